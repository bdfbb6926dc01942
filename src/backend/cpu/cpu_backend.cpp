// backend/cpu/cpu_backend.cpp -- the CPU reference backend: runs every stage on the host
// in fp32, one (batch, head) at a time, with all scratch carved from the caller's
// workspace. The oracle for the CUDA backend; kept plain on purpose.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>
#include <new>
#include <type_traits>
#include <vector>

#include "attention/attention.h"
#include "attention/attention_fp8.h"
#include "backend/backend.h"
#include "core/carver.h"
#include "core/error.h"
#include "core/tensor.h"
#include "importance/importance.h"
#include "importance/importance_spec.h"
#include "mask/mask.h"
#include "mask/mask_spec.h"
#include "methods/methods.h"
#include "pool/pool.h"
#include "rearrange/rearrange.h"

namespace psa {
namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// Scratch of one forward, per (batch, head); see carve().
struct Scratch {
  float *q, *k, *v, *out, *lse;
  float *k2, *k4, *k8, *v2, *v4, *v8, *kpad;
  float *scores, *ties, *method;
  int8_t *levels, *cap;
  int32_t *q_off, *k_off, *shuffle, *order;
};

Scratch carve(Carver& c, const Plan& p) {
  const bool sim = p.route.use_sim_mask;
  const bool other_method = p.route.method_mask();
  const int64_t d = p.problem.head_dim, lq = p.problem.len_q, lk = p.problem.len_k;
  const int64_t padded = p.k_blocks * p.block_n;
  Scratch s{};
  s.q = c.take<float>(lq * d);
  s.k = c.take<float>(lk * d);
  s.v = c.take<float>(lk * d);
  s.out = c.take<float>(lq * d);
  s.lse = c.take<float>(lq);
  s.k2 = c.take<float>(padded / 2 * d);
  s.k4 = c.take<float>(padded / 4 * d);
  s.k8 = c.take<float>(padded / 8 * d);
  s.v2 = c.take<float>(padded / 2 * d);
  s.v4 = c.take<float>(padded / 4 * d);
  s.v8 = c.take<float>(padded / 8 * d);
  s.kpad = sim ? c.take<float>(padded * d) : nullptr;
  s.scores = c.take<float>(p.q_blocks * p.k_blocks);
  s.ties = c.take<float>(p.q_blocks * p.k_blocks);  // tie masses (importance_spec.h)
  s.method = other_method ? c.take<float>(method_scratch_floats(p)) : nullptr;
  s.levels = c.take<int8_t>(p.q_blocks * p.k_blocks);
  s.cap = c.take<int8_t>(p.k_blocks);
  s.q_off = c.take<int32_t>(p.q_samples);
  s.k_off = c.take<int32_t>(p.k_samples);
  s.shuffle = c.take<int32_t>(std::max(p.block_m, p.block_n));
  s.order = c.take<int32_t>(p.k_blocks);
  return s;
}

// The level map of the last sparse forward of a plan, [B, Hq, Mq, Nk], allocated (not
// touched) by prepare; the forward only writes it. NULL when the allocation failed: planning
// still succeeds and read_levels reports PSA_ERR_OUT_OF_MEMORY.
struct CpuPlanData final : BackendPlanData {
  std::unique_ptr<int8_t[]> levels;
  size_t bytes = 0;
};

// The stages of one host forward over one (batch, head) at a time: scratch carved from the
// workspace, the K/V pyramids, the level counts and stage times. Each stage method only adapts
// the plan to its stage's function (rearrange/, pool/, importance/, mask/, methods/,
// attention/); CpuBackend::forward calls them in pipeline order.
class CpuForward {
 public:
  CpuForward(const Plan& plan, const ForwardArgs& a, Route route)
      : plan_(plan), a_(a), route_(route), kept_(dynamic_cast<CpuPlanData*>(plan.backend_data.get())) {
    Carver carver(Carver::align64(a.workspace));
    s_ = carve(carver, plan);
    const bool permuted = route != Route::kDense;
    qsrc_ = permuted ? &plan.q_seq.src : &none_;
    ksrc_ = permuted ? &plan.k_seq.src : &none_;
    float* const k_levels[4] = {s_.k, s_.k2, s_.k4, s_.k8};
    float* const v_levels[4] = {s_.v, s_.v2, s_.v4, s_.v8};
    std::copy(k_levels, k_levels + 4, kp_.level);
    std::copy(v_levels, v_levels + 4, vp_.level);
  }

  // Runs `stage_fn` and adds its wall time to stage `stage`; passes its status through.
  template <typename F>
  psa_status timed(int stage, F&& stage_fn) {
    const auto t0 = Clock::now();
    psa_status st = PSA_OK;
    if constexpr (std::is_void_v<decltype(stage_fn())>)
      stage_fn();
    else
      st = stage_fn();
    counts_.stage_ms[stage] += ms_since(t0);
    return st;
  }

  // Stages of one key/value head (b, hk).
  void rearrange_kv(int64_t b, int64_t hk) {
    const Problem& pb = plan_.problem;
    rearrange_head_cpu(a_.k, pb.dtype, a_.k_stride, b, hk, pb.len_k, pb.head_dim, *ksrc_, s_.k);
    rearrange_head_cpu(a_.v, pb.dtype, a_.v_stride, b, hk, pb.len_k, pb.head_dim, *ksrc_, s_.v);
  }
  void pool() {
    float* const k_out[3] = {s_.k2, s_.k4, s_.k8};
    float* const v_out[3] = {s_.v2, s_.v4, s_.v8};
    pool_kv_cpu(s_.k, s_.v, plan_.problem.len_k, plan_.problem.head_dim, plan_.k_blocks,
                plan_.block_n, k_out, v_out);
  }
  // precision fp8: K and V of the K/V head quantized once for every query head of its group,
  // over the levels this route pooled (the block methods use level 1 alone: V's largest block
  // scale is taken over the levels given).
  void quantize_kv() {
    const Problem& pb = plan_.problem;
    Pyramid k = kp_, v = vp_;
    if (!plan_.route.pyramid())
      for (int li = 1; li < 4; ++li) k.level[li] = v.level[li] = nullptr;
    kv8_ = fp8_quantize_kv_cpu(k, v, pb.len_k, pb.head_dim, plan_.block_n);
  }
  void sim_cap() {
    sim_cap_head_cpu(s_.k, plan_.problem.len_k, plan_.problem.head_dim, plan_.k_blocks,
                     plan_.block_n, plan_.route.sim_threshold, s_.kpad, s_.cap);
  }

  // Stages of one query head (b, h).
  void rearrange_q(int64_t b, int64_t h) {
    const Problem& pb = plan_.problem;
    rearrange_head_cpu(a_.q, pb.dtype, a_.q_stride, b, h, pb.len_q, pb.head_dim, *qsrc_, s_.q);
  }
  void importance(int64_t b, int64_t h) {
    const ImportanceSampling sm = importance_sampling(plan_, b, h, a_.q_offsets, a_.k_offsets);
    // precision fp8: the logits of the 8-bit rule, on the K this head's attention reads
    const Int8Keys k8{kv8_.k8[0].data(), kv8_.k_scale[0].data()};
    importance_head_cpu(s_.q, plan_.problem.len_q, s_.k, plan_.problem.len_k,
                        plan_.problem.head_dim, plan_.block_m, plan_.block_n, plan_.scale, sm,
                        s_.shuffle, s_.q_off, s_.k_off, s_.scores,
                        plan_.route.tie_mass ? s_.ties : nullptr, fp8() ? &k8 : nullptr);
  }
  void mask(int64_t b, int64_t h) {
    const RoutePlan& r = plan_.route;
    const MaskPostParams post = mask_post_params(plan_, s_.cap);
    mask_head_cpu(s_.scores, plan_.q_blocks, plan_.k_blocks, r.mask_row, post,
                  r.tie_mass ? s_.ties : nullptr, s_.levels, s_.order);
    keep_levels(b, h);
  }
  psa_status method_mask(int64_t b, int64_t h) {
    PSA_TRY(build_method_levels(plan_, s_.q, s_.k, s_.method, s_.levels));
    keep_levels(b, h);
    return PSA_OK;
  }
  void attention() {
    const Problem& pb = plan_.problem;
    if (route_ == Route::kDense) {
      dense_attention_cpu(s_.q, pb.len_q, s_.k, s_.v, pb.len_k, pb.head_dim, plan_.scale,
                          plan_.route.causal, s_.out, s_.lse);
    } else if (fp8()) {  // the 8-bit rule, evaluated exactly (K/V: quantize_kv)
      const Fp8QCpu q8 = fp8_quantize_q_cpu(s_.q, pb.len_q, plan_.block_m, kv8_);
      sparse_attention_fp8_cpu(q8, kv8_, s_.levels, plan_.scale, plan_.route.causal, 0, pb.len_q, s_.out, s_.lse);
    } else {
      sparse_attention_cpu(s_.q, pb.len_q, kp_, vp_, pb.len_k, pb.head_dim, plan_.block_m,
                           plan_.block_n, s_.levels, plan_.scale, plan_.route.causal, s_.out, s_.lse);
    }
  }
  void inverse(int64_t b, int64_t h) {
    const Problem& pb = plan_.problem;
    float* lse_bh = a_.lse != nullptr ? a_.lse + (b * pb.heads_q + h) * pb.len_q : nullptr;
    inverse_rearrange_head_cpu(a_.out, pb.dtype, a_.o_stride, b, h, pb.len_q, pb.head_dim, *qsrc_,
                               s_.out, s_.lse, lse_bh);
  }

  LevelCounts& counts() { return counts_; }
  // The sparse steps of this forward run the 8-bit rule (precision fp8; not the dense route).
  bool fp8() const { return route_ != Route::kDense && plan_.route.precision == PSA_PRECISION_FP8; }

 private:
  // Counts the level map of (b, h) and copies it into the plan's kept map.
  void keep_levels(int64_t b, int64_t h) {
    const int64_t cells = plan_.q_blocks * plan_.k_blocks;
    count_levels(s_.levels, cells, &counts_);
    if (kept_ == nullptr || !kept_->levels) return;
    std::memcpy(kept_->levels.get() + (b * plan_.problem.heads_q + h) * cells, s_.levels,
                static_cast<size_t>(cells));
  }

  const Plan& plan_;
  const ForwardArgs& a_;
  const Route route_;
  CpuPlanData* kept_;
  Scratch s_{};
  Pyramid kp_, vp_;
  Fp8KvCpu kv8_;  // precision fp8: the current K/V head, quantized (quantize_kv)
  const std::vector<int64_t> none_;
  const std::vector<int64_t>* qsrc_;
  const std::vector<int64_t>* ksrc_;
  LevelCounts counts_;
};

class CpuBackend final : public Backend {
 public:
  psa_backend kind() const override { return PSA_BACKEND_CPU; }

  psa_status prepare(Plan* plan) override {
    Carver c(nullptr);
    carve(c, *plan);
    plan->workspace_bytes = c.used() + 64;  // + alignment slack of the base pointer
    auto data = std::make_unique<CpuPlanData>();
    if (plan->route.sparse()) {
      data->bytes = static_cast<size_t>(plan->problem.batch * plan->problem.heads_q * plan->q_blocks *
                                        plan->k_blocks);
      if (data->bytes <= kMaxKeptLevelMapBytes)
        data->levels.reset(new (std::nothrow) int8_t[data->bytes]);
    }
    plan->backend_data = std::move(data);
    return PSA_OK;
  }

  psa_status check_pointers(const Plan& plan, const ForwardArgs& a) override {
    const void* ptrs[6] = {a.q, a.k, a.v, a.out, a.lse, a.workspace};
    const char* names[6] = {"q", "k", "v", "out", "lse", "workspace"};
    for (int i = 0; i < 6; ++i)
      PSA_RETURN_IF(ptrs[i] && memory_space_of(ptrs[i]) == MemorySpace::kDevice,
                    PSA_ERR_WRONG_MEMORY_SPACE,
                    "%s: is a CUDA device pointer; the CPU backend needs host memory", names[i]);
    // Elements are read and written as float / uint16_t: each tensor must be aligned to its
    // element size (lse to 4). The workspace may have any alignment (forward aligns inside it).
    const uintptr_t align[5] = {uintptr_t(dtype_size(plan.problem.dtype)), uintptr_t(dtype_size(plan.problem.dtype)),
                                uintptr_t(dtype_size(plan.problem.dtype)), uintptr_t(dtype_size(plan.problem.dtype)), 4};
    for (int i = 0; i < 5; ++i)
      PSA_TRY(check_element_alignment(ptrs[i], static_cast<unsigned>(align[i]), names[i]));
    return PSA_OK;
  }

  // The stage sequence of one host forward, per key/value head then per query head of its
  // group. The route picks the mask stage: none (dense), the method's own mask (rf_v2,
  // ada_bsa: no pyramid; psa_causal: after the pyramid) or PSA's pool -> importance -> mask.
  psa_status forward(const Plan& plan, const ForwardArgs& a, LevelCounts* counts) override {
    const auto t_total = Clock::now();
    const Problem& pb = plan.problem;
    const Route route = a.dense ? Route::kDense : plan.route.route;
    CpuForward f(plan, a, route);
    const int64_t group = pb.heads_q / pb.heads_kv;
    for (int64_t b = 0; b < pb.batch; ++b) {
      for (int64_t hk = 0; hk < pb.heads_kv; ++hk) {
        f.timed(PSA_STAGE_REARRANGE, [&] { f.rearrange_kv(b, hk); });
        if (route == Route::kPsa || route == Route::kCausalPsa) {
          f.timed(PSA_STAGE_POOL, [&] { f.pool(); });
          if (plan.route.sim_cap()) f.timed(PSA_STAGE_MASK, [&] { f.sim_cap(); });
        }
        if (f.fp8()) f.timed(PSA_STAGE_POOL, [&] { f.quantize_kv(); });  // as the GPU's pool pass
        for (int64_t h = hk * group; h < (hk + 1) * group; ++h) {
          f.timed(PSA_STAGE_REARRANGE, [&] { f.rearrange_q(b, h); });
          switch (route) {
            case Route::kDense:
              break;
            case Route::kBlockMethod:
            case Route::kCausalPsa:  // its importance and level rule: methods/causal_psa.cpp
              PSA_TRY(f.timed(PSA_STAGE_MASK, [&] { return f.method_mask(b, h); }));
              break;
            case Route::kPsa:
              f.timed(PSA_STAGE_IMPORTANCE, [&] { f.importance(b, h); });
              f.timed(PSA_STAGE_MASK, [&] { f.mask(b, h); });
              break;
          }
          f.timed(PSA_STAGE_ATTENTION, [&] { f.attention(); });
          f.timed(PSA_STAGE_INVERSE, [&] { f.inverse(b, h); });
        }
      }
    }
    f.counts().stage_ms[PSA_STAGE_TOTAL] = ms_since(t_total);
    *counts = f.counts();
    return PSA_OK;
  }

  psa_status read_counts(LevelCounts*) override { return PSA_OK; }

  psa_status read_levels(const Plan& plan, int8_t* dst) override {
    const auto* kept = dynamic_cast<const CpuPlanData*>(plan.backend_data.get());
    PSA_RETURN_IF(kept == nullptr || kept->bytes == 0, PSA_ERR_INTERNAL,
                  "level map: the plan keeps none (dense method)");
    PSA_RETURN_IF(!kept->levels, PSA_ERR_OUT_OF_MEMORY,
                  "level map: its %llu bytes are above the %llu kept per plan, or could not be "
                  "allocated when the shape was planned",
                  static_cast<unsigned long long>(kept->bytes),
                  static_cast<unsigned long long>(kMaxKeptLevelMapBytes));
    std::memcpy(dst, kept->levels.get(), kept->bytes);
    return PSA_OK;
  }
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend() { return std::make_unique<CpuBackend>(); }

int8_t* cpu_kept_levels(const Plan& plan) {
  auto* kept = dynamic_cast<CpuPlanData*>(plan.backend_data.get());
  return kept != nullptr ? kept->levels.get() : nullptr;
}

}  // namespace psa

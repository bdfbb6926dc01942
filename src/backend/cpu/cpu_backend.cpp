// backend/cpu/cpu_backend.cpp -- the CPU reference backend: runs every stage on the host
// in fp32, one (batch, head) at a time, with all scratch carved from the caller's
// workspace. The oracle for the CUDA backend; kept plain on purpose.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>
#include <new>
#include <vector>

#include "attention/attention.h"
#include "backend/backend.h"
#include "core/error.h"
#include "core/half.h"
#include "core/tensor.h"
#include "importance/importance.h"
#include "importance/importance_spec.h"
#include "mask/mask.h"
#include "methods/methods.h"
#include "pool/pool.h"

namespace psa {
namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// Carves aligned pieces out of the workspace; with base == nullptr it only measures.
class Carver {
 public:
  explicit Carver(void* base) : base_(static_cast<char*>(base)) {}
  template <typename T>
  T* take(int64_t count) {
    used_ = (used_ + 63) & ~uint64_t{63};
    T* p = base_ ? reinterpret_cast<T*>(base_ + used_) : nullptr;
    used_ += static_cast<uint64_t>(count) * sizeof(T);
    return p;
  }
  uint64_t used() const { return used_; }

 private:
  char* base_;
  uint64_t used_ = 0;
};

// Scratch of one forward, per (batch, head); see carve().
struct Scratch {
  float *q, *k, *v, *out, *lse;
  float *k2, *k4, *k8, *v2, *v4, *v8, *kpad;
  float *scores, *ties, *method;
  int8_t *levels, *cap;
  int32_t *q_off, *k_off, *shuffle, *order;
};

Scratch carve(Carver& c, const Config& cfg, const Plan& p) {
  const bool sim = cfg.use_sim_mask;
  const bool other_method = method_builds_levels(cfg.method);
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
  s.method = other_method ? c.take<float>(method_scratch_floats(cfg, p)) : nullptr;
  s.levels = c.take<int8_t>(p.q_blocks * p.k_blocks);
  s.cap = c.take<int8_t>(p.k_blocks);
  s.q_off = c.take<int32_t>(p.q_samples);
  s.k_off = c.take<int32_t>(p.k_samples);
  s.shuffle = c.take<int32_t>(std::max(p.block_m, p.block_n));
  s.order = c.take<int32_t>(p.k_blocks);
  return s;
}

// Copies head (b, h) of a strided tensor into a dense fp32 [len, d] buffer, rearranged
// (row i <- source row src[i]) when `src` is non-empty.
void load_head(const void* base, psa_dtype dt, const int64_t* stride, int64_t b, int64_t h,
               int64_t len, int64_t d, const std::vector<int64_t>& src, float* dst) {
  for (int64_t i = 0; i < len; ++i) {
    const int64_t row = src.empty() ? i : src[static_cast<size_t>(i)];
    const int64_t off = b * stride[0] + h * stride[1] + row * stride[2];
    for (int64_t c = 0; c < d; ++c) dst[i * d + c] = load_as_float(base, off + c, dt);
  }
}

// Inverse of load_head for the output (and the LSE).
void store_head(void* base, psa_dtype dt, const int64_t* stride, int64_t b, int64_t h,
                int64_t len, int64_t d, const std::vector<int64_t>& src, const float* from) {
  for (int64_t i = 0; i < len; ++i) {
    const int64_t row = src.empty() ? i : src[static_cast<size_t>(i)];
    const int64_t off = b * stride[0] + h * stride[1] + row * stride[2];
    for (int64_t c = 0; c < d; ++c) store_from_float(base, off + c, dt, from[i * d + c]);
  }
}

void count_levels(const int8_t* levels, int64_t n, LevelCounts* c) {
  for (int64_t e = 0; e < n; ++e) {
    const int lvl = levels[e];
    const int slot = lvl == 1 ? 0 : lvl == 2 ? 1 : lvl == 4 ? 2 : lvl == 8 ? 3 : 4;
    ++c->count[slot];
    if (lvl > 0) c->density_sum += 1.0 / lvl;
  }
}

// The level map of the last sparse forward of a plan, [B, Hq, Mq, Nk], allocated (not
// touched) by prepare; the forward only writes it. NULL when the allocation failed: planning
// still succeeds and read_levels reports PSA_ERR_OUT_OF_MEMORY.
struct CpuPlanData final : BackendPlanData {
  std::unique_ptr<int8_t[]> levels;
  size_t bytes = 0;
};

class CpuBackend final : public Backend {
 public:
  psa_backend kind() const override { return PSA_BACKEND_CPU; }

  psa_status prepare(const Config& config, Plan* plan) override {
    Carver c(nullptr);
    carve(c, config, *plan);
    plan->workspace_bytes = c.used() + 64;  // + alignment slack of the base pointer
    auto data = std::make_unique<CpuPlanData>();
    if (config.method != PSA_METHOD_DENSE) {
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
      PSA_RETURN_IF(reinterpret_cast<uintptr_t>(ptrs[i]) % align[i] != 0, PSA_ERR_MISALIGNED_POINTER,
                    "%s: address %p is not aligned to %u bytes (its element size)", names[i], ptrs[i],
                    static_cast<unsigned>(align[i]));
    return PSA_OK;
  }

  psa_status forward(const Config& cfg, const Plan& plan, const ForwardArgs& a,
                     LevelCounts* counts) override {
    const auto t_total = Clock::now();
    const Problem& pb = plan.problem;
    const int64_t d = pb.head_dim, lq = pb.len_q, lk = pb.len_k;
    const int64_t group = pb.heads_q / pb.heads_kv;
    const int64_t mq = plan.q_blocks, nk = plan.k_blocks;
    const uintptr_t aligned = (reinterpret_cast<uintptr_t>(a.workspace) + 63) & ~uintptr_t{63};
    Carver carver(reinterpret_cast<void*>(aligned));
    const Scratch s = carve(carver, cfg, plan);
    const std::vector<int64_t> none;
    const std::vector<int64_t>& qsrc = a.dense ? none : plan.q_seq.src;
    const std::vector<int64_t>& ksrc = a.dense ? none : plan.k_seq.src;
    const MaskRowParams row_params = mask_row_params(cfg);
    MaskPostParams post;
    post.block_m = plan.block_m;
    post.block_n = plan.block_n;
    post.lq = lq;
    post.lk = lk;
    post.causal = cfg.causal;
    post.text_rule = cfg.text_rule;
    post.text_rows_dense = cfg.text_rows_dense;
    post.text_begin = plan.text_begin;
    post.text_end = plan.text_end;
    post.sim_cap = cfg.use_sim_mask ? s.cap : nullptr;
    Pyramid kp, vp;
    kp.level[0] = s.k;
    kp.level[1] = s.k2;
    kp.level[2] = s.k4;
    kp.level[3] = s.k8;
    vp.level[0] = s.v;
    vp.level[1] = s.v2;
    vp.level[2] = s.v4;
    vp.level[3] = s.v8;
    LevelCounts c;
    auto t0 = Clock::now();
    auto* kept = dynamic_cast<CpuPlanData*>(plan.backend_data.get());
    auto keep_levels = [&](int64_t b, int64_t h) {
      if (kept == nullptr || !kept->levels) return;
      std::memcpy(kept->levels.get() + (b * pb.heads_q + h) * mq * nk, s.levels,
                  static_cast<size_t>(mq * nk));
    };

    for (int64_t b = 0; b < pb.batch; ++b) {
      for (int64_t hk = 0; hk < pb.heads_kv; ++hk) {
        t0 = Clock::now();
        load_head(a.k, pb.dtype, a.k_stride, b, hk, lk, d, ksrc, s.k);
        load_head(a.v, pb.dtype, a.v_stride, b, hk, lk, d, ksrc, s.v);
        c.stage_ms[PSA_STAGE_REARRANGE] += ms_since(t0);
        const bool block_method = cfg.method == PSA_METHOD_RF_V2 || cfg.method == PSA_METHOD_ADA_BSA;
        if (!a.dense && !block_method) {  // the other methods use full-resolution blocks only
          t0 = Clock::now();
          pool_pyramid_cpu(s.k, lk, d, nk, plan.block_n, s.k2, s.k4, s.k8);
          pool_pyramid_cpu(s.v, lk, d, nk, plan.block_n, s.v2, s.v4, s.v8);
          c.stage_ms[PSA_STAGE_POOL] += ms_since(t0);
          if (cfg.use_sim_mask) {
            t0 = Clock::now();
            for (int64_t t = 0; t < nk * plan.block_n; ++t)
              std::memcpy(s.kpad + t * d, s.k + std::min(t, lk - 1) * d, sizeof(float) * d);
            sim_cap_row(s.kpad, nk, plan.block_n, d, cfg.sim_threshold, s.cap);
            c.stage_ms[PSA_STAGE_MASK] += ms_since(t0);
          }
        }
        for (int64_t h = hk * group; h < (hk + 1) * group; ++h) {
          t0 = Clock::now();
          load_head(a.q, pb.dtype, a.q_stride, b, h, lq, d, qsrc, s.q);
          c.stage_ms[PSA_STAGE_REARRANGE] += ms_since(t0);
          if (a.dense) {
            t0 = Clock::now();
            dense_attention_cpu(s.q, lq, s.k, s.v, lk, d, plan.scale, cfg.causal, s.out, s.lse);
            c.stage_ms[PSA_STAGE_ATTENTION] += ms_since(t0);
          } else if (method_builds_levels(cfg.method)) {
            t0 = Clock::now();
            PSA_TRY(build_method_levels(cfg, plan, s.q, s.k, s.method, s.levels));
            count_levels(s.levels, mq * nk, &c);
            keep_levels(b, h);
            c.stage_ms[PSA_STAGE_MASK] += ms_since(t0);
            t0 = Clock::now();
            sparse_attention_cpu(s.q, lq, kp, vp, lk, d, plan.block_m, plan.block_n, s.levels,
                                 plan.scale, cfg.causal, s.out, s.lse);
            c.stage_ms[PSA_STAGE_ATTENTION] += ms_since(t0);
          } else {
            t0 = Clock::now();
            if (a.q_offsets != nullptr) {
              const int64_t bh = b * pb.heads_q + h;
              std::memcpy(s.q_off, a.q_offsets + bh * plan.q_samples, sizeof(int32_t) * plan.q_samples);
              std::memcpy(s.k_off, a.k_offsets + bh * plan.k_samples, sizeof(int32_t) * plan.k_samples);
            } else {
              sample_offsets(static_cast<uint64_t>(cfg.seed), b + cfg.batch_offset, h + cfg.head_offset,
                             kSampleQuery,
                             static_cast<int32_t>(plan.block_m), static_cast<int32_t>(plan.q_samples),
                             s.shuffle, s.q_off);
              sample_offsets(static_cast<uint64_t>(cfg.seed), b + cfg.batch_offset, h + cfg.head_offset,
                             kSampleKey,
                             static_cast<int32_t>(plan.block_n), static_cast<int32_t>(plan.k_samples),
                             s.shuffle, s.k_off);
            }
            float* const ties = tie_mass_ranking_enabled() ? s.ties : nullptr;
            importance_cpu(s.q, lq, s.k, lk, d, plan.block_m, plan.block_n, s.q_off,
                           static_cast<int32_t>(plan.q_samples), s.k_off,
                           static_cast<int32_t>(plan.k_samples), plan.scale, s.scores, ties);
            c.stage_ms[PSA_STAGE_IMPORTANCE] += ms_since(t0);
            t0 = Clock::now();
            for (int64_t i = 0; i < mq; ++i) {
              int8_t* row = s.levels + i * nk;
              const int64_t n = cfg.causal
                                    ? causal_visible_blocks(i, plan.block_m, plan.block_n, lq, lk)
                                    : nk;
              std::fill(row, row + nk, int8_t{0});
              if (n > 0)
                build_mask_row(s.scores + i * nk, n, row_params, row, s.order, nullptr,
                               ties != nullptr ? ties + i * nk : nullptr);
            }
            postprocess_levels(s.levels, mq, nk, post);
            count_levels(s.levels, mq * nk, &c);
            keep_levels(b, h);
            c.stage_ms[PSA_STAGE_MASK] += ms_since(t0);
            t0 = Clock::now();
            sparse_attention_cpu(s.q, lq, kp, vp, lk, d, plan.block_m, plan.block_n, s.levels,
                                 plan.scale, cfg.causal, s.out, s.lse);
            c.stage_ms[PSA_STAGE_ATTENTION] += ms_since(t0);
          }
          t0 = Clock::now();
          store_head(a.out, pb.dtype, a.o_stride, b, h, lq, d, qsrc, s.out);
          if (a.lse != nullptr) {
            float* lse_bh = a.lse + (b * pb.heads_q + h) * lq;
            for (int64_t i = 0; i < lq; ++i)
              lse_bh[qsrc.empty() ? i : qsrc[static_cast<size_t>(i)]] = s.lse[i];
          }
          c.stage_ms[PSA_STAGE_INVERSE] += ms_since(t0);
        }
      }
    }
    c.stage_ms[PSA_STAGE_TOTAL] = ms_since(t_total);
    *counts = c;
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

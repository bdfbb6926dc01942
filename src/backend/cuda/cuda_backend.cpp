// backend/cuda/cuda_backend.cpp -- CUDA backend: prepare() plans device tables and the workspace
// (may allocate); forward() only enqueues cuda/ stage entries on the caller's stream (no alloc,
// sync or device-to-host copy). Without PSA_WITH_CUDA only the "unavailable" stubs remain.
#include <cstdint>
#include <memory>

#include "backend/backend.h"
#include "core/error.h"

#if defined(PSA_WITH_CUDA)
#include <cuda_runtime_api.h>

#include <algorithm>
#include <vector>

#include "backend/cuda/cuda_device_scope.h"
#include "backend/cuda/cuda_dims.h"
#include "backend/cuda/cuda_causal_psa.h"
#include "backend/cuda/cuda_method_mask.h"
#include "ring/ring_cpu.h"
#include "backend/cuda/cuda_stage_timer.h"
#include "backend/cuda/cuda_workspace.h"
#include "cuda/attention/attention_cuda.h"
#include "cuda/attention/attention_fp8_cuda.h"
#include "cuda/core/cuda_status.h"
#include "cuda/importance/importance_cuda.h"
#include "importance/importance.h"
#include "cuda/mask/mask_cuda.h"
#include "cuda/pool/pool_cuda.h"
#include "cuda/rearrange/gather_cuda.h"
#include "mask/mask.h"
#include "mask/mask_spec.h"

namespace psa {

namespace {

// Device copies of the plan's permutations plus the workspace layout.
struct CudaPlanData final : BackendPlanData {
  int device = 0;
  int64_t* q_src = nullptr;  // [len_q] or NULL (identity)
  int64_t* k_src = nullptr;  // [len_k] or NULL
  // The level map of the last sparse forward, [B*Hq, Mq, Nk] int8, copied (device to device,
  // on the forward's stream) out of the workspace so that psa_context_get_level_map can read
  // it after the caller reused the workspace. NULL for a dense method.
  int8_t* levels_kept = nullptr;
  uint64_t levels_bytes = 0;
  CudaWorkspaceLayout layout;
  ~CudaPlanData() override {
    DeviceGuard guard(device);
    if (levels_kept) cudaFree(levels_kept);
    if (q_src) cudaFree(q_src);
    if (k_src && k_src != q_src) cudaFree(k_src);
  }
};

psa_status upload(const std::vector<int64_t>& host, int64_t** dev, const char* what) {
  *dev = nullptr;
  if (host.empty()) return PSA_OK;
  const size_t bytes = host.size() * sizeof(int64_t);
  PSA_CUDA_TRY(cudaMalloc(reinterpret_cast<void**>(dev), bytes), what);
  const cudaError_t e = cudaMemcpy(*dev, host.data(), bytes, cudaMemcpyHostToDevice);
  if (e != cudaSuccess) {
    cudaFree(*dev);
    *dev = nullptr;
    return gpu::cuda_status(e, what);
  }
  return PSA_OK;
}



// The stages of one CUDA forward: each method fills one cuda/<stage>/ entry's arguments from
// the plan (its route and shape) and enqueues it on the caller's stream. No allocation, no
// sync; CudaBackend::forward calls them in pipeline order.
class CudaForward {
 public:
  CudaForward(const Plan& plan, const CudaPlanData& data, const ForwardArgs& a,
              unsigned long long* counts, cudaEvent_t* events)
      : plan_(plan), pb_(plan.problem), dims_(problem_dims(plan)), data_(data), w_(data.layout), a_(a),
        stream_(static_cast<cudaStream_t>(a.stream)), ws_(static_cast<char*>(a.workspace)),
        counts_(counts), events_(events) {
    const int64_t q_str[4] = {pb_.heads_q * pb_.len_q * pb_.head_dim, pb_.len_q * pb_.head_dim, pb_.head_dim, 1};
    const int64_t k_str[4] = {pb_.heads_kv * pb_.len_k * pb_.head_dim, pb_.len_k * pb_.head_dim, pb_.head_dim, 1};
    std::copy(q_str, q_str + 4, contiguous_q_);
    std::copy(k_str, k_str + 4, contiguous_k_);
    // PSA reads the caller's Q in place through q_src (importance and attention, both
    // precisions) when its rows are 16-byte aligned; otherwise, and for the block methods, Q
    // is gathered.
    fp8_ = plan.route.psa() && plan.route.precision == PSA_PRECISION_FP8;
    q_in_place_ = plan.route.psa() && gpu::attention_rows_aligned(a.q, a.q_stride);
    q_use_ = q_in_place_ ? a.q : ws_ + w_.q;
    q_use_stride_ = q_in_place_ ? a.q_stride : contiguous_q_;
    q_use_rows_ = q_in_place_ ? data.q_src : nullptr;
    // PSA at the default precision without a key rearrangement (data.k_src NULL) and without
    // the similarity cap reads the caller's K and V in place too (importance and the
    // attention's level 1) when their rows are 16-byte aligned: the pool pass then writes the
    // pyramids only, not the level-1 copies.
    kv_in_place_ = plan.route.route == Route::kPsa && !fp8_ && data.k_src == nullptr && !plan.route.sim_cap() &&
                   gpu::attention_rows_aligned(a.k, a.k_stride) && gpu::attention_rows_aligned(a.v, a.v_stride);
    k_use_ = kv_in_place_ ? a.k : ws_ + w_.k;
    v_use_ = kv_in_place_ ? a.v : ws_ + w_.v;
    k_use_stride_ = kv_in_place_ ? a.k_stride : contiguous_k_;
    v_use_stride_ = kv_in_place_ ? a.v_stride : contiguous_k_;
  }

  char* workspace() const { return ws_; }

  // Stage boundary for the context's stage timing (recorded only when it is on).
  psa_status mark(int which) {
    if (events_ != nullptr)
      PSA_CUDA_TRY(cudaEventRecord(events_[which], stream_), "stage timing: cudaEventRecord");
    return PSA_OK;
  }

  psa_status begin() {
    PSA_TRY(mark(kStageEvStart));
    PSA_CUDA_TRY(cudaMemsetAsync(counts_, 0, sizeof(unsigned long long) * kNumSlots, stream_),
                 "level counts: cudaMemsetAsync");
    return PSA_OK;
  }

  // Rearrange: Q into the workspace unless it is read in place.
  psa_status rearrange_q() {
    if (q_in_place_) return PSA_OK;
    return gather(a_.q, a_.q_stride, pb_.heads_q, pb_.len_q, data_.q_src, w_.q);
  }
  // Rearrange (block methods): K and V into the workspace in the method's token order.
  psa_status rearrange_kv() {
    PSA_TRY(gather(a_.k, a_.k_stride, pb_.heads_kv, pb_.len_k, data_.k_src, w_.k));
    return gather(a_.v, a_.v_stride, pb_.heads_kv, pb_.len_k, data_.k_src, w_.v);
  }
  // Rearrange (level map of a sequence-parallel ring): K alone into the workspace.
  psa_status rearrange_k() { return gather(a_.k, a_.k_stride, pb_.heads_kv, pb_.len_k, data_.k_src, w_.k); }
  // Rearrange + pool (PSA): K and V copies and their pyramids in one pass over each. Only the
  // pooled levels in `levels` (bit p: level p, Plan::pooled_levels) are written; the attention
  // reads a level's pooled K / V only for work-list entries of that level.
  psa_status rearrange_pool_kv(unsigned levels) {
    const void* src[2] = {a_.k, a_.v};
    const int64_t* str[2] = {a_.k_stride, a_.v_stride};
    const uint64_t dst[2] = {w_.k, w_.v};
    const uint64_t* pooled[2] = {w_.k_pooled, w_.v_pooled};
    for (int t = 0; t < 2; ++t) {
      gpu::GatherArgs g = gather_args(src[t], str[t], pb_.heads_kv, pb_.len_k, data_.k_src, dst[t]);
      if (kv_in_place_) g.dst = nullptr;  // the attention reads level 1 from the caller
      void* out[3];
      for (int l = 0; l < 3; ++l) out[l] = (levels & (2u << l)) != 0u ? ws_ + pooled[t][l] : nullptr;
      PSA_TRY(gpu::gather_pool_pyramid_cuda(g, plan_.k_blocks, plan_.block_n, out, stream_));
    }
    return PSA_OK;
  }

  // Rearrange + pool + quantize (PSA, precision fp8): the 8-bit K / V pyramids with their scales
  // (the importance stage reads K's int8 level 1), and K's 16-bit level-1 copy only for the
  // similarity cap, in one pass over each.
  psa_status rearrange_pool_kv_fp8() {
    gpu::GatherArgs gk = gather_args(a_.k, a_.k_stride, pb_.heads_kv, pb_.len_k, data_.k_src, w_.k);
    gpu::GatherArgs gv = gather_args(a_.v, a_.v_stride, pb_.heads_kv, pb_.len_k, data_.k_src, 0);
    if (!plan_.route.sim_cap()) gk.dst = nullptr;
    gv.dst = nullptr;  // no 16-bit V
    return gpu::gather_pool_fp8_cuda(gk, gv, plan_.k_blocks, plan_.block_n, fp8_out(), stream_);
  }
  // The kernel's pool outputs in the workspace.
  gpu::Fp8KvOut fp8_out() const {
    gpu::Fp8KvOut o;
    o.k_mean = reinterpret_cast<float*>(ws_ + w_.k_mean);
    for (int li = 0; li < 4; ++li) {
      o.k8[li] = ws_ + w_.k8[li];
      o.v8[li] = ws_ + w_.v8[li];
    }
    o.k_scale = reinterpret_cast<float*>(ws_ + w_.k_scale);
    o.v_scale = reinterpret_cast<float*>(ws_ + w_.v_scale);
    o.v_smax = reinterpret_cast<float*>(ws_ + w_.v_smax);
    return o;
  }
  bool fp8() const { return fp8_; }

  // Importance (PSA): sample offsets, then the block scores.
  psa_status importance() {
    const RoutePlan& r = plan_.route;
    gpu::OffsetArgs oa;
    oa.seed = r.seed;
    oa.dims = dims_;
    oa.batch_offset = r.batch_offset;
    oa.head_offset = r.head_offset;
    oa.q_count = static_cast<int32_t>(plan_.q_samples);
    oa.k_count = static_cast<int32_t>(plan_.k_samples);
    oa.q_off = reinterpret_cast<int32_t*>(ws_ + w_.q_off);
    oa.k_off = reinterpret_cast<int32_t*>(ws_ + w_.k_off);
    PSA_TRY(gpu::sample_offsets_cuda(oa, stream_));
    gpu::ScoreArgs sa;
    sa.dtype = pb_.dtype;
    sa.q = q_use_;
    std::copy(q_use_stride_, q_use_stride_ + 4, sa.q_stride);
    sa.q_rows = q_use_rows_;
    sa.k = k_use_;
    std::copy(k_use_stride_, k_use_stride_ + 4, sa.k_stride);
    sa.dims = dims_;
    sa.q_off = oa.q_off;
    sa.k_off = oa.k_off;
    sa.q_count = oa.q_count;
    sa.k_count = oa.k_count;
    sa.scale = plan_.scale;
    sa.scores = reinterpret_cast<float*>(ws_ + w_.scores);
    sa.ties = r.tie_mass ? reinterpret_cast<float*>(ws_ + w_.ties) : nullptr;
    sa.tie_run_min = r.tie_mass ? tie_run_min() : 0;
    sa.scratch = w_.score_scratch_bytes > 0 ? ws_ + w_.score_scratch : nullptr;
    sa.scratch_bytes = w_.score_scratch_bytes;
    if (fp8_) {  // the 8-bit rule on the pool pass's int8 level-1 K (importance_spec.h)
      sa.k8 = ws_ + w_.k8[0];
      sa.k_scale = reinterpret_cast<const float*>(ws_ + w_.k_scale);
    }
    return gpu::block_scores_cuda(sa, stream_);
  }

  // The longest top run mask() never splits (ScoreArgs::tie_run_min; mask_spec.h
  // topk_unsplit_top_run) for topk rows, whose candidates are every key block, when it is at
  // least half a query block's sampled rows; else 0 (every row's tie masses). A query block has
  // at most q_samples tied blocks unless logits tie exactly, so a bound near that skips most
  // rows' masses, while a far smaller one skips few and the score kernel's run tracking costs
  // more than it saves (PERF_NOTES.md, "Importance: tie masses only where the mask reads them":
  // CogVideoX-5B psa_balanced, bound 13 of 32 rows, +4% of the stage). Causal rows (their
  // candidates vary) and thresholdbound rows (their ends follow the scores) get 0.
  int32_t tie_run_min() const {
    const MaskRowParams& rp = plan_.route.mask_row;
    if (plan_.route.causal || rp.mode != PSA_MASK_MODE_TOPK || plan_.k_blocks < 1) return 0;
    const int64_t c = topk_unsplit_top_run(plan_.k_blocks, rp.ratio_end, dims_.block_n, plan_.tile_n);
    if (2 * c < plan_.q_samples) return 0;
    return static_cast<int32_t>(std::min<int64_t>(c, INT32_MAX));
  }

  // Similarity cap per key block (PSA with use_sim_mask; always for causal PSA) into w.cap.
  psa_status sim_cap() {
    gpu::SimCapArgs ca;
    ca.dtype = pb_.dtype;
    ca.k = ws_ + w_.k;
    ca.heads = pb_.batch * pb_.heads_kv;
    ca.len_k = pb_.len_k;
    ca.head_dim = pb_.head_dim;
    ca.n_blocks = plan_.k_blocks;
    ca.block_n = plan_.block_n;
    std::copy(plan_.route.sim_threshold, plan_.route.sim_threshold + 3, ca.threshold);
    ca.cap = reinterpret_cast<int8_t*>(ws_ + w_.cap);
    return gpu::sim_cap_cuda(ca, stream_);
  }

  // Mask (PSA): similarity cap (use_sim_mask), then the level map.
  psa_status mask() {
    const RoutePlan& r = plan_.route;
    int8_t* cap = nullptr;
    if (r.sim_cap()) {
      PSA_TRY(sim_cap());
      cap = reinterpret_cast<int8_t*>(ws_ + w_.cap);
    }
    const MaskRowParams& rp = r.mask_row;
    gpu::LevelArgs la;
    la.scores = reinterpret_cast<const float*>(ws_ + w_.scores);
    la.ties = r.tie_mass ? reinterpret_cast<const float*>(ws_ + w_.ties) : nullptr;
    la.dims = dims_;
    la.tile_n = plan_.tile_n;
    la.mode = rp.mode;
    std::copy(rp.ratio_end, rp.ratio_end + kNumSlots, la.ratio_end);
    la.min_full_ratio = rp.min_full_ratio;
    la.causal = r.causal;
    la.text_rule = r.text_rule;
    la.text_rows_dense = r.text_rows_dense;
    la.text_begin = plan_.text_begin;
    la.text_end = plan_.text_end;
    la.cap = cap;
    la.levels = reinterpret_cast<int8_t*>(ws_ + w_.levels);
    return gpu::build_levels_cuda(la, stream_);
  }

  // Mask, every sparse route: the work list of the level map (+ level counts), and a copy of
  // the map for psa_context_get_level_map (stream-ordered, capturable).
  psa_status worklist() {
    gpu::WorklistArgs wa;
    wa.levels = reinterpret_cast<int8_t*>(ws_ + w_.levels);
    wa.rows = pb_.batch * pb_.heads_q * plan_.q_blocks;
    wa.nk = plan_.k_blocks;
    wa.blocks = reinterpret_cast<int32_t*>(ws_ + w_.wl_blocks);
    wa.count = reinterpret_cast<int32_t*>(ws_ + w_.wl_count);
    wa.stats = counts_;
    PSA_TRY(gpu::build_worklist_cuda(wa, stream_));
    if (data_.levels_kept != nullptr)
      PSA_CUDA_TRY(cudaMemcpyAsync(data_.levels_kept, wa.levels, data_.levels_bytes,
                                   cudaMemcpyDeviceToDevice, stream_),
                   "kept level map: cudaMemcpyAsync");
    return PSA_OK;
  }

  // The level map out of the workspace into `dst` ([B*Hq*Mq, Nk] contiguous).
  psa_status copy_levels_out(int8_t* dst) {
    const uint64_t bytes = static_cast<uint64_t>(pb_.batch * pb_.heads_q * plan_.q_blocks * plan_.k_blocks);
    PSA_CUDA_TRY(cudaMemcpyAsync(dst, ws_ + w_.levels, bytes, cudaMemcpyDeviceToDevice, stream_),
                 "level map: cudaMemcpyAsync");
    return PSA_OK;
  }
  // Columns [begin, begin + Nk) of a [B*Hq*Mq, map_nk] level map into the workspace's map
  // (a shard attention's key blocks): one 2D device copy.
  psa_status copy_levels_in(const int8_t* src, int64_t map_nk, int64_t begin) {
    const int64_t rows = pb_.batch * pb_.heads_q * plan_.q_blocks;
    PSA_CUDA_TRY(cudaMemcpy2DAsync(ws_ + w_.levels, static_cast<size_t>(plan_.k_blocks), src + begin,
                                   static_cast<size_t>(map_nk), static_cast<size_t>(plan_.k_blocks),
                                   static_cast<size_t>(rows), cudaMemcpyDeviceToDevice, stream_),
                 "shard level map: cudaMemcpy2DAsync");
    return PSA_OK;
  }

  // Attention + inverse rearrange: sparse attention over the work list; the epilogue writes
  // row x back to caller row q_src[x].
  psa_status attention() {
    gpu::AttentionArgs at = sparse_attention_args();
    at.k = k_use_;
    at.v = v_use_;
    std::copy(k_use_stride_, k_use_stride_ + 4, at.k_stride);
    std::copy(v_use_stride_, v_use_stride_ + 4, at.v_stride);
    // Block methods have level-1 entries only: the pooled slots are never read and point at
    // the full-resolution copies.
    const bool block_method = plan_.route.block_method();
    for (int l = 0; l < 3; ++l) {
      at.k_pooled[l] = ws_ + (block_method ? w_.k : w_.k_pooled[l]);
      at.v_pooled[l] = ws_ + (block_method ? w_.v : w_.v_pooled[l]);
    }
    return gpu::attention_cuda(at, stream_);
  }

  // Attention + inverse rearrange, precision fp8: the 8-bit kernel over the work list, with
  // the 16-bit path's Q, work list and output; K and V from the 8-bit pool pass.
  psa_status attention_fp8() {
    const gpu::AttentionArgs base = sparse_attention_args();
    gpu::AttentionFp8Args at;
    at.dtype = base.dtype;
    at.dims = base.dims;
    at.scale = base.scale;
    at.q = base.q;
    std::copy(base.q_stride, base.q_stride + 4, at.q_stride);
    at.q_rows = base.q_rows;
    at.kv = fp8_out();
    at.wl_blocks = base.wl_blocks;
    at.wl_count = base.wl_count;
    at.out = base.out;
    std::copy(base.o_stride, base.o_stride + 4, at.o_stride);
    at.lse = base.lse;
    at.out_rows = base.out_rows;
    return gpu::attention_fp8_cuda(at, stream_);
  }

  // Dense step (method dense or warm-up): plain attention over the caller's tensors (no
  // rearrangement, as the CPU backend); rows that are not 16-byte aligned are gathered into
  // the workspace first.
  psa_status dense_attention() {
    gpu::AttentionArgs at = attention_args();
    at.dense = true;
    const void* src[3] = {a_.q, a_.k, a_.v};
    const int64_t* str[3] = {a_.q_stride, a_.k_stride, a_.v_stride};
    const uint64_t dst[3] = {w_.q, w_.k, w_.v};
    const int64_t heads[3] = {pb_.heads_q, pb_.heads_kv, pb_.heads_kv};
    const int64_t lens[3] = {pb_.len_q, pb_.len_k, pb_.len_k};
    const void** use[3] = {&at.q, &at.k, &at.v};
    int64_t* use_stride[3] = {at.q_stride, at.k_stride, at.v_stride};
    for (int t = 0; t < 3; ++t) {
      const int64_t* stride = str[t];
      if (gpu::attention_rows_aligned(src[t], str[t])) {
        *use[t] = src[t];
      } else {
        PSA_TRY(gather(src[t], str[t], heads[t], lens[t], nullptr, dst[t]));
        *use[t] = ws_ + dst[t];
        stride = t == 0 ? contiguous_q_ : contiguous_k_;
      }
      std::copy(stride, stride + 4, use_stride[t]);
    }
    return gpu::attention_cuda(at, stream_);
  }

 private:
  gpu::GatherArgs gather_args(const void* src, const int64_t* stride, int64_t heads, int64_t len,
                              const int64_t* index, uint64_t at) const {
    gpu::GatherArgs g;
    g.dtype = pb_.dtype;
    g.batch = pb_.batch;
    g.head_dim = pb_.head_dim;
    g.src = src;
    std::copy(stride, stride + 4, g.stride);
    g.heads = heads;
    g.len = len;
    g.index = index;
    g.dst = ws_ + at;
    return g;
  }
  psa_status gather(const void* src, const int64_t* stride, int64_t heads, int64_t len,
                    const int64_t* index, uint64_t at) {
    return gpu::gather_rows_cuda(gather_args(src, stride, heads, len, index, at), stream_);
  }
  // The attention arguments every step shares: shape, blocks, scale, causal, output.
  gpu::AttentionArgs attention_args() const {
    gpu::AttentionArgs at;
    at.dtype = pb_.dtype;
    at.dims = dims_;
    at.dims.block_m = plan_.block_m == 64 ? 64 : 128;  // dense steps of any plan: 128
    at.scale = plan_.scale;
    at.causal = plan_.route.causal;
    at.out = a_.out;
    std::copy(a_.o_stride, a_.o_stride + 4, at.o_stride);
    at.lse = a_.lse;
    return at;
  }
  // ... plus what both sparse kernels read: Q as the forward uses it (rearranged copy, or the
  // caller's with a row index), the work list, and the inverse rearrangement of the output.
  gpu::AttentionArgs sparse_attention_args() const {
    gpu::AttentionArgs at = attention_args();
    at.dense = false;
    at.q = q_use_;
    std::copy(q_use_stride_, q_use_stride_ + 4, at.q_stride);
    at.q_rows = q_use_rows_;
    at.wl_blocks = reinterpret_cast<const int32_t*>(ws_ + w_.wl_blocks);
    at.wl_count = reinterpret_cast<const int32_t*>(ws_ + w_.wl_count);
    at.out_rows = data_.q_src;
    return at;
  }

  const Plan& plan_;
  const Problem& pb_;
  const gpu::ProblemDims dims_;
  const CudaPlanData& data_;
  const CudaWorkspaceLayout& w_;
  const ForwardArgs& a_;
  cudaStream_t stream_;
  char* ws_;
  unsigned long long* counts_;
  cudaEvent_t* events_;  // [kStageEvCount] or NULL (timing off)
  int64_t contiguous_q_[4], contiguous_k_[4];
  bool fp8_ = false;
  bool q_in_place_ = false;
  const void* q_use_ = nullptr;
  const int64_t* q_use_stride_ = nullptr;
  const int64_t* q_use_rows_ = nullptr;
  bool kv_in_place_ = false;  // PSA: level-1 K and V read from the caller (no rearrangement)
  const void* k_use_ = nullptr;
  const void* v_use_ = nullptr;
  const int64_t* k_use_stride_ = nullptr;
  const int64_t* v_use_stride_ = nullptr;
};

class CudaBackend final : public Backend {
 public:
  CudaBackend(int device, unsigned long long* counts) : device_(device), counts_(counts) {}
  ~CudaBackend() override {
    DeviceGuard guard(device_);
    if (timing_) destroy_events();
    cudaFree(counts_);
  }

  psa_backend kind() const override { return PSA_BACKEND_CUDA; }

  psa_status prepare(Plan* plan) override {
    DeviceGuard guard(device_);
    const Problem& pb = plan->problem;
    // Each stage's entry says what it supports; a shape is refused here, when it is planned,
    // never in a forward. Dense steps use the attention stage only (any block_n).
    const bool sparse = plan->route.sparse();
    // precision = fp8 runs where the 8-bit kernels do (Hopper, the PSA route, non-causal, head
    // dim 128, block_m 128); elsewhere the plan falls back to the default precision, which
    // psa_stats.precision reports after each forward.
    if (plan->route.precision == PSA_PRECISION_FP8 && !fp8_runs(*plan)) plan->route.precision = PSA_PRECISION_DEFAULT;
    PSA_TRY(gpu::attention_supported(pb.dtype, pb.batch, pb.heads_q, pb.len_q, pb.len_k, pb.head_dim,
                                     sparse ? plan->block_m : 128, plan->block_n, !sparse));
    if (sparse) {
      PSA_TRY(gpu::pool_supported(pb.head_dim, plan->block_n));
      PSA_TRY(gpu::importance_supported(plan->block_m, plan->block_n, plan->q_samples, plan->k_samples));
      PSA_TRY(gpu::levels_supported(pb.batch, pb.heads_q, plan->q_blocks, plan->k_blocks, plan->block_n));
      PSA_TRY(check_method_mask_limits(*plan));
      PSA_TRY(check_causal_psa_limits(*plan));
    }
    int64_t score_slots = 0;
    if (plan->route.sparse()) PSA_TRY(gpu::score_scratch_slots(&score_slots));
    auto data = std::make_unique<CudaPlanData>();
    data->device = device_;
    data->layout = cuda_workspace_layout(*plan, score_slots);
    PSA_TRY(upload(plan->q_seq.src, &data->q_src, "q permutation: cudaMalloc/cudaMemcpy"));
    if (!plan->k_seq.src.empty() && plan->k_seq.src == plan->q_seq.src)
      data->k_src = data->q_src;
    else
      PSA_TRY(upload(plan->k_seq.src, &data->k_src, "k permutation: cudaMalloc/cudaMemcpy"));
    if (data->layout.sparse) {
      data->levels_bytes = static_cast<uint64_t>(pb.batch * pb.heads_q * plan->q_blocks * plan->k_blocks);
      // Best effort: a shape too large for it still plans; reading its map then reports
      // PSA_ERR_OUT_OF_MEMORY.
      if (data->levels_bytes > kMaxKeptLevelMapBytes ||
          cudaMalloc(reinterpret_cast<void**>(&data->levels_kept), data->levels_bytes) != cudaSuccess) {
        (void)cudaGetLastError();
        data->levels_kept = nullptr;
      }
    }
    plan->workspace_bytes = data->layout.total;
    plan->backend_data = std::move(data);
    return PSA_OK;
  }

  psa_status check_pointers(const Plan& plan, const ForwardArgs& a) override {
    struct Ptr {
      const void* p;
      const char* name;
      uintptr_t align;
    };
    const Ptr ptrs[6] = {{a.q, "q", 16},  {a.k, "k", 16},     {a.v, "v", 16},
                         {a.out, "out", 16}, {a.lse, "lse", 4}, {a.workspace, "workspace", 16}};
    for (const Ptr& x : ptrs)
      if (x.p != nullptr) PSA_TRY(check_device_pointer(x.p, x.name, x.align, x.p == a.workspace, a.stream));
    (void)plan;
    return PSA_OK;
  }

  // The stage sequence of one CUDA forward, enqueued on the caller's stream. The route picks
  // the mask stage: rf_v2 / ada_bsa gather K, V and build their own level map; PSA gathers K,
  // V with their pyramids, samples importance and builds the PSA level map; causal PSA gathers
  // K, V with their pyramids, scores antidiagonals and applies its own level rule. All then
  // build the work list and run the sparse attention, whose epilogue is the inverse rearrange.
  psa_status forward(const Plan& plan, const ForwardArgs& a, LevelCounts* counts) override {
    DeviceGuard guard(device_);
    const auto* data = dynamic_cast<const CudaPlanData*>(plan.backend_data.get());
    PSA_RETURN_IF(data == nullptr, PSA_ERR_INTERNAL, "CUDA forward: the plan was not prepared by this backend");
    last_stream_ = static_cast<cudaStream_t>(a.stream);
    events_recorded_ = false;
    if (counts) *counts = LevelCounts{};
    CudaForward f(plan, *data, a, counts_, timing_ ? events_ : nullptr);
    if (a.dense) return f.dense_attention();
    PSA_RETURN_IF(!data->layout.sparse, PSA_ERR_INTERNAL, "CUDA forward: sparse step on a dense-only plan");
    PSA_TRY(f.begin());
    PSA_TRY(f.rearrange_q());
    switch (plan.route.route) {
      case Route::kBlockMethod:
        PSA_TRY(f.rearrange_kv());
        PSA_TRY(f.mark(kStageEvRearranged));
        PSA_TRY(f.mark(kStageEvPooled));  // no pyramid, no sampled importance
        PSA_TRY(f.mark(kStageEvImportance));
        PSA_TRY(enqueue_method_levels(plan, f.workspace(), data->layout, a.stream));
        break;
      case Route::kPsa:
        PSA_TRY(f.mark(kStageEvRearranged));
        PSA_TRY(f.fp8() ? f.rearrange_pool_kv_fp8() : f.rearrange_pool_kv(plan.pooled_levels));
        PSA_TRY(f.mark(kStageEvPooled));
        PSA_TRY(f.importance());
        PSA_TRY(f.mark(kStageEvImportance));
        PSA_TRY(f.mask());
        break;
      case Route::kCausalPsa:  // its importance and level rule: cuda_causal_psa.cpp
        PSA_TRY(f.mark(kStageEvRearranged));
        PSA_TRY(f.rearrange_pool_kv(plan.pooled_levels));  // every level (its own level rule)
        PSA_TRY(f.mark(kStageEvPooled));
        PSA_TRY(enqueue_causal_psa_scores(plan, f.workspace(), data->layout, a.stream));
        PSA_TRY(f.mark(kStageEvImportance));
        PSA_TRY(f.sim_cap());
        PSA_TRY(enqueue_causal_psa_levels(plan, f.workspace(), data->layout, a.stream));
        break;
      case Route::kDense:
        return set_error(PSA_ERR_INTERNAL, "CUDA forward: sparse step on a dense route");
    }
    PSA_TRY(f.worklist());
    PSA_TRY(f.mark(kStageEvMask));
    PSA_TRY(f.fp8() ? f.attention_fp8() : f.attention());
    PSA_TRY(f.mark(kStageEvAttention));
    events_recorded_ = timing_;
    return PSA_OK;
  }

  // The PSA ring halves (api/ring_api.cpp checks and plans): the forward's stages split at
  // the level map, on the caller's workspace and stream. Half 1 (level_map) runs the PSA
  // route up to the work list of a plan this backend prepared (its layout; V, its pyramids
  // and the attention left out) and copies the map out; half 2 takes a plan of the query
  // shard against one K/V shard, gathers and pools that shard, takes the shard's columns of
  // the map and runs the work list and the attention with the LSE.
  psa_status ring_workspace(const Plan& plan, bool level_map, uint64_t* bytes) override {
    DeviceGuard guard(device_);
    if (level_map) {
      const auto* data = dynamic_cast<const CudaPlanData*>(plan.backend_data.get());
      PSA_RETURN_IF(data == nullptr, PSA_ERR_INTERNAL, "CUDA level map: the plan was not prepared by this backend");
      *bytes = data->layout.total;
      return PSA_OK;
    }
    PSA_TRY(shard_supported(plan));
    *bytes = cuda_workspace_layout(plan, 0).total;
    return PSA_OK;
  }

  psa_status ring_level_map(const Plan& plan, const RingTensors& t, bool dense, int8_t* levels, void* workspace,
                            void* stream) override {
    DeviceGuard guard(device_);
    const auto* data = dynamic_cast<const CudaPlanData*>(plan.backend_data.get());
    PSA_RETURN_IF(data == nullptr || plan.route.route != Route::kPsa, PSA_ERR_INTERNAL,
                  "CUDA level map: the plan was not prepared by this backend for the psa route");
    PSA_RETURN_IF(t.q_offsets != nullptr || t.k_offsets != nullptr, PSA_ERR_UNSUPPORTED,
                  "injected sampling offsets: supported by the CPU backend only");
    PSA_TRY(check_device_pointer(t.q, "q", 16, false, stream));
    PSA_TRY(check_device_pointer(t.k, "k", 16, false, stream));
    PSA_TRY(check_device_pointer(levels, "levels", 1, false, stream));
    if (!dense) PSA_TRY(check_device_pointer(workspace, "workspace", 16, true, stream));
    const cudaStream_t s = static_cast<cudaStream_t>(stream);
    last_stream_ = s;
    events_recorded_ = false;
    if (dense) {  // a warm-up step: every pair at level 1 (half 2 then attends densely)
      const uint64_t bytes = static_cast<uint64_t>(plan.problem.batch * plan.problem.heads_q * plan.q_blocks *
                                                   plan.k_blocks);
      PSA_CUDA_TRY(cudaMemsetAsync(levels, 1, bytes, s), "level map: cudaMemsetAsync");
      return PSA_OK;
    }
    const ForwardArgs a = ring_args(t, workspace, stream);
    CudaForward f(plan, *data, a, counts_, nullptr);
    PSA_TRY(f.begin());
    PSA_TRY(f.rearrange_q());
    PSA_TRY(f.rearrange_k());
    PSA_TRY(f.importance());
    PSA_TRY(f.mask());
    PSA_TRY(f.worklist());  // the level counts and the plan's kept map
    return f.copy_levels_out(levels);
  }

  psa_status ring_shard_attention(const Plan& plan, const RingTensors& t, const int8_t* levels, int64_t map_nk,
                                  int64_t begin, void* workspace, void* stream) override {
    DeviceGuard guard(device_);
    PSA_RETURN_IF(plan.route.route != Route::kPsa, PSA_ERR_INTERNAL, "CUDA shard attention: not a psa route");
    PSA_TRY(shard_supported(plan));
    const struct {
      const void* p;
      const char* name;
      uintptr_t align;
    } ptrs[7] = {{t.q, "q", 16},   {t.k, "k", 16},     {t.v, "v", 16},           {levels, "levels", 1},
                 {t.out, "out", 16}, {t.lse, "lse", 4}, {workspace, "workspace", 16}};
    for (const auto& x : ptrs) PSA_TRY(check_device_pointer(x.p, x.name, x.align, x.p == workspace, stream));
    // The shard's plan is not prepared (no permutation, no kept map): its layout only.
    CudaPlanData data;
    data.device = device_;
    data.layout = cuda_workspace_layout(plan, 0);
    const ForwardArgs a = ring_args(t, workspace, stream);
    CudaForward f(plan, data, a, nullptr, nullptr);  // counts untouched: not a forward
    PSA_TRY(f.rearrange_q());
    // Every pooled level: the map comes from the caller (made for the whole key sequence, whose
    // block count the shard's plan does not know), so the shard's plan cannot bound its levels.
    PSA_TRY(f.rearrange_pool_kv(kPooledLevelsAll));
    PSA_TRY(f.copy_levels_in(levels, map_nk, begin));
    PSA_TRY(f.worklist());
    return f.attention();
  }

  psa_status set_stage_timing(bool on) override {
    DeviceGuard guard(device_);
    if (on && !timing_) {
      for (int i = 0; i < kStageEvCount; ++i)
        PSA_CUDA_TRY(cudaEventCreate(&events_[i]), "stage timing: cudaEventCreate");
    } else if (!on && timing_) {
      destroy_events();
    }
    timing_ = on;
    events_recorded_ = false;
    return PSA_OK;
  }

  psa_status read_levels(const Plan& plan, int8_t* dst) override {
    DeviceGuard guard(device_);
    const auto* data = dynamic_cast<const CudaPlanData*>(plan.backend_data.get());
    PSA_RETURN_IF(data == nullptr || data->levels_bytes == 0, PSA_ERR_INTERNAL,
                  "level map: the plan keeps none (dense method)");
    PSA_RETURN_IF(data->levels_kept == nullptr, PSA_ERR_OUT_OF_MEMORY,
                  "level map: its %llu bytes are above the %llu kept per plan, or the device "
                  "memory could not be allocated when the shape was planned",
                  static_cast<unsigned long long>(data->levels_bytes),
                  static_cast<unsigned long long>(kMaxKeptLevelMapBytes));
    PSA_CUDA_TRY(cudaStreamSynchronize(last_stream_), "level map: cudaStreamSynchronize");
    PSA_CUDA_TRY(cudaMemcpy(dst, data->levels_kept, data->levels_bytes, cudaMemcpyDeviceToHost),
                 "level map: cudaMemcpy");
    return PSA_OK;
  }

  psa_status read_counts(LevelCounts* counts) override {
    DeviceGuard guard(device_);
    PSA_CUDA_TRY(cudaStreamSynchronize(last_stream_), "level counts: cudaStreamSynchronize");
    unsigned long long host[kNumSlots] = {0, 0, 0, 0, 0};
    PSA_CUDA_TRY(cudaMemcpy(host, counts_, sizeof(host), cudaMemcpyDeviceToHost),
                 "level counts: cudaMemcpy");
    LevelCounts c;
    for (int s = 0; s < kNumSlots; ++s) c.count[s] = static_cast<int64_t>(host[s]);
    c.density_sum = static_cast<double>(c.count[kSlotL1]) + c.count[kSlotL2] / 2.0 +
                    c.count[kSlotL4] / 4.0 + c.count[kSlotL8] / 8.0;
    if (events_recorded_) {
      // Event pairs per stage; the inverse rearrange is fused into the attention epilogue.
      const int stage[kStageEvCount - 1] = {PSA_STAGE_REARRANGE, PSA_STAGE_POOL, PSA_STAGE_IMPORTANCE,
                                            PSA_STAGE_MASK, PSA_STAGE_ATTENTION};
      for (int e = 0; e + 1 < kStageEvCount; ++e) {
        float ms = 0.0f;
        PSA_CUDA_TRY(cudaEventElapsedTime(&ms, events_[e], events_[e + 1]), "stage timing: cudaEventElapsedTime");
        c.stage_ms[stage[e]] = ms;
      }
      float total = 0.0f;
      PSA_CUDA_TRY(cudaEventElapsedTime(&total, events_[kStageEvStart], events_[kStageEvAttention]),
                   "stage timing: cudaEventElapsedTime");
      c.stage_ms[PSA_STAGE_TOTAL] = total;
    }
    *counts = c;
    return PSA_OK;
  }

 private:
  // A pointer the kernels read or write: device (or managed) memory of this backend's device,
  // aligned to `align`. A workspace from cudaMallocAsync on a stream being captured is a graph
  // allocation: its address is only backed once the graph runs, so the runtime may not report
  // it as device memory yet (psa_sparse_attention allocates it so). Alignment is still checked.
  psa_status check_device_pointer(const void* p, const char* name, uintptr_t align, bool workspace,
                                  void* stream) const {
    cudaPointerAttributes attr{};
    const cudaError_t e = cudaPointerGetAttributes(&attr, p);
    if (e != cudaSuccess) (void)cudaGetLastError();
    bool device_visible =
        e == cudaSuccess && (attr.type == cudaMemoryTypeDevice || attr.type == cudaMemoryTypeManaged);
    if (!device_visible && workspace && stream_capturing(stream, /*if_unknown=*/false)) {
      attr.type = cudaMemoryTypeDevice;
      attr.device = device_;
      device_visible = true;
    }
    PSA_RETURN_IF(!device_visible, PSA_ERR_WRONG_MEMORY_SPACE,
                  "%s: %p is host memory; the CUDA backend needs device memory", name, p);
    PSA_RETURN_IF(attr.type == cudaMemoryTypeDevice && attr.device != device_, PSA_ERR_WRONG_MEMORY_SPACE,
                  "%s: %p lives on device %d; the context uses device %d", name, p, attr.device, device_);
    PSA_RETURN_IF(reinterpret_cast<uintptr_t>(p) % align != 0, PSA_ERR_MISALIGNED_POINTER,
                  "%s: %p is not %u-byte aligned", name, p, static_cast<unsigned>(align));
    return PSA_OK;
  }

  // Whether the 8-bit path runs this plan: the PSA route and every 8-bit entry's own check (the
  // device and build, head dim, blocks, causal; the importance stage's int8 score kernel: its
  // sample counts). Any refusal means the default precision.
  static bool fp8_runs(const Plan& plan) {
    const Problem& pb = plan.problem;
    if (!plan.route.psa()) return false;
    gpu::AttentionFp8Args a;
    a.dtype = pb.dtype;
    a.dims = problem_dims(plan);
    const bool ok = gpu::attention_fp8_supported(a, plan.route.causal) == PSA_OK &&
                    gpu::pool_fp8_supported(pb.head_dim, plan.block_n) == PSA_OK &&
                    gpu::score_int8_supported(plan.q_samples, plan.k_samples, pb.head_dim);
    clear_error();  // a refusal here is a choice, not the caller's error
    return ok;
  }

  // What a shard attention runs: the pyramid pooling and the sparse attention of its shape.
  static psa_status shard_supported(const Plan& plan) {
    const Problem& pb = plan.problem;
    PSA_TRY(gpu::attention_supported(pb.dtype, pb.batch, pb.heads_q, pb.len_q, pb.len_k, pb.head_dim,
                                     plan.block_m, plan.block_n, false));
    return gpu::pool_supported(pb.head_dim, plan.block_n);
  }

  static ForwardArgs ring_args(const RingTensors& t, void* workspace, void* stream) {
    ForwardArgs a;
    a.q = t.q;
    a.k = t.k;
    a.v = t.v;
    a.out = t.out;
    a.lse = t.lse;
    std::copy(t.q_stride, t.q_stride + 4, a.q_stride);
    std::copy(t.k_stride, t.k_stride + 4, a.k_stride);
    std::copy(t.v_stride, t.v_stride + 4, a.v_stride);
    std::copy(t.o_stride, t.o_stride + 4, a.o_stride);
    a.workspace = workspace;
    a.stream = stream;
    return a;
  }

  void destroy_events() {
    for (cudaEvent_t& e : events_) {
      if (e) cudaEventDestroy(e);
      e = nullptr;
    }
  }

  int device_;
  unsigned long long* counts_;  // device [kNumSlots], owned
  cudaStream_t last_stream_ = nullptr;
  // Stage events of this context (psa_context_set_stage_timing): created when timing is
  // switched on, recorded by each sparse forward, read by read_counts.
  bool timing_ = false, events_recorded_ = false;
  cudaEvent_t events_[kStageEvCount] = {};
};

}  // namespace

psa_status make_cuda_backend(int32_t device, std::unique_ptr<Backend>* out) {
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || count == 0) {
    (void)cudaGetLastError();
    return set_error(PSA_ERR_NO_DEVICE, "backend = PSA_BACKEND_CUDA, device = %d: no usable CUDA "
                     "device (%s)", device,
                     e != cudaSuccess ? cudaGetErrorString(e) : "device count is 0");
  }
  int dev = device;
  if (dev < 0) PSA_CUDA_TRY(cudaGetDevice(&dev), "cudaGetDevice");
  PSA_RETURN_IF(dev >= count, PSA_ERR_NO_DEVICE, "device = %d; this machine has %d CUDA device(s)",
                dev, count);
  cudaDeviceProp prop{};
  PSA_CUDA_TRY(cudaGetDeviceProperties(&prop, dev), "cudaGetDeviceProperties");
  PSA_RETURN_IF(prop.major < 8, PSA_ERR_UNSUPPORTED,
                "device %d (%s) is sm_%d%d; the CUDA backend needs sm_80 or newer", dev, prop.name,
                prop.major, prop.minor);
  DeviceGuard guard(dev);
  unsigned long long* counts = nullptr;
  PSA_CUDA_TRY(cudaMalloc(reinterpret_cast<void**>(&counts), sizeof(unsigned long long) * kNumSlots),
               "level counts: cudaMalloc");
  *out = std::make_unique<CudaBackend>(dev, counts);
  return PSA_OK;
}

bool cuda_backend_available() {
  int count = 0, dev = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0 || cudaGetDevice(&dev) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  int major = 0;
  if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  return major >= 8;
}

}  // namespace psa

#else  // !PSA_WITH_CUDA

namespace psa {

psa_status make_cuda_backend(int32_t device, std::unique_ptr<Backend>* out) {
  (void)device;
  (void)out;
  return set_error(PSA_ERR_BACKEND_UNAVAILABLE,
                   "backend = PSA_BACKEND_CUDA: this build of libpsa has no CUDA backend "
                   "(configure with -DPSA_WITH_CUDA=ON)");
}

bool cuda_backend_available() { return false; }

}  // namespace psa

#endif

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
#include "backend/cuda/cuda_causal_psa.h"
#include "backend/cuda/cuda_method_mask.h"
#include "backend/cuda/cuda_stage_timer.h"
#include "backend/cuda/cuda_workspace.h"
#include "cuda/attention/attention_cuda.h"
#include "cuda/core/cuda_status.h"
#include "cuda/importance/importance_cuda.h"
#include "importance/importance.h"
#include "cuda/mask/mask_cuda.h"
#include "cuda/pool/pool_cuda.h"
#include "cuda/rearrange/gather_cuda.h"
#include "mask/mask.h"

namespace psa {

CudaStageTimer* g_cuda_stage_timer = nullptr;

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


const char* dtype_label(psa_dtype d) {
  return d == PSA_DTYPE_F32 ? "f32" : d == PSA_DTYPE_F16 ? "f16" : d == PSA_DTYPE_BF16 ? "bf16" : "unknown";
}

class CudaBackend final : public Backend {
 public:
  CudaBackend(int device, unsigned long long* counts) : device_(device), counts_(counts) {}
  ~CudaBackend() override {
    DeviceGuard guard(device_);
    cudaFree(counts_);
  }

  psa_backend kind() const override { return PSA_BACKEND_CUDA; }

  psa_status prepare(const Config& cfg, Plan* plan) override {
    DeviceGuard guard(device_);
    const Problem& pb = plan->problem;
    PSA_RETURN_IF(pb.dtype != PSA_DTYPE_F16 && pb.dtype != PSA_DTYPE_BF16, PSA_ERR_UNSUPPORTED,
                  "q: dtype = %s; the CUDA backend supports f16 and bf16", dtype_label(pb.dtype));
    PSA_RETURN_IF(pb.head_dim != 64 && pb.head_dim != 128, PSA_ERR_UNSUPPORTED,
                  "q: shape[3] (head_dim) = %lld; supported by the CUDA backend: 64, 128",
                  static_cast<long long>(pb.head_dim));
    PSA_RETURN_IF(pb.batch > 65535 || pb.heads_q > 65535, PSA_ERR_UNSUPPORTED,
                  "q: batch = %lld, heads = %lld; the CUDA backend allows at most 65535 of each",
                  static_cast<long long>(pb.batch), static_cast<long long>(pb.heads_q));
    PSA_RETURN_IF(pb.len_q > (int64_t{1} << 30) || pb.len_k > (int64_t{1} << 30), PSA_ERR_UNSUPPORTED,
                  "seq_len %lld/%lld: the CUDA backend supports at most 2^30 tokens",
                  static_cast<long long>(pb.len_q), static_cast<long long>(pb.len_k));
    if (cfg.method != PSA_METHOD_DENSE) {
      PSA_RETURN_IF(plan->block_m != 64 && plan->block_m != 128, PSA_ERR_UNSUPPORTED,
                    "block_size.m = %lld; supported by the CUDA backend: 64, 128",
                    static_cast<long long>(plan->block_m));
      PSA_RETURN_IF(plan->block_n % 8 != 0 || plan->block_n > 128, PSA_ERR_UNSUPPORTED,
                    "block_size.n = %lld; supported by the CUDA backend: multiples of 8 up to 128",
                    static_cast<long long>(plan->block_n));
      PSA_RETURN_IF(plan->q_samples > plan->block_m || plan->k_samples > plan->block_n,
                    PSA_ERR_UNSUPPORTED, "sample counts %lld/%lld exceed the blocks",
                    static_cast<long long>(plan->q_samples), static_cast<long long>(plan->k_samples));
      const int64_t max_nk = gpu::max_mask_blocks();
      PSA_RETURN_IF(plan->k_blocks > max_nk, PSA_ERR_UNSUPPORTED,
                    "k: %lld key blocks of %lld tokens; the CUDA mask builder sorts at most %lld "
                    "per row (raise block_size.n)",
                    static_cast<long long>(plan->k_blocks), static_cast<long long>(plan->block_n),
                    static_cast<long long>(max_nk));
      PSA_TRY(check_method_mask_limits(cfg, *plan));
      PSA_TRY(check_causal_psa_limits(cfg, *plan));
    }
    int64_t score_slots = 0;
    if (cfg.method != PSA_METHOD_DENSE) PSA_TRY(gpu::score_scratch_slots(&score_slots));
    auto data = std::make_unique<CudaPlanData>();
    data->device = device_;
    data->layout = cuda_workspace_layout(cfg, *plan, score_slots);
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
      bool required;
    };
    const Ptr ptrs[6] = {{a.q, "q", 16, true},     {a.k, "k", 16, true},
                         {a.v, "v", 16, true},     {a.out, "out", 16, true},
                         {a.lse, "lse", 4, false}, {a.workspace, "workspace", 16, false}};
    for (const Ptr& x : ptrs) {
      if (x.p == nullptr) continue;
      cudaPointerAttributes attr{};
      const cudaError_t e = cudaPointerGetAttributes(&attr, x.p);
      if (e != cudaSuccess) (void)cudaGetLastError();
      bool device_visible = e == cudaSuccess && (attr.type == cudaMemoryTypeDevice ||
                                                 attr.type == cudaMemoryTypeManaged);
      // A workspace from cudaMallocAsync on a stream being captured is a graph allocation: its
      // address is only backed once the graph runs, so the runtime may not report it as device
      // memory yet (psa_sparse_attention allocates it so). Alignment is still checked.
      if (!device_visible && x.p == a.workspace && stream_capturing(a.stream, /*if_unknown=*/false)) {
        attr.type = cudaMemoryTypeDevice;
        attr.device = device_;
        device_visible = true;
      }
      PSA_RETURN_IF(!device_visible, PSA_ERR_WRONG_MEMORY_SPACE,
                    "%s: %p is host memory; the CUDA backend needs device memory", x.name, x.p);
      PSA_RETURN_IF(attr.type == cudaMemoryTypeDevice && attr.device != device_, PSA_ERR_WRONG_MEMORY_SPACE,
                    "%s: %p lives on device %d; the context uses device %d", x.name, x.p,
                    attr.device, device_);
      PSA_RETURN_IF(reinterpret_cast<uintptr_t>(x.p) % x.align != 0, PSA_ERR_MISALIGNED_POINTER,
                    "%s: %p is not %u-byte aligned", x.name, x.p, static_cast<unsigned>(x.align));
    }
    (void)plan;
    return PSA_OK;
  }

  psa_status forward(const Config& cfg, const Plan& plan, const ForwardArgs& a,
                     LevelCounts* counts) override {
    DeviceGuard guard(device_);
    const auto* data = dynamic_cast<const CudaPlanData*>(plan.backend_data.get());
    PSA_RETURN_IF(data == nullptr, PSA_ERR_INTERNAL, "CUDA forward: the plan was not prepared by this backend");
    cudaStream_t stream = static_cast<cudaStream_t>(a.stream);
    last_stream_ = stream;
    if (counts) *counts = LevelCounts{};
    const Problem& pb = plan.problem;
    const CudaWorkspaceLayout& w = data->layout;
    char* ws = static_cast<char*>(a.workspace);

    gpu::GatherArgs g;
    g.dtype = pb.dtype;
    g.batch = pb.batch;
    g.head_dim = pb.head_dim;
    auto gather = [&](const void* src, const int64_t* stride, int64_t heads, int64_t len,
                      const int64_t* index, uint64_t at) {
      g.src = src;
      std::copy(stride, stride + 4, g.stride);
      g.heads = heads;
      g.len = len;
      g.index = index;
      g.dst = ws + at;
      return gpu::gather_rows_cuda(g, stream);
    };
    const int64_t contiguous_q[4] = {pb.heads_q * pb.len_q * pb.head_dim, pb.len_q * pb.head_dim,
                                     pb.head_dim, 1};
    const int64_t contiguous_k[4] = {pb.heads_kv * pb.len_k * pb.head_dim, pb.len_k * pb.head_dim,
                                     pb.head_dim, 1};

    gpu::AttentionArgs at;
    at.dtype = pb.dtype;
    at.batch = pb.batch;
    at.heads_q = pb.heads_q;
    at.heads_kv = pb.heads_kv;
    at.len_q = pb.len_q;
    at.len_k = pb.len_k;
    at.head_dim = pb.head_dim;
    at.block_m = plan.block_m == 64 ? 64 : 128;
    at.block_n = plan.block_n;
    at.scale = plan.scale;
    at.causal = cfg.causal;
    at.out = a.out;
    std::copy(a.o_stride, a.o_stride + 4, at.o_stride);
    at.lse = a.lse;

    if (a.dense) {
      // Plain attention over the caller's tensors (no rearrangement, as the CPU backend);
      // rows that are not 16-byte aligned are gathered into the workspace first.
      at.dense = true;
      const void* src[3] = {a.q, a.k, a.v};
      const int64_t* str[3] = {a.q_stride, a.k_stride, a.v_stride};
      const uint64_t dst[3] = {w.q, w.k, w.v};
      const int64_t heads[3] = {pb.heads_q, pb.heads_kv, pb.heads_kv};
      const int64_t lens[3] = {pb.len_q, pb.len_k, pb.len_k};
      const void* use[3];
      const int64_t* use_stride[3];
      for (int t = 0; t < 3; ++t) {
        if (gpu::attention_rows_aligned(src[t], str[t])) {
          use[t] = src[t];
          use_stride[t] = str[t];
        } else {
          PSA_TRY(gather(src[t], str[t], heads[t], lens[t], nullptr, dst[t]));
          use[t] = ws + dst[t];
          use_stride[t] = t == 0 ? contiguous_q : contiguous_k;
        }
      }
      at.q = use[0];
      at.k = use[1];
      at.v = use[2];
      std::copy(use_stride[0], use_stride[0] + 4, at.q_stride);
      std::copy(use_stride[1], use_stride[1] + 4, at.k_stride);
      std::copy(use_stride[2], use_stride[2] + 4, at.v_stride);
      return gpu::attention_cuda(at, stream);
    }

    PSA_RETURN_IF(!w.sparse, PSA_ERR_INTERNAL, "CUDA forward: sparse step on a dense-only plan");
    CudaStageTimer* timer = g_cuda_stage_timer;
    auto mark = [&](int which) {
      if (timer) cudaEventRecord(static_cast<cudaEvent_t>(timer->events[which]), stream);
    };
    if (timer) {
      timer->levels_offset = w.levels;
      timer->levels_bytes = static_cast<uint64_t>(pb.batch * pb.heads_q * plan.q_blocks * plan.k_blocks);
    }
    mark(kStageEvStart);
    PSA_CUDA_TRY(cudaMemsetAsync(counts_, 0, sizeof(unsigned long long) * kNumSlots, stream),
                 "level counts: cudaMemsetAsync");
    // 1. rearrange into contiguous copies (K and V with the pyramid below for PSA). PSA reads
    // the caller's Q in place through q_src (importance and attention) when its rows are
    // 16-byte aligned; otherwise, and for the block methods, Q is gathered here.
    const bool block_method = is_block_method(cfg);
    const bool causal_psa = cfg.method == PSA_METHOD_PSA_CAUSAL;  // src/methods/causal_psa*
    const bool q_in_place = !block_method && !causal_psa && gpu::attention_rows_aligned(a.q, a.q_stride);
    const void* q_use = q_in_place ? a.q : ws + w.q;
    const int64_t* q_use_stride = q_in_place ? a.q_stride : contiguous_q;
    const int64_t* q_use_rows = q_in_place ? data->q_src : nullptr;
    if (!q_in_place) PSA_TRY(gather(a.q, a.q_stride, pb.heads_q, pb.len_q, data->q_src, w.q));
    if (block_method) {
      PSA_TRY(gather(a.k, a.k_stride, pb.heads_kv, pb.len_k, data->k_src, w.k));
      PSA_TRY(gather(a.v, a.v_stride, pb.heads_kv, pb.len_k, data->k_src, w.v));
      mark(kStageEvRearranged);
      // 2-4. rf_v2 / ada_bsa: no pyramid, no sampled importance; their own level map.
      mark(kStageEvPooled);
      mark(kStageEvImportance);
      PSA_TRY(enqueue_method_levels(cfg, plan, ws, w, stream));
    } else if (causal_psa) {
      mark(kStageEvRearranged);
      PSA_TRY(enqueue_causal_psa_levels(cfg, plan, a, data->k_src, ws, w, stream));
      mark(kStageEvPooled);
      mark(kStageEvImportance);
    } else {
      mark(kStageEvRearranged);
      // 2. K and V: rearranged copies and their pyramids in one pass over each.
      const void* src[2] = {a.k, a.v};
      const int64_t* str[2] = {a.k_stride, a.v_stride};
      const uint64_t dst[2] = {w.k, w.v};
      const uint64_t* pooled[2] = {w.k_pooled, w.v_pooled};
      for (int t = 0; t < 2; ++t) {
        g.src = src[t];
        std::copy(str[t], str[t] + 4, g.stride);
        g.heads = pb.heads_kv;
        g.len = pb.len_k;
        g.index = data->k_src;
        g.dst = ws + dst[t];
        void* out[3];
        for (int l = 0; l < 3; ++l) out[l] = ws + pooled[t][l];
        PSA_TRY(gpu::gather_pool_pyramid_cuda(g, plan.k_blocks, plan.block_n, out, stream));
      }
      mark(kStageEvPooled);
      // 3. importance.
      gpu::OffsetArgs oa;
      oa.seed = static_cast<uint64_t>(cfg.seed);
      oa.batch = pb.batch;
      oa.heads_q = pb.heads_q;
      oa.batch_offset = cfg.batch_offset;
      oa.head_offset = cfg.head_offset;
      oa.block_m = static_cast<int32_t>(plan.block_m);
      oa.q_count = static_cast<int32_t>(plan.q_samples);
      oa.block_n = static_cast<int32_t>(plan.block_n);
      oa.k_count = static_cast<int32_t>(plan.k_samples);
      oa.q_off = reinterpret_cast<int32_t*>(ws + w.q_off);
      oa.k_off = reinterpret_cast<int32_t*>(ws + w.k_off);
      PSA_TRY(gpu::sample_offsets_cuda(oa, stream));
      gpu::ScoreArgs sa;
      sa.dtype = pb.dtype;
      sa.q = q_use;
      std::copy(q_use_stride, q_use_stride + 4, sa.q_stride);
      sa.q_rows = q_use_rows;
      sa.k = ws + w.k;
      sa.batch = pb.batch;
      sa.heads_q = pb.heads_q;
      sa.heads_kv = pb.heads_kv;
      sa.len_q = pb.len_q;
      sa.len_k = pb.len_k;
      sa.head_dim = pb.head_dim;
      sa.block_m = plan.block_m;
      sa.block_n = plan.block_n;
      sa.q_off = oa.q_off;
      sa.k_off = oa.k_off;
      sa.q_count = oa.q_count;
      sa.k_count = oa.k_count;
      sa.scale = plan.scale;
      sa.scores = reinterpret_cast<float*>(ws + w.scores);
      sa.ties = tie_mass_ranking_enabled() ? reinterpret_cast<float*>(ws + w.ties) : nullptr;
      sa.scratch = w.score_scratch_bytes > 0 ? ws + w.score_scratch : nullptr;
      sa.scratch_bytes = w.score_scratch_bytes;
      PSA_TRY(gpu::block_scores_cuda(sa, stream));
      mark(kStageEvImportance);
      // 4. mask: similarity cap, levels, work list (+ level counts).
      int8_t* cap = nullptr;
      if (cfg.use_sim_mask) {
        gpu::SimCapArgs ca;
        ca.dtype = pb.dtype;
        ca.k = ws + w.k;
        ca.heads = pb.batch * pb.heads_kv;
        ca.len_k = pb.len_k;
        ca.head_dim = pb.head_dim;
        ca.n_blocks = plan.k_blocks;
        ca.block_n = plan.block_n;
        std::copy(cfg.sim_threshold, cfg.sim_threshold + 3, ca.threshold);
        cap = reinterpret_cast<int8_t*>(ws + w.cap);
        ca.cap = cap;
        PSA_TRY(gpu::sim_cap_cuda(ca, stream));
      }
      const MaskRowParams rp = mask_row_params(cfg);
      gpu::LevelArgs la;
      la.scores = sa.scores;
      la.ties = sa.ties;
      la.batch = pb.batch;
      la.heads_q = pb.heads_q;
      la.heads_kv = pb.heads_kv;
      la.mq = plan.q_blocks;
      la.nk = plan.k_blocks;
      la.block_m = plan.block_m;
      la.block_n = plan.block_n;
      la.tile_n = plan.tile_n;
      la.len_q = pb.len_q;
      la.len_k = pb.len_k;
      la.mode = rp.mode;
      std::copy(rp.ratio_end, rp.ratio_end + kNumSlots, la.ratio_end);
      la.min_full_ratio = rp.min_full_ratio;
      la.causal = cfg.causal;
      la.text_rule = cfg.text_rule;
      la.text_rows_dense = cfg.text_rows_dense;
      la.text_begin = plan.text_begin;
      la.text_end = plan.text_end;
      la.cap = cap;
      la.levels = reinterpret_cast<int8_t*>(ws + w.levels);
      PSA_TRY(gpu::build_levels_cuda(la, stream));
    }
    // 4b. work list of the level map (+ level counts), for every sparse method.
    gpu::WorklistArgs wa;
    wa.levels = reinterpret_cast<int8_t*>(ws + w.levels);
    wa.rows = pb.batch * pb.heads_q * plan.q_blocks;
    wa.nk = plan.k_blocks;
    wa.blocks = reinterpret_cast<int32_t*>(ws + w.wl_blocks);
    wa.count = reinterpret_cast<int32_t*>(ws + w.wl_count);
    wa.stats = counts_;
    PSA_TRY(gpu::build_worklist_cuda(wa, stream));
    // Keep the level map for psa_context_get_level_map (stream-ordered, capturable).
    if (data->levels_kept != nullptr)
      PSA_CUDA_TRY(cudaMemcpyAsync(data->levels_kept, wa.levels, data->levels_bytes,
                                   cudaMemcpyDeviceToDevice, stream),
                   "kept level map: cudaMemcpyAsync");
    mark(kStageEvMask);
    // 5. sparse attention; the epilogue writes row x back to caller row q_src[x].
    at.dense = false;
    at.q = q_use;
    std::copy(q_use_stride, q_use_stride + 4, at.q_stride);
    at.q_rows = q_use_rows;
    at.k = ws + w.k;
    at.v = ws + w.v;
    std::copy(contiguous_k, contiguous_k + 4, at.k_stride);
    std::copy(contiguous_k, contiguous_k + 4, at.v_stride);
    // Block methods have level-1 entries only: the pooled slots are never read and point at
    // the full-resolution copies.
    for (int l = 0; l < 3; ++l) {
      at.k_pooled[l] = ws + (block_method ? w.k : w.k_pooled[l]);
      at.v_pooled[l] = ws + (block_method ? w.v : w.v_pooled[l]);
    }
    at.wl_blocks = wa.blocks;
    at.wl_count = wa.count;
    at.out_rows = data->q_src;
    PSA_TRY(gpu::attention_cuda(at, stream));
    mark(kStageEvAttention);
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
    *counts = c;
    return PSA_OK;
  }

 private:
  int device_;
  unsigned long long* counts_;  // device [kNumSlots], owned
  cudaStream_t last_stream_ = nullptr;
};

}  // namespace

psa_status make_cuda_backend(int32_t device, std::unique_ptr<Backend>* out) {
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || count == 0) {
    (void)cudaGetLastError();
    return set_error(PSA_ERR_NO_DEVICE, "no usable CUDA device (%s)",
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

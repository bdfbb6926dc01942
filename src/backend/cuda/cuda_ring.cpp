// backend/cuda/cuda_ring.cpp -- CUDA backend, the PSA ring halves (cuda_ring.h): the CUDA
// forward's PSA stages split at the level map. Half 1 runs gather (K), sample offsets, block
// scores with tie masses, similarity cap and the level builder into the caller's map, then
// the work-list builder for the level counts; half 2 gathers and pools the shard's K/V, takes
// the shard's columns of the map (one 2D device copy), builds its work list and runs the
// sparse attention with the LSE. The same stage entries and arguments as cuda_backend.cpp's
// forward, so a ring of shards reproduces the whole CUDA forward. Enqueues only.
#if defined(PSA_WITH_CUDA)
#include "backend/cuda/cuda_ring.h"

#include <cuda_runtime_api.h>

#include <algorithm>

#include "backend/cuda/cuda_device_scope.h"
#include "backend/cuda/cuda_dims.h"
#include "core/error.h"
#include "cuda/attention/attention_cuda.h"
#include "cuda/core/cuda_status.h"
#include "cuda/importance/importance_cuda.h"
#include "cuda/importance/score_scratch.h"
#include "cuda/mask/mask_cuda.h"
#include "cuda/pool/pool_cuda.h"
#include "cuda/rearrange/gather_cuda.h"

namespace psa {
namespace {

// Byte offsets (256-byte aligned) of one half's intermediates in the caller's workspace.
class Layout {
 public:
  uint64_t take(uint64_t bytes) {
    const uint64_t at = (used_ + 255) & ~uint64_t{255};
    used_ = at + bytes;
    return at;
  }
  uint64_t total() const { return (used_ + 255) & ~uint64_t{255}; }

 private:
  uint64_t used_ = 0;
};

struct MapLayout {
  uint64_t q = 0, k = 0;           // gathered copies, input dtype
  uint64_t q_off = 0, k_off = 0;   // int32 [B*Hq, samples]
  uint64_t scores = 0, ties = 0;   // fp32 [B*Hq, Mq, Nk]
  uint64_t scratch = 0, scratch_bytes = 0;
  uint64_t cap = 0;                // int8 [B*Hkv, Nk] (use_sim_mask)
  uint64_t wl_blocks = 0, wl_count = 0;  // the work list, built for its level counts
  uint64_t total = 0;
};

MapLayout map_layout(const Plan& plan, int64_t score_slots) {
  const Problem& pb = plan.problem;
  const uint64_t d = static_cast<uint64_t>(pb.head_dim), es = 2;
  const uint64_t bq = static_cast<uint64_t>(pb.batch * pb.heads_q);
  const uint64_t bkv = static_cast<uint64_t>(pb.batch * pb.heads_kv);
  const uint64_t mq = static_cast<uint64_t>(plan.q_blocks), nk = static_cast<uint64_t>(plan.k_blocks);
  Layout l;
  MapLayout w;
  w.q = l.take(bq * static_cast<uint64_t>(pb.len_q) * d * es);
  w.k = l.take(bkv * static_cast<uint64_t>(pb.len_k) * d * es);
  w.q_off = l.take(bq * static_cast<uint64_t>(plan.q_samples) * 4);
  w.k_off = l.take(bq * static_cast<uint64_t>(plan.k_samples) * 4);
  w.scores = l.take(bq * mq * nk * 4);
  w.ties = l.take(bq * mq * nk * 4);
  w.scratch_bytes = gpu::score_scratch_bytes(static_cast<int64_t>(bq), plan.q_blocks, plan.k_blocks,
                                             plan.q_samples, plan.k_samples, score_slots);
  if (w.scratch_bytes > 0) w.scratch = l.take(w.scratch_bytes);
  if (plan.route.sim_cap()) w.cap = l.take(bkv * nk);
  w.wl_blocks = l.take(bq * mq * nk * 4);
  w.wl_count = l.take(bq * mq * 4 * 4);
  w.total = l.total();
  return w;
}

struct ShardLayout {
  uint64_t q = 0, k = 0, v = 0;
  uint64_t k_pooled[3] = {0, 0, 0}, v_pooled[3] = {0, 0, 0};  // levels 2, 4, 8
  uint64_t levels = 0;                  // int8 [B*Hq*Mq, nk]: the shard's columns of the map
  uint64_t wl_blocks = 0, wl_count = 0;
  uint64_t total = 0;
};

ShardLayout shard_layout(const Plan& plan) {
  const Problem& pb = plan.problem;
  const uint64_t d = static_cast<uint64_t>(pb.head_dim), es = 2;
  const uint64_t bq = static_cast<uint64_t>(pb.batch * pb.heads_q);
  const uint64_t bkv = static_cast<uint64_t>(pb.batch * pb.heads_kv);
  const uint64_t mq = static_cast<uint64_t>(plan.q_blocks), nk = static_cast<uint64_t>(plan.k_blocks);
  const uint64_t padded = nk * static_cast<uint64_t>(plan.block_n);
  Layout l;
  ShardLayout w;
  w.q = l.take(bq * static_cast<uint64_t>(pb.len_q) * d * es);
  w.k = l.take(bkv * static_cast<uint64_t>(pb.len_k) * d * es);
  w.v = l.take(bkv * static_cast<uint64_t>(pb.len_k) * d * es);
  for (int p = 0; p < 3; ++p) {
    w.k_pooled[p] = l.take(bkv * (padded >> (p + 1)) * d * es);
    w.v_pooled[p] = l.take(bkv * (padded >> (p + 1)) * d * es);
  }
  w.levels = l.take(bq * mq * nk);
  w.wl_blocks = l.take(bq * mq * nk * 4);
  w.wl_count = l.take(bq * mq * 4 * 4);
  w.total = l.total();
  return w;
}

psa_status check_shard_supported(const Plan& plan) {
  const Problem& pb = plan.problem;
  PSA_TRY(gpu::attention_supported(pb.dtype, pb.batch, pb.heads_q, pb.len_q, pb.len_k, pb.head_dim,
                                   plan.block_m, plan.block_n, false));
  return gpu::pool_supported(pb.head_dim, plan.block_n);
}

// A pointer the kernels read or write: device (or managed) memory of `device`, aligned to
// `align`. A workspace from cudaMallocAsync on a stream under capture may not be reported as
// device memory yet (as in the forward's check); its alignment is still checked.
psa_status check_pointer(const void* p, const char* name, uintptr_t align, int device, bool workspace,
                         void* stream) {
  cudaPointerAttributes attr{};
  const cudaError_t e = cudaPointerGetAttributes(&attr, p);
  if (e != cudaSuccess) (void)cudaGetLastError();
  bool visible = e == cudaSuccess && (attr.type == cudaMemoryTypeDevice || attr.type == cudaMemoryTypeManaged);
  if (!visible && workspace && stream_capturing(stream, /*if_unknown=*/false)) {
    attr.type = cudaMemoryTypeDevice;
    attr.device = device;
    visible = true;
  }
  PSA_RETURN_IF(!visible, PSA_ERR_WRONG_MEMORY_SPACE,
                "%s: %p is host memory; the CUDA backend needs device memory", name, p);
  PSA_RETURN_IF(attr.type == cudaMemoryTypeDevice && attr.device != device, PSA_ERR_WRONG_MEMORY_SPACE,
                "%s: %p lives on device %d; the context uses device %d", name, p, attr.device, device);
  PSA_RETURN_IF(reinterpret_cast<uintptr_t>(p) % align != 0, PSA_ERR_MISALIGNED_POINTER,
                "%s: %p is not %u-byte aligned", name, p, static_cast<unsigned>(align));
  return PSA_OK;
}

gpu::GatherArgs gather_args(const Plan& plan, const void* src, const int64_t* stride, int64_t heads,
                            int64_t len, void* dst) {
  gpu::GatherArgs g;
  g.dtype = plan.problem.dtype;
  g.batch = plan.problem.batch;
  g.head_dim = plan.problem.head_dim;
  g.src = src;
  std::copy(stride, stride + 4, g.stride);
  g.heads = heads;
  g.len = len;
  g.index = nullptr;  // ring inputs are already in the computing order
  g.dst = dst;
  return g;
}

void contiguous_strides(int64_t heads, int64_t len, int64_t d, int64_t* s) {
  s[0] = heads * len * d;
  s[1] = len * d;
  s[2] = d;
  s[3] = 1;
}

// Q as the importance and attention kernels read it: the caller's tensor in place when its
// rows are 16-byte aligned, else a contiguous copy gathered into the workspace at `at`.
struct QUse {
  const void* q = nullptr;
  int64_t stride[4] = {0, 0, 0, 1};
};

psa_status use_q(const Plan& plan, const RingTensors& t, char* at, cudaStream_t s, QUse* out) {
  const Problem& pb = plan.problem;
  if (gpu::attention_rows_aligned(t.q, t.q_stride)) {
    out->q = t.q;
    std::copy(t.q_stride, t.q_stride + 4, out->stride);
    return PSA_OK;
  }
  PSA_TRY(gpu::gather_rows_cuda(gather_args(plan, t.q, t.q_stride, pb.heads_q, pb.len_q, at), s));
  out->q = at;
  contiguous_strides(pb.heads_q, pb.len_q, pb.head_dim, out->stride);
  return PSA_OK;
}

}  // namespace

psa_status cuda_level_map_workspace(const Plan& plan, uint64_t* bytes) {
  PSA_RETURN_IF(plan.route.route != Route::kPsa, PSA_ERR_INTERNAL,
                "level map: the CUDA ring runs the psa route only");
  int64_t slots = 0;
  PSA_TRY(gpu::score_scratch_slots(&slots));
  *bytes = map_layout(plan, slots).total;
  return PSA_OK;
}

psa_status cuda_shard_attention_workspace(const Plan& plan, uint64_t* bytes) {
  PSA_TRY(check_shard_supported(plan));
  *bytes = shard_layout(plan).total;
  return PSA_OK;
}

psa_status cuda_level_map(const Plan& plan, const RingTensors& t, bool dense, int8_t* levels,
                          void* workspace, void* stream, const CudaRingTarget& target) {
  PSA_RETURN_IF(plan.route.route != Route::kPsa, PSA_ERR_INTERNAL,
                "level map: the CUDA ring runs the psa route only");
  PSA_RETURN_IF(t.q_offsets != nullptr || t.k_offsets != nullptr, PSA_ERR_UNSUPPORTED,
                "injected sampling offsets: supported by the CPU backend only");
  const Problem& pb = plan.problem;
  const int dev = target.device;
  PSA_TRY(check_pointer(t.q, "q", 16, dev, false, stream));
  PSA_TRY(check_pointer(t.k, "k", 16, dev, false, stream));
  PSA_TRY(check_pointer(levels, "levels", 1, dev, false, stream));
  if (!dense) PSA_TRY(check_pointer(workspace, "workspace", 16, dev, true, stream));
  const cudaStream_t s = static_cast<cudaStream_t>(stream);
  const int64_t rows = pb.batch * pb.heads_q * plan.q_blocks;
  const uint64_t map_bytes = static_cast<uint64_t>(rows * plan.k_blocks);
  if (dense) {  // a warm-up step: every pair at level 1 (half 2 then attends densely)
    PSA_CUDA_TRY(cudaMemsetAsync(levels, 1, map_bytes, s), "level map: cudaMemsetAsync");
    return PSA_OK;
  }
  int64_t slots = 0;
  PSA_TRY(gpu::score_scratch_slots(&slots));
  const MapLayout w = map_layout(plan, slots);
  char* ws = static_cast<char*>(workspace);
  const gpu::ProblemDims dims = problem_dims(plan);
  const RoutePlan& r = plan.route;

  PSA_CUDA_TRY(cudaMemsetAsync(target.counts, 0, sizeof(unsigned long long) * kNumSlots, s),
               "level counts: cudaMemsetAsync");
  // Rearrange (identity): Q read in place when aligned; K into a contiguous copy.
  QUse q;
  PSA_TRY(use_q(plan, t, ws + w.q, s, &q));
  PSA_TRY(gpu::gather_rows_cuda(gather_args(plan, t.k, t.k_stride, pb.heads_kv, pb.len_k, ws + w.k), s));

  // Importance: sample offsets at the shard's global (batch, head), then the block scores.
  gpu::OffsetArgs oa;
  oa.seed = r.seed;
  oa.dims = dims;
  oa.batch_offset = r.batch_offset;
  oa.head_offset = r.head_offset;
  oa.q_count = static_cast<int32_t>(plan.q_samples);
  oa.k_count = static_cast<int32_t>(plan.k_samples);
  oa.q_off = reinterpret_cast<int32_t*>(ws + w.q_off);
  oa.k_off = reinterpret_cast<int32_t*>(ws + w.k_off);
  PSA_TRY(gpu::sample_offsets_cuda(oa, s));
  gpu::ScoreArgs sa;
  sa.dtype = pb.dtype;
  sa.q = q.q;
  std::copy(q.stride, q.stride + 4, sa.q_stride);
  sa.q_rows = nullptr;
  sa.k = ws + w.k;
  sa.dims = dims;
  sa.q_off = oa.q_off;
  sa.k_off = oa.k_off;
  sa.q_count = oa.q_count;
  sa.k_count = oa.k_count;
  sa.scale = plan.scale;
  sa.scores = reinterpret_cast<float*>(ws + w.scores);
  sa.ties = r.tie_mass ? reinterpret_cast<float*>(ws + w.ties) : nullptr;
  sa.scratch = w.scratch_bytes > 0 ? ws + w.scratch : nullptr;
  sa.scratch_bytes = w.scratch_bytes;
  PSA_TRY(gpu::block_scores_cuda(sa, s));

  // Mask: similarity cap (use_sim_mask), then the level map straight into the caller's map.
  int8_t* cap = nullptr;
  if (r.sim_cap()) {
    gpu::SimCapArgs ca;
    ca.dtype = pb.dtype;
    ca.k = ws + w.k;
    ca.heads = pb.batch * pb.heads_kv;
    ca.len_k = pb.len_k;
    ca.head_dim = pb.head_dim;
    ca.n_blocks = plan.k_blocks;
    ca.block_n = plan.block_n;
    std::copy(r.sim_threshold, r.sim_threshold + 3, ca.threshold);
    ca.cap = reinterpret_cast<int8_t*>(ws + w.cap);
    PSA_TRY(gpu::sim_cap_cuda(ca, s));
    cap = ca.cap;
  }
  const MaskRowParams& rp = r.mask_row;
  gpu::LevelArgs la;
  la.scores = sa.scores;
  la.ties = sa.ties;
  la.dims = dims;
  la.tile_n = plan.tile_n;
  la.mode = rp.mode;
  std::copy(rp.ratio_end, rp.ratio_end + kNumSlots, la.ratio_end);
  la.min_full_ratio = rp.min_full_ratio;
  la.causal = r.causal;
  la.text_rule = r.text_rule;
  la.text_rows_dense = r.text_rows_dense;
  la.text_begin = plan.text_begin;
  la.text_end = plan.text_end;
  la.cap = cap;
  la.levels = levels;
  PSA_TRY(gpu::build_levels_cuda(la, s));

  // Level counts for the statistics (the work list itself is not needed here), and the
  // plan's copy of the map for psa_context_get_level_map.
  gpu::WorklistArgs wa;
  wa.levels = levels;
  wa.rows = rows;
  wa.nk = plan.k_blocks;
  wa.blocks = reinterpret_cast<int32_t*>(ws + w.wl_blocks);
  wa.count = reinterpret_cast<int32_t*>(ws + w.wl_count);
  wa.stats = target.counts;
  PSA_TRY(gpu::build_worklist_cuda(wa, s));
  if (target.levels_kept != nullptr && target.levels_kept_bytes == map_bytes)
    PSA_CUDA_TRY(cudaMemcpyAsync(target.levels_kept, levels, map_bytes, cudaMemcpyDeviceToDevice, s),
                 "kept level map: cudaMemcpyAsync");
  return PSA_OK;
}

psa_status cuda_shard_attention(const Plan& plan, const RingTensors& t, const int8_t* levels,
                                int64_t map_nk, int64_t begin, void* workspace, void* stream,
                                int device) {
  PSA_TRY(check_shard_supported(plan));
  PSA_TRY(check_pointer(t.q, "q", 16, device, false, stream));
  PSA_TRY(check_pointer(t.k, "k", 16, device, false, stream));
  PSA_TRY(check_pointer(t.v, "v", 16, device, false, stream));
  PSA_TRY(check_pointer(levels, "levels", 1, device, false, stream));
  PSA_TRY(check_pointer(t.out, "out", 16, device, false, stream));
  PSA_TRY(check_pointer(t.lse, "lse", 4, device, false, stream));
  PSA_TRY(check_pointer(workspace, "workspace", 16, device, true, stream));
  const Problem& pb = plan.problem;
  const ShardLayout w = shard_layout(plan);
  char* ws = static_cast<char*>(workspace);
  const cudaStream_t s = static_cast<cudaStream_t>(stream);
  const int64_t nk = plan.k_blocks, rows = pb.batch * pb.heads_q * plan.q_blocks;

  // Rearrange (identity) + pool: the shard's K and V copies and their pyramids, one pass each.
  const void* src[2] = {t.k, t.v};
  const int64_t* str[2] = {t.k_stride, t.v_stride};
  const uint64_t dst[2] = {w.k, w.v};
  const uint64_t* pooled[2] = {w.k_pooled, w.v_pooled};
  for (int x = 0; x < 2; ++x) {
    const gpu::GatherArgs g = gather_args(plan, src[x], str[x], pb.heads_kv, pb.len_k, ws + dst[x]);
    void* out[3];
    for (int p = 0; p < 3; ++p) out[p] = ws + pooled[x][p];
    PSA_TRY(gpu::gather_pool_pyramid_cuda(g, nk, plan.block_n, out, s));
  }
  QUse q;
  PSA_TRY(use_q(plan, t, ws + w.q, s, &q));

  // The shard's columns of the map as a contiguous [rows, nk] map, then its work list.
  const int8_t* shard_levels = levels;
  if (begin != 0 || nk != map_nk) {
    PSA_CUDA_TRY(cudaMemcpy2DAsync(ws + w.levels, static_cast<size_t>(nk), levels + begin,
                                   static_cast<size_t>(map_nk), static_cast<size_t>(nk),
                                   static_cast<size_t>(rows), cudaMemcpyDeviceToDevice, s),
                 "shard level map: cudaMemcpy2DAsync");
    shard_levels = reinterpret_cast<const int8_t*>(ws + w.levels);
  }
  gpu::WorklistArgs wa;
  wa.levels = shard_levels;
  wa.rows = rows;
  wa.nk = nk;
  wa.blocks = reinterpret_cast<int32_t*>(ws + w.wl_blocks);
  wa.count = reinterpret_cast<int32_t*>(ws + w.wl_count);
  wa.stats = nullptr;
  PSA_TRY(gpu::build_worklist_cuda(wa, s));

  // Attention over the work list, with the fp32 LSE of every row.
  gpu::AttentionArgs at;
  at.dtype = pb.dtype;
  at.dims = problem_dims(plan);
  at.scale = plan.scale;
  at.causal = false;
  at.dense = false;
  at.q = q.q;
  std::copy(q.stride, q.stride + 4, at.q_stride);
  at.q_rows = nullptr;
  at.k = ws + w.k;
  at.v = ws + w.v;
  contiguous_strides(pb.heads_kv, pb.len_k, pb.head_dim, at.k_stride);
  contiguous_strides(pb.heads_kv, pb.len_k, pb.head_dim, at.v_stride);
  for (int p = 0; p < 3; ++p) {
    at.k_pooled[p] = ws + w.k_pooled[p];
    at.v_pooled[p] = ws + w.v_pooled[p];
  }
  at.wl_blocks = wa.blocks;
  at.wl_count = wa.count;
  at.out = t.out;
  std::copy(t.o_stride, t.o_stride + 4, at.o_stride);
  at.lse = t.lse;
  at.out_rows = nullptr;
  return gpu::attention_cuda(at, s);
}

}  // namespace psa
#endif  // PSA_WITH_CUDA

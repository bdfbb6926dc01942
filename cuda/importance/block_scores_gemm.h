// cuda/importance/block_scores_gemm.h -- importance stage, launcher layer (internal): the
// GEMM-shaped score path behind block_scores_cuda (sm80 and sm90 kernels). Declarations only;
// callers go through importance_cuda.h, which picks this path when score_gemm_supported() and a
// scratch is given.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "cuda/importance/importance_cuda.h"

namespace psa {
namespace gpu {

// Scores of importance_cpu for every (b, h) (same arguments as block_scores_cuda). Requires
// power-of-two q_count/k_count <= 128, head_dim 64 or 128, and a.scratch_bytes >= one slot.
psa_status block_scores_gemm_cuda(const ScoreArgs& a, cudaStream_t stream);

// The query rows the score kernels read: q [B, Hq, Lq, D] at element strides (sb, sh, sl),
// problem row x at tensor row index[x] (NULL: x). Filled from ScoreArgs by q_row_source.
struct QRowSource {
  const void* base;
  int64_t sb, sh, sl;
  const int64_t* index;
#ifdef __CUDACC__
  template <typename T>
  __device__ __forceinline__ const T* row(int64_t b, int64_t h, int64_t x) const {
    return static_cast<const T*>(base) + b * sb + h * sh + (index != nullptr ? index[x] : x) * sl;
  }
#endif
};
// A ScoreArgs stride (batch, head, row, 1) as element strides; {0, 0, 0, 1} means contiguous
// [B, heads, len, d].
struct RowStrides {
  int64_t sb, sh, sl;
};
inline RowStrides row_strides(const int64_t stride[4], int64_t heads, int64_t len, int64_t d) {
  if (stride[0] == 0 && stride[1] == 0 && stride[2] == 0) return RowStrides{heads * len * d, len * d, d};
  return RowStrides{stride[0], stride[1], stride[2]};
}

// The geometry and sampling fields every score kernel's parameter block shares (the GEMM path's
// GemmScoreParams and the per-block kernel's ScoreKernelParams), from the entry's arguments.
template <typename Params>
inline void fill_score_params(Params& p, const ScoreArgs& a) {
  p.k = a.k;
  const RowStrides ks = row_strides(a.k_stride, a.dims.heads_kv, a.dims.len_k, a.dims.head_dim);
  p.k_sb = ks.sb;
  p.k_sh = ks.sh;
  p.k_sl = ks.sl;
  p.heads_q = a.dims.heads_q;
  p.group = a.dims.heads_q / a.dims.heads_kv;
  p.len_q = a.dims.len_q;
  p.len_k = a.dims.len_k;
  p.block_m = a.dims.block_m;
  p.block_n = a.dims.block_n;
  p.mq = (a.dims.len_q + a.dims.block_m - 1) / a.dims.block_m;
  p.nk = (a.dims.len_k + a.dims.block_n - 1) / a.dims.block_n;
  p.q_off = a.q_off;
  p.k_off = a.k_off;
  p.q_count = a.q_count;
  p.scale = a.scale;
  p.scores = a.scores;
  p.ties = a.ties;
}

// q_stride {0, 0, 0, 1} means contiguous [B, Hq, Lq, D].
inline QRowSource q_row_source(const ScoreArgs& a) {
  const RowStrides qs = row_strides(a.q_stride, a.dims.heads_q, a.dims.len_q, a.dims.head_dim);
  QRowSource s;
  s.base = a.q;
  s.sb = qs.sb;
  s.sh = qs.sh;
  s.sl = qs.sl;
  s.index = a.q_rows;
  return s;
}

namespace score_gemm {

// Resident CTAs per SM the kernel is built for (__launch_bounds__): d128 needs ~220 registers
// (64 of Q fragments, 64 of accumulators) -> 1; d64 fits 128 -> 2.
constexpr int score_gemm_min_ctas(int64_t head_dim) { return head_dim == 64 ? 2 : 1; }

// Kernel parameters: raw pointers and 64-bit extents, converted once from ScoreArgs.
struct GemmScoreParams {
  QRowSource q;
  const void* k;
  int64_t k_sb, k_sh, k_sl;  // K's batch, kv-head and row strides (elements)
  int64_t heads_q, group, len_q, len_k, block_m, block_n, mq, nk;
  int64_t row_tiles;  // per (b, h)
  int64_t tiles;      // B * Hq * row_tiles
  const int32_t* q_off;
  const int32_t* k_off;
  int32_t q_count, q_shift;  // q_count = 1 << q_shift
  float scale;
  float* scratch;  // [gridDim.x][nk][256]
  float* scores;   // [B*Hq, mq, nk]
  float* ties;     // [B*Hq, mq, nk] tie masses, or NULL (ScoreArgs::ties)
  int32_t tie_run_min;  // ScoreArgs::tie_run_min
};

// Hopper kernel (block_scores_sm90.cu) for a.dtype and a.dims.head_dim; grid <= `slots`.
// cudaErrorNotSupported when TMA cannot describe K (the caller then runs the sm80 kernel).
cudaError_t launch_scores_sm90(const GemmScoreParams& p, const ScoreArgs& a, int64_t slots, cudaStream_t s);

// sm80 kernel: one per (dtype, head dim), each in its own instantiation file; grid <= `slots`.
psa_status launch_scores_bf16_d64(const GemmScoreParams& p, int32_t k_count, int64_t slots, cudaStream_t s);
psa_status launch_scores_bf16_d128(const GemmScoreParams& p, int32_t k_count, int64_t slots, cudaStream_t s);
psa_status launch_scores_f16_d64(const GemmScoreParams& p, int32_t k_count, int64_t slots, cudaStream_t s);
psa_status launch_scores_f16_d128(const GemmScoreParams& p, int32_t k_count, int64_t slots, cudaStream_t s);

}  // namespace score_gemm
}  // namespace gpu
}  // namespace psa

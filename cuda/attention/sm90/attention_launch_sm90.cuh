// cuda/attention/sm90/attention_launch_sm90.cuh -- attention stage, launcher layer for Hopper
// (sm_90a): host code only -- the TMA tensor maps of Q and of K/V per level, the kernel's
// Sm90Params, and the persistent-grid launcher of attention_kernel_sm90.cuh's kernel.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>
#include <type_traits>

#include "cuda/attention/sm90/attention_kernel_sm90.cuh"
#include "cuda/core/sm90.cuh"

namespace psa {
namespace gpu {
namespace sm90 {

// One [B, H, rows, D] tensor with element strides (sb, sh, sl) -> a tensor map with boxes of
// 64 columns x box_rows rows. False when TMA cannot describe it (alignment, stride limits).
inline bool encode_map(CUtensorMap* m, bool f16, const void* base, int64_t batch, int64_t heads, int64_t rows,
                       int64_t d, int64_t sb, int64_t sh, int64_t sl, int box_rows) {
  if (rows <= 0 || rows > (int64_t{1} << 31) - 1 || heads > INT32_MAX || batch > INT32_MAX) return false;
  const cuuint64_t dims[4] = {static_cast<cuuint64_t>(d), static_cast<cuuint64_t>(rows),
                              static_cast<cuuint64_t>(heads), static_cast<cuuint64_t>(batch)};
  const cuuint64_t strides[3] = {static_cast<cuuint64_t>(sl) * 2, static_cast<cuuint64_t>(sh) * 2,
                                 static_cast<cuuint64_t>(sb) * 2};
  const cuuint32_t box[4] = {64, static_cast<cuuint32_t>(box_rows), 1, 1};
  return encode_tiled(m, f16 ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16 : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 4, base, dims,
                      strides, box, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B);
}

// The same d128 tensor as the kernel's 8-row groups: [batch * heads][rows / 8][2 panels][8][64]
// (the panel dimension's stride, 128 bytes, is below the rows'), boxes of one (batch, head),
// box_rows / 8 groups, both panels. False when the (batch, head) pairs do not fold into one
// coordinate (sb != heads * sh with batch > 1), when rows or box_rows is not a multiple of 8
// (a group would reach past the tensor's end instead of falling out of bounds), or when TMA
// cannot describe it; the kernel then keeps the per-panel layout.
inline bool encode_grouped_map(CUtensorMap* m, bool f16, const void* base, int64_t batch, int64_t heads,
                               int64_t rows, int64_t sb, int64_t sh, int64_t sl, int box_rows) {
  if (rows <= 0 || rows % 8 != 0 || box_rows % 8 != 0 || box_rows > 128 ||
      (batch > 1 && sb != heads * sh) || rows / 8 > INT32_MAX || heads * batch > INT32_MAX)
    return false;
  const cuuint64_t dims[5] = {64, 8, 2, static_cast<cuuint64_t>(rows / 8), static_cast<cuuint64_t>(heads * batch)};
  const cuuint64_t strides[4] = {static_cast<cuuint64_t>(sl) * 2, 128, static_cast<cuuint64_t>(sl) * 16,
                                 static_cast<cuuint64_t>(sh) * 2};
  const cuuint32_t box[5] = {64, 8, 2, static_cast<cuuint32_t>(box_rows / 8), 1};
  return encode_tiled(m, f16 ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16 : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 5, base, dims,
                      strides, box, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B);
}

// The kernel's parameters for `p`: tensor maps of Q and of K/V at every level. False when a
// tensor cannot be described (the caller then uses the sm80 kernel).
inline bool make_sm90_params(const AttnKernelParams& p, bool f16, int d, int64_t batch, Sm90Params* out) {
  out->a = p;
  out->batch = batch;
  out->kv_grouped = 0;
  const int64_t heads_kv = p.heads_q / p.group;
  if (!encode_map(&out->q, f16, p.q, batch, p.heads_q, p.len_q, d, p.q_sb, p.q_sh, p.q_sl, p.q_rows ? 1 : 128))
    return false;
  for (int li = 0; li < 4; ++li) {
    const int64_t rows = li == 0 ? p.len_k : (p.nk * p.block_n) >> li;
    const int box = p.dense ? 128 : static_cast<int>(p.block_n >> li);
    out->box_rows[li] = box;
    if (p.dense && li > 0) {  // never read: copies of level 1
      out->k[li] = out->k[0];
      out->v[li] = out->v[0];
      continue;
    }
    if (box < 1 || box > 128 || 128 % box != 0) return false;
    if (!encode_map(&out->k[li], f16, p.k[li], batch, heads_kv, rows, d, p.k_sb[li], p.k_sh[li], p.k_sl[li], box) ||
        !encode_map(&out->v[li], f16, p.v[li], batch, heads_kv, rows, d, p.v_sb[li], p.v_sh[li], p.v_sl[li], box))
      return false;
  }
  // d128: the 8-row group layout when every level whose entries are 8 or more rows maps that
  // way (levels of fewer rows per entry keep their per-panel boxes, placed inside a group).
  if (d != 128) return true;
  CUtensorMap gk[4], gv[4];
  const int levels = p.dense ? 1 : 4;
  for (int li = 0; li < levels; ++li) {
    const int box = out->box_rows[li];
    if (box % 8 != 0) continue;
    const int64_t rows = li == 0 ? p.len_k : (p.nk * p.block_n) >> li;
    if (!encode_grouped_map(&gk[li], f16, p.k[li], batch, heads_kv, rows, p.k_sb[li], p.k_sh[li], p.k_sl[li], box) ||
        !encode_grouped_map(&gv[li], f16, p.v[li], batch, heads_kv, rows, p.v_sb[li], p.v_sh[li], p.v_sl[li], box))
      return true;
  }
  for (int li = 0; li < levels; ++li) {
    if (out->box_rows[li] % 8 != 0) continue;
    out->k[li] = gk[li];
    out->v[li] = gv[li];
  }
  for (int li = levels; li < 4; ++li) {  // dense: never read, copies of level 1 as above
    out->k[li] = out->k[0];
    out->v[li] = out->v[0];
  }
  out->kv_grouped = 1;
  return true;
}

// Launcher: one persistent CTA of 384 threads per SM (fewer when there are fewer rows).
// cudaErrorNotSupported when TMA cannot describe the tensors.
template <typename T, int D>
cudaError_t launch_sparse_attention_sm90(const AttnKernelParams& p, int64_t batch, cudaStream_t stream) {
  using Tr = Traits<D>;
  Sm90Params sp;
  if (!make_sm90_params(p, std::is_same<T, __half>::value, D, batch, &sp)) return cudaErrorNotSupported;
  cudaError_t e = cudaFuncSetAttribute(sparse_attention_sm90_kernel<T, D>,
                                       cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       static_cast<int>(Tr::kSmemBytes));
  if (e != cudaSuccess) return e;
  int sms = 0;
  if ((e = current_sm_count(&sms)) != cudaSuccess) return e;
  int64_t ctas = p.mq * p.heads_q * batch;
  if (ctas > sms) ctas = sms;
  if (p.max_ctas > 0 && ctas > p.max_ctas) ctas = p.max_ctas;
  const unsigned grid = static_cast<unsigned>(ctas);
  sparse_attention_sm90_kernel<T, D><<<grid, Tr::kThreads, Tr::kSmemBytes, stream>>>(sp);
  return cudaGetLastError();
}

}  // namespace sm90
}  // namespace gpu
}  // namespace psa

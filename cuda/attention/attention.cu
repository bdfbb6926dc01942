// cuda/attention/attention.cu -- attention stage, entry layer: checks what the kernels
// support, unpacks AttentionArgs into the kernel parameter block and dispatches on dtype x
// head dim x block_m, and between the Hopper (sm90/) and the sm80 kernel. No math here.
#include <cstdint>

#include "cuda/attention/attention_cuda.h"
#include "cuda/attention/attention_launch.h"
#include "cuda/attention/fill_params.h"
#include "core/tensor.h"
#include "cuda/core/cuda_status.h"

namespace psa {
namespace gpu {

bool attention_rows_aligned(const void* ptr, const int64_t stride[4]) { return rows_16b_aligned(ptr, stride); }

namespace {
// The Hopper kernel loads each work-list entry (block_n / p rows) as one TMA box inside a
// 128-key tile, so block_n / p must divide 128.
bool sm90_block_n_ok(const AttentionArgs& a) {
  return a.dense || (a.dims.block_n >= 8 && a.dims.block_n <= 128 && (a.dims.block_n & (a.dims.block_n - 1)) == 0);
}
}  // namespace

AttentionKernel attention_kernel_for(const AttentionArgs& a) {
  if (a.kernel != AttentionKernel::kAuto) return a.kernel;
  return a.dims.block_m == 128 && sm90_block_n_ok(a) && attention_sm90_available() ? AttentionKernel::kSm90
                                                                              : AttentionKernel::kSm80;
}

psa_status attention_supported(psa_dtype dtype, int64_t batch, int64_t heads_q, int64_t len_q,
                               int64_t len_k, int64_t head_dim, int64_t block_m, int64_t block_n,
                               bool dense) {
  PSA_RETURN_IF(dtype != PSA_DTYPE_F16 && dtype != PSA_DTYPE_BF16, PSA_ERR_UNSUPPORTED,
                "q: dtype = %s; the CUDA attention kernel supports f16 and bf16", dtype_name(dtype));
  PSA_RETURN_IF(head_dim != 64 && head_dim != 128, PSA_ERR_UNSUPPORTED,
                "q: shape[3] (head_dim) = %lld; supported by the CUDA attention kernel: 64, 128",
                static_cast<long long>(head_dim));
  PSA_RETURN_IF(block_m != 64 && block_m != 128, PSA_ERR_UNSUPPORTED,
                "block_size.m = %lld; supported by the CUDA attention kernel: 64, 128",
                static_cast<long long>(block_m));
  PSA_RETURN_IF(!dense && (block_n % 8 != 0 || block_n < 8), PSA_ERR_UNSUPPORTED,
                "block_size.n = %lld; the CUDA attention kernel needs a multiple of 8",
                static_cast<long long>(block_n));
  PSA_RETURN_IF(len_q > INT32_MAX / 2 || len_k > INT32_MAX / 2, PSA_ERR_UNSUPPORTED,
                "q, k: seq_len = %lld, %lld; the CUDA attention kernel's 32-bit token indices allow "
                "at most 2^30 - 1",
                static_cast<long long>(len_q), static_cast<long long>(len_k));
  PSA_RETURN_IF(heads_q > 65535 || batch > 65535, PSA_ERR_UNSUPPORTED,
                "q: batch = %lld, heads = %lld; the CUDA grid allows at most 65535 of each",
                static_cast<long long>(batch), static_cast<long long>(heads_q));
  return PSA_OK;
}

psa_status attention_cuda(const AttentionArgs& a, cudaStream_t stream) {
  PSA_TRY(attention_supported(a.dtype, a.dims.batch, a.dims.heads_q, a.dims.len_q, a.dims.len_k, a.dims.head_dim, a.dims.block_m,
                              a.dims.block_n, a.dense));
  PSA_RETURN_IF(!attention_rows_aligned(a.q, a.q_stride) || !attention_rows_aligned(a.k, a.k_stride) ||
                    !attention_rows_aligned(a.v, a.v_stride),
                PSA_ERR_INTERNAL, "attention: q/k/v rows must be 16-byte aligned (gather first)");
  PSA_RETURN_IF(reinterpret_cast<uintptr_t>(a.out) % 16 != 0, PSA_ERR_MISALIGNED_POINTER,
                "out: pointer %p is not 16-byte aligned", a.out);
  PSA_RETURN_IF(!a.dense && (a.wl_blocks == nullptr || a.wl_count == nullptr), PSA_ERR_INTERNAL,
                "attention: sparse call without a work list");

  AttnKernelParams p{};
  fill_row_params(a, &p);
  const int64_t nk = p.nk;
  p.k[0] = a.k;
  p.v[0] = a.v;
  p.k_sb[0] = a.k_stride[0];
  p.k_sh[0] = a.k_stride[1];
  p.k_sl[0] = a.k_stride[2];
  p.v_sb[0] = a.v_stride[0];
  p.v_sh[0] = a.v_stride[1];
  p.v_sl[0] = a.v_stride[2];
  for (int li = 1; li < 4; ++li) {
    const int64_t lp = nk * a.dims.block_n >> li;
    p.k[li] = a.dense ? a.k : a.k_pooled[li - 1];
    p.v[li] = a.dense ? a.v : a.v_pooled[li - 1];
    p.k_sb[li] = p.v_sb[li] = a.dims.heads_kv * lp * a.dims.head_dim;
    p.k_sh[li] = p.v_sh[li] = lp * a.dims.head_dim;
    p.k_sl[li] = p.v_sl[li] = a.dims.head_dim;
  }
  p.causal = a.causal ? 1 : 0;
  p.dense = a.dense ? 1 : 0;
  p.max_ctas = a.max_ctas > 0 ? a.max_ctas : 0;
  if (a.dims.batch == 0 || a.dims.heads_q == 0 || p.mq == 0) return PSA_OK;

  const int bm = static_cast<int>(a.dims.block_m);
  const AttentionKernel kernel = attention_kernel_for(a);
  if (kernel == AttentionKernel::kSm90) {
    PSA_RETURN_IF(bm != 128 || !attention_sm90_available() || !sm90_block_n_ok(a), PSA_ERR_UNSUPPORTED,
                  "attention: the sm90 kernel needs compute capability 9.x, an sm_90a build, "
                  "block_size.m = 128 (got %d) and block_size.n a power of two <= 128 (got %lld)",
                  bm, static_cast<long long>(a.dims.block_n));
    const cudaError_t e = launch_attention_sm90(p, a.dtype == PSA_DTYPE_F16, static_cast<int>(a.dims.head_dim),
                                                a.dims.batch, stream);
    if (e == cudaSuccess) return PSA_OK;
    // cudaErrorNotSupported: TMA cannot describe these tensors (strides); the sm80 kernel can.
    if (e != cudaErrorNotSupported || a.kernel == AttentionKernel::kSm90)
      return set_error(PSA_ERR_CUDA, "sparse_attention_sm90_kernel<%s, d=%lld>: %s",
                       dtype_name(a.dtype), static_cast<long long>(a.dims.head_dim),
                       cudaGetErrorString(e));
  }
  cudaError_t e;
  if (a.dtype == PSA_DTYPE_F16)
    e = a.dims.head_dim == 64 ? launch_attention_f16_d64(p, bm, a.dims.batch, stream)
                         : launch_attention_f16_d128(p, bm, a.dims.batch, stream);
  else
    e = a.dims.head_dim == 64 ? launch_attention_bf16_d64(p, bm, a.dims.batch, stream)
                         : launch_attention_bf16_d128(p, bm, a.dims.batch, stream);
  if (e != cudaSuccess)
    return set_error(PSA_ERR_CUDA, "sparse_attention_kernel<%s, d=%lld, bm=%d>: %s",
                     dtype_name(a.dtype), static_cast<long long>(a.dims.head_dim),
                     bm, cudaGetErrorString(e));
  return PSA_OK;
}

}  // namespace gpu
}  // namespace psa

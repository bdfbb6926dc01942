// cuda/attention/sm90/attention_fp8_sm90.cu -- attention stage, the 8-bit path's launcher and
// entry for Hopper: the TMA tensor maps (bf16 Q as the 16-bit kernel's, one-row boxes when Q is
// read through q_rows; 8-bit K / V per level,
// boxes of 128 bytes x block_n / p rows), the persistent-grid launch of
// attention_fp8_kernel_sm90.cuh's kernel and the checks. The kernel body exists only in the
// sm_90a pass; attention_fp8_supported keeps the sm_80 pass's empty kernel from being launched.
#include "cuda/attention/attention_fp8_cuda.h"
#include "cuda/attention/fill_params.h"
#include "cuda/attention/sm90/attention_fp8_kernel_sm90.cuh"
#include "cuda/attention/sm90/attention_launch_sm90.cuh"
#include "cuda/core/cuda_status.h"

namespace psa {
namespace gpu {
namespace {

// An 8-bit [B, H, rows, 128] tensor, contiguous -> boxes of 128 bytes x box_rows rows.
bool encode_map8(CUtensorMap* m, const void* base, int64_t batch, int64_t heads, int64_t rows, int box_rows) {
  if (rows <= 0 || rows > (int64_t{1} << 31) - 1) return false;
  const cuuint64_t dims[4] = {128, static_cast<cuuint64_t>(rows), static_cast<cuuint64_t>(heads),
                              static_cast<cuuint64_t>(batch)};
  const cuuint64_t strides[3] = {128, static_cast<cuuint64_t>(rows) * 128,
                                 static_cast<cuuint64_t>(heads * rows) * 128};
  const cuuint32_t box[4] = {128, static_cast<cuuint32_t>(box_rows), 1, 1};
  return sm90::encode_tiled(m, CU_TENSOR_MAP_DATA_TYPE_UINT8, 4, base, dims, strides, box, CU_TENSOR_MAP_SWIZZLE_128B,
                            CU_TENSOR_MAP_L2_PROMOTION_L2_256B);
}

template <typename T>
psa_status launch(const AttentionFp8Args& a, const sm90::Sm90Fp8Params& sp, cudaStream_t stream) {
  using Tr = sm90::Fp8Traits;
  PSA_CUDA_TRY(cudaFuncSetAttribute(sm90::sparse_attention_fp8_sm90_kernel<T>,
                                    cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(Tr::kSmemBytes)),
               "sparse_attention_fp8_sm90_kernel: cudaFuncSetAttribute");
  int sms = 0;
  PSA_CUDA_TRY(sm90::current_sm_count(&sms), "sparse_attention_fp8_sm90_kernel: SM count");
  int64_t ctas = sp.a.mq * sp.a.heads_q * sp.batch;
  if (ctas > sms) ctas = sms;
  if (a.max_ctas > 0 && ctas > a.max_ctas) ctas = a.max_ctas;
  sm90::sparse_attention_fp8_sm90_kernel<T><<<static_cast<unsigned>(ctas), Tr::kThreads, Tr::kSmemBytes, stream>>>(sp);
  return launch_status("sparse_attention_fp8_sm90_kernel");
}

}  // namespace

psa_status attention_fp8_supported(const AttentionFp8Args& a, bool causal) {
  const bool sm90 = sm90::kernel_has_sm90_image(
      reinterpret_cast<const void*>(sm90::sparse_attention_fp8_sm90_kernel<__nv_bfloat16>));
  PSA_RETURN_IF(!sm90, PSA_ERR_UNSUPPORTED,
                "precision fp8: needs a GPU of compute capability 9.x and a build with sm_90a code");
  PSA_RETURN_IF(a.dtype != PSA_DTYPE_BF16 && a.dtype != PSA_DTYPE_F16, PSA_ERR_UNSUPPORTED,
                "precision fp8: q dtype must be f16 or bf16");
  PSA_RETURN_IF(a.dims.head_dim != 128, PSA_ERR_UNSUPPORTED,
                "precision fp8: head_dim = %lld; the 8-bit kernel supports 128", static_cast<long long>(a.dims.head_dim));
  PSA_RETURN_IF(a.dims.block_m != 128, PSA_ERR_UNSUPPORTED, "precision fp8: block_size.m = %lld; the 8-bit kernel needs 128",
                static_cast<long long>(a.dims.block_m));
  const int64_t bn = a.dims.block_n;
  PSA_RETURN_IF(bn < 8 || bn > 128 || (bn & (bn - 1)) != 0, PSA_ERR_UNSUPPORTED,
                "precision fp8: block_size.n = %lld; the 8-bit kernel needs a power of two from 8 to 128",
                static_cast<long long>(bn));
  PSA_RETURN_IF(causal, PSA_ERR_UNSUPPORTED, "precision fp8: causal attention is not supported by the 8-bit kernel");
  PSA_RETURN_IF(a.dims.heads_q > 65535 || a.dims.batch > 65535 || a.dims.len_q > INT32_MAX / 2 ||
                    a.dims.len_k > INT32_MAX / 2,
                PSA_ERR_UNSUPPORTED, "precision fp8: batch, heads or lengths beyond the kernel's 32-bit indices");
  return PSA_OK;
}

psa_status attention_fp8_cuda(const AttentionFp8Args& a, cudaStream_t stream) {
  PSA_TRY(attention_fp8_supported(a, false));
  PSA_RETURN_IF(!rows_16b_aligned(a.q, a.q_stride), PSA_ERR_INTERNAL, "fp8 attention: q rows must be 16-byte aligned");
  PSA_RETURN_IF(reinterpret_cast<uintptr_t>(a.out) % 16 != 0, PSA_ERR_MISALIGNED_POINTER,
                "out: pointer %p is not 16-byte aligned", a.out);
  PSA_RETURN_IF(a.wl_blocks == nullptr || a.wl_count == nullptr || a.kv.k_mean == nullptr ||
                    a.kv.k_scale == nullptr || a.kv.v_scale == nullptr || a.kv.v_smax == nullptr,
                PSA_ERR_INTERNAL, "fp8 attention: work list or scales missing");
  PSA_RETURN_IF(reinterpret_cast<uintptr_t>(a.kv.k_mean) % 16 != 0, PSA_ERR_INTERNAL,
                "fp8 attention: k_mean must be 16-byte aligned (the kernel reads it as float4)");
  const int64_t mq = ceil_div(a.dims.len_q, a.dims.block_m), nk = ceil_div(a.dims.len_k, a.dims.block_n);
  if (a.dims.batch == 0 || a.dims.heads_q == 0 || mq == 0) return PSA_OK;
  sm90::Sm90Fp8Params sp{};
  AttnKernelParams& p = sp.a;
  fill_row_params(a, &p);
  sp.batch = a.dims.batch;
  sp.k_mean = a.kv.k_mean;
  sp.k_scale = a.kv.k_scale;
  sp.v_scale = a.kv.v_scale;
  sp.v_smax = a.kv.v_smax;
  const bool f16 = a.dtype == PSA_DTYPE_F16;
  PSA_RETURN_IF(!sm90::encode_map(&sp.q, f16, a.q, a.dims.batch, a.dims.heads_q, a.dims.len_q, 128, a.q_stride[0],
                                  a.q_stride[1], a.q_stride[2], a.q_rows != nullptr ? 1 : 128),
                PSA_ERR_UNSUPPORTED, "fp8 attention: TMA cannot describe q (strides)");
  for (int li = 0; li < 4; ++li) {
    const int64_t rows = li == 0 ? a.dims.len_k : (nk * a.dims.block_n) >> li;
    const int box = static_cast<int>(a.dims.block_n >> li);
    sp.box_rows[li] = box;
    PSA_RETURN_IF(!encode_map8(&sp.k[li], a.kv.k8[li], a.dims.batch, a.dims.heads_kv, rows, box) ||
                      !encode_map8(&sp.v[li], a.kv.v8[li], a.dims.batch, a.dims.heads_kv, rows, box),
                  PSA_ERR_UNSUPPORTED, "fp8 attention: TMA cannot describe the 8-bit K / V of level %d", 1 << li);
  }
  return f16 ? launch<__half>(a, sp, stream) : launch<__nv_bfloat16>(a, sp, stream);
}

}  // namespace gpu
}  // namespace psa

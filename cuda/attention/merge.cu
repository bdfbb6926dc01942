// cuda/attention/merge.cu -- psa_merge_attention on the CUDA backend: one warp per query row
// reads the parts' log-sum-exps, forms the weights of attention/merge_spec.h and writes the
// weighted sum of the parts' rows (fp32, products and sums rounded separately as on the CPU).
#include "cuda/attention/merge_cuda.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "attention/merge_spec.h"
#include "core/error.h"
#include "cuda/core/cuda_status.h"

namespace psa {
namespace gpu {
namespace {

template <typename T>
__device__ __forceinline__ float load_f(const T* p) { return static_cast<float>(*p); }
template <>
__device__ __forceinline__ float load_f<__half>(const __half* p) { return __half2float(*p); }
template <>
__device__ __forceinline__ float load_f<__nv_bfloat16>(const __nv_bfloat16* p) {
  return __bfloat162float(*p);
}
template <typename T>
__device__ __forceinline__ void store_f(T* p, float x) { *p = static_cast<T>(x); }
template <>
__device__ __forceinline__ void store_f<__half>(__half* p, float x) { *p = __float2half_rn(x); }
template <>
__device__ __forceinline__ void store_f<__nv_bfloat16>(__nv_bfloat16* p, float x) {
  *p = __float2bfloat16_rn(x);
}

constexpr int kWarps = 4;

template <typename T>
__global__ void __launch_bounds__(kWarps * 32) merge_kernel(MergeArgs a, int64_t rows) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kWarps + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= rows) return;
  const int64_t L = a.shape[2], H = a.shape[1];
  const int64_t l = row % L, h = (row / L) % H, b = row / (L * H);
  const int64_t base = b * a.stride[0] + h * a.stride[1] + l * a.stride[2];
  float part[kMaxMergeParts];
  float w[kMaxMergeParts];
  for (int i = 0; i < a.count; ++i) part[i] = a.lses[i][row];
  float lse = 0.0f;
  const bool any = merge_weights(a.count, part, w, &lse);
  T* out = static_cast<T*>(a.out) + base;
  for (int64_t d = lane; d < a.shape[3]; d += 32) {
    float acc = 0.0f;
    if (any) {
      for (int i = 0; i < a.count; ++i)
        acc = __fadd_rn(acc, __fmul_rn(w[i], load_f(static_cast<const T*>(a.outs[i]) + base + d)));
    }
    store_f(out + d, acc);
  }
  __syncwarp();  // every lane has read lses[i][row] before lane 0 may overwrite it in place
  if (lane == 0 && a.lse != nullptr) a.lse[row] = lse;
}

}  // namespace

psa_status merge_attention_cuda(const MergeArgs& a, cudaStream_t stream) {
  PSA_RETURN_IF(a.count < 1 || a.count > kMaxMergeParts, PSA_ERR_INTERNAL,
                "merge: %d parts", a.count);
  const int64_t rows = a.shape[0] * a.shape[1] * a.shape[2];
  if (rows == 0) return PSA_OK;
  const int64_t blocks = (rows + kWarps - 1) / kWarps;
  PSA_RETURN_IF(blocks > 0x7fffffffLL, PSA_ERR_UNSUPPORTED,
                "merge: %lld rows; at most %lld supported", static_cast<long long>(rows),
                0x7fffffffLL * kWarps);
  const dim3 grid(static_cast<unsigned>(blocks));
  switch (a.dtype) {
    case PSA_DTYPE_F32: merge_kernel<float><<<grid, kWarps * 32, 0, stream>>>(a, rows); break;
    case PSA_DTYPE_F16: merge_kernel<__half><<<grid, kWarps * 32, 0, stream>>>(a, rows); break;
    case PSA_DTYPE_BF16:
      merge_kernel<__nv_bfloat16><<<grid, kWarps * 32, 0, stream>>>(a, rows);
      break;
    default: return set_error(PSA_ERR_INVALID_DTYPE, "merge: dtype %d", static_cast<int>(a.dtype));
  }
  return launch_status("merge_kernel");
}

}  // namespace gpu
}  // namespace psa

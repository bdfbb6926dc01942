// cuda/pool/pool_pyramid.cu -- pool stage: kernel (one level-8 token's 8 sources -> its
// level-2, -4 and -8 tokens, fp32 means rounded once), launcher and entry. Source indices
// come from pool_spec.h; must not define its own padding rule.
#include <cstdint>

#include "cuda/core/cuda_status.h"
#include "cuda/core/device.cuh"
#include "cuda/pool/pool_cuda.h"
#include "pool/pool_spec.h"

namespace psa {
namespace gpu {
namespace {

// One thread per (head, level-8 token t, 8-element chunk of the head dim). Means match
// pool_pyramid_cpu in fp32 (0.5 * (a + b) at each level) before the single rounding.
template <typename T>
__global__ void pool_pyramid_kernel(const T* __restrict__ x, int64_t len, int64_t d,
                                    int64_t n8, T* __restrict__ o2, T* __restrict__ o4,
                                    T* __restrict__ o8, int64_t total) {
  const int64_t chunks = d / 8;
  for (int64_t c = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; c < total;
       c += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t col = (c % chunks) * 8;
    const int64_t t = (c / chunks) % n8;
    const int64_t head = c / chunks / n8;
    const T* xh = x + head * len * d;
    float l2[4][8];
#pragma unroll
    for (int u = 0; u < 4; ++u) {
      float a[8], b[8];
      const int64_t sa = pooled_source(t * 4 + u, 2, 0, len);
      const int64_t sb = pooled_source(t * 4 + u, 2, 1, len);
      unpack8<T>(__ldg(reinterpret_cast<const uint4*>(xh + sa * d + col)), a);
      unpack8<T>(__ldg(reinterpret_cast<const uint4*>(xh + sb * d + col)), b);
#pragma unroll
      for (int e = 0; e < 8; ++e) l2[u][e] = 0.5f * (a[e] + b[e]);
      *reinterpret_cast<uint4*>(o2 + (head * n8 * 4 + t * 4 + u) * d + col) = pack8<T>(l2[u]);
    }
    float l4[2][8];
#pragma unroll
    for (int u = 0; u < 2; ++u) {
#pragma unroll
      for (int e = 0; e < 8; ++e) l4[u][e] = 0.5f * (l2[2 * u][e] + l2[2 * u + 1][e]);
      *reinterpret_cast<uint4*>(o4 + (head * n8 * 2 + t * 2 + u) * d + col) = pack8<T>(l4[u]);
    }
    float l8[8];
#pragma unroll
    for (int e = 0; e < 8; ++e) l8[e] = 0.5f * (l4[0][e] + l4[1][e]);
    *reinterpret_cast<uint4*>(o8 + (head * n8 + t) * d + col) = pack8<T>(l8);
  }
}

template <typename T>
psa_status launch_pool(const PoolArgs& a, cudaStream_t stream) {
  const int64_t n8 = pooled_length(a.n_blocks, a.block_n, 8);
  const int64_t total = a.heads * n8 * (a.head_dim / 8);
  if (total == 0) return PSA_OK;
  const int threads = 256;
  const int64_t want = ceil_div(total, threads);
  const unsigned blocks = static_cast<unsigned>(want < 65536 * 8 ? want : 65536 * 8);
  pool_pyramid_kernel<T><<<blocks, threads, 0, stream>>>(
      static_cast<const T*>(a.x), a.len, a.head_dim, n8, static_cast<T*>(a.out[0]),
      static_cast<T*>(a.out[1]), static_cast<T*>(a.out[2]), total);
  return launch_status("pool_pyramid_kernel");
}

}  // namespace

psa_status pool_pyramid_cuda(const PoolArgs& a, cudaStream_t stream) {
  PSA_RETURN_IF(a.head_dim % 8 != 0 || a.block_n % 8 != 0, PSA_ERR_INTERNAL,
                "pool: head_dim = %lld and block_n = %lld must be multiples of 8",
                static_cast<long long>(a.head_dim), static_cast<long long>(a.block_n));
  switch (a.dtype) {
    case PSA_DTYPE_F16: return launch_pool<__half>(a, stream);
    case PSA_DTYPE_BF16: return launch_pool<__nv_bfloat16>(a, stream);
    default:
      return set_error(PSA_ERR_UNSUPPORTED, "pool: dtype = %d; the CUDA backend supports f16 and bf16",
                       static_cast<int>(a.dtype));
  }
}

}  // namespace gpu
}  // namespace psa

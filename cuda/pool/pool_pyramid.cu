// cuda/pool/pool_pyramid.cu -- pool stage: kernels (one level-8 token's 8 sources -> its
// level-2, -4 and -8 tokens, fp32 means rounded once), launchers and entries; the fused form
// also gathers the sources through the rearrangement and writes the level-1 copy, so K and V
// are read once for both stages. Source indices come from pool_spec.h; must not define its
// own padding rule.
#include <cstdint>

#include "cuda/core/cuda_status.h"
#include "cuda/core/device.cuh"
#include "cuda/pool/pool_cuda.h"
#include "cuda/pool/pyramid8.cuh"
#include "cuda/rearrange/gather_cuda.h"
#include "pool/pool_spec.h"

namespace psa {
namespace gpu {
namespace {

// Levels 2, 4 and 8 of level-8 token t of `head` from the 8-element chunk at column `col` of its
// 8 source positions (pyramid8.cuh), stored; a NULL output's level is formed (the next level is
// its mean) but not stored.
template <typename T>
__device__ __forceinline__ void store_pyramid(const uint4 (&x)[8], int64_t head, int64_t t, int64_t n8, int64_t d,
                                              int64_t col, T* __restrict__ o2, T* __restrict__ o4,
                                              T* __restrict__ o8) {
  pyramid8<T>(x, [&](int level, int u, const uint4& v) {
    T* o = level == 2 ? o2 : level == 4 ? o4 : o8;
    if (o != nullptr) *reinterpret_cast<uint4*>(o + (head * n8 * (8 / level) + t * (8 / level) + u) * d + col) = v;
  });
}

// One thread per (head, level-8 token t, 8-element chunk of the head dim).
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
    uint4 src[8];
#pragma unroll
    for (int u = 0; u < 8; ++u)
      src[u] = __ldg(reinterpret_cast<const uint4*>(xh + pooled_source(t * 4 + u / 2, 2, u & 1, len) * d + col));
    store_pyramid<T>(src, head, t, n8, d, col, o2, o4, o8);
  }
}

// Fused rearrange + pool: one thread per (b*heads + h, level-8 token t, 8-element chunk). Its
// 8 positions 8t .. 8t+7 are read through the rearrangement (row i <- source row index[i])
// from the strided source; positions < len are copied bit for bit to the contiguous level-1
// tensor, and the pyramid is built from the same values by the same store_pyramid as
// pool_pyramid_kernel (so the result equals gather_rows_cuda followed by pool_pyramid_cuda).
// kVec: source rows are 16-byte aligned. dst NULL: the pyramid only (the level-1 tensor is read
// in place).
template <typename T, bool kVec>
__global__ void gather_pool_kernel(const uint16_t* __restrict__ src, int64_t sb, int64_t sh, int64_t sl,
                                   const int64_t* __restrict__ index, int64_t heads, int64_t len, int64_t d,
                                   int64_t n8, uint16_t* __restrict__ dst, T* __restrict__ o2, T* __restrict__ o4,
                                   T* __restrict__ o8, int64_t total) {
  const int64_t chunks = d / 8;
  for (int64_t c = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; c < total;
       c += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t col = (c % chunks) * 8;
    const int64_t t = (c / chunks) % n8;
    const int64_t bh = c / chunks / n8;
    const uint16_t* sh_base = src + (bh / heads) * sb + (bh % heads) * sh + col;
    uint16_t* dh = dst != nullptr ? dst + bh * len * d + col : nullptr;
    auto load = [&](int64_t pos) {  // position pos of the rearranged sequence (pos < len)
      const uint16_t* s = sh_base + (index ? index[pos] : pos) * sl;
      if (kVec) return __ldg(reinterpret_cast<const uint4*>(s));
      uint4 r;
      uint16_t* e = reinterpret_cast<uint16_t*>(&r);
#pragma unroll
      for (int k = 0; k < 8; ++k) e[k] = s[k];
      return r;
    };
    uint4 src[8];
#pragma unroll
    for (int u = 0; u < 8; ++u) {
      src[u] = load(pooled_source(t * 4 + u / 2, 2, u & 1, len));
      if (dh != nullptr && t * 8 + u < len) *reinterpret_cast<uint4*>(dh + (t * 8 + u) * d) = src[u];
    }
    store_pyramid<T>(src, bh, t, n8, d, col, o2, o4, o8);
  }
}

template <typename T>
psa_status launch_gather_pool(const GatherArgs& g, int64_t n_blocks, int64_t block_n, void* const out[3],
                              cudaStream_t stream) {
  const int64_t n8 = pooled_length(n_blocks, block_n, 8);
  const int64_t total = g.batch * g.heads * n8 * (g.head_dim / 8);
  if (total == 0 || g.len == 0) return PSA_OK;
  const int threads = 256;
  const unsigned blocks = grid_stride_blocks(total, threads, 65536 * 8);
  const bool vec = rows_16b_aligned(g.src, g.stride);  // the entry requires stride[3] == 1
  const auto* src = static_cast<const uint16_t*>(g.src);
  auto* dst = static_cast<uint16_t*>(g.dst);
  T* o2 = static_cast<T*>(out[0]);
  T* o4 = static_cast<T*>(out[1]);
  T* o8 = static_cast<T*>(out[2]);
  if (vec)
    gather_pool_kernel<T, true><<<blocks, threads, 0, stream>>>(src, g.stride[0], g.stride[1], g.stride[2], g.index,
                                                                g.heads, g.len, g.head_dim, n8, dst, o2, o4, o8, total);
  else
    gather_pool_kernel<T, false><<<blocks, threads, 0, stream>>>(src, g.stride[0], g.stride[1], g.stride[2], g.index,
                                                                 g.heads, g.len, g.head_dim, n8, dst, o2, o4, o8, total);
  return launch_status("gather_pool_kernel");
}

template <typename T>
psa_status launch_pool(const PoolArgs& a, cudaStream_t stream) {
  const int64_t n8 = pooled_length(a.n_blocks, a.block_n, 8);
  const int64_t total = a.heads * n8 * (a.head_dim / 8);
  if (total == 0) return PSA_OK;
  const int threads = 256;
  const unsigned blocks = grid_stride_blocks(total, threads, 65536 * 8);
  pool_pyramid_kernel<T><<<blocks, threads, 0, stream>>>(
      static_cast<const T*>(a.x), a.len, a.head_dim, n8, static_cast<T*>(a.out[0]),
      static_cast<T*>(a.out[1]), static_cast<T*>(a.out[2]), total);
  return launch_status("pool_pyramid_kernel");
}

}  // namespace

psa_status pool_supported(int64_t head_dim, int64_t block_n) {
  PSA_RETURN_IF(head_dim % 8 != 0 || block_n % 8 != 0 || block_n < 8, PSA_ERR_UNSUPPORTED,
                "head_dim = %lld, block_size.n = %lld; the CUDA pool stage needs multiples of 8",
                static_cast<long long>(head_dim), static_cast<long long>(block_n));
  return PSA_OK;
}

psa_status gather_pool_pyramid_cuda(const GatherArgs& g, int64_t n_blocks, int64_t block_n, void* const out[3],
                                    cudaStream_t stream) {
  PSA_TRY(pool_supported(g.head_dim, block_n));
  PSA_RETURN_IF(g.stride[3] != 1, PSA_ERR_INTERNAL, "gather+pool: the column stride must be 1");
  PSA_RETURN_IF(n_blocks * block_n < g.len, PSA_ERR_INTERNAL,
                "gather+pool: %lld blocks of %lld do not cover %lld tokens", static_cast<long long>(n_blocks),
                static_cast<long long>(block_n), static_cast<long long>(g.len));
  PSA_RETURN_IF(reinterpret_cast<uintptr_t>(g.dst) % 16 != 0, PSA_ERR_INTERNAL,
                "gather+pool: destination not 16-byte aligned");
  switch (g.dtype) {
    case PSA_DTYPE_F16: return launch_gather_pool<__half>(g, n_blocks, block_n, out, stream);
    case PSA_DTYPE_BF16: return launch_gather_pool<__nv_bfloat16>(g, n_blocks, block_n, out, stream);
    default:
      return set_error(PSA_ERR_UNSUPPORTED, "gather+pool: dtype = %d; the CUDA backend supports f16 and bf16",
                       static_cast<int>(g.dtype));
  }
}

psa_status pool_pyramid_cuda(const PoolArgs& a, cudaStream_t stream) {
  PSA_TRY(pool_supported(a.head_dim, a.block_n));
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

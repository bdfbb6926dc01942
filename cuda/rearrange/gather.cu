// cuda/rearrange/gather.cu -- rearrange stage: kernel (bit copy of 16-byte row chunks through
// an optional permutation), its launcher and the entry. Must not interpret the values.
#include <cstdint>

#include "cuda/core/cuda_status.h"
#include "cuda/rearrange/gather_cuda.h"

namespace psa {
namespace gpu {
namespace {

// One thread per 8-element chunk of an output row. kVec: source rows are 16-byte aligned,
// so a chunk moves as one uint4; otherwise as eight 2-byte loads.
template <bool kVec>
__global__ void gather_rows_kernel(const uint16_t* __restrict__ src, int64_t sb, int64_t sh,
                                   int64_t sl, uint16_t* __restrict__ dst, int64_t heads,
                                   int64_t len, int64_t chunks_per_row,
                                   const int64_t* __restrict__ index, int64_t total) {
  for (int64_t c = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; c < total;
       c += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t col = (c % chunks_per_row) * 8;
    const int64_t row = c / chunks_per_row;  // (b*heads + h)*len + i
    const int64_t i = row % len;
    const int64_t bh = row / len;
    const int64_t b = bh / heads, h = bh % heads;
    const int64_t srow = index ? index[i] : i;
    const uint16_t* s = src + b * sb + h * sh + srow * sl + col;
    uint16_t* d = dst + row * (chunks_per_row * 8) + col;
    if (kVec) {
      *reinterpret_cast<uint4*>(d) = __ldg(reinterpret_cast<const uint4*>(s));
    } else {
      uint16_t tmp[8];
#pragma unroll
      for (int e = 0; e < 8; ++e) tmp[e] = s[e];
      *reinterpret_cast<uint4*>(d) = *reinterpret_cast<const uint4*>(tmp);
    }
  }
}

psa_status launch_gather(const GatherArgs& a, bool vec, cudaStream_t stream) {
  const int64_t chunks = a.head_dim / 8;
  const int64_t total = a.batch * a.heads * a.len * chunks;
  if (total == 0) return PSA_OK;
  const int threads = 256;
  const unsigned blocks = grid_stride_blocks(total, threads, 65536 * 8);
  const auto* src = static_cast<const uint16_t*>(a.src);
  auto* dst = static_cast<uint16_t*>(a.dst);
  if (vec)
    gather_rows_kernel<true><<<blocks, threads, 0, stream>>>(
        src, a.stride[0], a.stride[1], a.stride[2], dst, a.heads, a.len, chunks, a.index, total);
  else
    gather_rows_kernel<false><<<blocks, threads, 0, stream>>>(
        src, a.stride[0], a.stride[1], a.stride[2], dst, a.heads, a.len, chunks, a.index, total);
  return launch_status("gather_rows_kernel");
}

}  // namespace

psa_status gather_rows_cuda(const GatherArgs& a, cudaStream_t stream) {
  PSA_RETURN_IF(a.dtype != PSA_DTYPE_F16 && a.dtype != PSA_DTYPE_BF16, PSA_ERR_UNSUPPORTED,
                "gather: dtype = %d; the CUDA backend supports f16 and bf16", static_cast<int>(a.dtype));
  PSA_RETURN_IF(a.head_dim % 8 != 0 || a.stride[3] != 1, PSA_ERR_INTERNAL,
                "gather: head_dim = %lld must be a multiple of 8 with unit stride",
                static_cast<long long>(a.head_dim));
  PSA_RETURN_IF(reinterpret_cast<uintptr_t>(a.dst) % 16 != 0, PSA_ERR_INTERNAL,
                "gather: destination not 16-byte aligned");
  const bool vec = rows_16b_aligned(a.src, a.stride);
  return launch_gather(a, vec, stream);
}

}  // namespace gpu
}  // namespace psa

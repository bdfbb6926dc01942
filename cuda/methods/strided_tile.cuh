// cuda/methods/strided_tile.cuh -- mask stage (ada_bsa, psa_causal), kernel layer: one block of
// a head's 16-bit tokens in shared memory as fp32 strided groups, the layout both antidiagonal
// scorers read. Device code only.
#pragma once
#include <cstdint>

#include "cuda/core/device.cuh"

namespace psa {
namespace gpu {

// Tokens [first, first + rows) of x ([len, d], d a multiple of 8, rows 16-byte aligned) into
// `tile` as rows / stride groups of `stride` fp32 rows: token t at
// tile + (t / stride) * gstride + (t % stride) * d (gstride >= stride * d: a caller pads it to
// spread the groups over the banks). Rows past len are zero. Every thread of the CTA takes part;
// no synchronisation.
template <typename T>
__device__ __forceinline__ void load_strided_tile(float* tile, const T* x, int64_t first, int64_t rows,
                                                  int64_t stride, int64_t len, int64_t d, int64_t gstride) {
  const int64_t per_row = d / 8;
  for (int64_t c = threadIdx.x; c < rows * per_row; c += blockDim.x) {
    const int64_t t = c / per_row, e0 = (c % per_row) * 8;
    float f[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    if (first + t < len) unpack8<T>(*reinterpret_cast<const uint4*>(x + (first + t) * d + e0), f);
    float* dst = tile + (t / stride) * gstride + (t % stride) * d + e0;
#pragma unroll
    for (int i = 0; i < 8; ++i) dst[i] = f[i];
  }
}

}  // namespace gpu
}  // namespace psa

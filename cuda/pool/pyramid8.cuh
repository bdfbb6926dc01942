// cuda/pool/pyramid8.cuh -- pool stage, the arithmetic of one level-8 token, shared by the 16-bit
// pass (pool_pyramid.cu) and the 8-bit one (pool_fp8.cu), so that both pool the same bits.
#pragma once
#include <cstdint>

#include "cuda/core/device.cuh"

namespace psa {
namespace gpu {

// Levels 2, 4 and 8 of one level-8 token from one 8-channel chunk of its 8 source tokens (x[u]:
// position 8t + u, replicate-padded): the means of pool_pyramid_cpu in fp32 (0.5 * (a + b) at
// each level, of the unrounded level below), each rounded once to T and handed to
// put(level, u, packed) as soon as it is formed (level 2: u = 0..3 for token 4t + u, level 4:
// u = 0..1 for 2t + u, level 8: u = 0 for t), so a caller that stores them keeps few values live.
template <typename T, typename Put>
__device__ __forceinline__ void pyramid8(const uint4 (&x)[8], Put&& put) {
  float l2[4][8];
#pragma unroll
  for (int u = 0; u < 4; ++u) {
    float a[8], b[8];
    unpack8<T>(x[2 * u], a);
    unpack8<T>(x[2 * u + 1], b);
#pragma unroll
    for (int e = 0; e < 8; ++e) l2[u][e] = 0.5f * (a[e] + b[e]);
    put(2, u, pack8<T>(l2[u]));
  }
  float l4[2][8];
#pragma unroll
  for (int u = 0; u < 2; ++u) {
#pragma unroll
    for (int e = 0; e < 8; ++e) l4[u][e] = 0.5f * (l2[2 * u][e] + l2[2 * u + 1][e]);
    put(4, u, pack8<T>(l4[u]));
  }
  float l8[8];
#pragma unroll
  for (int e = 0; e < 8; ++e) l8[e] = 0.5f * (l4[0][e] + l4[1][e]);
  put(8, 0, pack8<T>(l8));
}

}  // namespace gpu
}  // namespace psa

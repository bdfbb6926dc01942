// core/bits.h -- the bits of an fp32 value and back, for the spec headers' integer tricks (sort
// keys, exponent arithmetic, format conversions): the CUDA intrinsics in device code, memcpy on
// the host; and the fp32 product that no compiler fuses.
#pragma once
#include <cstdint>
#include <cstring>

#include "core/hd.h"

namespace psa {

PSA_HD uint32_t float_bits(float x) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(x);
#else
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
#endif
}

PSA_HD float bits_float(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float x;
  std::memcpy(&x, &u, sizeof x);
  return x;
#endif
}

// An fp32 product rounded on its own: __fmul_rn keeps nvcc from fusing it into an FMA with a
// following addition, so kernels that run spec arithmetic reproduce the CPU bits. Host builds
// must not contract either (CMakeLists.txt passes -ffp-contract=off).
PSA_HD float mul_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}

}  // namespace psa

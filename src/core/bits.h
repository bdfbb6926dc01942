// core/bits.h -- the bits of an fp32 value and back, for the spec headers' integer tricks (sort
// keys, exponent arithmetic, format conversions): the CUDA intrinsics in device code, memcpy on
// the host.
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

}  // namespace psa

// core/half.h -- host-side fp16/bf16 <-> fp32 conversion (round to nearest even), used by
// the CPU backend and by tests. Device code uses cuda_fp16.h / cuda_bf16.h instead.
#pragma once
#include <cstdint>
#include <cstring>

#include "psa.h"

namespace psa {

inline float bf16_to_float(uint16_t h) {
  uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

inline uint16_t float_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu)) return static_cast<uint16_t>((u >> 16) | 0x40);  // NaN stays NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

inline float half_to_float(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t man = h & 0x3ffu;
  uint32_t u;
  if (exp == 0) {
    if (man == 0) {
      u = sign;
    } else {  // subnormal: normalise
      int e = -1;
      do {
        ++e;
        man <<= 1;
      } while ((man & 0x400u) == 0);
      u = sign | static_cast<uint32_t>(127 - 15 - e) << 23 | (man & 0x3ffu) << 13;
    }
  } else if (exp == 0x1f) {
    u = sign | 0x7f800000u | (man << 13);
  } else {
    u = sign | (exp + 127 - 15) << 23 | (man << 13);
  }
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

inline uint16_t float_to_half(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  uint32_t sign = (u >> 16) & 0x8000u;
  uint32_t absu = u & 0x7fffffffu;
  if (absu >= 0x7f800000u) return static_cast<uint16_t>(sign | 0x7c00u | (absu > 0x7f800000u ? 0x200u : 0));
  if (absu >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow -> inf
  if (absu < 0x38800000u) {                                              // subnormal or zero
    if (absu < 0x33000000u) return static_cast<uint16_t>(sign);
    uint32_t e = absu >> 23;
    uint32_t man = (absu & 0x7fffffu) | 0x800000u;
    uint32_t shift = 126 - e;  // 14 + (112 - e) ... places mantissa into 10 bits
    uint32_t res = man >> shift;
    uint32_t rem = man & ((1u << shift) - 1u);
    uint32_t halfway = 1u << (shift - 1);
    if (rem > halfway || (rem == halfway && (res & 1u))) ++res;
    return static_cast<uint16_t>(sign | res);
  }
  uint32_t res = ((absu >> 13) - (112u << 10));
  uint32_t rem = absu & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (res & 1u))) ++res;
  return static_cast<uint16_t>(sign | res);
}

inline float load_as_float(const void* base, int64_t index, psa_dtype dtype) {
  switch (dtype) {
    case PSA_DTYPE_F32: return static_cast<const float*>(base)[index];
    case PSA_DTYPE_F16: return half_to_float(static_cast<const uint16_t*>(base)[index]);
    case PSA_DTYPE_BF16: return bf16_to_float(static_cast<const uint16_t*>(base)[index]);
  }
  return 0.0f;
}

inline void store_from_float(void* base, int64_t index, psa_dtype dtype, float value) {
  switch (dtype) {
    case PSA_DTYPE_F32: static_cast<float*>(base)[index] = value; break;
    case PSA_DTYPE_F16: static_cast<uint16_t*>(base)[index] = float_to_half(value); break;
    case PSA_DTYPE_BF16: static_cast<uint16_t*>(base)[index] = float_to_bf16(value); break;
  }
}

}  // namespace psa

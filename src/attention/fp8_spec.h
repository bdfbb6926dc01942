// attention/fp8_spec.h -- meaning of the FP8 (e4m3) attention path, shared by every backend:
// the e4m3 format and its rounding, and the rule that turns a group of values into a scale.
// Which groups share a scale (per query block, per key block and level, per V channel), the K
// smoothing and the quantized probabilities are in attention/attention_fp8.h.
//
// e4m3 is the OCP 8-bit E4M3 format (CUDA's __nv_fp8_e4m3, the "fn" variant): a sign bit, 4
// exponent bits (bias 7) and 3 mantissa bits; no infinities; S.1111.111 is NaN. Finite values:
// +-(8 + m) * 2^(e - 10) for e = 1..15 (m < 7 at e = 15, so the largest is 448), subnormals
// +-m * 2^-9 (m = 1..7), and +-0.
#pragma once
#include <cstdint>

#include "core/bits.h"
#include "core/hd.h"

namespace psa {

constexpr float kE4m3Max = 448.0f;

// The value of an e4m3 code (NaN for 0x7f / 0xff).
PSA_HD float e4m3_to_float(uint8_t b) {
  const uint32_t sign = static_cast<uint32_t>(b & 0x80u) << 24;
  const uint32_t e = (b >> 3) & 15u, m = b & 7u;
  if (e == 15u && m == 7u) return bits_float(sign | 0x7fc00000u);
  if (e == 0u) return bits_float(sign | float_bits(static_cast<float>(m) * 0.001953125f));  // m * 2^-9
  return bits_float(sign | ((e + 120u) << 23) | (m << 20));  // fp32 exponent e - 7 + 127
}

// x rounded to e4m3: to nearest, ties to even, saturating as cvt.rn.satfinite.e4m3x2.f32 does
// (a magnitude of 448 or more gives +-448, never NaN; inputs of +-inf included), NaN -> NaN
// (0x7f with x's sign), -0 -> 0x80. Only integer operations and one exact fp32 add/sub pair.
PSA_HD uint8_t float_to_e4m3(float x) {
  const uint32_t u = float_bits(x);
  const uint8_t sign = static_cast<uint8_t>((u >> 24) & 0x80u);
  const uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return static_cast<uint8_t>(sign | 0x7fu);  // NaN
  if (a >= 0x43e00000u) return static_cast<uint8_t>(sign | 0x7eu);  // |x| >= 448
  if (a < 0x3c800000u) {  // |x| < 2^-6: subnormal (or zero) code m * 2^-9, m = 0..8
    // |x| * 2^9 < 8 is exact; adding and subtracting 1.5 * 2^23 rounds it to an integer, ties to
    // even. m = 8 is the code of 2^-6 (exponent 1, mantissa 0).
    const float f = bits_float(a) * 512.0f;
    const float r = (f + 12582912.0f) - 12582912.0f;
    return static_cast<uint8_t>(sign | static_cast<uint32_t>(r));
  }
  // Normal: keep the fp32 exponent and the top 3 mantissa bits; round the 20 bits below to
  // nearest even (a carry into the exponent is the correct next binade; below 448 it never
  // reaches the NaN code).
  uint32_t r = a >> 20;
  const uint32_t rem = a & 0xfffffu;
  if (rem > 0x80000u || (rem == 0x80000u && (r & 1u) != 0u)) ++r;
  const uint32_t e = (r >> 3) - 120u;  // e4m3 exponent: fp32 exponent - 127 + 7
  return static_cast<uint8_t>(sign | (e << 3) | (r & 7u));
}

// x rounded to the nearest e4m3 value (as float).
PSA_HD float round_e4m3(float x) { return e4m3_to_float(float_to_e4m3(x)); }

// Scale of a group of values whose largest finite magnitude is `amax` (NaN and +-inf do not
// count): the group is stored as fp8_quantize(x, inv) and read back as e4m3 * s, with inv = 448 /
// amax and s = amax / 448 (each one correctly rounded fp32 division, so every backend gets the
// same bits). A group without a non-zero finite value, or whose amax is so small that 448 / amax
// overflows, takes inv = s = 1.
struct Fp8Scale {
  float inv;  // quantize: fp8_quantize(x, inv)
  float s;    // dequantize: e4m3 value * s
};
// qmax: the format's largest magnitude (448 for e4m3, 127 for int8).
PSA_HD Fp8Scale fp8_scale(float amax, float qmax = kE4m3Max) {
  const float inv = qmax / amax;
  if (!(amax > 0.0f) || !(inv <= 3.402823466e38f)) return Fp8Scale{1.0f, 1.0f};
  return Fp8Scale{inv, amax / qmax};
}

// The same group's scale rounded up to a power of two: s = the smallest normal power of two >=
// amax / qmax (that quotient correctly rounded first), inv = 1 / s, both exact. The values then
// use (qmax / 2, qmax] of the format at most instead of all of it; for e4m3, a floating-point
// format, that changes no value's relative precision above the subnormal range. Same fallback
// as fp8_scale.
PSA_HD Fp8Scale fp8_scale_pow2(float amax, float qmax = kE4m3Max) {
  const float r = amax / qmax;
  if (!(amax > 0.0f) || !(r <= 3.402823466e38f)) return Fp8Scale{1.0f, 1.0f};
  const uint32_t b = float_bits(r);
  uint32_t e = b >> 23;  // biased exponent (r > 0)
  if (e == 0) {
    e = 1;  // subnormal quotient: 2^-126 bounds it
  } else if ((b & 0x7fffffu) != 0) {
    ++e;    // not a power of two already: the next one (e <= 254: r < FLT_MAX / 127)
  }
  return Fp8Scale{bits_float((254u - e) << 23), bits_float(e << 23)};
}

// The largest finite magnitude of a and b (amax accumulation; NaN and +-inf skipped).
PSA_HD float fp8_amax(float acc, float x) {
  const float a = x < 0.0f ? -x : x;
  return a <= 3.402823466e38f && a > acc ? a : acc;
}

// One value of a group with scale inv: a finite x becomes e4m3(x * inv) (the product rounded in
// fp32 first), a NaN or infinite x becomes NaN, so a non-finite input still reaches its row's
// output as in the bf16 path instead of saturating to +-448.
PSA_HD float fp8_quantize(float x, float inv) {
  const float a = x < 0.0f ? -x : x;
  if (!(a <= 3.402823466e38f)) return bits_float(0x7fc00000u);
  return round_e4m3(x * inv);
}

// The 8-bit integer alternative (Hopper's wgmma also multiplies s8/u8 at the FP8 rate, with
// exact int32 accumulation): x rounded to the nearest integer (ties to even) and clamped to
// [lo, hi] (int8: -127..127, uint8: 0..255); NaN stays NaN.
PSA_HD float round_int(float x, float lo, float hi) {
  if (x != x) return x;
  x = x < lo ? lo : (x > hi ? hi : x);
  const float a = x < 0.0f ? -x : x;  // <= 255 here, so the 1.5 * 2^23 add rounds it to an integer
  const float r = (a + 12582912.0f) - 12582912.0f;
  return x < 0.0f ? -r : r;
}
constexpr float kInt8Max = 127.0f, kUint8Max = 255.0f;
PSA_HD float int8_quantize(float x, float inv) {
  const float a = x < 0.0f ? -x : x;
  if (!(a <= 3.402823466e38f)) return bits_float(0x7fc00000u);
  return round_int(x * inv, -kInt8Max, kInt8Max);
}

}  // namespace psa

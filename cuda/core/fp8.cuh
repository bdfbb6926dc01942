// cuda/core/fp8.cuh -- the 8-bit conversions of attention/fp8_spec.h on the GPU's own
// instructions, for every kernel of the 8-bit path (the pool stage's quantization now, the
// attention kernel's P later). Each function returns the code that fp8_spec.h's definition
// gives, bit for bit; tests/cuda/fp8_convert_cuda_test.cu checks that over every fp32 value.
#pragma once
#include <cuda_fp16.h>

#include <cstdint>

#include "attention/fp8_spec.h"

namespace psa {
namespace gpu {

// float_to_e4m3(lo) | float_to_e4m3(hi) << 8. From sm_89 on one cvt.rn.satfinite (fp8_spec.h's
// rounding is defined to be that instruction's), before it the integer definition.
__device__ __forceinline__ uint32_t e4m3x2(float lo, float hi) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  uint16_t b;
  asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(b) : "f"(hi), "f"(lo));  // first operand: upper byte
  return b;
#else
  return static_cast<uint32_t>(float_to_e4m3(lo)) | static_cast<uint32_t>(float_to_e4m3(hi)) << 8;
#endif
}

// The value of the e4m3 code in the low byte of `code` (e4m3_to_float): from sm_89 on one
// cvt.rn.f16x2.e4m3x2 (every e4m3 value is an f16 value) and the f16 -> f32 conversion.
__device__ __forceinline__ float e4m3_value(uint32_t code) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  uint32_t h2;
  asm("cvt.rn.f16x2.e4m3x2 %0, %1;" : "=r"(h2) : "h"(static_cast<uint16_t>(code & 0xffu)));
  return __half2float(__ushort_as_half(static_cast<unsigned short>(h2 & 0xffffu)));
#else
  return e4m3_to_float(static_cast<uint8_t>(code));
#endif
}

// Both values of an e4m3x2 pair (code of lo in bits 0-7, hi in 8-15).
__device__ __forceinline__ float2 e4m3x2_values(uint32_t code2) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  uint32_t h2;
  asm("cvt.rn.f16x2.e4m3x2 %0, %1;" : "=r"(h2) : "h"(static_cast<uint16_t>(code2 & 0xffffu)));
  return __half22float2(*reinterpret_cast<const __half2*>(&h2));
#else
  return make_float2(e4m3_to_float(static_cast<uint8_t>(code2)), e4m3_to_float(static_cast<uint8_t>(code2 >> 8)));
#endif
}

// The codes of fp8_quantize(a, inv) and fp8_quantize(b, inv): a non-finite value becomes NaN
// (not the +-448 that satfinite gives +-inf), a finite one e4m3(x * inv).
__device__ __forceinline__ uint32_t fp8_quantize_x2(float a, float b, float inv) {
  const float nan = __uint_as_float(0x7fc00000u);
  return e4m3x2(fabsf(a) <= 3.402823466e38f ? a * inv : nan, fabsf(b) <= 3.402823466e38f ? b * inv : nan);
}

// (float)s for |s| < 2^22, exactly: s + 0x4B400000 is the bit pattern of 1.5 * 2^23 + s (an
// integer in [2^23, 2^24): exact), and subtracting 1.5 * 2^23 is exact too. An integer add and a
// float add instead of I2FP, which sm_90 issues to the ALU pipe, the busiest one of the 8-bit
// attention kernel's consumers (39% -> 32% active in ncu at Wan2.1-1.3B). That kernel's
// S = Q8 . K8 over 128 channels is at most 127 * 127 * 128 < 2^21 in magnitude.
__device__ __forceinline__ float small_int_to_float(int32_t s) {
  return __int_as_float(s + 0x4B400000) - 12582912.0f;
}

// x rounded to the nearest integer (ties to even) in the low bits of the float 1.5 * 2^23 + x, for
// |x| < 2^22: the int8 conversions' rounding without F2I.
__device__ __forceinline__ uint32_t round_int_bits(float x) { return __float_as_uint(__fadd_rn(x, 12582912.0f)); }

// int8_quantize(y, inv) as a byte: y * inv rounded in fp32, clamped to [-127, 127], then rounded
// to the nearest integer, ties to even (int8_quantize's clamp-then-round) by adding 1.5 * 2^23,
// whose low byte is then the integer's two's-complement byte (0x4B400000 + n for |n| <= 127);
// 0x80 (-128, never a rounded value) for a non-finite y, whose int8_quantize is NaN. Two float
// minima, an add and a mask instead of F2I, which sm_90 runs at a quarter of the FP32 rate.
__device__ __forceinline__ uint32_t int8_quantize_code(float y, float inv) {
  const float x = fminf(fmaxf(y * inv, -127.0f), 127.0f);
  const uint32_t b = round_int_bits(x) & 0xffu;
  return fabsf(y) <= 3.402823466e38f ? b : 0x80u;
}

// int8_quantize_code of four values, packed (y0 in the low byte), where each is finite with
// |y * inv| < 127.5: a group's values under its own scale (|y| <= amax, inv = fp8_scale(amax,
// kInt8Max).inv, so |y * inv| rounds twice to at most 127 * (1 + 2^-23)^2; or the fallback inv = 1
// with amax 0 or below 127 / FLT_MAX). There neither the clamp nor the non-finite select of
// int8_quantize_code can change a byte: the rounding alone remains, and PRMT packs the bytes.
__device__ __forceinline__ uint32_t int8_quantize_x4_in_range(float y0, float y1, float y2, float y3, float inv) {
  const uint32_t w0 = round_int_bits(__fmul_rn(y0, inv)), w1 = round_int_bits(__fmul_rn(y1, inv)),
                 w2 = round_int_bits(__fmul_rn(y2, inv)), w3 = round_int_bits(__fmul_rn(y3, inv));
  return __byte_perm(__byte_perm(w0, w1, 0x0040), __byte_perm(w2, w3, 0x0040), 0x5410);
}

// int8_quantize_x16 under the same condition as int8_quantize_x4_in_range (every value finite,
// |x * inv| < 127.5).
__device__ __forceinline__ uint4 int8_quantize_x16_in_range(const float (&x)[16], float inv) {
  return make_uint4(int8_quantize_x4_in_range(x[0], x[1], x[2], x[3], inv),
                    int8_quantize_x4_in_range(x[4], x[5], x[6], x[7], inv),
                    int8_quantize_x4_in_range(x[8], x[9], x[10], x[11], inv),
                    int8_quantize_x4_in_range(x[12], x[13], x[14], x[15], inv));
}

// fp8_quantize_x2 for finite a and b: no non-finite select.
__device__ __forceinline__ uint32_t fp8_quantize_x2_finite(float a, float b, float inv) {
  return e4m3x2(__fmul_rn(a, inv), __fmul_rn(b, inv));
}

// int8_quantize_code of 16 values as 16 bytes in order (x[0] in the low byte of .x).
__device__ __forceinline__ uint4 int8_quantize_x16(const float (&x)[16], float inv) {
  uint32_t w[4];
#pragma unroll
  for (int e = 0; e < 4; ++e)
    w[e] = int8_quantize_code(x[4 * e], inv) | int8_quantize_code(x[4 * e + 1], inv) << 8 |
           int8_quantize_code(x[4 * e + 2], inv) << 16 | int8_quantize_code(x[4 * e + 3], inv) << 24;
  return make_uint4(w[0], w[1], w[2], w[3]);
}

}  // namespace gpu
}  // namespace psa

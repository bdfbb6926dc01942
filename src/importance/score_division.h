// importance/score_division.h -- the row normalisation of the score rule (importance_spec.h),
// S = (float)(P / s) with s the row sum in double, by fp32 arithmetic with the same bits. The
// CUDA score kernels call normalised_score instead of a double division; the CPU reference
// keeps the division, and the tests compare the two (tests/importance/score_division_test.cpp
// on the host, tests/cuda/score_division_cuda_test.cu on the GPU).
//
// Why: on Hopper, double-precision instructions issue to the pipe that the tensor cores use;
// the score kernel's finisher warps normalise beside the sweep's wgmma and waited on it
// (PERF_NOTES.md, "Importance: the block weight in fp32").
//
// How: a candidate quotient c is accepted only when the remainder v - c s, evaluated to within
// about 2^-45 v, shows v / s farther than a margin (2^-40 v) from both of c's rounding
// boundaries (the midpoints to its fp32 neighbours): then v / s, its double rounding (within
// 2^-53 of it) and c all round to c. Otherwise -- about 1 quotient in 44,000, and every argument
// outside the ranges named below -- the caller divides in double.
#pragma once
#include <cmath>
#include <cstdint>

#include "core/bits.h"
#include "core/hd.h"

namespace psa {

// A row sum s prepared for the quotients of its row: hi + lo within 2^-48 s, inv ~ 1 / hi.
// `fast`: 1 <= s <= 2^40 (every row sum of the score rule with a P == 1 block is >= 1).
struct ScoreDivisor {
  float hi = 0.0f, lo = 0.0f, inv = 0.0f;
  bool fast = false;
};
PSA_HD ScoreDivisor score_divisor(double s) {
  ScoreDivisor d;
  d.fast = s >= 1.0 && s <= 0x1p40;
  if (d.fast) {
    d.hi = static_cast<float>(s);
    d.lo = static_cast<float>(s - static_cast<double>(d.hi));
    d.inv = 1.0f / d.hi;
  }
  return d;
}

// v / s rounded to double, then to fp32 (the rule's static_cast<float>(v / s)), as out, when
// fp32 arithmetic decides it; false when it does not. Handles v = 0 and 2^-60 <= v <= 1 with
// d.fast. A candidate c (v * inv and one correction) is the result when the remainder
// R = v - c s, evaluated as (v - c hi) - c lo to within about 2^-45 v, lies inside
// (-h_below hi, h_above hi) by more than the margin 2^-40 v, where h_below and h_above are the
// half-distances to c's fp32 neighbours: then v / s, its double rounding (within 2^-53 of it) and
// c share c's rounding interval (the interval's ends at s instead of hi move by 2^-48 v).
PSA_HD bool div_rn_f32(float v, const ScoreDivisor& d, float& out) {
  // No branch, so a kernel can evaluate several at once: an argument out of range is replaced
  // by 1 and refused (v = 0 gives +0, decided).
  const bool in_range = d.fast && v >= 0x1p-60f && v <= 1.0f;
  const float vs = in_range ? v : 1.0f;
  const float q0 = mul_rn(vs, d.inv);
  const float c = fmaf(fmaf(-q0, d.lo, fmaf(-q0, d.hi, vs)), d.inv, q0);
  const float r = fmaf(-c, d.lo, fmaf(-c, d.hi, vs));
  const uint32_t b = float_bits(c);
  const float half_up = bits_float((b & 0x7f800000u) - (24u << 23));
  const float half_dn = (b & 0x7fffffu) == 0 ? mul_rn(half_up, 0.5f) : half_up;
  const float margin = mul_rn(vs, 0x1p-40f);
  const bool decided = r >= 0.0f ? r + margin < mul_rn(half_up, d.hi) : margin - r < mul_rn(half_dn, d.hi);
  const bool zero = d.fast && v == 0.0f;  // 0 / s = +0
  out = zero ? 0.0f : c;
  return zero || (in_range && decided);
}

// static_cast<float>(v / s) (the rule), with fp32 arithmetic where it decides the rounding.
PSA_HD float normalised_score(float v, double s, const ScoreDivisor& d) {
  float q;
  return div_rn_f32(v, d, q) ? q : static_cast<float>(v / s);
}

}  // namespace psa

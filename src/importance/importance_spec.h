// importance/importance_spec.h -- meaning of the importance stage (spec 3), shared by the
// CPU reference and the CUDA kernels: which in-block offsets are sampled, and how sampled
// logits become a block score. Deterministic: offsets depend only on (seed, batch, head,
// which tensor), never on call order, so a forward is reproducible and graph-replayable.
#pragma once
#include <cmath>
#include <cstdint>

#include "core/bits.h"
#include "core/hd.h"

namespace psa {

// Counter-based 64-bit mixer (splitmix64 finaliser): a pure function of its input.
PSA_HD uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Which tensor a sample stream belongs to (q and k draw independently).
enum SampleStream : uint32_t { kSampleQuery = 0, kSampleKey = 1 };

// The stream key of (seed, batch, head, stream): every draw of the stream derives from it.
PSA_HD uint64_t sample_key(uint64_t seed, int64_t batch, int64_t head, uint32_t stream) {
  return mix64(seed ^ mix64(static_cast<uint64_t>(batch) * 0x100000001b3ull +
                            static_cast<uint64_t>(head) * 0x9e3779b1ull + stream));
}

// Draw i of a stream (0 <= i < block): the position in [i, block) that step i of the shuffle
// swaps with position i. A pure function of (key, i, block), so the draws of a stream can be
// computed in any order or in parallel; only the swaps are sequential.
PSA_HD int32_t sample_draw(uint64_t key, int32_t i, int32_t block) {
  const uint64_t r = mix64(key + static_cast<uint64_t>(i));
  return i + static_cast<int32_t>(r % static_cast<uint64_t>(block - i));
}

// Draws `count` distinct offsets in [0, block) for (seed, batch, head, stream) by a partial
// Fisher-Yates shuffle of 0..block-1 (step i swaps positions i and sample_draw(key, i, block));
// writes them to out[0..count) in draw order (position i is final after step i). `scratch`
// holds `block` ints. Requires 1 <= count <= block <= 1024.
PSA_HD void sample_offsets(uint64_t seed, int64_t batch, int64_t head, uint32_t stream,
                           int32_t block, int32_t count, int32_t* scratch, int32_t* out) {
  for (int32_t i = 0; i < block; ++i) scratch[i] = i;
  const uint64_t key = sample_key(seed, batch, head, stream);
  for (int32_t i = 0; i < count; ++i) {
    const int32_t j = sample_draw(key, i, block);
    const int32_t t = scratch[i];
    scratch[i] = scratch[j];
    scratch[j] = t;
    out[i] = scratch[i];
  }
}

// Token index of sample `t` of block `blk` (replicate padding: indices past the end
// clamp to the last token, spec 3.1).
PSA_HD int64_t sampled_token(int64_t blk, int64_t block, int32_t offset, int64_t len) {
  int64_t idx = blk * block + offset;
  return idx < len ? idx : len - 1;
}

// Block score (spec 3.4 without the 16-bit roundings): for query block i and key block j,
//   a[r, j] = scale * max_{c in samples of j} q_r . k_c           (fp32, rounded once)
//   m[r]    = max_j' a[r, j']
//   P[i, j] = sample_weight(max_{r in samples of i} (a[r, j] - m[r]))
//   S[i, j] = P[i, j] / sum_j P[i, j]                              (sum in double)
// i.e. P = max_r exp(a - m) (exp is monotone), with the exponential taken once, of the largest
// difference; each difference is rounded on its own in fp32, NaN differences are skipped
// (fmax), and a block with none left has P = sample_weight(-inf) = 0. The row
// normalisation runs over the real key blocks only (the reference also counts
// alignment-padding columns; it cancels in thresholdbound and is irrelevant to topk).
//
// With precision fp8 (psa_precision; the CPU backend and the CUDA backend's 8-bit route) the
// logits come from 8-bit operands, attention/attention_fp8.h's quantization of Q and K:
//   a[r, j] = (scale * s_q(i)) * s_k(j) * max_{c in samples of j} q8_r . k8_c
// with k8 = int8(K - K's smoothing mean) and s_k(j) the level-1 scale of key block j (the 8-bit
// pool pass's; NaN when the block holds a non-finite value, so its logits are NaN), q8_r =
// int8(q_r / s_q(i)) with s_q(i) = fp8_scale(largest finite magnitude of the sampled rows of
// query block i, 127), the dot in exact integer arithmetic (|q8 . k8| <= 127^2 d < 2^24 for
// d <= 1024) and each product rounded to fp32 in the order written. A sampled row holding a
// non-finite value has NaN logits (it scores no block). The mean's term q_r . mean is the same
// for every key of the row and cancels in a - m; the quantization moves a little (BENCHMARKS.md,
// "Importance on int8 operands": the masks keep 97-99.5% of the 16-bit masks' blocks).
//
// sample_weight is e^y by a fixed sequence of fp32 operations (below), the same bits on the
// CPU and on every GPU. Until 2026-11-29 it was exp in double rounded to fp32; on Hopper the
// score kernel's double-precision instructions waited on the pipe its tensor cores use, and
// the fp32 sequence took about 0.4 ms off the Wan2.1-14B importance stage (PERF_NOTES.md,
// "Importance: the block weight in fp32"). The two agree to within one ulp.

// ---- Tie mass: the secondary rank criterion (libpsa rule; mask_spec.h ranks_before) -------
// Every key block that holds some sampled row's best key scores exactly P = 1, so a row's top
// 3-10 blocks tie exactly (measured on 32x32 .. 64x64 latents and 4-frame clips, bn 32-128);
// ranking them by key index favoured the earliest blocks of the sequence. Ties are ranked by
// the tie mass instead, the summed weight of the block over the sampled rows of block i:
//   T[i, j] = sum_r sample_weight(a[r, j] - m[r])  when P[i, j] == 1,   T[i, j] = 0 otherwise,
// i.e. how much sampled attention mass (each row relative to its own best logit) the block
// draws -- a block that is the best of many rows and close for the rest ranks first. T is 0
// below the top because only exact ties consult it and the top tie is the one that occurs:
// a backend evaluates it for the few P == 1 blocks only. The sum
// has one fixed order on every backend, that of a 32-lane butterfly: partial w[l] = sum over
// r = l, l + 32, ... (ascending r, fp32); then for o = 16, 8, 4, 2, 1 every w[l] becomes
// w[l] + w[l ^ o]; T = w[0]. 0 <= T <= count (finite).

// e^y for a difference y = a - m <= 0, the same bits on every backend: only correctly rounded
// fp32 operations, fused multiply-adds written as fmaf (never left to contraction), and
// integer operations on the bits:
//   y NaN or y < -86 -> 0 (so no result is subnormal and flush-to-zero changes nothing);
//   y = min(y, 0) (y > 0 does not occur: m is the row maximum);
//   t = fma(y, log2(e), 1.5 * 2^23): 1.5 * 2^23 + n with n = y * log2(e) rounded to the nearest
//       integer (ties to even), in [-124, 0]; n = t - 1.5 * 2^23 (exact);
//   f = fma(-n, ln2_lo, fma(-n, ln2_hi, y)), |f| <= 0.35 (Cody-Waite, ln2 = ln2_hi + ln2_lo);
//   p = 1 + f(1 + f(1/2 + f(1/6 + f(1/24 + f(1/120 + f(1/720 + f/5040)))))) by Horner with
//       fmaf (the Taylor polynomial of e^f of degree 7; the constants are the fp32 roundings);
//   result: the bits of p plus n * 2^23 (= p * 2^n, normal; t's bits are those of 1.5 * 2^23
//       plus n, and 1.5 * 2^23's bits shifted left by 23 vanish, so n * 2^23 = t's bits << 23).
// Relative error against e^y: below 2e-7, at most one ulp (tests/importance/importance_test.cpp
// over every fp32 argument of [-86, 0]); not monotone (2,878 arguments in [-86, 0] give one ulp
// less than their predecessor), so the rule takes the maximum of the differences, not of the
// weights. The GPU gives the same bits for every fp32 argument
// (tests/cuda/score_division_cuda_test.cu).
PSA_HD float sample_weight(float y) {
  if (!(y >= -86.0f)) return 0.0f;
  y = fminf(y, 0.0f);
  const float t = fmaf(y, 1.44269504088896341f, 12582912.0f);
  const float n = t - 12582912.0f;
  float f = fmaf(-n, 0.693145751953125f, y);
  f = fmaf(-n, 1.428606765330187e-06f, f);
  float p = 1.0f / 5040.0f;
  p = fmaf(p, f, 1.0f / 720.0f);
  p = fmaf(p, f, 1.0f / 120.0f);
  p = fmaf(p, f, 1.0f / 24.0f);
  p = fmaf(p, f, 1.0f / 6.0f);
  p = fmaf(p, f, 0.5f);
  p = fmaf(p, f, 1.0f);
  p = fmaf(p, f, 1.0f);
  return bits_float(float_bits(p) + (float_bits(t) << 23));
}

constexpr int kTieLanes = 32;

// The fixed-order sum above, fed one weight at a time in ascending r (a GPU warp computes the
// same bits with lane l summing r = l, l + 32, ... and a __shfl_xor butterfly: fp32 addition
// commutes, so both sides of every pair add the same two values).
struct TieMassSum {
  float w[kTieLanes];
  PSA_HD TieMassSum() {
    for (int l = 0; l < kTieLanes; ++l) w[l] = 0.0f;
  }
  PSA_HD void add(int32_t r, float e) { w[r % kTieLanes] += e; }
  PSA_HD float result() {
    for (int o = kTieLanes / 2; o > 0; o >>= 1) {
      float n[kTieLanes];
      for (int l = 0; l < kTieLanes; ++l) n[l] = w[l] + w[l ^ o];
      for (int l = 0; l < kTieLanes; ++l) w[l] = n[l];
    }
    return w[0];
  }
};

// T of one block from its `count` weights e[r * stride] (r < count; sample_weight of each row's difference).
PSA_HD float tie_mass(const float* e, int32_t count, int64_t stride) {
  TieMassSum t;
  for (int32_t r = 0; r < count; ++r) t.add(r, e[r * stride]);
  return t.result();
}

}  // namespace psa

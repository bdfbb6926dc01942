// methods/causal_psa_spec.h -- meaning of the causal PSA variant (`psa_causal`, spec App. A,
// the video-understanding prefill path), shared by the CPU builder (causal_psa.cpp) and the
// CUDA kernels. Header-only: no containers, no sorting, no CUDA runtime.
//
// One (batch, query head), L = len_q = len_k tokens, square blocks of `bs` tokens,
// nb = ceil(L / bs) blocks, stride S | bs, G = ceil(L / S) strided groups, bs / S groups per
// block.
//
// Step 1, importance (antidiagonal scoring): the strided dot of query group r and key group t
//     dot(r, t) = sum_{j < S} q[r*S + S-1-j] . k[t*S + j]      (rows >= L read as zero)
// is the sum along one antidiagonal of the S x S tile (r, t) of Q K^T. Group r's logits
// scale / S * dot(r, t) over the visible groups t <= r (causal at the strided granularity)
// go through a softmax, and the probabilities are summed per block pair:
//     score[I][J] = sum_{r in block I, r < G} sum_{t in block J, t <= r} P(r, t).
// Groups at or past G are pure padding: they are neither a query row nor a key of any row
// (the reference's -inf padded keys; its padded query rows are dropped here). Query groups
// are processed in chunks of xattn_chunk_size / S rows; the scores do not depend on it.
//
// Step 2, levels of block row I (valid = I + 1 candidates, key blocks 0..I): the candidates
// in stable descending score order (ties: lower key index first; NaN last). Slots 1, 2, 4,
// 8, 0 take rank intervals; a slot's start is the previous slot's end (0 for level 1):
//   topk:        ranks [trunc(valid * start), trunc(valid * end))   (products in fp32)
//   energybound: ranks whose E = cumsum / max(row sum, 1e-10) lies in (start, end]
//                (double sums in rank order; the block that crosses `end` is excluded)
// No alignment, no level-1 floor; ranks no slot takes stay 0. Then
//   text: the key blocks and the query blocks that intersect the last text_length tokens
//         [L - T, L) get level 1 on every visible pair;
//   causal: J > I -> 0;  diagonal J == I -> 1;  column 0 -> 1;
//   similarity cap (always on): level = min(level, cap[J]) for level > 0, cap from the
//         replicate-padded keys (spec 5), so padded keys are never read past the tensor.
// Step 3: the causal pyramid attention (spec 6.5) of the shared attention stage.
#pragma once
#include <cmath>
#include <cstdint>

#include "core/hd.h"

namespace psa {

// ceil(len / stride): strided groups of a sequence.
PSA_HD int64_t causal_psa_groups(int64_t len, int64_t stride) {
  return (len + stride - 1) / stride;
}

// Strided antidiagonal dot of query group r and key group t (fp32). q, k: [len, d].
PSA_HD float causal_psa_group_dot(const float* q, const float* k, int64_t r, int64_t t,
                                  int64_t stride, int64_t len, int64_t d) {
  float s = 0.0f;
  for (int64_t j = 0; j < stride; ++j) {
    const int64_t qi = r * stride + stride - 1 - j, ki = t * stride + j;
    if (qi >= len || ki >= len) continue;
    for (int64_t e = 0; e < d; ++e) s += q[qi * d + e] * k[ki * d + e];
  }
  return s;
}

// The first block that holds one of the last `text_length` tokens, or nb when there is none.
PSA_HD int64_t causal_psa_text_block(int64_t len, int64_t text_length, int64_t bs) {
  if (text_length <= 0) return (len + bs - 1) / bs;
  const int64_t first = text_length >= len ? 0 : len - text_length;
  return first / bs;
}

// Rank interval [lo, hi) of slot `s` in topk mode, for `valid` candidates (fp32 products,
// truncation toward zero, clamped to valid).
PSA_HD void causal_psa_topk_interval(int64_t valid, double start, double end, int64_t* lo,
                                     int64_t* hi) {
  const float v = static_cast<float>(valid);
  int64_t a = static_cast<int64_t>(v * static_cast<float>(start));
  int64_t b = static_cast<int64_t>(v * static_cast<float>(end));
  if (a > valid) a = valid;
  if (b > valid) b = valid;
  if (a < 0) a = 0;
  *lo = a;
  *hi = b;
}

// Level of the candidate at rank `rank` of `valid` in topk mode (0 when no slot takes it;
// a later slot wins an overlap, as the reference's assignment order).
PSA_HD int causal_psa_topk_level(int64_t rank, int64_t valid, const double* ratio_end) {
  const int levels[5] = {1, 2, 4, 8, 0};
  int level = 0;
  double start = 0.0;
  for (int s = 0; s < 5; ++s) {
    int64_t lo = 0, hi = 0;
    causal_psa_topk_interval(valid, start, ratio_end[s], &lo, &hi);
    if (rank >= lo && rank < hi) level = levels[s];
    start = ratio_end[s];
  }
  return level;
}

// Level of a candidate whose cumulative mass fraction (through its rank) is e in energybound
// mode: the first slot with previous end < e <= end, else 0.
PSA_HD int causal_psa_energy_level(double e, const double* ratio_end) {
  const int levels[5] = {1, 2, 4, 8, 0};
  double lower = 0.0;
  for (int s = 0; s < 5; ++s) {
    if (lower < e && e <= ratio_end[s]) return levels[s];
    lower = ratio_end[s];
  }
  return 0;
}

// Forced and capped level of pair (I, J) after the slot rule gave `level` (J <= I assumed
// visible; J > I is 0). text_block: causal_psa_text_block. cap: the key block's cap.
PSA_HD int causal_psa_final_level(int level, int64_t i, int64_t j, int64_t text_block, int cap) {
  if (j > i) return 0;
  if (j == i || j == 0 || i >= text_block || j >= text_block) level = 1;
  if (level > 0 && cap < level) level = cap;
  return level;
}

}  // namespace psa

// methods/ada_bsa_spec.h -- meaning of the adaptive block-sparse (`ada_bsa`) mask builder
// (rainfusion-adabsa spec 3, canonical [PROPOSAL] choices), shared by the CPU builder
// (ada_bsa.cpp) and a later CUDA kernel. Header-only: no containers, no sorting, no CUDA.
#pragma once
#include <cmath>
#include <cstdint>

#include "core/hd.h"

namespace psa {

constexpr int64_t kAdaBlock = 128;                      // mask block, both dims
constexpr int64_t kAdaStride = 8;                       // anti-diagonal stride g
constexpr int64_t kAdaGroupsPerBlock = kAdaBlock / kAdaStride;  // 16 strided rows/cols per block
// Rows with fewer candidates than this are never capped by `sparsity` (spec 3.3 step 6).
constexpr int64_t kAdaMinBlocksForCap = 10;

// Strided groups of a sequence of `len` tokens: ceil(len / 8). Both tails are zero-padded
// (spec 3.8 PROPOSAL): the last group is kept even when partial.
PSA_HD int64_t ada_bsa_groups(int64_t len) { return (len + kAdaStride - 1) / kAdaStride; }

// Anti-diagonal sum of the 8x8 tile (r, c) of Q K^T (spec 3.2, 3.9):
//   sum_j <q[8r + j], k[8c + 7 - j]>, rows at index >= len read as zero.
// q, k: [len, d] fp32 row-major. The caller multiplies by scale / 8.
PSA_HD float ada_bsa_group_dot(const float* q, const float* k, int64_t r, int64_t c,
                               int64_t len, int64_t d) {
  float s = 0.0f;
  for (int64_t j = 0; j < kAdaStride; ++j) {
    const int64_t qi = r * kAdaStride + j, ki = c * kAdaStride + (kAdaStride - 1 - j);
    if (qi >= len || ki >= len) continue;
    for (int64_t e = 0; e < d; ++e) s += q[qi * d + e] * k[ki * d + e];
  }
  return s;
}

// Causal mode (spec 3.6 PROPOSAL, XAttention-style): strided query group r sees strided key
// groups c <= r, each row's softmax runs over those only. Groups never straddle a 128-block,
// so block row I sees key blocks 0..I, the diagonal one partially.
PSA_HD bool ada_bsa_group_visible(int64_t r, int64_t c, bool causal) { return !causal || c <= r; }

// Candidate key blocks of block row I (spec 3.3): nb, or I + 1 when causal.
PSA_HD int64_t ada_bsa_candidates(int64_t row, int64_t nb, bool causal) {
  return causal ? (row + 1 < nb ? row + 1 : nb) : nb;
}

// Causal rows with at most two candidates keep all of them (spec 3.3 step 1).
PSA_HD bool ada_bsa_row_keeps_all(int64_t n, bool causal) { return causal && n <= 2; }

// Columns excluded from the ranking and the CDF mass, then force-kept (spec 3.3 step 2,
// 3.5): the last candidate when keep_recent or non-causal (in non-causal mode it is always
// kept, as upstream), and column 0 when keep_sink.
PSA_HD bool ada_bsa_excluded(int64_t j, int64_t n, bool causal, bool keep_sink,
                             bool keep_recent) {
  return (j == n - 1 && (keep_recent || !causal)) || (j == 0 && keep_sink);
}

// Number of sorted scores the guard is taken from (spec 3.4 PROPOSAL).
// y: the row's n scores (excluded columns set to 0) sorted in descending order.
//  K_cdf = n when tau >= 1, else the smallest k >= 1 with y_0 + ... + y_{k-1} >= tau * total
//          (prefix and total summed in double in sorted order, so the full prefix equals
//          total and K_cdf <= n always);
//  K = min(K_cdf, max(1, floor(n * (1 - sparsity)))) when n >= 10, else K_cdf.
PSA_HD int64_t ada_bsa_keep_count(const float* y, int64_t n, double tau, double sparsity) {
  int64_t kcdf = n;
  if (tau < 1.0) {
    double total = 0.0;
    for (int64_t i = 0; i < n; ++i) total += static_cast<double>(y[i]);
    const double target = tau * total;
    double prefix = 0.0;
    for (int64_t i = 0; i < n; ++i) {
      prefix += static_cast<double>(y[i]);
      if (prefix >= target) {
        kcdf = i + 1;
        break;
      }
    }
  }
  if (n >= kAdaMinBlocksForCap) {
    int64_t kc = static_cast<int64_t>(floor(static_cast<double>(n) * (1.0 - sparsity)));
    if (kc < 1) kc = 1;
    if (kc < kcdf) kcdf = kc;
  }
  return kcdf < 1 ? 1 : kcdf;
}

// Final rule for column j < n of a row (spec 3.3 steps 8-10, 3.9): kept when its score is
// >= the guard y[K-1] (ties kept; the upstream -1e-5 slack is not applied), when excluded
// (force-kept), and column 0 always.
PSA_HD bool ada_bsa_keep(float x, float guard, int64_t j, bool excluded) {
  return j == 0 || excluded || x >= guard;
}

}  // namespace psa

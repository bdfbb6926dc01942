// tests/mask/mask_row_test.cpp -- mask stage: build_mask_row and segments_row (spec 4.6
// format, worked example) and a property test over random rows against a line-by-line
// transcription of the pseudocode of spec 4.3 / 4.4. Host only; no CUDA.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <random>
#include <vector>

#include "mask/mask.h"
#include "mask/mask_spec.h"

namespace {

using psa::kMaskSlots;
using psa::MaskRowParams;

MaskRowParams row_params(psa_mask_mode mode, int64_t bn, int64_t tn, const double* ends) {
  MaskRowParams p;
  p.mode = mode;
  p.block_n = bn;
  p.tile_n = tn;
  for (int s = 0; s < kMaskSlots; ++s) p.ratio_end[s] = ends[s];
  return p;
}

// Spec 4.6 worked example (N = 20, bn = 32, default ratio ends): scores chosen so that the
// rank order is the one of the verified reference row.
TEST(MaskSegments, WorkedExample) {
  const int32_t ranked[20] = {5, 10, 12, 11, 16, 0, 17, 6, 3, 7, 13, 8, 14, 18, 2, 9, 19, 1, 15, 4};
  std::vector<float> scores(20);
  for (int r = 0; r < 20; ++r) scores[ranked[r]] = static_cast<float>(20 - r);
  const double ends[kMaskSlots] = {0.1, 0.15, 0.15, 0.35, 1.0};
  std::vector<int8_t> lv(20);
  std::vector<int32_t> order(20);
  int64_t seg_end[kMaskSlots];
  psa::build_mask_row(scores.data(), 20, row_params(PSA_MASK_MODE_TOPK, 32, 32, ends), lv.data(),
                      order.data(), seg_end);
  std::vector<int32_t> row(psa::segments_width(20), 7);
  psa::segments_row(order.data(), seg_end, 20, row.data());
  const std::vector<int32_t> expected = {5,  10, -1, 12, 11, -1, -1, 16, 0, 17, 6, 3, 7,
                                         13, 8,  -1, 14, 18, 2,  9,  19, 1, 15, 4, -1};
  EXPECT_EQ(row, expected);
  EXPECT_EQ(lv[5], 1);
  EXPECT_EQ(lv[12], 2);
  EXPECT_EQ(lv[16], 8);
  EXPECT_EQ(lv[4], 0);
}

// Ratios that stop short of 1.0: uncovered ranks are level 0, absent from the segments row,
// and the positions after the last separator are 0.
// n = 10, bn = 128 (A(8) = 2), ends .1 .2 .2 .3 .5: L1 [0,1), L2 [1,2), L4 empty,
// L8 raw 3 -> [2,4) after round-up, L0 [4,5); ranks 5..9 uncovered.
TEST(MaskSegments, RatiosBelowOne) {
  std::vector<float> scores(10);
  for (int j = 0; j < 10; ++j) scores[j] = static_cast<float>(j);  // order 9, 8, ..., 0
  const double ends[kMaskSlots] = {0.1, 0.2, 0.2, 0.3, 0.5};
  std::vector<int8_t> lv(10);
  std::vector<int32_t> order(10);
  int64_t seg_end[kMaskSlots];
  psa::build_mask_row(scores.data(), 10, row_params(PSA_MASK_MODE_TOPK, 128, 32, ends), lv.data(),
                      order.data(), seg_end);
  EXPECT_EQ(std::vector<int64_t>(seg_end, seg_end + 5), (std::vector<int64_t>{1, 2, 2, 4, 5}));
  std::vector<int32_t> row(15, 7);
  psa::segments_row(order.data(), seg_end, 10, row.data());
  EXPECT_EQ(row, (std::vector<int32_t>{9, -1, 8, -1, -1, 7, 6, -1, 5, -1, 0, 0, 0, 0, 0}));
  EXPECT_EQ((std::vector<int>(lv.begin(), lv.end())),
            (std::vector<int>{0, 0, 0, 0, 0, 0, 8, 8, 2, 1}));
}

// ---- Property test ---------------------------------------------------------------------

// Spec 4.3 / 4.4 pseudocode, transcribed line by line (reference `A(0) = 0` included).
void reference_ends(const std::vector<float>& sorted, const MaskRowParams& p, int64_t* seg) {
  const int64_t N = static_cast<int64_t>(sorted.size());
  const int levels[kMaskSlots] = {1, 2, 4, 8, 0};
  auto ceil_div = [](int64_t a, int64_t b) { return (a + b - 1) / b; };
  std::vector<float> E(sorted.size());
  float c = 0.0f;
  for (size_t r = 0; r < sorted.size(); ++r) E[r] = (c += sorted[r]);
  for (float& x : E) x /= c;
  int64_t cur = 0;
  for (int s = 0; s < kMaskSlots; ++s) {
    const int lvl = levels[s];
    const double e = p.ratio_end[s];
    int64_t end;
    if (p.mode == PSA_MASK_MODE_TOPK) {
      const int64_t A = lvl == 0 ? 1 : ceil_div(lvl, p.block_n / p.tile_n);
      const int64_t raw = std::min<int64_t>(N, static_cast<int64_t>(N * e));
      const int64_t n = raw - cur;
      if (A > 1 && n > 0) {
        end = std::min(cur + ceil_div(n, A) * A, N);
        if (end == N) end = cur + ((N - cur) / A) * A;
      } else {
        end = raw;
      }
      if (end > cur) cur = end;
    } else {
      const int64_t A = ceil_div(lvl, p.block_n / p.tile_n);
      int64_t cnt = 0;
      for (float x : E) cnt += static_cast<double>(x) <= e + 1e-6;
      const int64_t raw = cnt > 0 ? cnt + 1 : cur;
      if (A > 1) {
        end = std::min(cur + ceil_div(std::max<int64_t>(raw - cur, 0), A) * A, N);
        if (end == N) end = cur + ((N - cur) / A) * A;
      } else {
        end = std::max(std::min(std::max<int64_t>(raw, 0), N), cur);
        if (lvl == 1)
          end = std::max(end, std::min(N, static_cast<int64_t>(N * p.min_full_ratio) + 1));
      }
      cur = end;
    }
    seg[s] = cur;
  }
}

uint64_t test_seed() {
  if (const char* env = std::getenv("PSA_TEST_SEED")) return std::strtoull(env, nullptr, 10);
  return (static_cast<uint64_t>(std::random_device{}()) << 32) ^ std::random_device{}();
}

TEST(MaskRowProperty, RandomRows) {
  const uint64_t seed = test_seed();
  SCOPED_TRACE(testing::Message() << "seed " << seed << " (rerun with PSA_TEST_SEED=" << seed
                                  << ")");
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u01(0.0, 1.0);
  const int64_t tiles[][2] = {{128, 32}, {64, 32}, {32, 32}, {128, 64}, {128, 16}};
  const double preset[kMaskSlots] = {0.1, 0.15, 0.15, 0.35, 1.0};

  for (int iter = 0; iter < 3000; ++iter) {
    const int64_t n = 1 + static_cast<int64_t>(rng() % (iter % 4 == 0 ? 12 : 300));
    const auto& bt = tiles[rng() % 5];
    double ends[kMaskSlots];
    if (iter % 7 == 0) {
      std::copy(preset, preset + kMaskSlots, ends);
    } else {
      for (double& e : ends) e = u01(rng);
      std::sort(ends, ends + kMaskSlots);
      if (rng() % 2) ends[4] = 1.0;
    }
    const psa_mask_mode mode = (iter % 2) ? PSA_MASK_MODE_THRESHOLDBOUND : PSA_MASK_MODE_TOPK;
    MaskRowParams p = row_params(mode, bt[0], bt[1], ends);

    // Quantised scores (many ties) or a softmax-like spread.
    std::vector<float> scores(static_cast<size_t>(n));
    const int q = 1 + static_cast<int>(rng() % 8);
    for (float& s : scores)
      s = (rng() % 2) ? static_cast<float>(std::floor(u01(rng) * q) / q)
                      : static_cast<float>(std::exp(-8.0 * u01(rng)));
    scores[rng() % n] = 1.0f;  // a positive row sum

    std::vector<int8_t> lv(static_cast<size_t>(n));
    std::vector<int32_t> order(static_cast<size_t>(n));
    int64_t seg[kMaskSlots];
    psa::build_mask_row(scores.data(), n, p, lv.data(), order.data(), seg);
    SCOPED_TRACE(testing::Message() << "iter " << iter << " n=" << n << " mode=" << mode
                                    << " bn=" << bt[0] << " tn=" << bt[1]);

    // Order: a permutation, descending, ties by ascending key index.
    std::vector<int32_t> sorted_idx(order);
    std::sort(sorted_idx.begin(), sorted_idx.end());
    for (int64_t j = 0; j < n; ++j) ASSERT_EQ(sorted_idx[j], j);
    for (int64_t r = 0; r + 1 < n; ++r) {
      const float a = scores[order[r]], b = scores[order[r + 1]];
      ASSERT_TRUE(a > b || (a == b && order[r] < order[r + 1])) << "rank " << r;
    }

    // Interval ends: the transcribed pseudocode, non-decreasing within [0, n].
    std::vector<float> sorted(static_cast<size_t>(n));
    for (int64_t r = 0; r < n; ++r) sorted[r] = scores[order[r]];
    int64_t ref[kMaskSlots];
    reference_ends(sorted, p, ref);
    int64_t prev = 0;
    for (int s = 0; s < kMaskSlots; ++s) {
      ASSERT_EQ(seg[s], ref[s]) << "slot " << s;
      ASSERT_GE(seg[s], prev);
      ASSERT_LE(seg[s], n);
      prev = seg[s];
    }
    if (mode == PSA_MASK_MODE_TOPK) {
      int64_t same_n[kMaskSlots];
      psa::topk_segment_ends(n, ends, bt[0], bt[1], same_n);  // identical for every row
      for (int s = 0; s < kMaskSlots; ++s) ASSERT_EQ(seg[s], same_n[s]);
    } else {
      ASSERT_GE(seg[0], std::min(n, psa::truncated_fraction(n, p.min_full_ratio) + 1));
    }

    // Levels: valid, equal to the slot of the rank, counts = interval lengths, aligned.
    int64_t count[9] = {0};
    for (int64_t j = 0; j < n; ++j) {
      ASSERT_TRUE(psa::is_mask_level(lv[j])) << "block " << j << " level " << int(lv[j]);
      ++count[lv[j]];
    }
    for (int64_t r = 0; r < n; ++r) ASSERT_EQ(lv[order[r]], psa::level_of_rank(r, seg));
    prev = 0;
    for (int s = 0; s < 4; ++s) {
      const int lvl = psa::level_of_slot(s);
      ASSERT_EQ(count[lvl], seg[s] - prev) << "level " << lvl;
      // Round-down at the row end also lands on a multiple, so counts are always aligned.
      ASSERT_EQ(count[lvl] % psa::alignment_multiple(lvl, bt[0], bt[1]), 0) << "level " << lvl;
      prev = seg[s];
    }
    ASSERT_EQ(count[0], n - seg[3]);

    // Segments row: each covered rank once, 5 separators, zeros after the last one; with
    // ratios reaching the row end it lists every key block exactly once.
    std::vector<int32_t> row(static_cast<size_t>(psa::segments_width(n)), 7);
    psa::segments_row(order.data(), seg, n, row.data());
    std::vector<int> seen(static_cast<size_t>(n), 0);
    int separators = 0;
    int64_t pos = 0;
    for (; pos < psa::segments_width(n) && separators < kMaskSlots; ++pos) {
      if (row[pos] == -1) {
        ++separators;
      } else {
        ASSERT_GE(row[pos], 0);
        ASSERT_LT(row[pos], n);
        ++seen[row[pos]];
      }
    }
    ASSERT_EQ(separators, kMaskSlots);
    ASSERT_EQ(pos, kMaskSlots + seg[4]);
    for (; pos < psa::segments_width(n); ++pos) ASSERT_EQ(row[pos], 0);
    for (int64_t r = 0; r < n; ++r) ASSERT_EQ(seen[order[r]], r < seg[4] ? 1 : 0);
    if (ends[4] >= 1.0) {
      ASSERT_EQ(seg[4], n);
      for (int v : seen) ASSERT_EQ(v, 1);
    }
  }
}

}  // namespace

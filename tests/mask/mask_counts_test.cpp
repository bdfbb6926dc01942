// tests/mask/mask_counts_test.cpp -- mask stage: the count rules of mask_spec.h (alignment,
// topk, thresholdbound, level-1 floor, tie order) on the hand-worked cases of spec 4.
// Host only; no CUDA.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "mask/mask.h"
#include "mask/mask_spec.h"

namespace {

using psa::alignment_multiple;
using psa::build_mask_row;
using psa::kMaskSlots;
using psa::MaskRowParams;

// Per-level counts {L1, L2, L4, L8, L0} from interval ends; uncovered ranks count as L0.
std::vector<int64_t> slot_counts(const int64_t* seg_end, int64_t n) {
  std::vector<int64_t> c(kMaskSlots);
  int64_t cur = 0;
  for (int s = 0; s < kMaskSlots; ++s) {
    c[s] = seg_end[s] - cur;
    cur = seg_end[s];
  }
  c[kMaskSlots - 1] += n - cur;
  return c;
}

std::vector<int64_t> topk_counts(int64_t n, const double* ratio, int64_t bn, int64_t tn) {
  int64_t seg_end[kMaskSlots];
  psa::topk_segment_ends(n, ratio, bn, tn, seg_end);
  return slot_counts(seg_end, n);
}

MaskRowParams row_params(psa_mask_mode mode, int64_t bn, int64_t tn, std::vector<double> ends) {
  MaskRowParams p;
  p.mode = mode;
  p.block_n = bn;
  p.tile_n = tn;
  for (int s = 0; s < kMaskSlots; ++s) p.ratio_end[s] = ends[s];
  return p;
}

std::vector<int> levels_of(const std::vector<float>& scores, const MaskRowParams& p) {
  std::vector<int8_t> lv(scores.size());
  build_mask_row(scores.data(), static_cast<int64_t>(scores.size()), p, lv.data(), nullptr,
                 nullptr);
  return std::vector<int>(lv.begin(), lv.end());
}

TEST(MaskCounts, SlotLevels) {
  const int expected[kMaskSlots] = {1, 2, 4, 8, 0};
  for (int s = 0; s < kMaskSlots; ++s) EXPECT_EQ(psa::level_of_slot(s), expected[s]);
}

// Spec 4.2 table: A(1), A(2), A(4), A(8) per (bn, tn); A(0) = 1 always.
TEST(MaskCounts, AlignmentTable) {
  struct Row {
    int64_t bn, tn;
    int64_t a[4];
  };
  const Row table[] = {{128, 32, {1, 1, 1, 2}},
                       {64, 32, {1, 1, 2, 4}},
                       {32, 32, {1, 2, 4, 8}},
                       {128, 64, {1, 1, 2, 4}},
                       {128, 16, {1, 1, 1, 1}}};
  const int levels[4] = {1, 2, 4, 8};
  for (const Row& r : table) {
    for (int k = 0; k < 4; ++k)
      EXPECT_EQ(alignment_multiple(levels[k], r.bn, r.tn), r.a[k])
          << "bn=" << r.bn << " tn=" << r.tn << " level " << levels[k];
    EXPECT_EQ(alignment_multiple(0, r.bn, r.tn), 1);
  }
}

// Spec 4.3 worked example: N = 20, ratio ends 1:.1 2:.15 4:.15 8:.35 0:1.
TEST(MaskCounts, TopkWorkedExample) {
  const double ends[kMaskSlots] = {0.1, 0.15, 0.15, 0.35, 1.0};
  EXPECT_EQ(topk_counts(20, ends, 128, 32), (std::vector<int64_t>{2, 1, 0, 4, 13}));
  // Level 2 rounds 1 up to 2; level 8 rounds 3 up to 8 (its quota doubled by alignment).
  EXPECT_EQ(topk_counts(20, ends, 32, 32), (std::vector<int64_t>{2, 2, 0, 8, 8}));
}

// N*e in double, truncated toward zero: 3*0.1 = 0.30000000000000004 -> 0,
// 139*0.15 = 20.849999999999998 -> 20.
TEST(MaskCounts, TopkDoubleProducts) {
  EXPECT_EQ(psa::truncated_fraction(3, 0.1), 0);
  EXPECT_EQ(psa::truncated_fraction(139, 0.15), 20);
  const double ends[kMaskSlots] = {0.15, 0.15, 0.15, 0.15, 1.0};
  EXPECT_EQ(topk_counts(139, ends, 128, 32), (std::vector<int64_t>{20, 0, 0, 0, 119}));
  const double tenth[kMaskSlots] = {0.1, 0.1, 0.1, 0.1, 1.0};
  EXPECT_EQ(topk_counts(3, tenth, 128, 32), (std::vector<int64_t>{0, 0, 0, 0, 3}));
}

// Round up, and round down when the round-up reaches the row end.
TEST(MaskCounts, TopkRoundDownAtRowEnd) {
  // bn=32: A(8) = 8. N = 10, level 8 wants ranks [1, 5): round-up to 8 ends at 9 < 10.
  const double a[kMaskSlots] = {0.1, 0.1, 0.1, 0.5, 1.0};
  EXPECT_EQ(topk_counts(10, a, 32, 32), (std::vector<int64_t>{1, 0, 0, 8, 1}));
  // N = 7: level 8 wants 3, the round-up to 8 passes the row end -> rounded down to 0.
  EXPECT_EQ(topk_counts(7, a, 32, 32), (std::vector<int64_t>{0, 0, 0, 0, 7}));
  // N = 8: the round-up ends exactly at the row end -> round down keeps all 8.
  EXPECT_EQ(topk_counts(8, a, 32, 32), (std::vector<int64_t>{0, 0, 0, 8, 0}));
  // Default ratios with N <= 3 (bn=64): every level rounds to 0 (spec 4.3, empty row).
  const double d[kMaskSlots] = {0.1, 0.15, 0.15, 0.35, 1.0};
  EXPECT_EQ(topk_counts(3, d, 64, 32), (std::vector<int64_t>{0, 0, 0, 0, 3}));
  // N = 4 happens to yield four level-8 blocks.
  EXPECT_EQ(topk_counts(4, d, 64, 32), (std::vector<int64_t>{0, 0, 0, 4, 0}));
}

// Spec 4.4 worked example: row [.5,.2,.1,.1,.05,.05], ratio ends 1:.4 2:.5 4:.6 8:.8 0:1.
// In fp32 the running sums are .5, .7, .8, .9, .95, 1 up to ~1e-7 and the total is the last
// one, so E = [.5, .7, .8, .9, .95, 1] within 2 ulp; every threshold e + 1e-6 is > 1e-7 away
// from every E[r] (E[0] = .5 vs .500001, E[2] ~ .8 vs .800001), so the counts are those of
// exact arithmetic and fp32 changes none of the three results:
//   cnt(.4)=0 -> L1 gets only its floor min(6, trunc(.36)+1) = 1; cnt(.5)=1 -> raw 2;
//   cnt(.6)=1 -> raw 2; cnt(.8)=3 -> raw 4; cnt(1)=6 -> raw 7, clamped to 6.
TEST(MaskCounts, ThresholdboundWorkedExample) {
  const std::vector<float> row = {0.5f, 0.2f, 0.1f, 0.1f, 0.05f, 0.05f};
  std::vector<float> mass(row);
  psa::relative_cumulative_mass(mass.data(), 6, mass.data());
  const double expected_mass[6] = {0.5, 0.7, 0.8, 0.9, 0.95, 1.0};
  for (int r = 0; r < 6; ++r) EXPECT_NEAR(mass[r], expected_mass[r], 2e-7) << "rank " << r;
  EXPECT_EQ(mass[5], 1.0f);

  const std::vector<double> ends = {0.4, 0.5, 0.6, 0.8, 1.0};
  // bn=128: A(8) = 2, level 8 takes ranks 2, 3 exactly.
  EXPECT_EQ(levels_of(row, row_params(PSA_MASK_MODE_THRESHOLDBOUND, 128, 32, ends)),
            (std::vector<int>{1, 2, 8, 8, 0, 0}));
  // bn=64: A(8) = 4, ranks [2, 4) round up to [2, 6), which is the row end -> round down
  // keeps (6-2)/4*4 = 4 blocks.
  EXPECT_EQ(levels_of(row, row_params(PSA_MASK_MODE_THRESHOLDBOUND, 64, 32, ends)),
            (std::vector<int>{1, 2, 8, 8, 8, 8}));
  // bn=32: A(2) = 2 rounds level 2 up to ranks [1, 3); level 8 needs 8, 3 remain -> 0.
  EXPECT_EQ(levels_of(row, row_params(PSA_MASK_MODE_THRESHOLDBOUND, 32, 32, ends)),
            (std::vector<int>{1, 2, 2, 0, 0, 0}));
}

// Level-1 floor min(N, trunc(N * 0.06) + 1): N = 100 -> 7, even when one block holds all mass.
TEST(MaskCounts, ThresholdboundLevelOneFloor) {
  std::vector<float> row(100, 0.0f);
  row[37] = 1.0f;
  MaskRowParams p = row_params(PSA_MASK_MODE_THRESHOLDBOUND, 128, 32, {0.4, 0.5, 0.6, 0.8, 1.0});
  std::vector<int8_t> lv(100);
  std::vector<int32_t> order(100);
  int64_t seg_end[kMaskSlots];
  build_mask_row(row.data(), 100, p, lv.data(), order.data(), seg_end);
  EXPECT_EQ(slot_counts(seg_end, 100), (std::vector<int64_t>{7, 0, 0, 0, 93}));
  // Top block first, then ties in ascending key order.
  EXPECT_EQ(order[0], 37);
  for (int r = 1; r < 7; ++r) EXPECT_EQ(order[r], r - 1);
  EXPECT_EQ(lv[37], 1);
  EXPECT_EQ(lv[5], 1);
  EXPECT_EQ(lv[6], 0);

  // The floor is capped at N, and topk has no floor.
  std::vector<float> one = {1.0f};
  EXPECT_EQ(levels_of(one, p), (std::vector<int>{1}));
  EXPECT_EQ(levels_of(one, row_params(PSA_MASK_MODE_TOPK, 128, 32, {0.1, 0.15, 0.15, 0.35, 1.0})),
            (std::vector<int>{0}));
}

// A top block that alone exceeds e leaves the slot empty (cnt = 0), not the whole row.
TEST(MaskCounts, ThresholdboundCountZeroKeepsCursor) {
  const int64_t cnt[kMaskSlots] = {0, 0, 3, 0, 10};
  int64_t seg_end[kMaskSlots];
  psa::thresholdbound_ends_from_counts(cnt, 10, 128, 32, 0.06, seg_end);
  // L1 floor 1; L2 empty; L4 -> raw 4; L8 cnt 0 -> empty; L0 raw 11 -> 10.
  const int64_t expected[kMaskSlots] = {1, 1, 4, 4, 10};
  for (int s = 0; s < kMaskSlots; ++s) EXPECT_EQ(seg_end[s], expected[s]) << "slot " << s;
}

// Equal scores: the lower key index ranks first (stable descending sort), NaN ranks last.
TEST(MaskCounts, TiesByLowerIndex) {
  const std::vector<float> scores = {0.25f, 0.5f, 0.25f, 0.5f, 0.0f, 0.25f};
  MaskRowParams p = row_params(PSA_MASK_MODE_TOPK, 128, 32, {0.5, 0.5, 0.5, 0.5, 1.0});
  std::vector<int8_t> lv(6);
  std::vector<int32_t> order(6);
  build_mask_row(scores.data(), 6, p, lv.data(), order.data(), nullptr);
  EXPECT_EQ(order, (std::vector<int32_t>{1, 3, 0, 2, 5, 4}));
  EXPECT_EQ((std::vector<int>(lv.begin(), lv.end())), (std::vector<int>{1, 1, 0, 1, 0, 0}));

  EXPECT_TRUE(psa::ranks_before(1.0f, 5, 1.0f, 6));
  EXPECT_FALSE(psa::ranks_before(1.0f, 6, 1.0f, 5));
  EXPECT_TRUE(psa::ranks_before(-1.0f, 9, NAN, 0));
  EXPECT_FALSE(psa::ranks_before(NAN, 0, -1.0f, 9));
  EXPECT_TRUE(psa::ranks_before(NAN, 0, NAN, 1));
  EXPECT_TRUE(psa::ranks_before(0.0f, 0, -0.0f, 1));
  EXPECT_TRUE(psa::ranks_before(-0.0f, 0, 0.0f, 1));
}

// A row without usable mass (all zero) is treated as uniform mass.
TEST(MaskCounts, ZeroRowUsesUniformMass) {
  std::vector<float> mass(4, 0.0f);
  psa::relative_cumulative_mass(mass.data(), 4, mass.data());
  EXPECT_EQ(mass, (std::vector<float>{0.25f, 0.5f, 0.75f, 1.0f}));
}

TEST(MaskCounts, RowParamsFromConfig) {
  psa::Config c;
  c.mask_mode = PSA_MASK_MODE_THRESHOLDBOUND;
  c.block_n = 32;
  c.tile_n = 16;
  const double ends[kMaskSlots] = {0.2, 0.3, 0.4, 0.5, 0.9};
  for (int s = 0; s < kMaskSlots; ++s) c.ratio_end[s] = ends[s];
  c.min_full_ratio = 0.1;
  MaskRowParams p = psa::mask_row_params(c);
  EXPECT_EQ(p.mode, PSA_MASK_MODE_THRESHOLDBOUND);
  EXPECT_EQ(p.block_n, 32);
  EXPECT_EQ(p.tile_n, 16);
  for (int s = 0; s < kMaskSlots; ++s) EXPECT_EQ(p.ratio_end[s], ends[s]);
  EXPECT_EQ(p.min_full_ratio, 0.1);
}

}  // namespace

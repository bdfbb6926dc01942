// tests/mask/postprocess_test.cpp -- mask stage: postprocess_levels (causal, text SPAN /
// REFERENCE_SUFFIX, sim cap) on hand-worked level maps, and causal visibility against a
// token-by-token brute force. Host only; no CUDA.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "mask/mask.h"
#include "mask/mask_spec.h"

namespace {

using psa::MaskPostParams;
using Map = std::vector<std::vector<int>>;

Map run(int64_t mq, int64_t nk, int initial, const MaskPostParams& p) {
  std::vector<int8_t> lv(static_cast<size_t>(mq * nk), static_cast<int8_t>(initial));
  psa::postprocess_levels(lv.data(), mq, nk, p);
  Map m(static_cast<size_t>(mq));
  for (int64_t i = 0; i < mq; ++i) m[i].assign(lv.begin() + i * nk, lv.begin() + (i + 1) * nk);
  return m;
}

MaskPostParams geometry(int64_t bm, int64_t bn, int64_t lq, int64_t lk, bool causal) {
  MaskPostParams p;
  p.block_m = bm;
  p.block_n = bn;
  p.lq = lq;
  p.lk = lk;
  p.causal = causal;
  return p;
}

// Lq = Lk = 300, bm = 128, bn = 64 (partial last blocks on both sides): Mq = 3, Nk = 5.
// Block 0 = rows 0..127 sees keys <= 127 (blocks 0, 1, both on the diagonal band);
// block 1 = rows 128..255, band [128, 255] = blocks 2, 3; block 2 = rows 256..299, band
// [256, 299] = block 4.
TEST(MaskPostprocess, CausalSquare) {
  MaskPostParams p = geometry(128, 64, 300, 300, true);
  EXPECT_EQ(run(3, 5, 8, p), (Map{{1, 1, 0, 0, 0}, {8, 8, 1, 1, 0}, {8, 8, 8, 8, 1}}));
  EXPECT_EQ(psa::causal_visible_blocks(0, 128, 64, 300, 300), 2);
  EXPECT_EQ(psa::causal_visible_blocks(1, 128, 64, 300, 300), 4);
  EXPECT_EQ(psa::causal_visible_blocks(2, 128, 64, 300, 300), 5);
}

// Lq = 100 < Lk = 300, bm = bn = 64: offset 200. Block 0 = rows 0..63 sees keys <= 263
// (all 5 blocks), band [200, 263] = blocks 3, 4; block 1 = rows 64..99, band [264, 299].
TEST(MaskPostprocess, CausalShorterQueries) {
  MaskPostParams p = geometry(64, 64, 100, 300, true);
  EXPECT_EQ(run(2, 5, 4, p), (Map{{4, 4, 4, 1, 1}, {4, 4, 4, 4, 1}}));
  EXPECT_EQ(psa::causal_visible_blocks(0, 64, 64, 100, 300), 5);
  EXPECT_EQ(psa::causal_visible_blocks(1, 64, 64, 100, 300), 5);
}

// Lq = 300 > Lk = 100, bm = bn = 64: offset -200. Blocks 0..2 (rows 0..191) see nothing;
// block 3 = rows 192..255 sees keys <= 55 (rows 192..199 none), band [0, 55] = block 0;
// block 4 = rows 256..299, band [56, 99] = blocks 0 and 1.
TEST(MaskPostprocess, CausalLongerQueriesAndEmptyRows) {
  MaskPostParams p = geometry(64, 64, 300, 100, true);
  EXPECT_EQ(run(5, 2, 2, p), (Map{{0, 0}, {0, 0}, {0, 0}, {1, 0}, {1, 1}}));
  const int64_t expected[5] = {0, 0, 0, 1, 2};
  for (int64_t i = 0; i < 5; ++i)
    EXPECT_EQ(psa::causal_visible_blocks(i, 64, 64, 300, 100), expected[i]) << "block " << i;
}

// Token-level brute force on random geometries: a key block survives iff some row of the
// query block sees some key of it; it is level 1 iff it holds the diagonal key x + offset
// of some row x that has one.
TEST(MaskPostprocess, CausalMatchesTokenBruteForce) {
  std::mt19937 rng(std::random_device{}());
  const int64_t sizes[] = {16, 32, 64, 128};
  for (int iter = 0; iter < 200; ++iter) {
    const int64_t bm = sizes[rng() % 4], bn = sizes[rng() % 4];
    const int64_t lq = 1 + rng() % 400, lk = 1 + rng() % 400;
    const int64_t mq = (lq + bm - 1) / bm, nk = (lk + bn - 1) / bn, off = lk - lq;
    SCOPED_TRACE(testing::Message() << "bm=" << bm << " bn=" << bn << " lq=" << lq << " lk=" << lk);
    Map got = run(mq, nk, 8, geometry(bm, bn, lq, lk, true));
    for (int64_t i = 0; i < mq; ++i) {
      std::vector<int> want(static_cast<size_t>(nk), 0);
      int64_t visible = 0;
      for (int64_t x = i * bm; x < std::min((i + 1) * bm, lq); ++x) {
        for (int64_t t = 0; t < lk && t <= x + off; ++t) {
          if (want[t / bn] == 0) want[t / bn] = 8;
          visible = std::max(visible, t / bn + 1);
        }
        if (x + off >= 0) want[(x + off) / bn] = 1;
      }
      ASSERT_EQ(got[i], want) << "query block " << i;
      ASSERT_EQ(psa::causal_visible_blocks(i, bm, bn, lq, lk), visible) << "query block " << i;
    }
  }
}

// SPAN: key blocks intersecting [250, 280) (blocks 3, 4 at bn = 64) -> 1 in every row; with
// text_rows_dense also the query blocks intersecting it (1, 2 at bm = 128) -> all 1.
TEST(MaskPostprocess, TextSpan) {
  MaskPostParams p = geometry(128, 64, 300, 300, false);
  p.text_begin = 250;
  p.text_end = 280;
  EXPECT_EQ(run(3, 5, 4, p), (Map{{4, 4, 4, 1, 1}, {4, 4, 4, 1, 1}, {4, 4, 4, 1, 1}}));
  p.text_rows_dense = true;
  EXPECT_EQ(run(3, 5, 4, p), (Map{{4, 4, 4, 1, 1}, {1, 1, 1, 1, 1}, {1, 1, 1, 1, 1}}));
  p.text_end = p.text_begin;  // no text
  EXPECT_EQ(run(3, 5, 4, p), (Map{{4, 4, 4, 4, 4}, {4, 4, 4, 4, 4}, {4, 4, 4, 4, 4}}));
  // A span inside one block marks that block only.
  p.text_begin = 70;
  p.text_end = 71;
  p.text_rows_dense = false;
  EXPECT_EQ(run(1, 5, 0, p), (Map{{0, 1, 0, 0, 0}}));
}

// REFERENCE_SUFFIX: the last ceil(T / bn) key blocks, whatever the span's position; rows
// are not special-cased even with text_rows_dense.
TEST(MaskPostprocess, TextReferenceSuffix) {
  MaskPostParams p = geometry(128, 64, 300, 300, false);
  p.text_rule = PSA_TEXT_RULE_REFERENCE_SUFFIX;
  p.text_rows_dense = true;
  p.text_begin = 0;
  p.text_end = 30;  // T = 30 -> 1 block
  EXPECT_EQ(run(2, 5, 8, p), (Map{{8, 8, 8, 8, 1}, {8, 8, 8, 8, 1}}));
  p.text_end = 130;  // T = 130 -> 3 blocks
  EXPECT_EQ(run(1, 5, 8, p), (Map{{8, 8, 1, 1, 1}}));
  p.text_end = 1000;  // more blocks than there are
  EXPECT_EQ(run(1, 5, 0, p), (Map{{1, 1, 1, 1, 1}}));
}

// Sim cap: min(level, cap); skip stays skip, level 1 stays 1.
TEST(MaskPostprocess, SimCapMin) {
  const int8_t cap[5] = {2, 8, 1, 4, 1};
  MaskPostParams p = geometry(128, 64, 300, 300, false);
  p.sim_cap = cap;
  std::vector<int8_t> lv = {8, 4, 2, 1, 0, 8, 8, 8, 8, 8};
  psa::postprocess_levels(lv.data(), 2, 5, p);
  EXPECT_EQ(lv, (std::vector<int8_t>{2, 4, 1, 1, 0, 2, 8, 1, 4, 1}));
}

// All three in order. Text in key block 0 (text first) and in block 4 (text last): under
// causal a text block with no visible key stays 0; the cap never touches forced level-1s.
TEST(MaskPostprocess, CausalThenTextThenCap) {
  const int8_t cap[5] = {2, 2, 2, 2, 2};
  MaskPostParams p = geometry(128, 64, 300, 300, true);
  p.sim_cap = cap;
  p.text_begin = 0;
  p.text_end = 64;
  EXPECT_EQ(run(3, 5, 8, p), (Map{{1, 1, 0, 0, 0}, {1, 2, 1, 1, 0}, {1, 2, 2, 2, 1}}));
  p.text_begin = 260;
  p.text_end = 300;
  p.text_rows_dense = true;  // query block 2 intersects the text
  EXPECT_EQ(run(3, 5, 8, p), (Map{{1, 1, 0, 0, 0}, {2, 2, 1, 1, 0}, {1, 1, 1, 1, 1}}));
}

}  // namespace

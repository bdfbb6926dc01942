// tests/methods/rf_v2_mask_test.cpp -- rf_v2 mask builder (rainfusion-adabsa spec 2.3-2.5,
// 2.9) on hand-worked inputs: tile-constant q/k make every block mean, logit and top-K
// choice computable by hand (ties, first-frame sink, text tiles including a mixed
// video/text tile, partial last tile, sparsity 0 and just below 1) and error paths.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "common/test_util.h"
#include "methods/method_test_util.h"

namespace {

using psa_test::grid;
using psa_test::levels_of;
using psa_test::mask_string;
using psa_test::method_config;
using psa_test::plan_for;

constexpr int64_t kD = 4;

// [len, kD] rows; every row of 128-tile i is value[i] * e0 (the partial last tile too).
std::vector<float> tiled(int64_t len, const std::vector<float>& value) {
  std::vector<float> x(static_cast<size_t>(len * kD), 0.0f);
  for (int64_t t = 0; t < len; ++t) x[static_cast<size_t>(t * kD)] = value[static_cast<size_t>(t / 128)];
  return x;
}

std::string repeat_rows(const std::string& first, const std::string& row, int64_t n) {
  std::string s = first;
  for (int64_t i = 1; i < n; ++i) s += "/" + row;
  return s;
}

// Grid 4 x 8 x 16: one 128-token frame per tile, so the sink is tile 0 and nb = 4. With
// q = e0 and tile means c_j * e0 every row's logits are c_j (scale 1).
struct FourTiles {
  psa::VideoGeometry geo = grid(4, 8, 16);
  int64_t len = 512;
  std::string run(double sparsity, const std::vector<float>& qv, const std::vector<float>& kv) {
    const psa::Config cfg = method_config(PSA_METHOD_RF_V2, sparsity);
    const psa::Plan plan = plan_for(cfg, geo, len, kD, 1.0);
    EXPECT_EQ(plan.k_blocks, 4);
    return mask_string(levels_of(plan, tiled(len, qv), tiled(len, kv)), 4);
  }
};

TEST(RfV2Mask, TopKPerRowPlusFirstFrameSink) {
  FourTiles f;
  // K = ceil(4 * 0.5) = 2: columns 1 and 2 by score, column 0 and row 0 by the sink.
  EXPECT_EQ(f.run(0.5, {1, 1, 1, 1}, {0, 3, 2, 1}), "1111/1110/1110/1110");
}

TEST(RfV2Mask, TiesAtTheThresholdAreAllKept) {
  FourTiles f;
  // Threshold = 2nd largest = 2, held by columns 2 and 3.
  EXPECT_EQ(f.run(0.5, {1, 1, 1, 1}, {0, 3, 2, 2}), "1111/1111/1111/1111");
}

TEST(RfV2Mask, SelectionIsPerRow) {
  FourTiles f;
  // Row 3 has q = -e0: its logits are -c, so its top-2 are columns 0 and 3.
  EXPECT_EQ(f.run(0.5, {1, 1, 1, -1}, {0, 3, 2, 1}), "1111/1110/1110/1001");
}

TEST(RfV2Mask, SparsityZeroIsDense) {
  FourTiles f;
  EXPECT_EQ(f.run(0.0, {1, 1, 1, -1}, {0, 3, 2, 1}), "1111/1111/1111/1111");
}

TEST(RfV2Mask, SparsityJustBelowOneKeepsOneBlockPlusForced) {
  FourTiles f;
  EXPECT_EQ(f.run(0.999, {1, 1, 1, 1}, {0, 3, 2, 1}), "1111/1100/1100/1100");
  EXPECT_EQ(f.run(std::nextafter(1.0, 0.0), {1, 1, 1, 1}, {0, 3, 2, 1}), "1111/1100/1100/1100");
}

TEST(RfV2Mask, EveryTileHoldingTextIsForcedIncludingTheMixedOne) {
  // Grid 3 x 8 x 12 (unaligned) + 100 text tokens: Nv = 288, S = 388, nb = 4. Tile 2 holds
  // video 256..287 and text 288..383, tile 3 text only. Forced: tile 0 (sink, h*w = 96)
  // and tiles 2, 3 (text); only pair (1, 1) is decided by score. Upstream's rule (the last
  // ceil(100/128) = 1 block) would also leave (1, 2) and (2, 1) to the score.
  const psa::Config cfg = method_config(PSA_METHOD_RF_V2, 0.9);  // K = ceil(0.4) = 1
  const psa::Plan plan = plan_for(cfg, grid(3, 8, 12, 100, PSA_TEXT_FIRST), 388, kD, 1.0);
  ASSERT_EQ(plan.k_blocks, 4);
  EXPECT_EQ(plan.text_begin, 288);
  EXPECT_EQ(plan.text_end, 388);
  const auto lv = levels_of(plan, tiled(388, {1, 1, 1, 1}), tiled(388, {0, -5, -5, 0}));
  EXPECT_EQ(mask_string(lv, 4), "1111/1011/1111/1111");
}

TEST(RfV2Mask, SinkSpansFrameOneAndLastTileMeanUsesItsMembers) {
  // Grid 3 x 12 x 16: h*w = 192 -> F = 2 (tile 1 also holds frame-1 tokens); Nv = 576,
  // nb = 5, tile 4 has 64 tokens. K = ceil(5 * 0.19999999999999996) = 1. Tile 4's mean is
  // 3 (> tile 3's 2); dividing by 128 instead of 64 would make it 1.5 and pick tile 3.
  const psa::Config cfg = method_config(PSA_METHOD_RF_V2, 0.8);
  const psa::Plan plan = plan_for(cfg, grid(3, 12, 16), 576, kD, 1.0);
  ASSERT_EQ(plan.k_blocks, 5);
  const auto lv = levels_of(plan, tiled(576, {1, 1, 1, 1, 1}), tiled(576, {-9, -9, 1, 2, 3}));
  EXPECT_EQ(mask_string(lv, 5), repeat_rows("11111/11111", "11001", 4));
}

TEST(RfV2Mask, SingleUnalignedImageAndSmallGridsRun) {
  // t = 1 with h, w not multiples of 8 fails upstream; here it is frame 0 in raster order.
  std::mt19937_64 rng(psa_test::fresh_seed());
  struct G {
    int64_t t, h, w, text;
  };
  for (const G g : {G{1, 30, 52, 0}, G{1, 30, 52, 40}, G{2, 7, 5, 0}, G{3, 16, 9, 130}}) {
    const int64_t len = g.t * g.h * g.w + g.text;
    const psa::Config cfg = method_config(PSA_METHOD_RF_V2, 0.8);
    const psa::Plan plan = plan_for(cfg, grid(g.t, g.h, g.w, g.text, PSA_TEXT_LAST), len, 16);
    const auto lv = levels_of(plan, psa_test::random_vec(rng, size_t(len * 16)),
                              psa_test::random_vec(rng, size_t(len * 16)));
    for (int8_t l : lv) EXPECT_TRUE(l == 0 || l == 1);
    // Rows and columns of the sink are dense.
    const int64_t nb = plan.k_blocks, sink = (g.h * g.w + 127) / 128;
    for (int64_t i = 0; i < nb; ++i)
      for (int64_t j = 0; j < std::min(sink, nb); ++j) {
        EXPECT_EQ(lv[static_cast<size_t>(i * nb + j)], 1);
        EXPECT_EQ(lv[static_cast<size_t>(j * nb + i)], 1);
      }
  }
}

TEST(RfV2Mask, ErrorsNameTheProblem) {
  const psa::Config cfg = method_config(PSA_METHOD_RF_V2, 0.5);
  std::vector<float> x(256 * kD, 0.0f);
  psa_status st = PSA_OK;
  // No video grid on the plan.
  const psa::Plan no_grid = plan_for(cfg, psa::VideoGeometry{}, 256, kD);
  levels_of(no_grid, x, x, &st);
  EXPECT_EQ(st, PSA_ERR_INVALID_STATE);
  EXPECT_NE(std::string(psa_last_error_message()).find("video grid"), std::string::npos);
  // Blocks other than 128 x 128 (a plan built in C++ past validation).
  psa::Plan p64 = plan_for(cfg, grid(4, 8, 8), 256, kD);
  p64.block_n = 64;
  levels_of(p64, x, x, &st);
  EXPECT_EQ(st, PSA_ERR_UNSUPPORTED);
  EXPECT_NE(std::string(psa_last_error_message()).find("128"), std::string::npos);
  // Cross-attention lengths.
  psa::Plan cross = plan_for(cfg, grid(4, 8, 8), 256, kD);
  cross.problem.len_q = 128;
  levels_of(cross, x, x, &st);
  EXPECT_EQ(st, PSA_ERR_INVALID_SHAPE);
  EXPECT_NE(std::string(psa_last_error_message()).find("seq_len"), std::string::npos);
}

}  // namespace

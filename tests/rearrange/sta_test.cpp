// tests/rearrange/sta_test.cpp -- rearrange stage: the STA tile-major order (spec 7.3)
// against a brute-force walk of the tiles. Host only; no CUDA.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "rearrange/rearrange.h"

namespace {

// Walks tiles in raster order (time slowest), then the tokens of each tile in raster order.
std::vector<int64_t> brute_force_sta(int64_t W, int64_t H, int64_t D, int64_t tT, int64_t tH,
                                     int64_t tW) {
  std::vector<int64_t> f;
  for (int64_t zT = 0; zT < D / tT; ++zT)
    for (int64_t yT = 0; yT < H / tH; ++yT)
      for (int64_t xT = 0; xT < W / tW; ++xT)
        for (int64_t zi = 0; zi < tT; ++zi)
          for (int64_t yi = 0; yi < tH; ++yi)
            for (int64_t xi = 0; xi < tW; ++xi) {
              const int64_t x = xT * tW + xi, y = yT * tH + yi, z = zT * tT + zi;
              f.push_back(x + W * (y + H * z));
            }
  return f;
}

TEST(Sta, MatchesBruteForce) {
  struct Case {
    int64_t W, H, D, tT, tH, tW;
  };
  const Case cases[] = {
      {8, 6, 4, 2, 3, 4},    {16, 16, 4, 2, 8, 8}, {12, 10, 6, 3, 5, 2},
      {80, 48, 18, 2, 8, 8}, {5, 7, 3, 1, 1, 1},   {6, 4, 2, 2, 4, 6},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(psa::sta_order(c.W, c.H, c.D, c.tT, c.tH, c.tW),
              brute_force_sta(c.W, c.H, c.D, c.tT, c.tH, c.tW))
        << c.W << "x" << c.H << "x" << c.D << " tile " << c.tT << "," << c.tH << "," << c.tW;
  }
}

TEST(Sta, UnitTileAndWholeGridTileAreRaster) {
  std::vector<int64_t> raster(5 * 7 * 3);
  for (size_t i = 0; i < raster.size(); ++i) raster[i] = static_cast<int64_t>(i);
  EXPECT_EQ(psa::sta_order(5, 7, 3, 1, 1, 1), raster);
  EXPECT_EQ(psa::sta_order(5, 7, 3, 3, 7, 5), raster);
}

// A tile only along width regroups each row into column chunks: checked by hand.
TEST(Sta, HandCheckedSmallCase) {
  // W=4, H=2, D=1, tile (1, 2, 2): tiles are columns {0,1} and {2,3} over both rows.
  EXPECT_EQ(psa::sta_order(4, 2, 1, 1, 2, 2), (std::vector<int64_t>{0, 1, 4, 5, 2, 3, 6, 7}));
}

TEST(Sta, NonDivisibleOrBadTileGivesEmpty) {
  EXPECT_TRUE(psa::sta_order(45, 30, 13, 2, 8, 8).empty());  // CogVideoX 13 frames, YAML tile
  EXPECT_TRUE(psa::sta_order(8, 8, 4, 2, 8, 0).empty());
  EXPECT_TRUE(psa::sta_order(8, 8, 0, 1, 1, 1).empty());
}

}  // namespace

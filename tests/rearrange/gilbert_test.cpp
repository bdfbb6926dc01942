// tests/rearrange/gilbert_test.cpp -- rearrange stage: the Gilbert curve against spec 7.1
// (exact vectors and sha256 digests of the reference) and its structural properties.
// Host only; no CUDA.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "rearrange/rearrange.h"
#include "sha256.h"

namespace {

using psa::gilbert3d_order;

struct Grid {
  int64_t W, H, D;
};

// Production grids of spec 8.1 (W x H x D), plus 52x30x21 (the 21x30x52 t,h,w example).
const Grid kProductionGrids[] = {{45, 30, 13}, {80, 45, 18}, {52, 30, 21},
                                 {85, 48, 11}, {40, 22, 31}, {80, 48, 18}};

std::string grid_name(const Grid& g) {
  return std::to_string(g.W) + "x" + std::to_string(g.H) + "x" + std::to_string(g.D);
}

::testing::AssertionResult is_permutation_of_grid(const std::vector<int64_t>& f, const Grid& g) {
  const int64_t n = g.W * g.H * g.D;
  if (static_cast<int64_t>(f.size()) != n) {
    return ::testing::AssertionFailure() << grid_name(g) << ": length " << f.size() << ", expected "
                                         << n;
  }
  std::vector<char> seen(static_cast<size_t>(n), 0);
  for (size_t i = 0; i < f.size(); ++i) {
    if (f[i] < 0 || f[i] >= n || seen[static_cast<size_t>(f[i])]) {
      return ::testing::AssertionFailure() << grid_name(g) << ": F[" << i << "] = " << f[i]
                                           << " out of range or repeated";
    }
    seen[static_cast<size_t>(f[i])] = 1;
  }
  return ::testing::AssertionSuccess();
}

struct StepStats {
  int64_t non_unit = 0;   // steps whose Manhattan length is not 1
  int64_t max_coord = 0;  // largest change of a single coordinate in one step
  int64_t max_l1 = 0;     // largest Manhattan length of one step
};

StepStats step_stats(const std::vector<int64_t>& f, const Grid& g) {
  StepStats s;
  for (size_t i = 1; i < f.size(); ++i) {
    const int64_t a = f[i - 1], b = f[i];
    const int64_t dx = std::llabs(a % g.W - b % g.W);
    const int64_t dy = std::llabs((a / g.W) % g.H - (b / g.W) % g.H);
    const int64_t dz = std::llabs(a / (g.W * g.H) - b / (g.W * g.H));
    if (dx + dy + dz != 1) ++s.non_unit;
    s.max_coord = std::max({s.max_coord, dx, dy, dz});
    s.max_l1 = std::max(s.max_l1, dx + dy + dz);
  }
  return s;
}

std::string joined(const std::vector<int64_t>& f) {
  std::string s;
  for (size_t i = 0; i < f.size(); ++i) {
    if (i) s += ',';
    s += std::to_string(f[i]);
  }
  return s;
}

TEST(Gilbert, PermutationOfEverySmallGrid) {
  for (int64_t W = 1; W <= 8; ++W)
    for (int64_t H = 1; H <= 8; ++H)
      for (int64_t D = 1; D <= 6; ++D) {
        const Grid g{W, H, D};
        EXPECT_TRUE(is_permutation_of_grid(gilbert3d_order(W, H, D), g));
      }
}

TEST(Gilbert, PermutationOfProductionGrids) {
  for (const Grid& g : kProductionGrids) {
    EXPECT_TRUE(is_permutation_of_grid(gilbert3d_order(g.W, g.H, g.D), g));
  }
}

TEST(Gilbert, DegenerateGrids) {
  EXPECT_TRUE(gilbert3d_order(0, 4, 4).empty());
  EXPECT_TRUE(gilbert3d_order(4, -1, 4).empty());
  EXPECT_EQ(gilbert3d_order(1, 1, 1), (std::vector<int64_t>{0}));
  // A line is walked in raster order along its one long axis.
  EXPECT_EQ(gilbert3d_order(1, 5, 1), (std::vector<int64_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(gilbert3d_order(1, 1, 4), (std::vector<int64_t>{0, 1, 2, 3}));
}

// Upstream gilbert promises a continuous curve for even cuboids only; on those every step
// must be a unit step.
TEST(Gilbert, EvenGridsTakeOnlyUnitSteps) {
  std::vector<Grid> grids;
  for (int64_t W = 2; W <= 24; W += 2)
    for (int64_t H = 2; H <= 24; H += 2)
      for (int64_t D = 2; D <= 24; D += 2) grids.push_back({W, H, D});
  grids.push_back({80, 48, 18});  // the only all-even production grid
  for (const Grid& g : grids) {
    const StepStats s = step_stats(gilbert3d_order(g.W, g.H, g.D), g);
    EXPECT_EQ(s.non_unit, 0) << grid_name(g);
  }
}

// Odd extents force jumps where sub-boxes join: the reference (which this curve matches by
// sha256 below) cannot always keep halves even. Bounds are the measured values, so a
// change in either direction shows up here as well as in the digests:
//   3x5x7: 6 non-unit steps, all diagonal (no coordinate moves by more than 1);
//   13x11x7: 22 (2.2%), 2 of them move one coordinate by 2;  5x5x5: 5, one jump of 3;
//   production grids: at most 0.9% of the steps, no coordinate moves by more than 2.
TEST(Gilbert, OddGridsTakeFewNonUnitSteps) {
  struct Case {
    Grid g;
    int64_t max_non_unit, max_coord;
  };
  const Case cases[] = {
      {{3, 5, 7}, 6, 1},        {{13, 11, 7}, 22, 2},    {{5, 5, 5}, 5, 3},
      {{7, 7, 7}, 16, 1},       {{3, 3, 3}, 2, 1},       {{3, 2, 2}, 1, 1},
      {{45, 30, 13}, 151, 2},   {{80, 45, 18}, 96, 2},   {{52, 30, 21}, 76, 2},
      {{85, 48, 11}, 395, 2},   {{40, 22, 31}, 56, 1},
  };
  for (const Case& c : cases) {
    const StepStats s = step_stats(gilbert3d_order(c.g.W, c.g.H, c.g.D), c.g);
    EXPECT_LE(s.non_unit, c.max_non_unit) << grid_name(c.g);
    EXPECT_LE(s.max_coord, c.max_coord) << grid_name(c.g);
    EXPECT_GT(s.non_unit, 0) << grid_name(c.g) << ": odd extents were expected to need a jump";
  }
}

// Over every grid of 1..8 x 1..8 x 1..6 the measured worst cases are 8 non-unit steps
// (7x7x5), a single-coordinate jump of 3 (5x5x5, 5x7x5, ...) and a step of Manhattan length 4.
TEST(Gilbert, SmallGridStepBounds) {
  for (int64_t W = 1; W <= 8; ++W)
    for (int64_t H = 1; H <= 8; ++H)
      for (int64_t D = 1; D <= 6; ++D) {
        const Grid g{W, H, D};
        const StepStats s = step_stats(gilbert3d_order(W, H, D), g);
        EXPECT_LE(s.non_unit, 8) << grid_name(g);
        EXPECT_LE(s.max_coord, 3) << grid_name(g);
        EXPECT_LE(s.max_l1, 4) << grid_name(g);
        if (W % 2 == 0 && H % 2 == 0 && D % 2 == 0) {
          EXPECT_EQ(s.non_unit, 0) << grid_name(g);
        }
      }
}

TEST(Gilbert, SpecVectorsSmall) {
  EXPECT_EQ(gilbert3d_order(2, 2, 2), (std::vector<int64_t>{0, 2, 6, 4, 5, 7, 3, 1}));
  EXPECT_EQ(gilbert3d_order(3, 2, 2),
            (std::vector<int64_t>{0, 1, 3, 4, 10, 9, 6, 7, 8, 11, 5, 2}));
}

TEST(Gilbert, SpecVectorsCogVideoX5B) {
  const std::vector<int64_t> f = gilbert3d_order(45, 30, 13);
  ASSERT_EQ(f.size(), 17550u);
  EXPECT_EQ(std::vector<int64_t>(f.begin(), f.begin() + 12),
            (std::vector<int64_t>{0, 1350, 1351, 1, 46, 1396, 1395, 45, 90, 91, 136, 135}));
  EXPECT_EQ(std::vector<int64_t>(f.end() - 3, f.end()), (std::vector<int64_t>{1393, 1394, 44}));
}

TEST(Gilbert, SpecVectorsWan720p) {
  const std::vector<int64_t> f = gilbert3d_order(80, 45, 18);
  ASSERT_EQ(f.size(), 64800u);
  EXPECT_EQ(std::vector<int64_t>(f.begin(), f.begin() + 12),
            (std::vector<int64_t>{0, 1, 81, 80, 3680, 3681, 3601, 3600, 7200, 7280, 10880, 10800}));
}

// sha256 of the comma-joined decimal list, first 16 hex digits, from spec 7.1.
TEST(Gilbert, SpecDigests) {
  struct Case {
    Grid g;
    const char* prefix;
  };
  const Case cases[] = {
      {{45, 30, 13}, "86dc98f2126f4c2f"}, {{80, 45, 18}, "d27a308ff425c3dd"},
      {{80, 48, 18}, "2c3c17073bcfdbbb"}, {{40, 22, 31}, "750024c28bb2c467"},
      {{85, 48, 11}, "ac9b9019c097b99f"}, {{52, 30, 21}, "c2f0a9f0131a73f1"},
  };
  for (const Case& c : cases) {
    const std::string digest = psa_test::sha256_hex(joined(gilbert3d_order(c.g.W, c.g.H, c.g.D)));
    EXPECT_EQ(digest.substr(0, 16), c.prefix) << grid_name(c.g) << ": " << digest;
  }
}

// The digest helper itself, against FIPS 180-4 examples (one and two blocks, 10^6 bytes).
TEST(Sha256Helper, KnownAnswers) {
  EXPECT_EQ(psa_test::sha256_hex(""),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(psa_test::sha256_hex("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(psa_test::sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(psa_test::sha256_hex(std::string(1000000, 'a')),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

}  // namespace

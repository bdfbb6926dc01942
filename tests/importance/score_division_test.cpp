// tests/importance/score_division_test.cpp -- importance/score_division.h against the rule it
// replaces in the kernels (importance_spec.h's (float)(v / s) with s in double): the same bits
// on fresh random quotients, on quotients built next to a rounding boundary (a double divisor
// puts v / s within 2^-53 of the midpoint between two fp32 neighbours) and on the special
// values; and the fp32 evaluation decides nearly every ordinary quotient (otherwise it would
// only be the rule).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>

#include "common/test_util.h"
#include "core/bits.h"
#include "importance/score_division.h"

namespace {

using psa::div_rn_f32;
using psa::float_bits;
using psa::normalised_score;
using psa::score_divisor;

TEST(ScoreDivision, NormalisedScoreMatchesTheRule) {
  const uint64_t seed = psa_test::fresh_seed();
  std::mt19937_64 g(seed);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  int64_t decided = 0, n = 0;
  for (int i = 0; i < (1 << 20); ++i) {
    // A row sum as the score rule makes it (1 <= s), and a weight 0 <= v <= 1 of any magnitude.
    const double s = 1.0 + std::ldexp(u(g), static_cast<int>(u(g) * 24));
    const float v = static_cast<float>(std::ldexp(u(g), -static_cast<int>(u(g) * 70)));
    const auto d = score_divisor(s);
    float q;
    const bool fast = div_rn_f32(v, d, q);
    if (v >= 0x1p-40f) {
      decided += fast;
      ++n;
    }
    if (fast) ASSERT_EQ(float_bits(q), float_bits(static_cast<float>(v / s))) << v << " / " << s << " seed " << seed;
    ASSERT_EQ(float_bits(normalised_score(v, s, d)), float_bits(static_cast<float>(v / s)))
        << v << " / " << s << " seed " << seed;
  }
  EXPECT_GT(decided, n * 999 / 1000) << "seed " << seed;
}

TEST(ScoreDivision, NormalisedScoreNextToRoundingBoundaries) {
  // s = v / m for a midpoint m between fp32 neighbours c and c': v / s is within 2^-53 of m, so
  // the double quotient may round either way, and the fp32 path must hand it to the rule.
  const uint64_t seed = psa_test::fresh_seed();
  std::mt19937_64 g(seed);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  int built = 0;
  for (int i = 0; i < (1 << 18); ++i) {
    const float c = static_cast<float>(std::ldexp(1.0 + u(g), -1 - static_cast<int>(u(g) * 30)));
    const float nb = u(g) < 0.5 ? std::nextafter(c, 2.0f) : std::nextafter(c, 0.0f);
    const double m = (static_cast<double>(c) + nb) / 2;
    const float v = static_cast<float>(0.5 + 0.5 * u(g));
    const double s = v / m;
    if (!(s >= 1.0)) continue;
    ++built;
    const auto d = score_divisor(s);
    float q;
    EXPECT_FALSE(div_rn_f32(v, d, q)) << v << " / " << s << " seed " << seed;
    ASSERT_EQ(float_bits(normalised_score(v, s, d)), float_bits(static_cast<float>(v / s)))
        << v << " / " << s << " seed " << seed;
  }
  EXPECT_GT(built, 1000);
}

TEST(ScoreDivision, NormalisedScoreSpecialArguments) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (double s : {1.0, 1.0 + 0x1p-52, 3.0, 0x1p40, 0x1p40 + 1.0, 0.5, 0.0, 1e300}) {
    const auto d = score_divisor(s);
    for (float v : {0.0f, 1.0f, 0.5f, 0x1p-60f, 0x1p-61f, 0x1p-126f, 0x1p-149f, 0x1.fffffep-1f}) {
      if (s > 0.0)
        EXPECT_EQ(float_bits(normalised_score(v, s, d)), float_bits(static_cast<float>(v / s))) << v << " / " << s;
    }
    float q;
    EXPECT_FALSE(div_rn_f32(nan, d, q));
    EXPECT_FALSE(div_rn_f32(2.0f, d, q));
  }
}

}  // namespace

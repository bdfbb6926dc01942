// tests/mask/sim_cap_test.cpp -- mask stage: sim_cap_row (spec 5) against a double-precision
// brute force on random keys and on constructed keys with a known cap. Host only; no CUDA.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "mask/mask.h"

namespace {

// Spec 5 in double, with the Triton path's epsilons.
double cos_double(const float* a, const float* b, int64_t d) {
  double dot = 0, na = 0, nb = 0;
  for (int64_t k = 0; k < d; ++k) {
    dot += double(a[k]) * b[k];
    na += double(a[k]) * a[k];
    nb += double(b[k]) * b[k];
  }
  return dot / (std::sqrt(na + 1e-12) * std::sqrt(nb + 1e-12) + 1e-6);
}

double sim_double(const float* block, int64_t bn, int64_t d, int p) {
  double s = 0;
  for (int64_t t = 0; t < bn / p; ++t)
    s += cos_double(block + t * p * d, block + (t * p + p - 1) * d, d);
  return s / double(bn / p);
}

std::vector<int> caps(const std::vector<float>& keys, int64_t nb, int64_t bn, int64_t d,
                      const double t[3]) {
  std::vector<int8_t> c(static_cast<size_t>(nb), -1);
  psa::sim_cap_row(keys.data(), nb, bn, d, t, c.data());
  return std::vector<int>(c.begin(), c.end());
}

// Random keys: in each block, tokens of the same g-group (g = 2, 4 or 8 per block) share a
// random base, plus a per-block noise level, so all four caps occur. fp32 vs double differs by
// ~1e-6: compare wherever every sim is 1e-4 from its threshold.
TEST(SimCap, MatchesDoubleBruteForce) {
  const uint64_t seed = std::random_device{}();
  SCOPED_TRACE(testing::Message() << "seed " << seed);
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> gauss(0.0f, 1.0f);
  std::uniform_real_distribution<float> u01(0.0f, 1.0f);
  const double presets[][3] = {{0.7, 0.65, 0.6}, {0.0, 0.0, -1.0}, {0.5, 0.5, 0.5}};
  const int64_t shapes[][2] = {{8, 16}, {32, 64}, {64, 64}, {128, 128}};
  int compared = 0, total = 0, seen[9] = {0};
  for (int iter = 0; iter < 40; ++iter) {
    const int64_t bn = shapes[iter % 4][0], d = shapes[iter % 4][1], nb = 12;
    const double* t = presets[iter % 3];
    std::vector<float> keys(static_cast<size_t>(nb * bn * d));
    for (int64_t j = 0; j < nb; ++j) {
      const float noise = 2.0f * u01(rng) * u01(rng);
      const int64_t group = int64_t{2} << (rng() % 3);
      std::vector<float> base(static_cast<size_t>(d));
      for (int64_t tok = 0; tok < bn; ++tok) {
        if (tok % group == 0)
          for (float& b : base) b = gauss(rng);
        float* k = &keys[(j * bn + tok) * d];
        for (int64_t c = 0; c < d; ++c) k[c] = base[c] + noise * gauss(rng);
      }
    }
    std::vector<int> got = caps(keys, nb, bn, d, t);
    for (int64_t j = 0; j < nb; ++j) {
      const float* blk = &keys[j * bn * d];
      const double s2 = sim_double(blk, bn, d, 2), s4 = sim_double(blk, bn, d, 4),
                   s8 = sim_double(blk, bn, d, 8);
      const int want = s8 > t[2] ? 8 : (s4 > t[1] ? 4 : (s2 > t[0] ? 2 : 1));
      ++total;
      if (std::fabs(s2 - t[0]) < 1e-4 || std::fabs(s4 - t[1]) < 1e-4 || std::fabs(s8 - t[2]) < 1e-4)
        continue;
      ++compared;
      ++seen[want];
      EXPECT_EQ(got[j], want) << "iter " << iter << " block " << j << " sims " << s2 << " " << s4
                              << " " << s8;
    }
  }
  EXPECT_GE(compared, total * 9 / 10);
  for (int c : {1, 2, 4, 8}) EXPECT_GT(seen[c], 0) << "cap " << c << " never exercised";
}

// One 8-group pattern (8 tokens, each a basis vector index, -1 = zero key) repeated over
// every group of every block.
std::vector<float> pattern_keys(const int (&pat)[8], int64_t nb, int64_t bn, int64_t d,
                                float scale) {
  std::vector<float> keys(static_cast<size_t>(nb * bn * d), 0.0f);
  for (int64_t tok = 0; tok < nb * bn; ++tok)
    if (pat[tok % 8] >= 0) keys[tok * d + pat[tok % 8]] = scale;
  return keys;
}

TEST(SimCap, ConstructedKeys) {
  const double t[3] = {0.7, 0.65, 0.6};
  // Identical keys in each 8-group: every sim is 1/(1 + 1e-6) -> cap 8.
  const int same[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  EXPECT_EQ(caps(pattern_keys(same, 3, 64, 16, 2.5f), 3, 64, 16, t), (std::vector<int>{8, 8, 8}));
  // Alternating orthogonal keys: every compared pair is (even, odd) -> all sims 0 -> cap 1;
  // with a negative x2 threshold the same keys give cap 2.
  const int alt[8] = {0, 1, 0, 1, 0, 1, 0, 1};
  EXPECT_EQ(caps(pattern_keys(alt, 2, 32, 8, 0.3f), 2, 32, 8, t), (std::vector<int>{1, 1}));
  const double low2[3] = {-0.5, 0.65, 0.6};
  EXPECT_EQ(caps(pattern_keys(alt, 2, 32, 8, 0.3f), 2, 32, 8, low2), (std::vector<int>{2, 2}));
  // 4-groups with equal ends but orthogonal neighbours and 8-group ends: sim2 = sim8 = 0,
  // sim4 ~ 1 -> cap 4.
  const int four[8] = {0, 2, 2, 0, 1, 2, 2, 1};
  EXPECT_EQ(caps(pattern_keys(four, 2, 16, 4, 1.0f), 2, 16, 4, t), (std::vector<int>{4, 4}));
  // Zero keys: the epsilons keep the cosine at 0 (no NaN) -> cap 1.
  const int zero[8] = {-1, -1, -1, -1, -1, -1, -1, -1};
  EXPECT_EQ(caps(pattern_keys(zero, 1, 8, 4, 1.0f), 1, 8, 4, t), (std::vector<int>{1}));
  // Default thresholds (0, 0, -1): sim8 > -1 -> cap 8 (no effect).
  const double defaults[3] = {0.0, 0.0, -1.0};
  EXPECT_EQ(caps(pattern_keys(alt, 2, 32, 8, 0.3f), 2, 32, 8, defaults), (std::vector<int>{8, 8}));
}

}  // namespace

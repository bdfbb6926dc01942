// tests/importance/importance_test.cpp -- block importance against a brute-force double
// evaluation of spec 3.4's formula, the sampler's contract, and the tie weight's accuracy.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <set>

#include "common/test_util.h"
#include "importance/importance.h"
#include "importance/importance_spec.h"

namespace {

std::vector<double> brute_force(const std::vector<float>& q, int64_t lq, const std::vector<float>& k,
                                int64_t lk, int64_t d, int64_t bm, int64_t bn,
                                const std::vector<int32_t>& qo, const std::vector<int32_t>& ko,
                                double scale) {
  const int64_t mq = (lq + bm - 1) / bm, nk = (lk + bn - 1) / bn;
  std::vector<double> s(mq * nk, 0.0);
  for (int64_t i = 0; i < mq; ++i) {
    for (int32_t qs : qo) {
      const int64_t x = std::min<int64_t>(i * bm + qs, lq - 1);
      std::vector<double> a(nk, -INFINITY);
      for (int64_t j = 0; j < nk; ++j)
        for (int32_t ks : ko) {
          const int64_t t = std::min<int64_t>(j * bn + ks, lk - 1);
          double dot = 0;
          for (int64_t c = 0; c < d; ++c) dot += double(q[x * d + c]) * k[t * d + c];
          a[j] = std::max(a[j], scale * dot);
        }
      const double mx = *std::max_element(a.begin(), a.end());
      for (int64_t j = 0; j < nk; ++j) s[i * nk + j] = std::max(s[i * nk + j], std::exp(a[j] - mx));
    }
    double sum = 0;
    for (int64_t j = 0; j < nk; ++j) sum += s[i * nk + j];
    for (int64_t j = 0; j < nk; ++j) s[i * nk + j] /= sum;
  }
  return s;
}

struct Case {
  int64_t lq, lk, d, bm, bn, div;
};

class ImportanceVsBruteForce : public ::testing::TestWithParam<Case> {};

TEST_P(ImportanceVsBruteForce, Matches) {
  const Case c = GetParam();
  const uint64_t seed = psa_test::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  const auto q = psa_test::random_vec(rng, c.lq * c.d);
  const auto k = psa_test::random_vec(rng, c.lk * c.d);
  std::vector<int32_t> qo(c.bm / c.div), ko(c.bn / c.div), scratch(std::max(c.bm, c.bn));
  psa::sample_offsets(seed, 0, 3, psa::kSampleQuery, int32_t(c.bm), int32_t(qo.size()), scratch.data(), qo.data());
  psa::sample_offsets(seed, 0, 3, psa::kSampleKey, int32_t(c.bn), int32_t(ko.size()), scratch.data(), ko.data());
  const double scale = 1.0 / std::sqrt(double(c.d));
  const int64_t mq = (c.lq + c.bm - 1) / c.bm, nk = (c.lk + c.bn - 1) / c.bn;
  std::vector<float> got(mq * nk, NAN);
  psa::importance_cpu(q.data(), c.lq, k.data(), c.lk, c.d, c.bm, c.bn, qo.data(), int32_t(qo.size()),
                      ko.data(), int32_t(ko.size()), float(scale), got.data());
  const auto want = brute_force(q, c.lq, k, c.lk, c.d, c.bm, c.bn, qo, ko, scale);
  for (int64_t i = 0; i < mq; ++i) {
    double row = 0;
    for (int64_t j = 0; j < nk; ++j) {
      EXPECT_NEAR(got[i * nk + j], want[i * nk + j], 2e-5 + 1e-4 * want[i * nk + j]) << i << "," << j;
      row += got[i * nk + j];
    }
    EXPECT_NEAR(row, 1.0, 1e-5);
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, ImportanceVsBruteForce,
                         ::testing::Values(Case{512, 512, 32, 128, 128, 4}, Case{300, 700, 16, 128, 64, 4},
                                           Case{129, 97, 8, 64, 32, 8}, Case{1000, 1000, 64, 128, 32, 4},
                                           Case{256, 256, 16, 128, 128, 16}));

TEST(Sampler, DistinctInRangeDeterministicAndPerHead) {
  std::vector<int32_t> a(32), b(32), c(32), scratch(128);
  psa::sample_offsets(7, 1, 2, psa::kSampleQuery, 128, 32, scratch.data(), a.data());
  psa::sample_offsets(7, 1, 2, psa::kSampleQuery, 128, 32, scratch.data(), b.data());
  psa::sample_offsets(7, 1, 3, psa::kSampleQuery, 128, 32, scratch.data(), c.data());
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  std::set<int32_t> uniq(a.begin(), a.end());
  EXPECT_EQ(uniq.size(), 32u);
  for (int32_t o : a) {
    EXPECT_GE(o, 0);
    EXPECT_LT(o, 128);
  }
  psa::sample_offsets(7, 1, 2, psa::kSampleKey, 128, 32, scratch.data(), c.data());
  EXPECT_NE(a, c) << "query and key streams must be independent";
}

TEST(Sampler, FullBlockIsAPermutation) {
  std::vector<int32_t> a(64), scratch(64);
  psa::sample_offsets(psa_test::fresh_seed(), 0, 0, psa::kSampleKey, 64, 64, scratch.data(), a.data());
  std::set<int32_t> uniq(a.begin(), a.end());
  EXPECT_EQ(uniq.size(), 64u);
}

TEST(Importance, DominantBlockGetsTheMass) {
  // One key block aligned with every query: its score must dominate each row.
  const int64_t d = 16, lq = 256, lk = 512, bm = 128, bn = 128;
  std::mt19937_64 rng(psa_test::fresh_seed());
  auto q = psa_test::random_vec(rng, lq * d, 0.1f);
  auto k = psa_test::random_vec(rng, lk * d, 0.1f);
  for (int64_t x = 0; x < lq; ++x) q[x * d] = 4.0f;
  for (int64_t t = 256; t < 384; ++t) k[t * d] = 4.0f;
  std::vector<int32_t> qo(32), ko(32), scratch(128);
  psa::sample_offsets(1, 0, 0, psa::kSampleQuery, 128, 32, scratch.data(), qo.data());
  psa::sample_offsets(1, 0, 0, psa::kSampleKey, 128, 32, scratch.data(), ko.data());
  std::vector<float> s(2 * 4);
  psa::importance_cpu(q.data(), lq, k.data(), lk, d, bm, bn, qo.data(), 32, ko.data(), 32, 0.25f, s.data());
  for (int i = 0; i < 2; ++i) {
    EXPECT_GT(s[i * 4 + 2], 0.9f);
  }
}

// tie_weight (the fp32 exp of the tie masses) against exp in double: within 2e-7 relative
// on fresh differences over its whole range and near 0, exact at 0, 0 below -86 and for NaN.
TEST(TieWeight, IsExpToAboutOneUlp) {
  std::mt19937_64 rng(psa_test::fresh_seed());
  std::uniform_real_distribution<float> wide(-86.0f, 0.0f), unit(0.0f, 1.0f);
  double worst = 0.0;
  for (int i = 0; i < 2000000; ++i) {
    const float y = i % 2 ? wide(rng) : -unit(rng) * std::ldexp(1.0f, -static_cast<int>(rng() % 40));
    const double e = std::exp(static_cast<double>(y));
    const float w = psa::tie_weight(y);
    ASSERT_TRUE(std::isnormal(w)) << y;
    worst = std::max(worst, std::fabs(static_cast<double>(w) - e) / e);
  }
  EXPECT_LT(worst, 2e-7);
  EXPECT_EQ(1.0f, psa::tie_weight(0.0f));
  EXPECT_EQ(1.0f, psa::tie_weight(-0.0f));
  EXPECT_EQ(0.0f, psa::tie_weight(-86.001f));
  EXPECT_EQ(0.0f, psa::tie_weight(-std::numeric_limits<float>::infinity()));
  EXPECT_EQ(0.0f, psa::tie_weight(std::numeric_limits<float>::quiet_NaN()));
  EXPECT_GT(psa::tie_weight(-86.0f), 0.0f);
}

}  // namespace

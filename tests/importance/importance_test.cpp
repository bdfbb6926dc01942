// tests/importance/importance_test.cpp -- block importance against a brute-force double
// evaluation of spec 3.4's formula, the sampler's contract, and the block weight's accuracy.
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

// sample_weight (the fp32 exp of the block weights and tie masses) against exp in double:
// within 2e-7 relative on fresh differences over its whole range and near 0, exact at 0, 0
// below -86 and for NaN.
TEST(SampleWeight, IsExpToAboutOneUlp) {
  std::mt19937_64 rng(psa_test::fresh_seed());
  std::uniform_real_distribution<float> wide(-86.0f, 0.0f), unit(0.0f, 1.0f);
  double worst = 0.0;
  for (int i = 0; i < 2000000; ++i) {
    const float y = i % 2 ? wide(rng) : -unit(rng) * std::ldexp(1.0f, -static_cast<int>(rng() % 40));
    const double e = std::exp(static_cast<double>(y));
    const float w = psa::sample_weight(y);
    ASSERT_TRUE(std::isnormal(w)) << y;
    worst = std::max(worst, std::fabs(static_cast<double>(w) - e) / e);
  }
  EXPECT_LT(worst, 2e-7);
  EXPECT_EQ(1.0f, psa::sample_weight(0.0f));
  EXPECT_EQ(1.0f, psa::sample_weight(-0.0f));
  EXPECT_EQ(0.0f, psa::sample_weight(-86.001f));
  EXPECT_EQ(0.0f, psa::sample_weight(-std::numeric_limits<float>::infinity()));
  EXPECT_EQ(0.0f, psa::sample_weight(std::numeric_limits<float>::quiet_NaN()));
  EXPECT_GT(psa::sample_weight(-86.0f), 0.0f);
}

// Every fp32 difference of [-86, 0] (about 1.1e9; half a minute): within one ulp of the
// correctly rounded e^y. Run with --gtest_also_run_disabled_tests.
TEST(SampleWeight, DISABLED_EveryArgumentWithinOneUlp) {
  double worst = 0.0;
  for (uint32_t u = psa::float_bits(-86.0f);; --u) {
    const float y = psa::bits_float(u);
    const double e = std::exp(static_cast<double>(y));
    const float r = static_cast<float>(e);
    const double ulp = static_cast<double>(std::nextafter(r, 2.0f)) - r;
    worst = std::max(worst, std::fabs(static_cast<double>(psa::sample_weight(y)) - e) / ulp);
    if (u == 0x80000000u) break;
  }
  EXPECT_LE(worst, 1.0);
  std::printf("[sample weight] [-86, 0]: worst %.3f ulp\n", worst);
}

// P takes sample_weight of the largest difference, not the largest weight (sample_weight is
// not monotone): on fresh logits, importance_cpu's P is sample_weight(max_r (a - m)) exactly.
TEST(SampleWeight, BlockWeightIsTheWeightOfTheLargestDifference) {
  const uint64_t seed = psa_test::fresh_seed();
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  const int64_t lq = 64, lk = 96, d = 8, bm = 16, bn = 8, mq = lq / bm, nk = lk / bn;
  std::vector<float> q(lq * d), k(lk * d);
  for (float& x : q) x = 3.0f * nd(rng);
  for (float& x : k) x = nd(rng);
  std::vector<int32_t> qo = {0, 5, 11}, ko = {1, 6};
  std::vector<float> s(mq * nk);
  psa::importance_cpu(q.data(), lq, k.data(), lk, d, bm, bn, qo.data(), 3, ko.data(), 2, 0.5f, s.data());
  for (int64_t i = 0; i < mq; ++i) {
    std::vector<float> a(3 * nk), m(3, -INFINITY);
    for (int r = 0; r < 3; ++r)
      for (int64_t j = 0; j < nk; ++j) {
        float best = -INFINITY;
        for (int c = 0; c < 2; ++c) {
          float dot = 0.0f;
          for (int64_t e = 0; e < d; ++e) dot += q[(i * bm + qo[r]) * d + e] * k[(j * bn + ko[c]) * d + e];
          best = std::max(best, dot);
        }
        a[r * nk + j] = 0.5f * best;
        m[r] = std::max(m[r], a[r * nk + j]);
      }
    double sum = 0.0;
    std::vector<float> p(nk);
    for (int64_t j = 0; j < nk; ++j) {
      float y = -INFINITY;
      for (int r = 0; r < 3; ++r) y = std::fmax(y, a[r * nk + j] - m[r]);
      p[j] = psa::sample_weight(y);
      sum += p[j];
    }
    for (int64_t j = 0; j < nk; ++j)
      ASSERT_EQ(static_cast<float>(p[j] / sum), s[i * nk + j]) << "i " << i << " j " << j << " seed " << seed;
  }
}

}  // namespace

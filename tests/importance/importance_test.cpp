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

// ---- The 8-bit rule (precision fp8; importance_spec.h) ----

// Operands the quantization reproduces exactly: every Q row holds integers in [-127, 127] times
// its query block's power of two 2^f, with +-127 2^f in the row (so s_q = 2^f and the codes are
// the integers), and K's codes times a power of two 2^e per key block (s_k = 2^e). The rule's
// logits ((scale 2^f) 2^e) dot are then importance_cpu's scale (2^(f+e) dot) bit for bit: both
// are the exact integer dot times powers of two, so scores and tie masses must be identical.
struct ExactInt8Head {
  std::vector<float> q, k8, kscale, k;  // k = k8 * kscale (importance_cpu's operand)
};
ExactInt8Head exact_int8_head(int64_t lq, int64_t lk, int64_t d, int64_t bm, int64_t bn, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int> code(-127, 127), pow2(-3, 3);
  ExactInt8Head h;
  const int64_t mq = (lq + bm - 1) / bm, nk = (lk + bn - 1) / bn;
  std::vector<float> qf(static_cast<size_t>(mq));
  for (float& f : qf) f = std::ldexp(1.0f, pow2(gen));
  h.q.resize(static_cast<size_t>(lq * d));
  for (int64_t x = 0; x < lq; ++x)
    for (int64_t c = 0; c < d; ++c) {
      const float v = c == (x % d) ? (x % 2 ? 127.0f : -127.0f) : static_cast<float>(code(gen));
      h.q[static_cast<size_t>(x * d + c)] = v * qf[static_cast<size_t>(x / bm)];
    }
  h.kscale.resize(static_cast<size_t>(nk));
  for (float& s : h.kscale) s = std::ldexp(1.0f, pow2(gen));
  h.k8.resize(static_cast<size_t>(lk * d));
  h.k.resize(h.k8.size());
  for (int64_t t = 0; t < lk * d; ++t) {
    h.k8[static_cast<size_t>(t)] = static_cast<float>(code(gen));
    h.k[static_cast<size_t>(t)] = h.k8[static_cast<size_t>(t)] * h.kscale[static_cast<size_t>(t / d / bn)];
  }
  return h;
}

TEST(ImportanceInt8, EqualsTheFloatRuleOnOperandsItQuantizesExactly) {
  struct Case {
    int64_t lq, lk, d, bm, bn;
    int32_t qc, kc;
  };
  for (const Case& c : {Case{300, 520, 16, 64, 32, 8, 4}, Case{257, 129, 32, 128, 64, 16, 16},
                        Case{64, 700, 8, 32, 128, 4, 32}}) {
    const ExactInt8Head h = exact_int8_head(c.lq, c.lk, c.d, c.bm, c.bn, static_cast<uint32_t>(c.lq + c.lk));
    std::vector<int32_t> qo(static_cast<size_t>(c.qc)), ko(static_cast<size_t>(c.kc)), shuf(128);
    psa::sample_offsets(3, 0, 1, psa::kSampleQuery, static_cast<int32_t>(c.bm), c.qc, shuf.data(), qo.data());
    psa::sample_offsets(3, 0, 1, psa::kSampleKey, static_cast<int32_t>(c.bn), c.kc, shuf.data(), ko.data());
    const int64_t mq = (c.lq + c.bm - 1) / c.bm, nk = (c.lk + c.bn - 1) / c.bn;
    std::vector<float> s8(static_cast<size_t>(mq * nk)), t8(s8.size()), sf(s8.size()), tf(s8.size());
    const float scale = 0.0625f * 0.7f;
    psa::importance_int8_cpu(h.q.data(), c.lq, psa::Int8Keys{h.k8.data(), h.kscale.data()}, c.lk, c.d, c.bm, c.bn,
                             qo.data(), c.qc, ko.data(), c.kc, scale, s8.data(), t8.data());
    psa::importance_cpu(h.q.data(), c.lq, h.k.data(), c.lk, c.d, c.bm, c.bn, qo.data(), c.qc, ko.data(), c.kc, scale,
                        sf.data(), tf.data());
    int64_t ties = 0;
    for (size_t e = 0; e < s8.size(); ++e) {
      ASSERT_EQ(s8[e], sf[e]) << "score " << e;
      ASSERT_EQ(t8[e], tf[e]) << "tie mass " << e;
      ties += t8[e] > 0.0f;
    }
    EXPECT_GE(ties, mq);  // every row has a top block
  }
}

TEST(ImportanceInt8, NonFiniteKeysAndRowsScoreNothing) {
  const int64_t lq = 256, lk = 640, d = 16, bm = 128, bn = 64, mq = 2, nk = 10;
  const int32_t qc = 8, kc = 8;
  ExactInt8Head h = exact_int8_head(lq, lk, d, bm, bn, 99u);
  std::vector<int32_t> qo(qc), ko(kc), shuf(128);
  psa::sample_offsets(5, 0, 0, psa::kSampleQuery, bm, qc, shuf.data(), qo.data());
  psa::sample_offsets(5, 0, 0, psa::kSampleKey, bn, kc, shuf.data(), ko.data());
  std::vector<float> base(mq * nk), s(mq * nk);
  const psa::Int8Keys keys{h.k8.data(), h.kscale.data()};
  psa::importance_int8_cpu(h.q.data(), lq, keys, lk, d, bm, bn, qo.data(), qc, ko.data(), kc, 0.25f, base.data());
  // A key block with a non-finite value (a NaN code; also an unsampled token) scores 0 in every row.
  std::vector<float> k8 = h.k8;
  const int32_t unsampled = [&] {
    for (int32_t o = 0; o < bn; ++o)
      if (std::find(ko.begin(), ko.end(), o) == ko.end()) return o;
    return 0;
  }();
  k8[static_cast<size_t>((4 * bn + unsampled) * d + 3)] = std::nanf("");
  k8[static_cast<size_t>((6 * bn + ko[0]) * d + 5)] = std::nanf("");  // and a sampled token of block 6
  psa::importance_int8_cpu(h.q.data(), lq, psa::Int8Keys{k8.data(), h.kscale.data()}, lk, d, bm, bn, qo.data(), qc,
                           ko.data(), kc, 0.25f, s.data());
  for (int64_t i = 0; i < mq; ++i) {
    EXPECT_EQ(s[i * nk + 4], 0.0f);
    EXPECT_EQ(s[i * nk + 6], 0.0f);
    double sum = 0;
    for (int64_t j = 0; j < nk; ++j) sum += s[i * nk + j];
    EXPECT_NEAR(sum, 1.0, 1e-6);
  }
  // So does a NaN scale (the GPU pool pass's mark of such a block).
  std::vector<float> ks = h.kscale;
  ks[7] = std::nanf("");
  psa::importance_int8_cpu(h.q.data(), lq, psa::Int8Keys{h.k8.data(), ks.data()}, lk, d, bm, bn, qo.data(), qc,
                           ko.data(), kc, 0.25f, s.data());
  EXPECT_EQ(s[7], 0.0f);
  EXPECT_EQ(s[nk + 7], 0.0f);
  // A sampled row with an infinite value scores nothing: block 0's scores are those of its other
  // rows (its finite values still set s_q, which the +-127 of every row fixes here).
  std::vector<float> q = h.q;
  q[static_cast<size_t>(qo[2] * d + 1)] = INFINITY;
  psa::importance_int8_cpu(q.data(), lq, keys, lk, d, bm, bn, qo.data(), qc, ko.data(), kc, 0.25f, s.data());
  std::vector<int32_t> qo7;
  for (int32_t r = 0; r < qc; ++r)
    if (r != 2) qo7.push_back(qo[r]);
  std::vector<float> s7(mq * nk);
  psa::importance_int8_cpu(h.q.data(), lq, keys, lk, d, bm, bn, qo7.data(), qc - 1, ko.data(), kc, 0.25f, s7.data());
  for (int64_t j = 0; j < nk; ++j) {
    EXPECT_EQ(s[j], s7[j]) << j;
    EXPECT_EQ(s[nk + j], base[nk + j]) << j;  // block 1 untouched
  }
  // Every sampled row of block 1 non-finite: its row of scores is all zeros.
  for (int32_t r = 0; r < qc; ++r) q[static_cast<size_t>((bm + qo[r]) * d)] = std::nanf("");
  psa::importance_int8_cpu(q.data(), lq, keys, lk, d, bm, bn, qo.data(), qc, ko.data(), kc, 0.25f, s.data());
  for (int64_t j = 0; j < nk; ++j) EXPECT_EQ(s[nk + j], 0.0f) << j;
}

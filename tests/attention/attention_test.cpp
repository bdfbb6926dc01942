// tests/attention/attention_test.cpp -- the mixed-level attention stage against an
// independent double reference: all-level-1 = dense, pooled identical keys = full
// resolution, diagonal-only = restricted attention, random level mixes = explicit pooled
// token lists with weight p, causal visibility, empty rows, LSE.
#include <gtest/gtest.h>

#include "attention/attention.h"
#include "common/test_util.h"
#include "pool/pool.h"

namespace {

struct Head {
  int64_t lq, lk, d, bm, bn;
  std::vector<float> q, k, v, k2, k4, k8, v2, v4, v8;
  psa::Pyramid kp, vp;
  Head(std::mt19937_64& rng, int64_t lq_, int64_t lk_, int64_t d_, int64_t bm_, int64_t bn_)
      : lq(lq_), lk(lk_), d(d_), bm(bm_), bn(bn_) {
    q = psa_test::random_vec(rng, lq * d);
    k = psa_test::random_vec(rng, lk * d);
    v = psa_test::random_vec(rng, lk * d);
    pool();
  }
  void pool() {
    const int64_t nk = (lk + bn - 1) / bn, padded = nk * bn;
    for (auto* p : {&k2, &v2}) p->assign(padded / 2 * d, 0);
    for (auto* p : {&k4, &v4}) p->assign(padded / 4 * d, 0);
    for (auto* p : {&k8, &v8}) p->assign(padded / 8 * d, 0);
    psa::pool_pyramid_cpu(k.data(), lk, d, nk, bn, k2.data(), k4.data(), k8.data());
    psa::pool_pyramid_cpu(v.data(), lk, d, nk, bn, v2.data(), v4.data(), v8.data());
    kp.level[0] = k.data(); kp.level[1] = k2.data(); kp.level[2] = k4.data(); kp.level[3] = k8.data();
    vp.level[0] = v.data(); vp.level[1] = v2.data(); vp.level[2] = v4.data(); vp.level[3] = v8.data();
  }
  int64_t mq() const { return (lq + bm - 1) / bm; }
  int64_t nk() const { return (lk + bn - 1) / bn; }
  double scale() const { return 1.0 / std::sqrt(double(d)); }
  std::vector<float> run(const std::vector<int8_t>& levels, bool causal, std::vector<float>* lse = nullptr) {
    std::vector<float> out(lq * d, NAN);
    std::vector<float> l(lq, NAN);
    psa::sparse_attention_cpu(q.data(), lq, kp, vp, lk, d, bm, bn, levels.data(), float(scale()), causal,
                              out.data(), l.data());
    if (lse) *lse = l;
    return out;
  }
};

// Reference for a level map written from the definition: key block j at level p becomes the
// pooled tokens (means of p replicate-padded keys/values, computed here in double) each with
// weight p, i.e. logit + ln p.
std::vector<double> ref_levels(const Head& h, const std::vector<int8_t>& levels, bool causal,
                               std::vector<double>* lse) {
  const int64_t d = h.d, nk = h.nk(), off = h.lk - h.lq;
  std::vector<double> out(h.lq * d, 0.0);
  if (lse) lse->assign(h.lq, -INFINITY);
  for (int64_t x = 0; x < h.lq; ++x) {
    std::vector<std::pair<double, std::vector<double>>> toks;  // (logit incl. ln p, value)
    const int64_t i = x / h.bm;
    for (int64_t j = 0; j < nk; ++j) {
      const int p = levels[i * nk + j];
      if (p == 0) continue;
      for (int64_t s = j * h.bn; s < (j + 1) * h.bn; s += p) {
        if (p == 1 && s >= h.lk) break;
        if (causal && s + p - 1 > x + off) continue;
        std::vector<double> km(d, 0.0), vm(d, 0.0);
        for (int u = 0; u < p; ++u) {
          const int64_t t = std::min(s + u, h.lk - 1);
          for (int64_t c = 0; c < d; ++c) {
            km[c] += h.k[t * d + c] / p;
            vm[c] += h.v[t * d + c] / p;
          }
        }
        double dot = 0;
        for (int64_t c = 0; c < d; ++c) dot += h.q[x * d + c] * km[c];
        toks.push_back({dot * h.scale() + std::log(double(p)), vm});
      }
    }
    if (toks.empty()) continue;
    double mx = -INFINITY, sum = 0;
    for (auto& t : toks) mx = std::max(mx, t.first);
    for (auto& t : toks) {
      const double w = std::exp(t.first - mx);
      sum += w;
      for (int64_t c = 0; c < d; ++c) out[x * d + c] += w * t.second[c];
    }
    for (int64_t c = 0; c < d; ++c) out[x * d + c] /= sum;
    if (lse) (*lse)[x] = mx + std::log(sum);
  }
  return out;
}

TEST(SparseAttention, AllLevelOneEqualsDense) {
  const uint64_t seed = psa_test::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  Head h(rng, 300, 300, 32, 128, 64);
  std::vector<int8_t> lv(h.mq() * h.nk(), 1);
  const auto got = h.run(lv, false);
  const auto want = psa_test::ref_attention(h.q, h.lq, h.k, h.v, h.lk, h.d, h.scale(),
                                            [](int64_t, int64_t) { return true; });
  EXPECT_LT(psa_test::rel_l2(got, want), 1e-5);
}

TEST(SparseAttention, PooledBlockOfIdenticalKeysEqualsFullResolution) {
  const uint64_t seed = psa_test::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  for (int p : {2, 4, 8}) {
    Head h(rng, 128, 512, 16, 128, 128);
    // Every aligned group of p keys (and values) identical.
    for (int64_t t = 0; t < h.lk; ++t)
      for (int64_t c = 0; c < h.d; ++c) {
        h.k[t * h.d + c] = h.k[(t / p * p) * h.d + c];
        h.v[t * h.d + c] = h.v[(t / p * p) * h.d + c];
      }
    h.pool();
    std::vector<int8_t> full(h.nk(), 1), pooled(h.nk(), int8_t(p));
    pooled[0] = 1;
    pooled[2] = 0;
    full[2] = 0;
    std::vector<float> lse_full, lse_pooled;
    const auto a = h.run(full, false, &lse_full);
    const auto b = h.run(pooled, false, &lse_pooled);
    EXPECT_LT(psa_test::rel_l2(b, a), 1e-5) << "level " << p;
    for (int64_t x = 0; x < h.lq; ++x) EXPECT_NEAR(lse_pooled[x], lse_full[x], 1e-4);
  }
}

TEST(SparseAttention, DiagonalOnlyEqualsRestrictedAttention) {
  const uint64_t seed = psa_test::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  Head h(rng, 500, 500, 32, 128, 128);
  std::vector<int8_t> lv(h.mq() * h.nk(), 0);
  for (int64_t i = 0; i < h.mq(); ++i) lv[i * h.nk() + i] = 1;
  const auto got = h.run(lv, false);
  const auto want = psa_test::ref_attention(h.q, h.lq, h.k, h.v, h.lk, h.d, h.scale(),
                                            [](int64_t x, int64_t t) { return x / 128 == t / 128; });
  EXPECT_LT(psa_test::rel_l2(got, want), 1e-5);
}

struct MixCase {
  int64_t lq, lk, bm, bn;
  bool causal;
};
class SparseAttentionMix : public ::testing::TestWithParam<MixCase> {};

TEST_P(SparseAttentionMix, RandomLevelsMatchPooledTokenReference) {
  const MixCase c = GetParam();
  const uint64_t seed = psa_test::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  Head h(rng, c.lq, c.lk, 16, c.bm, c.bn);
  std::vector<int8_t> lv(h.mq() * h.nk());
  const int8_t choices[5] = {0, 1, 2, 4, 8};
  std::uniform_int_distribution<int> pick(0, 4);
  for (auto& l : lv) l = choices[pick(rng)];
  std::vector<float> lse;
  std::vector<double> want_lse;
  const auto got = h.run(lv, c.causal, &lse);
  const auto want = ref_levels(h, lv, c.causal, &want_lse);
  EXPECT_LT(psa_test::rel_l2(got, want), 1e-5);
  for (int64_t x = 0; x < h.lq; ++x) {
    if (std::isinf(want_lse[x])) {
      EXPECT_TRUE(std::isinf(lse[x]) && lse[x] < 0) << "row " << x;
      for (int64_t cc = 0; cc < h.d; ++cc) ASSERT_EQ(got[x * h.d + cc], 0.0f) << "empty row " << x;
    } else {
      EXPECT_NEAR(lse[x], want_lse[x], 1e-4) << "row " << x;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, SparseAttentionMix,
                         ::testing::Values(MixCase{256, 256, 128, 128, false}, MixCase{300, 300, 128, 32, false},
                                           MixCase{200, 333, 64, 64, false}, MixCase{257, 257, 128, 64, true},
                                           MixCase{100, 260, 64, 32, true}, MixCase{1, 1, 128, 32, false},
                                           MixCase{129, 129, 128, 128, true}));

TEST(SparseAttention, EmptyRowsGiveZerosAndMinusInfLse) {
  std::mt19937_64 rng(psa_test::fresh_seed());
  Head h(rng, 256, 256, 16, 128, 128);
  std::vector<int8_t> lv = {1, 2, 0, 0};
  std::vector<float> lse;
  const auto out = h.run(lv, false, &lse);
  for (int64_t x = 128; x < 256; ++x) {
    EXPECT_TRUE(std::isinf(lse[x]) && lse[x] < 0);
    for (int64_t c = 0; c < h.d; ++c) ASSERT_EQ(out[x * h.d + c], 0.0f);
  }
  for (int64_t x = 0; x < 128; ++x) EXPECT_TRUE(std::isfinite(lse[x]));
}

TEST(SparseAttention, CausalFirstTileFullyMaskedGivesNoNaN) {
  // Key block 0 at level 8: rows 0..6 see no pooled token of it (spec 6.5); they must be
  // zero, not NaN, and later rows finite.
  std::mt19937_64 rng(psa_test::fresh_seed());
  Head h(rng, 128, 128, 16, 128, 128);
  std::vector<int8_t> lv = {8};
  std::vector<float> lse;
  const auto out = h.run(lv, true, &lse);
  for (int64_t x = 0; x < 7; ++x) EXPECT_EQ(out[x * h.d], 0.0f);
  for (int64_t x = 7; x < 128; ++x) EXPECT_TRUE(std::isfinite(out[x * h.d])) << x;
}

TEST(DenseAttention, MatchesReferenceCausalAndCross) {
  const uint64_t seed = psa_test::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  for (bool causal : {false, true}) {
    const int64_t lq = 70, lk = 150, d = 16;
    const auto q = psa_test::random_vec(rng, lq * d), k = psa_test::random_vec(rng, lk * d),
               v = psa_test::random_vec(rng, lk * d);
    std::vector<float> out(lq * d), lse(lq);
    psa::dense_attention_cpu(q.data(), lq, k.data(), v.data(), lk, d, 0.25f, causal, out.data(), lse.data());
    const auto want = psa_test::ref_attention(q, lq, k, v, lk, d, 0.25, [&](int64_t x, int64_t t) {
      return !causal || t <= x + (lk - lq);
    });
    EXPECT_LT(psa_test::rel_l2(out, want), 1e-5);
  }
}

}  // namespace

// tests/methods/ada_bsa_mask_test.cpp -- ada_bsa mask builder (rainfusion-adabsa spec 3,
// canonical choices): hand-worked rows whose block scores are set through the keys (CDF
// cut, ties at the guard, sparsity cap and its n >= 10 gate, keep_sink / keep_recent,
// causal rows, the key tail), and a cross-check against an independent double-precision
// model of spec 3.2-3.3 written with the query-reversed (upstream) anti-diagonal.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "common/test_util.h"
#include "methods/method_test_util.h"

namespace {

using psa_test::levels_of;
using psa_test::mask_string;
using psa_test::plan_for;

constexpr int64_t kD = 4;

psa::Config ada(double tau, double sparsity, bool keep_sink = true, bool keep_recent = true,
                bool causal = false) {
  psa::Config c = psa_test::method_config(PSA_METHOD_ADA_BSA, sparsity);
  c.cdf_threshold = tau;
  c.keep_sink = keep_sink;
  c.keep_recent = keep_recent;
  c.causal = causal;
  return c;
}

// q = e0, keys of block J = ln(w_J) e0, scale 1: every strided logit of block J is
// (1/8) * 8 * ln(w_J), so each row's block scores are proportional to w_J.
std::string weighted(const psa::Config& cfg, const std::vector<float>& w) {
  const int64_t nb = static_cast<int64_t>(w.size()), len = nb * 128;
  std::vector<float> q(static_cast<size_t>(len * kD), 0.0f), k = q;
  for (int64_t t = 0; t < len; ++t) {
    q[static_cast<size_t>(t * kD)] = 1.0f;
    k[static_cast<size_t>(t * kD)] = std::log(w[static_cast<size_t>(t / 128)]);
  }
  const psa::Plan plan = plan_for(cfg, psa::VideoGeometry{}, len, kD, 1.0);
  return mask_string(levels_of(plan, q, k), nb);
}

std::string rows(const std::string& row, int64_t n) {
  std::string s = row;
  for (int64_t i = 1; i < n; ++i) s += "/" + row;
  return s;
}

// 12 blocks; block 0 (sink) and 11 (last) are excluded from the mass by default, the rest
// weigh 40, 20, 10, 10 and six 1s (total 86).
const std::vector<float> kW12 = {5, 40, 20, 10, 10, 1, 1, 1, 1, 1, 1, 5};

TEST(AdaBsaMask, CdfOneAndSparsityZeroIsDense) {
  EXPECT_EQ(weighted(ada(1.0, 0.0), kW12), rows("111111111111", 12));
}

TEST(AdaBsaMask, CdfCutKeepsTheSmallestMassPrefix) {
  // tau 0.5: 43 of 86 -> 40 + 20 -> K = 2.
  EXPECT_EQ(weighted(ada(0.5, 0.0), kW12), rows("111000000001", 12));
  // tau 0.05 (small): K = 1.
  EXPECT_EQ(weighted(ada(0.05, 0.0), kW12), rows("110000000001", 12));
}

TEST(AdaBsaMask, TiesAtTheGuardAreKept) {
  // tau 0.8: 68.8 -> 40, 60, 70 -> K = 3, guard 10, held by blocks 3 and 4.
  EXPECT_EQ(weighted(ada(0.8, 0.0), kW12), rows("111110000001", 12));
  // tau 1, sparsity 0.5: K = floor(12 * 0.5) = 6, guard = 1 = all six 1s.
  EXPECT_EQ(weighted(ada(1.0, 0.5), kW12), rows("111111111111", 12));
}

TEST(AdaBsaMask, SparsityCapsLongRows) {
  // floor(12 * 0.30000000000000004) = 3 -> guard 10 (ties: blocks 3, 4).
  EXPECT_EQ(weighted(ada(1.0, 0.7), kW12), rows("111110000001", 12));
  // Just below 1: max(1, floor(0.6)) = 1.
  EXPECT_EQ(weighted(ada(1.0, 0.95), kW12), rows("110000000001", 12));
  EXPECT_EQ(weighted(ada(0.8, std::nextafter(1.0, 0.0)), kW12), rows("110000000001", 12));
  // The cap takes the smaller of the two counts: tau 0.5 (K 2) under a cap of 3.
  EXPECT_EQ(weighted(ada(0.5, 0.7), kW12), rows("111000000001", 12));
}

TEST(AdaBsaMask, ShortRowsAreNeverCapped) {
  const std::vector<float> w6 = {5, 40, 20, 10, 10, 5};
  EXPECT_EQ(weighted(ada(1.0, 0.9), w6), rows("111111", 6));
  EXPECT_EQ(weighted(ada(0.4, 0.9), w6), rows("110001", 6));  // 32 of 80 -> K = 1
}

TEST(AdaBsaMask, KeepSinkOnlyChangesTheMass) {
  // tau 0.69. keep_sink: 59.34 of 86 -> K = 2. Without: block 0 (5) joins, 62.79 of 91 ->
  // K = 3 (guard 10, blocks 3 and 4). Block 0 is kept either way.
  EXPECT_EQ(weighted(ada(0.69, 0.0, true), kW12), rows("111000000001", 12));
  EXPECT_EQ(weighted(ada(0.69, 0.0, false), kW12), rows("111110000001", 12));
  // Without keep_sink block 0 competes for the quota: here it takes the only slot.
  EXPECT_EQ(weighted(ada(0.05, 0.0, false), {90, 40, 20, 10, 10, 1, 1, 1, 1, 1, 1, 5}),
            rows("100000000001", 12));
}

TEST(AdaBsaMask, NonCausalAlwaysKeepsTheLastBlock) {
  EXPECT_EQ(weighted(ada(0.5, 0.0, true, false), kW12), rows("111000000001", 12));
  EXPECT_EQ(weighted(ada(0.5, 0.0, false, false), kW12), rows("111000000001", 12));
}

// Uniform logits (q = 0), causal, nb = 4: strided row r spreads 1/(r+1) over groups 0..r,
// so in rows 2 and 3 the off-diagonal blocks outweigh the diagonal and tie each other.
std::string causal_uniform(bool keep_sink, bool keep_recent, double tau) {
  const psa::Config cfg = ada(tau, 0.0, keep_sink, keep_recent, true);
  std::vector<float> z(512 * kD, 0.0f);
  const psa::Plan plan = plan_for(cfg, psa::VideoGeometry{}, 512, kD, 1.0);
  return mask_string(levels_of(plan, z, z), 4);
}

TEST(AdaBsaMask, CausalRows) {
  // Rows 0, 1 (n <= 2) keep all candidates; keep_recent forces the diagonal.
  EXPECT_EQ(causal_uniform(true, true, 0.3), "1000/1100/1110/1111");
  EXPECT_EQ(causal_uniform(true, false, 0.3), "1000/1100/1100/1110");
  EXPECT_EQ(causal_uniform(false, false, 0.3), "1000/1100/1100/1110");
  EXPECT_EQ(causal_uniform(true, true, 1.0), "1000/1100/1110/1111");
}

TEST(AdaBsaMask, KeyTailIsScored) {
  // S = 261: block 2 holds only the 5 tail keys (one partial stride group). Tail queries
  // and keys align strongly, so the tail group takes most of row 2's mass; the NPU kernel
  // drops keys past 8 * floor(S / 8) and would give block 2 no score at all.
  const int64_t len = 261;
  std::mt19937_64 rng(psa_test::fresh_seed());
  std::vector<float> q = psa_test::random_vec(rng, size_t(len * kD), 0.1f);
  std::vector<float> k = psa_test::random_vec(rng, size_t(len * kD), 0.1f);
  for (int64_t t = 256; t < len; ++t) {
    q[static_cast<size_t>(t * kD)] = 1.0f;
    k[static_cast<size_t>(t * kD)] = 20.0f;
  }
  const psa::Config cfg = ada(0.3, 0.0, true, false, true);
  const psa::Plan plan = plan_for(cfg, psa::VideoGeometry{}, len, kD, 1.0);
  EXPECT_EQ(mask_string(levels_of(plan, q, k), 3), "100/110/101");
}

// ---- Independent model (spec 3.2-3.3, double, full matrices, query-reversed groups) ----

std::vector<int8_t> model(const std::vector<float>& q, const std::vector<float>& k, int64_t len,
                          int64_t d, double scale, const psa::Config& c) {
  const int64_t g = (len + 7) / 8, nb = (len + 127) / 128;
  auto row = [&](const std::vector<float>& x, int64_t i) { return i < len ? &x[size_t(i * d)] : nullptr; };
  std::vector<double> sb(size_t(nb * nb), 0.0);
  std::vector<double> a(static_cast<size_t>(g));
  for (int64_t r = 0; r < g; ++r) {
    const int64_t cmax = c.causal ? r + 1 : g;
    double mx = -INFINITY;
    for (int64_t col = 0; col < cmax; ++col) {
      double s = 0;
      for (int64_t j = 0; j < 8; ++j) {
        const float* qr = row(q, 8 * r + 7 - j);
        const float* kr = row(k, 8 * col + j);
        if (!qr || !kr) continue;
        for (int64_t e = 0; e < d; ++e) s += double(qr[e]) * kr[e];
      }
      a[size_t(col)] = s * scale / 8;
      mx = std::max(mx, a[size_t(col)]);
    }
    double sum = 0;
    for (int64_t col = 0; col < cmax; ++col) sum += std::exp(a[size_t(col)] - mx);
    for (int64_t col = 0; col < cmax; ++col)
      sb[size_t(r / 16 * nb + col / 16)] += std::exp(a[size_t(col)] - mx) / sum;
  }
  std::vector<int8_t> m(size_t(nb * nb), 0);
  for (int64_t i = 0; i < nb; ++i) {
    const int64_t n = c.causal ? i + 1 : nb;
    if (c.causal && n <= 2) {
      for (int64_t j = 0; j < n; ++j) m[size_t(i * nb + j)] = 1;
      continue;
    }
    std::vector<bool> ex(size_t(n), false);
    if (c.keep_recent || !c.causal) ex[size_t(n - 1)] = true;
    if (c.keep_sink) ex[0] = true;
    std::vector<double> x(static_cast<size_t>(n));
    for (int64_t j = 0; j < n; ++j) x[size_t(j)] = ex[size_t(j)] ? 0.0 : sb[size_t(i * nb + j)];
    std::vector<double> y = x;
    std::sort(y.begin(), y.end(), std::greater<double>());
    double total = 0;
    for (double v : y) total += v;
    int64_t kk = n;
    if (c.cdf_threshold < 1) {
      double pre = 0;
      for (int64_t j = 0; j < n; ++j) {
        pre += y[size_t(j)];
        if (pre >= c.cdf_threshold * total) {
          kk = j + 1;
          break;
        }
      }
    }
    if (n >= 10) kk = std::min<int64_t>(kk, std::max<int64_t>(1, int64_t(std::floor(n * (1 - c.sparsity)))));
    const double guard = y[size_t(kk - 1)];
    for (int64_t j = 0; j < n; ++j)
      m[size_t(i * nb + j)] = (x[size_t(j)] >= guard || ex[size_t(j)] || j == 0) ? 1 : 0;
  }
  return m;
}

TEST(AdaBsaMask, MatchesIndependentDoubleModel) {
  const uint64_t seed = psa_test::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  struct Case {
    int64_t len;
    double tau, sparsity;
    bool sink, recent, causal;
  };
  const Case cases[] = {{1536, 0.9, 0.5, true, true, false},  {1531, 0.7, 0.0, false, true, false},
                        {1600, 1.0, 0.8, true, true, false},  {1333, 0.95, 0.3, true, false, true},
                        {2048, 0.5, 0.6, false, false, true}, {300, 0.6, 0.9, true, true, false}};
  int64_t total = 0, differ = 0;
  for (const Case& cs : cases) {
    const int64_t d = 16;
    // Video-like tokens (a 1 x 1 x len "grid") make block scores far from uniform.
    const std::vector<float> q = psa_test::video_like(rng, 1, 1, cs.len, d);
    const std::vector<float> k = psa_test::video_like(rng, 1, 1, cs.len, d);
    const psa::Config cfg = ada(cs.tau, cs.sparsity, cs.sink, cs.recent, cs.causal);
    const psa::Plan plan = plan_for(cfg, psa::VideoGeometry{}, cs.len, d);
    const std::vector<int8_t> got = levels_of(plan, q, k);
    const std::vector<int8_t> want = model(q, k, cs.len, d, 1.0 / std::sqrt(double(d)), cfg);
    ASSERT_EQ(got.size(), want.size());
    int64_t diff = 0;
    for (size_t e = 0; e < got.size(); ++e) diff += got[e] != want[e];
    total += static_cast<int64_t>(got.size());
    differ += diff;
    // fp32 vs double can only flip a block sitting exactly at a guard or CDF boundary.
    EXPECT_LE(diff, 1) << "len " << cs.len << " tau " << cs.tau << " sparsity " << cs.sparsity;
  }
  std::printf("[ada_bsa vs double model] %lld of %lld mask entries differ\n",
              static_cast<long long>(differ), static_cast<long long>(total));
}

}  // namespace

// tests/methods/causal_psa_test.cpp -- the causal PSA variant (psa_causal, spec App. A) on
// the CPU backend: the antidiagonal importance against a naive double-precision model built
// from explicitly reshaped (reversed-query) tensors padded to the chunk; the topk /
// energybound levels with text, diagonal, column 0 and the cap against a brute-force rank
// count; the all-level-1 variant against causal dense attention (GQA, partial last block);
// the sparse forward against a double pyramid reference of its own level map; bad input.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "common/api_util.h"
#include "common/test_util.h"
#include "methods/causal_psa.h"
#include "methods/method_test_util.h"

namespace {

using psa_test::ConfigPtr;
using psa_test::ContextPtr;
using psa_test::HostTensor;

// Spec App. A step 1 written the way the reference does it: zero-pad q, k to a multiple of
// the chunk, reshape key t = [k[tS], ..., k[tS+S-1]], query r = [q[rS+S-1], ..., q[rS]],
// logits scale / S * <q~_r, k~_t> on t <= r (padded key groups -inf), softmax, block sums.
// Query groups past ceil(L / S) are padding and dropped.
std::vector<double> naive_importance(const std::vector<float>& q, const std::vector<float>& k,
                                     int64_t len, int64_t d, int64_t bs, int64_t stride,
                                     int64_t chunk, double scale) {
  const int64_t padded = (len + chunk - 1) / chunk * chunk;
  const int64_t groups_all = padded / stride, groups = (len + stride - 1) / stride;
  const int64_t nb = (len + bs - 1) / bs, per = bs / stride, w = stride * d;
  std::vector<double> qr(static_cast<size_t>(groups_all * w), 0.0), kr = qr;
  for (int64_t g = 0; g < groups_all; ++g)
    for (int64_t j = 0; j < stride; ++j)
      for (int64_t e = 0; e < d; ++e) {
        const int64_t ki = g * stride + j, qi = g * stride + stride - 1 - j;
        kr[g * w + j * d + e] = ki < len ? k[ki * d + e] : 0.0;
        qr[g * w + j * d + e] = qi < len ? q[qi * d + e] : 0.0;
      }
  std::vector<double> scores(static_cast<size_t>(nb * nb), 0.0), p(groups_all);
  for (int64_t r = 0; r < groups; ++r) {
    double mx = -INFINITY;
    for (int64_t t = 0; t < groups_all; ++t) {
      if (t > r || t >= groups) {
        p[t] = -INFINITY;
        continue;
      }
      double s = 0.0;
      for (int64_t c = 0; c < w; ++c) s += qr[r * w + c] * kr[t * w + c];
      p[t] = s * scale / static_cast<double>(stride);
      mx = std::max(mx, p[t]);
    }
    double sum = 0.0;
    for (int64_t t = 0; t < groups_all; ++t) sum += p[t] == -INFINITY ? 0.0 : std::exp(p[t] - mx);
    for (int64_t t = 0; t < groups_all; ++t)
      if (p[t] != -INFINITY) scores[(r / per) * nb + t / per] += std::exp(p[t] - mx) / sum;
  }
  return scores;
}

TEST(CausalPsaImportance, EqualsNaiveDoubleModel) {
  const uint64_t seed = psa_test::fresh_seed();
  std::mt19937_64 rng(seed);
  struct Case { int64_t len, bs, stride, chunk; };
  const Case cases[] = {{1000, 128, 8, 256}, {1000, 128, 16, 384}, {777, 64, 8, 128},
                        {517, 64, 16, 192},  {300, 128, 16, 4096}, {129, 128, 8, 128}};
  for (const Case& c : cases) {
    const int64_t d = 16;
    const auto q = psa_test::random_vec(rng, static_cast<size_t>(c.len * d));
    const auto k = psa_test::random_vec(rng, static_cast<size_t>(c.len * d));
    const int64_t nb = (c.len + c.bs - 1) / c.bs;
    const float scale = 0.25f;
    std::vector<float> logits(static_cast<size_t>(c.len)), got(static_cast<size_t>(nb * nb), -1.f);
    psa::causal_psa_importance_cpu(q.data(), k.data(), c.len, d, c.bs, c.stride, c.chunk, scale,
                                   logits.data(), got.data());
    const auto want = naive_importance(q, k, c.len, d, c.bs, c.stride, c.chunk, scale);
    double row_mass = 0.0;
    for (int64_t e = 0; e < nb * nb; ++e) {
      ASSERT_NEAR(got[e], want[e], 2e-5 * std::max(1.0, want[e]))
          << "seed " << seed << " len " << c.len << " stride " << c.stride << " pair " << e;
      row_mass += want[e];
    }
    // Every real strided query row contributes probability mass 1.
    EXPECT_NEAR(row_mass, static_cast<double>((c.len + c.stride - 1) / c.stride), 1e-6);
  }
}

// Brute force of step 2 (spec App. A) by rank counting, no sorting.
std::vector<int8_t> brute_levels(const std::vector<float>& scores, int64_t nb,
                                 psa_mask_mode mode, const double* end, int64_t text_block,
                                 const std::vector<int8_t>& cap) {
  const int lv[5] = {1, 2, 4, 8, 0};
  std::vector<int8_t> out(static_cast<size_t>(nb * nb), 0);
  for (int64_t i = 0; i < nb; ++i) {
    const int64_t valid = i + 1;
    const float* s = scores.data() + i * nb;
    for (int64_t j = 0; j < valid; ++j) {
      int64_t rank = 0;
      double above = 0.0, total = 0.0;
      for (int64_t u = 0; u < valid; ++u) {
        total += s[u];
        if (s[u] > s[j] || (s[u] == s[j] && u < j)) ++rank;
      }
      // Cumulative mass through rank `rank`: in rank order, summed the same way (rank by rank).
      std::vector<std::pair<int64_t, float>> ranked;
      for (int64_t u = 0; u < valid; ++u) {
        int64_t ru = 0;
        for (int64_t x = 0; x < valid; ++x)
          if (s[x] > s[u] || (s[x] == s[u] && x < u)) ++ru;
        ranked.emplace_back(ru, s[u]);
      }
      std::sort(ranked.begin(), ranked.end());
      for (int64_t r = 0; r <= rank; ++r) above += ranked[static_cast<size_t>(r)].second;
      int level = 0;
      if (mode == PSA_MASK_MODE_TOPK) {
        double start = 0.0;
        for (int sl = 0; sl < 5; ++sl) {
          const int64_t lo = static_cast<int64_t>(static_cast<float>(valid) * static_cast<float>(start));
          const int64_t hi = std::min<int64_t>(
              valid, static_cast<int64_t>(static_cast<float>(valid) * static_cast<float>(end[sl])));
          if (rank >= lo && rank < hi) level = lv[sl];
          start = end[sl];
        }
      } else {
        const double e = above / std::max(total, 1e-10);
        double lower = 0.0;
        for (int sl = 0; sl < 5; ++sl) {
          if (lower < e && e <= end[sl]) {
            level = lv[sl];
            break;
          }
          lower = end[sl];
        }
      }
      if (j == i || j == 0 || i >= text_block || j >= text_block) level = 1;
      if (level > 0) level = std::min<int>(level, cap[static_cast<size_t>(j)]);
      out[static_cast<size_t>(i * nb + j)] = static_cast<int8_t>(level);
    }
  }
  return out;
}

TEST(CausalPsaMask, TopkAndEnergyboundEqualBruteForce) {
  const uint64_t seed = psa_test::fresh_seed();
  std::mt19937_64 rng(seed);
  const double ratio_sets[3][5] = {{0.05, 0.15, 0.25, 0.5, 1.0},
                                   {0.7, 0.8, 0.9, 0.9, 1.0},
                                   {0.3, 0.3, 0.6, 0.8, 0.95}};
  const int8_t caps[4] = {1, 2, 4, 8};
  int64_t checked = 0, nonzero_levels[9] = {0};
  for (int trial = 0; trial < 24; ++trial) {
    const int64_t nb = 1 + static_cast<int64_t>(rng() % 40);
    const bool ties = trial % 3 == 0;
    std::vector<float> scores(static_cast<size_t>(nb * nb), 0.0f);
    std::uniform_real_distribution<float> u(0.0f, 1.0f);
    for (int64_t i = 0; i < nb; ++i)
      for (int64_t j = 0; j <= i; ++j) {
        float x = u(rng);
        x = ties ? std::floor(x * 4.0f) / 4.0f : x * x * x;
        scores[static_cast<size_t>(i * nb + j)] = x;
      }
    std::vector<int8_t> cap(static_cast<size_t>(nb));
    for (auto& c : cap) c = caps[rng() % 4];
    if (trial % 2 == 0) std::fill(cap.begin(), cap.end(), int8_t{8});
    const int64_t text_block = trial % 4 == 1 ? nb : static_cast<int64_t>(rng() % (nb + 1));
    for (psa_mask_mode mode : {PSA_MASK_MODE_TOPK, PSA_MASK_MODE_ENERGYBOUND}) {
      const double* end = ratio_sets[trial % 3];
      std::vector<float> row(static_cast<size_t>(nb));
      std::vector<int32_t> order(static_cast<size_t>(nb));
      std::vector<int8_t> got(static_cast<size_t>(nb * nb), -1);
      psa::causal_psa_levels_cpu(scores.data(), nb, mode, end, text_block, cap.data(), row.data(),
                                 order.data(), got.data());
      const auto want = brute_levels(scores, nb, mode, end, text_block, cap);
      ASSERT_EQ(got, want) << "seed " << seed << " trial " << trial << " nb " << nb << " mode "
                           << mode;
      for (int8_t l : got) ++nonzero_levels[l];
      ++checked;
    }
  }
  EXPECT_EQ(checked, 48);
  // The cases reach every level (the comparison is not vacuous).
  for (int l : {0, 1, 2, 4, 8}) EXPECT_GT(nonzero_levels[l], 0) << "level " << l;
}

// Hand-worked rows with exact (dyadic) masses: the crossing block goes to the next level,
// an all-zero row takes no slot, topk truncates valid * end.
TEST(CausalPsaMask, HandWorkedRows) {
  const int64_t nb = 6;
  std::vector<float> scores(static_cast<size_t>(nb * nb), 0.0f);
  const float row5[6] = {0.0625f, 0.5f, 0.25f, 0.125f, 0.0625f, 0.0f};
  for (int j = 0; j < 6; ++j) scores[static_cast<size_t>(5 * nb + j)] = row5[j];
  // Row 4 stays all zero.
  const std::vector<int8_t> cap(nb, 8);
  std::vector<float> row(nb);
  std::vector<int32_t> order(nb);
  std::vector<int8_t> lv(static_cast<size_t>(nb * nb));
  const double e[5] = {0.5, 0.75, 0.875, 0.875, 1.0};
  psa::causal_psa_levels_cpu(scores.data(), nb, PSA_MASK_MODE_ENERGYBOUND, e, nb, cap.data(),
                             row.data(), order.data(), lv.data());
  // E by rank: .5 (j1) -> 1, .75 (j2) -> 2, .875 (j3) -> 4, .9375 (j0) and 1 (j4, j5) -> 0;
  // then column 0 and the diagonal -> 1.
  EXPECT_EQ(std::vector<int8_t>(lv.begin() + 5 * nb, lv.end()),
            (std::vector<int8_t>{1, 1, 2, 4, 0, 1}));
  EXPECT_EQ(std::vector<int8_t>(lv.begin() + 4 * nb, lv.begin() + 5 * nb),
            (std::vector<int8_t>{1, 0, 0, 0, 1, 0}));
  // topk, valid = 6: L1 [0, trunc(6*.5) = 3), L2 [3, 4), L4 [4, 5), L8 [5, 5), L0 [5, 6).
  psa::causal_psa_levels_cpu(scores.data(), nb, PSA_MASK_MODE_TOPK, e, nb, cap.data(),
                             row.data(), order.data(), lv.data());
  // Ranks: j1, j2, j3, j0, j4, j5 -> 1, 1, 1, 2, 4, 0; column 0 and the diagonal -> 1.
  EXPECT_EQ(std::vector<int8_t>(lv.begin() + 5 * nb, lv.end()),
            (std::vector<int8_t>{1, 1, 1, 1, 4, 1}));
  // Row 4 (all ties at 0, valid 5): ranks by index, L1 [0, 2), L2 [2, 3), L4 [3, 4), L0 [4, 5).
  EXPECT_EQ(std::vector<int8_t>(lv.begin() + 4 * nb, lv.begin() + 5 * nb),
            (std::vector<int8_t>{1, 1, 2, 4, 1, 0}));
  // Text: the last block as rows and columns; cap 2 on key block 3.
  std::vector<int8_t> cap2(cap);
  cap2[3] = 2;
  psa::causal_psa_levels_cpu(scores.data(), nb, PSA_MASK_MODE_ENERGYBOUND, e, 5, cap2.data(),
                             row.data(), order.data(), lv.data());
  EXPECT_EQ(std::vector<int8_t>(lv.begin() + 5 * nb, lv.end()),
            (std::vector<int8_t>{1, 1, 1, 1, 1, 1}));
  EXPECT_EQ(std::vector<int8_t>(lv.begin() + 4 * nb, lv.begin() + 5 * nb),
            (std::vector<int8_t>{1, 0, 0, 0, 1, 0}));
  psa::causal_psa_levels_cpu(scores.data(), nb, PSA_MASK_MODE_ENERGYBOUND, e, nb, cap2.data(),
                             row.data(), order.data(), lv.data());
  EXPECT_EQ(lv[5 * nb + 3], 2);  // min(4, cap 2)
  EXPECT_EQ(lv[5 * nb + 2], 2);  // cap 8
}

// --- forwards through the C API ------------------------------------------------------------

ConfigPtr causal_config(psa_mask_mode mode, const double* ends, int64_t stride, int64_t bs,
                        int64_t text) {
  psa_config* c = nullptr;
  EXPECT_EQ(psa_config_create(&c), PSA_OK);
  ConfigPtr cfg(c);
  EXPECT_EQ(psa_config_set_int(c, PSA_PARAM_METHOD, PSA_METHOD_PSA_CAUSAL), PSA_OK);
  EXPECT_EQ(psa_config_set_int(c, PSA_PARAM_CAUSAL, 1), PSA_OK);
  EXPECT_EQ(psa_config_set_int(c, PSA_PARAM_BLOCK_M, bs), PSA_OK);
  EXPECT_EQ(psa_config_set_int(c, PSA_PARAM_BLOCK_N, bs), PSA_OK);
  EXPECT_EQ(psa_config_set_int(c, PSA_PARAM_MASK_MODE, mode), PSA_OK);
  EXPECT_EQ(psa_config_set_int(c, PSA_PARAM_XATTN_STRIDE, stride), PSA_OK);
  EXPECT_EQ(psa_config_set_int(c, PSA_PARAM_XATTN_CHUNK_SIZE, 2 * bs), PSA_OK);
  EXPECT_EQ(psa_config_set_int(c, PSA_PARAM_TEXT_LENGTH, text), PSA_OK);
  const psa_param ids[5] = {PSA_PARAM_RATIO_L1, PSA_PARAM_RATIO_L2, PSA_PARAM_RATIO_L4,
                            PSA_PARAM_RATIO_L8, PSA_PARAM_RATIO_L0};
  for (int s = 0; s < 5; ++s) EXPECT_EQ(psa_config_set_double(c, ids[s], ends[s]), PSA_OK);
  const double sim[3] = {0.2, 0.1, 0.0};
  const psa_param sid[3] = {PSA_PARAM_SIM_THRESHOLD_X2, PSA_PARAM_SIM_THRESHOLD_X4,
                            PSA_PARAM_SIM_THRESHOLD_X8};
  for (int s = 0; s < 3; ++s) EXPECT_EQ(psa_config_set_double(c, sid[s], sim[s]), PSA_OK);
  return cfg;
}

struct Gqa {
  int64_t hq = 4, hk = 2, len = 300, d = 32;
};

void fill(HostTensor& t, std::mt19937_64& rng, int64_t heads, int64_t len, int64_t d) {
  for (int64_t h = 0; h < heads; ++h) {
    auto v = psa_test::video_like(rng, 1, 1, len, d, 0.3f);
    t.set_head(0, h, v);
  }
}

TEST(CausalPsaForward, AllLevelOneEqualsCausalDenseGqa) {
  const uint64_t seed = psa_test::fresh_seed();
  std::mt19937_64 rng(seed);
  const double ends[5] = {1.0, 1.0, 1.0, 1.0, 1.0};
  for (int64_t bs : {64, 128}) {
    const Gqa g;
    ConfigPtr cfg = causal_config(PSA_MASK_MODE_TOPK, ends, 16, bs, 40);
    psa_context* ctx = nullptr;
    PSA_ASSERT_OK(psa_context_create(cfg.get(), PSA_BACKEND_CPU, 0, &ctx));
    ContextPtr hold(ctx);
    HostTensor q(PSA_LAYOUT_BNSD, PSA_DTYPE_F32, 1, g.hq, g.len, g.d);
    HostTensor k(PSA_LAYOUT_BNSD, PSA_DTYPE_F32, 1, g.hk, g.len, g.d), v = k;
    HostTensor out(PSA_LAYOUT_BNSD, PSA_DTYPE_F32, 1, g.hq, g.len, g.d);
    fill(q, rng, g.hq, g.len, g.d);
    fill(k, rng, g.hk, g.len, g.d);
    fill(v, rng, g.hk, g.len, g.d);
    std::vector<float> lse;
    PSA_ASSERT_OK(psa_test::forward_cpu(ctx, q, k, v, &out, &lse));
    for (int64_t h = 0; h < g.hq; ++h) {
      const int64_t hk = h / (g.hq / g.hk);
      const auto want = psa_test::ref_attention(q.head(0, h), g.len, k.head(0, hk), v.head(0, hk),
                                                g.len, g.d, 1.0 / std::sqrt(double(g.d)),
                                                [](int64_t x, int64_t t) { return t <= x; });
      EXPECT_LT(psa_test::rel_l2(out.head(0, h), want), 1e-5) << "seed " << seed << " head " << h;
    }
  }
}

// Double model of the sparse stage for a given level map (spec 6.2 + 6.5): level-p token t
// of block J is the mean of keys [t*p, t*p+p) (replicate-padded), weight p, visible iff its
// last key is <= x.
std::vector<double> pyramid_ref(const std::vector<float>& q, const std::vector<float>& k,
                                const std::vector<float>& v, int64_t len, int64_t d, int64_t bs,
                                const int8_t* levels, double scale) {
  const int64_t nb = (len + bs - 1) / bs;
  std::vector<double> out(static_cast<size_t>(len * d), 0.0);
  for (int64_t x = 0; x < len; ++x) {
    const int64_t i = x / bs;
    std::vector<double> z, vals;
    for (int64_t j = 0; j < nb; ++j) {
      const int p = levels[i * nb + j];
      if (p == 0) continue;
      for (int64_t t0 = j * bs; t0 < (j + 1) * bs; t0 += p) {
        if (t0 + p - 1 > x) continue;
        std::vector<double> km(d, 0.0), vm(d, 0.0);
        for (int64_t u = t0; u < t0 + p; ++u)
          for (int64_t c = 0; c < d; ++c) {
            km[c] += k[std::min(u, len - 1) * d + c] / p;
            vm[c] += v[std::min(u, len - 1) * d + c] / p;
          }
        double s = 0.0;
        for (int64_t c = 0; c < d; ++c) s += q[x * d + c] * km[c];
        z.push_back(s * scale + std::log(double(p)));
        vals.insert(vals.end(), vm.begin(), vm.end());
      }
    }
    const double mx = *std::max_element(z.begin(), z.end());
    double sum = 0.0;
    for (size_t e = 0; e < z.size(); ++e) {
      const double w = std::exp(z[e] - mx);
      sum += w;
      for (int64_t c = 0; c < d; ++c) out[x * d + c] += w * vals[e * d + c];
    }
    for (int64_t c = 0; c < d; ++c) out[x * d + c] /= sum;
  }
  return out;
}

TEST(CausalPsaForward, SparseEqualsPyramidReferenceOfItsLevelMap) {
  const uint64_t seed = psa_test::fresh_seed();
  std::mt19937_64 rng(seed);
  const double ends[2][5] = {{0.3, 0.5, 0.7, 0.8, 1.0}, {0.2, 0.4, 0.5, 0.7, 1.0}};
  for (psa_mask_mode mode : {PSA_MASK_MODE_ENERGYBOUND, PSA_MASK_MODE_TOPK}) {
    const Gqa g{4, 2, 1000, 32};
    const int64_t bs = 64, nb = (g.len + bs - 1) / bs;
    ConfigPtr cfg = causal_config(mode, ends[mode == PSA_MASK_MODE_TOPK], 8, bs, 70);
    psa_context* ctx = nullptr;
    PSA_ASSERT_OK(psa_context_create(cfg.get(), PSA_BACKEND_CPU, 0, &ctx));
    ContextPtr hold(ctx);
    HostTensor q(PSA_LAYOUT_BNSD, PSA_DTYPE_F32, 1, g.hq, g.len, g.d);
    HostTensor k(PSA_LAYOUT_BNSD, PSA_DTYPE_F32, 1, g.hk, g.len, g.d), v = k;
    HostTensor out(PSA_LAYOUT_BNSD, PSA_DTYPE_F32, 1, g.hq, g.len, g.d);
    fill(q, rng, g.hq, g.len, g.d);
    fill(k, rng, g.hk, g.len, g.d);
    fill(v, rng, g.hk, g.len, g.d);
    PSA_ASSERT_OK(psa_test::forward_cpu(ctx, q, k, v, &out, nullptr));
    std::vector<int8_t> levels(static_cast<size_t>(g.hq * nb * nb));
    PSA_ASSERT_OK(psa_context_get_level_map(ctx, levels.data(), levels.size()));
    int64_t pooled = 0, skipped = 0;
    for (int64_t h = 0; h < g.hq; ++h) {
      const int8_t* lv = levels.data() + h * nb * nb;
      const int64_t text_block = (g.len - 70) / bs;
      for (int64_t i = 0; i < nb; ++i)
        for (int64_t j = 0; j < nb; ++j) {
          const int l = lv[i * nb + j];
          if (j > i) EXPECT_EQ(l, 0);
          if (j <= i && (j == i || j == 0 || i >= text_block || j >= text_block)) EXPECT_EQ(l, 1);
          pooled += l > 1;
          skipped += j <= i && l == 0;
        }
      const int64_t hk = h / (g.hq / g.hk);
      const auto want = pyramid_ref(q.head(0, h), k.head(0, hk), v.head(0, hk), g.len, g.d, bs, lv,
                                    1.0 / std::sqrt(double(g.d)));
      const auto got = out.head(0, h);
      for (float x : got) ASSERT_TRUE(std::isfinite(x));
      EXPECT_LT(psa_test::rel_l2(got, want), 1e-5) << "seed " << seed << " head " << h;
    }
    EXPECT_GT(pooled, 0) << "mode " << mode;
    EXPECT_GT(skipped, 0) << "mode " << mode;
  }
}

// --- bad input ------------------------------------------------------------------------------

std::string validate_message(psa_config* c) {
  EXPECT_NE(psa_config_validate(c), PSA_OK);
  return psa_last_error_message();
}

TEST(CausalPsaConfig, BadInputIsNamed) {
  const double ends[5] = {0.7, 0.8, 0.9, 0.9, 1.0};
  {
    ConfigPtr c = causal_config(PSA_MASK_MODE_ENERGYBOUND, ends, 8, 128, 0);
    EXPECT_EQ(psa_config_validate(c.get()), PSA_OK) << psa_last_error_message();
    ASSERT_EQ(psa_config_set_int(c.get(), PSA_PARAM_CAUSAL, 0), PSA_OK);
    EXPECT_NE(validate_message(c.get()).find("causal = false"), std::string::npos);
  }
  {
    ConfigPtr c = causal_config(PSA_MASK_MODE_ENERGYBOUND, ends, 8, 128, 0);
    ASSERT_EQ(psa_config_set_int(c.get(), PSA_PARAM_METHOD, PSA_METHOD_PSA), PSA_OK);
    EXPECT_NE(validate_message(c.get()).find("mask_mode = energybound"), std::string::npos);
  }
  {
    ConfigPtr c = causal_config(PSA_MASK_MODE_TOPK, ends, 24, 128, 0);
    EXPECT_NE(validate_message(c.get()).find("xattn_stride = 24: must divide block_size.m (128)"),
              std::string::npos);
  }
  {
    ConfigPtr c = causal_config(PSA_MASK_MODE_THRESHOLDBOUND, ends, 8, 128, 0);
    EXPECT_NE(validate_message(c.get()).find("mask_mode = thresholdbound"), std::string::npos);
  }
  {
    ConfigPtr c = causal_config(PSA_MASK_MODE_TOPK, ends, 8, 128, 0);
    ASSERT_EQ(psa_config_set_int(c.get(), PSA_PARAM_XATTN_CHUNK_SIZE, 1000), PSA_OK);
    EXPECT_NE(validate_message(c.get()).find("xattn_chunk_size = 1000"), std::string::npos);
    EXPECT_NE(psa_config_set_int(c.get(), PSA_PARAM_XATTN_STRIDE, 0), PSA_OK);
    EXPECT_NE(std::string(psa_last_error_message()).find("xattn_stride"), std::string::npos);
  }
  {
    ConfigPtr c = causal_config(PSA_MASK_MODE_TOPK, ends, 8, 128, 0);
    ASSERT_EQ(psa_config_set_int(c.get(), PSA_PARAM_BLOCK_N, 64), PSA_OK);
    EXPECT_NE(validate_message(c.get()).find("block_size.n = 64"), std::string::npos);
  }
  // Lq != Lk (a decode step): refused when planned, nothing written.
  ConfigPtr c = causal_config(PSA_MASK_MODE_ENERGYBOUND, ends, 8, 128, 0);
  psa_context* ctx = nullptr;
  PSA_ASSERT_OK(psa_context_create(c.get(), PSA_BACKEND_CPU, 0, &ctx));
  ContextPtr hold(ctx);
  HostTensor q(PSA_LAYOUT_BNSD, PSA_DTYPE_F32, 1, 2, 1, 32);
  HostTensor k(PSA_LAYOUT_BNSD, PSA_DTYPE_F32, 1, 2, 200, 32), v = k;
  HostTensor out(PSA_LAYOUT_BNSD, PSA_DTYPE_F32, 1, 2, 1, 32);
  std::fill(out.bytes.begin(), out.bytes.end(), uint8_t{0x7f});
  const auto before = out.bytes;
  EXPECT_EQ(psa_test::forward_cpu(ctx, q, k, v, &out, nullptr), PSA_ERR_INVALID_SHAPE);
  EXPECT_NE(std::string(psa_last_error_message()).find("k: seq_len = 200"), std::string::npos)
      << psa_last_error_message();
  EXPECT_EQ(out.bytes, before);
}

TEST(CausalPsaConfig, ShippedPresetsLoad) {
  for (const char* model : {"Qwen2.5-VL-7B", "Qwen2-VL-7B"}) {
    psa_config* c = nullptr;
    PSA_ASSERT_OK(psa_config_load_embedded(model, nullptr, &c));
    ConfigPtr hold(c);
    int64_t method = -1, mode = -1, stride = -1, chunk = -1, text = -1, bm = -1;
    double l1 = 0, l8 = 0;
    PSA_ASSERT_OK(psa_config_get_int(c, PSA_PARAM_METHOD, &method));
    PSA_ASSERT_OK(psa_config_get_int(c, PSA_PARAM_MASK_MODE, &mode));
    PSA_ASSERT_OK(psa_config_get_int(c, PSA_PARAM_XATTN_STRIDE, &stride));
    PSA_ASSERT_OK(psa_config_get_int(c, PSA_PARAM_XATTN_CHUNK_SIZE, &chunk));
    PSA_ASSERT_OK(psa_config_get_int(c, PSA_PARAM_TEXT_LENGTH, &text));
    PSA_ASSERT_OK(psa_config_get_int(c, PSA_PARAM_BLOCK_M, &bm));
    PSA_ASSERT_OK(psa_config_get_double(c, PSA_PARAM_RATIO_L1, &l1));
    PSA_ASSERT_OK(psa_config_get_double(c, PSA_PARAM_RATIO_L8, &l8));
    EXPECT_EQ(method, PSA_METHOD_PSA_CAUSAL);
    EXPECT_EQ(mode, PSA_MASK_MODE_ENERGYBOUND);
    EXPECT_EQ(stride, 8);
    EXPECT_EQ(chunk, 4096);
    EXPECT_EQ(text, 512);
    EXPECT_EQ(bm, 128);
    EXPECT_EQ(l1, 0.7);
    EXPECT_EQ(l8, 0.9);
    psa_config* t = nullptr;
    PSA_ASSERT_OK(psa_config_load_embedded(model, "psa_topk", &t));
    ConfigPtr hold_t(t);
    PSA_ASSERT_OK(psa_config_get_int(t, PSA_PARAM_XATTN_STRIDE, &stride));
    EXPECT_EQ(stride, 16);
  }
}

}  // namespace

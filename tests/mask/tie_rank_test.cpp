// tests/mask/tie_rank_test.cpp -- the secondary rank criterion of tied key blocks (tie mass,
// importance_spec.h / mask_spec.h): build_mask_row ranks equal scores by tie mass, then key
// index, against an independent brute-force ranking; the tie rule never changes a level's
// count; importance_cpu's tie masses against a double-precision evaluation of their
// definition on inputs with exact ties; a top run no longer than topk_unsplit_top_run gets its
// levels whatever its tie masses. Host only.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "common/test_util.h"
#include "importance/importance.h"
#include "importance/importance_spec.h"
#include "mask/mask.h"
#include "mask/mask_spec.h"

namespace {

// Rank of each block by counting, for every block, the blocks that must come before it:
// higher score, or equal score and higher tie mass, or both equal and lower index.
std::vector<int32_t> brute_force_order(const std::vector<float>& s, const std::vector<float>& t) {
  const size_t n = s.size();
  std::vector<int32_t> order(n, -1);
  for (size_t a = 0; a < n; ++a) {
    size_t before = 0;
    for (size_t b = 0; b < n; ++b) {
      if (b == a) continue;
      const bool first = s[b] > s[a] || (s[b] == s[a] && (t[b] > t[a] || (t[b] == t[a] && b < a)));
      before += first ? 1 : 0;
    }
    order[before] = static_cast<int32_t>(a);
  }
  return order;
}

psa::MaskRowParams params(psa_mask_mode mode, int64_t bn) {
  psa::MaskRowParams p;
  p.mode = mode;
  p.block_n = bn;
  p.tile_n = 32;
  const double topk[5] = {0.1, 0.15, 0.15, 0.35, 1.0}, tb[5] = {0.4, 0.5, 0.6, 0.8, 1.0};
  std::copy(mode == PSA_MASK_MODE_TOPK ? topk : tb, (mode == PSA_MASK_MODE_TOPK ? topk : tb) + 5, p.ratio_end);
  return p;
}

TEST(TieRank, EqualScoresRankByTieMassThenIndex) {
  const uint64_t seed = psa_test::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  int64_t reordered = 0;
  for (int rep = 0; rep < 300; ++rep) {
    const int64_t n = 1 + static_cast<int64_t>(rng() % 200);
    // Scores on a coarse grid (many exact ties); tie masses on a coarse grid too (ties of both).
    std::vector<float> s(static_cast<size_t>(n)), t(s.size());
    const int levels = 1 + static_cast<int>(rng() % 6);
    for (auto& v : s) v = static_cast<float>(rng() % levels) / static_cast<float>(levels);
    for (auto& v : t) v = rep % 3 == 0 ? 0.0f : static_cast<float>(rng() % 5) * 0.75f;
    for (psa_mask_mode mode : {PSA_MASK_MODE_TOPK, PSA_MASK_MODE_THRESHOLDBOUND}) {
      for (int64_t bn : {32, 64, 128}) {
        const psa::MaskRowParams p = params(mode, bn);
        std::vector<int8_t> lv(s.size(), -1), lv_index(s.size(), -1);
        std::vector<int32_t> order(s.size()), order_index(s.size());
        int64_t seg[5], seg_index[5];
        psa::build_mask_row(s.data(), n, p, lv.data(), order.data(), seg, t.data());
        ASSERT_EQ(brute_force_order(s, t), order) << "n " << n << " mode " << mode << " bn " << bn;
        for (int64_t r = 0; r < n; ++r) EXPECT_EQ(lv[order[r]], psa::level_of_rank(r, seg));
        // Without tie masses: key index among equal scores, and the same interval ends (the
        // cumulative mass is equal within a run of equal scores).
        psa::build_mask_row(s.data(), n, p, lv_index.data(), order_index.data(), seg_index, nullptr);
        ASSERT_EQ(brute_force_order(s, std::vector<float>(s.size(), 0.0f)), order_index);
        for (int k = 0; k < 5; ++k) EXPECT_EQ(seg[k], seg_index[k]) << "slot " << k;
        reordered += order != order_index ? 1 : 0;
      }
    }
  }
  EXPECT_GT(reordered, 100);  // the tie masses did reorder rows
}

// The case of the issue: the top blocks tie at one score; the tie mass decides which of them
// take level 1, the rest keep their key order.
TEST(TieRank, TopRunIsRankedByTieMass) {
  std::vector<float> s(20, 0.01f), t(20, 0.0f);
  for (int j : {2, 7, 11, 15}) s[j] = 0.2f;  // four blocks tie at the top
  t[2] = 1.5f;
  t[7] = 6.0f;
  t[11] = 1.5f;
  t[15] = 3.25f;
  std::vector<int8_t> lv(20);
  std::vector<int32_t> order(20);
  psa::build_mask_row(s.data(), 20, params(PSA_MASK_MODE_TOPK, 128), lv.data(), order.data(), nullptr, t.data());
  EXPECT_EQ((std::vector<int32_t>{7, 15, 2, 11, 0, 1, 3}), std::vector<int32_t>(order.begin(), order.begin() + 7));
  // topk n = 20: L1 = trunc(2.0) = 2 blocks, L2 = trunc(3.0) - 2 = 1 block.
  EXPECT_EQ(1, lv[7]);
  EXPECT_EQ(1, lv[15]);
  EXPECT_EQ(2, lv[2]);
  EXPECT_NE(1, lv[11]);
  EXPECT_NE(2, lv[11]);
}

// topk_unsplit_top_run: a top run no longer than it gets the same levels whatever its tie
// masses; a longer one does not (some rows' levels change). Random topk rows: a top run of
// random length, random tie masses on it, scores below it (with their own ties).
TEST(TieRank, UnsplitTopRunNeedsNoTieMass) {
  const uint64_t seed = psa_test::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  int64_t short_runs = 0, long_runs = 0, long_changed = 0;
  for (int rep = 0; rep < 2000; ++rep) {
    const int64_t bn = rep % 3 == 0 ? 32 : rep % 3 == 1 ? 64 : 128;
    psa::MaskRowParams p = params(PSA_MASK_MODE_TOPK, bn);
    if (rep % 2 == 1)  // random interval ends (ascending ratios), besides the reference's
      for (int s = 0, prev = 0; s < 4; ++s) p.ratio_end[s] = (prev += static_cast<int>(rng() % 25)) / 100.0;
    const int64_t n = 1 + static_cast<int64_t>(rng() % 300);
    const int64_t c = psa::topk_unsplit_top_run(n, p.ratio_end, p.block_n, p.tile_n);
    ASSERT_GE(c, 1);
    ASSERT_LE(c, n);
    const int64_t run = 1 + static_cast<int64_t>(rng() % static_cast<uint64_t>(std::min<int64_t>(n, 2 * c + 3)));
    std::vector<float> s(static_cast<size_t>(n)), t(s.size(), 0.0f);
    for (auto& v : s) v = static_cast<float>(rng() % 50) / 100.0f;  // below the top score
    std::vector<size_t> idx(s.size());
    for (size_t j = 0; j < idx.size(); ++j) idx[j] = j;
    std::shuffle(idx.begin(), idx.end(), rng);
    for (int64_t k = 0; k < run; ++k) {
      s[idx[static_cast<size_t>(k)]] = 0.75f;
      t[idx[static_cast<size_t>(k)]] = static_cast<float>(1 + rng() % 32);
    }
    std::vector<int8_t> with(s.size()), without(s.size());
    psa::build_mask_row(s.data(), n, p, with.data(), nullptr, nullptr, t.data());
    psa::build_mask_row(s.data(), n, p, without.data(), nullptr, nullptr, nullptr);
    if (run <= c) {
      ++short_runs;
      ASSERT_EQ(with, without) << "n " << n << " bn " << bn << " run " << run << " unsplit " << c;
    } else {
      ++long_runs;
      long_changed += with != without ? 1 : 0;
    }
  }
  EXPECT_GT(short_runs, 200);
  EXPECT_GT(long_runs, 200);
  EXPECT_GT(long_changed, long_runs / 4) << "runs past unsplit_top_run should often depend on the tie masses";
}

TEST(TieRank, TieKeyOrdersLikeTieMass) {
  const float v[] = {0.0f, -0.0f, 1e-30f, 0.5f, 1.0f, 1.0f, 2.75f, 31.0f, 128.0f};
  for (float a : v)
    for (float b : v) {
      EXPECT_EQ(psa::tie_key(a) < psa::tie_key(b), psa::ranks_before(1.0f, a, 5, 1.0f, b, 5) && !(a == b))
          << a << " " << b;
      EXPECT_EQ(psa::tie_key(a) == psa::tie_key(b), a == b) << a << " " << b;
    }
  EXPECT_TRUE(psa::ranks_before(0.5f, 0.0f, 9, 0.25f, 7.0f, 0));   // score first
  EXPECT_TRUE(psa::ranks_before(0.5f, 2.0f, 9, 0.5f, 1.0f, 0));    // then tie mass
  EXPECT_TRUE(psa::ranks_before(0.5f, 1.0f, 0, 0.5f, 1.0f, 9));    // then index
  EXPECT_TRUE(psa::ranks_before(-1.0f, 0.0f, 9, NAN, 5.0f, 0));    // NaN scores last
}

// Double-precision reference of spec 3.4 plus the tie mass: T[i, j] = sum_r exp(a - m[r]) for
// the blocks whose best logit equals some sampled row's maximum, 0 elsewhere.
void brute_force_ties(const std::vector<float>& q, const std::vector<float>& k, int64_t L, int64_t d,
                      int64_t bm, int64_t bn, const std::vector<int32_t>& qo, const std::vector<int32_t>& ko,
                      double scale, std::vector<double>* ties, std::vector<int>* top) {
  const int64_t mq = (L + bm - 1) / bm, nk = (L + bn - 1) / bn;
  ties->assign(static_cast<size_t>(mq * nk), 0.0);
  top->assign(ties->size(), 0);
  std::vector<double> sum(ties->size(), 0.0);
  for (int64_t i = 0; i < mq; ++i)
    for (int32_t qs : qo) {
      const int64_t x = std::min<int64_t>(i * bm + qs, L - 1);
      std::vector<double> a(static_cast<size_t>(nk), -INFINITY);
      for (int64_t j = 0; j < nk; ++j)
        for (int32_t ks : ko) {
          const int64_t tk = std::min<int64_t>(j * bn + ks, L - 1);
          double dot = 0;
          for (int64_t c = 0; c < d; ++c) dot += double(q[x * d + c]) * k[tk * d + c];
          a[j] = std::max(a[j], scale * dot);
        }
      const double m = *std::max_element(a.begin(), a.end());
      for (int64_t j = 0; j < nk; ++j) {
        sum[i * nk + j] += std::exp(a[j] - m);
        if (a[j] == m) (*top)[i * nk + j] = 1;
      }
    }
  for (size_t e = 0; e < ties->size(); ++e) (*ties)[e] = (*top)[e] ? sum[e] : 0.0;
}

TEST(TieRank, ImportanceTieMassesMatchTheirDefinition) {
  const uint64_t seed = psa_test::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  // Small integers and scale 1/8: every dot and logit is exact in fp32, so the top blocks tie
  // exactly (several blocks often share a row's best logit) and the tie set is known exactly.
  for (int64_t bn : {32, 64, 128}) {
    const int64_t L = 1000, d = 64, bm = 128;
    std::vector<float> q(static_cast<size_t>(L * d)), k(q.size());
    for (auto& v : q) v = static_cast<float>(static_cast<int>(rng() % 5) - 2);
    for (auto& v : k) v = static_cast<float>(static_cast<int>(rng() % 5) - 2);
    std::vector<int32_t> qo(32), ko(static_cast<size_t>(bn / 4)), scratch(128);
    psa::sample_offsets(seed, 0, 1, psa::kSampleQuery, 128, 32, scratch.data(), qo.data());
    psa::sample_offsets(seed, 0, 1, psa::kSampleKey, static_cast<int32_t>(bn), static_cast<int32_t>(ko.size()),
                        scratch.data(), ko.data());
    const int64_t mq = (L + bm - 1) / bm, nk = (L + bn - 1) / bn;
    std::vector<float> scores(static_cast<size_t>(mq * nk)), ties(scores.size(), NAN), scores_only(scores.size());
    psa::importance_cpu(q.data(), L, k.data(), L, d, bm, bn, qo.data(), 32, ko.data(), static_cast<int32_t>(ko.size()),
                        0.125f, scores.data(), ties.data());
    psa::importance_cpu(q.data(), L, k.data(), L, d, bm, bn, qo.data(), 32, ko.data(), static_cast<int32_t>(ko.size()),
                        0.125f, scores_only.data());
    EXPECT_EQ(scores, scores_only);  // tie masses do not touch the scores
    std::vector<double> want;
    std::vector<int> top;
    brute_force_ties(q, k, L, d, bm, bn, qo, ko, 0.125, &want, &top);
    int64_t tied_rows = 0;
    for (int64_t i = 0; i < mq; ++i) {
      int64_t at_top = 0;
      const float best = *std::max_element(scores.begin() + i * nk, scores.begin() + (i + 1) * nk);
      for (int64_t j = 0; j < nk; ++j) {
        const size_t e = static_cast<size_t>(i * nk + j);
        EXPECT_EQ(top[e] != 0, ties[e] != 0.0f) << "block " << i << "," << j;
        EXPECT_NEAR(want[e], ties[e], 1e-5 * std::max(1.0, want[e])) << "block " << i << "," << j;
        EXPECT_EQ(top[e] != 0, scores[e] == best);  // the tie masses sit on the top score
        at_top += top[e];
      }
      EXPECT_GE(at_top, 1);
      tied_rows += at_top > 1 ? 1 : 0;
    }
    EXPECT_GT(tied_rows, 0) << "bn " << bn;
  }
}

TEST(TieRank, TieMassSumOrderIsTheButterfly) {
  // Independent statement of the order: partials by r mod 32, then the xor butterfly.
  std::mt19937_64 rng(psa_test::fresh_seed());
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  for (int count : {1, 7, 8, 16, 31, 32, 33, 64, 100, 128}) {
    std::vector<float> e(static_cast<size_t>(count));
    for (auto& v : e) v = u(rng) * (rng() % 2 ? 1.0f : 1e-4f);
    float w[32] = {};
    for (int r = 0; r < count; ++r) w[r % 32] = w[r % 32] + e[static_cast<size_t>(r)];
    for (int o : {16, 8, 4, 2, 1}) {
      float nw[32];
      for (int l = 0; l < 32; ++l) nw[l] = w[l] + w[l ^ o];
      std::copy(nw, nw + 32, w);
    }
    const float got = psa::tie_mass(e.data(), count, 1);
    EXPECT_EQ(w[0], got) << count;
    double exact = 0;
    for (float v : e) exact += v;
    EXPECT_NEAR(exact, got, 1e-5 * exact);
  }
}

}  // namespace

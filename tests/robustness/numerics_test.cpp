// tests/robustness/numerics_test.cpp -- the whole pipeline (public API, CPU backend) on
// numerically hostile inputs: NaN/Inf reach exactly the rows that read them, rows that
// attend to nothing give zeros and LSE = -inf, logits near 1e8 neither overflow nor lose the
// softmax winner (also through the +ln p bias of pooled keys), and degenerate lengths
// (L = 1, one block, Lq = 1 against a long key sequence). Run under ASan/UBSan by
// scripts/sanitize.sh, which also catches out-of-bounds reads on these paths.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>
#include <vector>

#include "robustness/robust_env.h"

namespace psa_robust {
namespace {

using Edits = std::vector<std::pair<psa_param, double>>;

// A CPU context from the library defaults plus `edits` (int parameters given as doubles).
ContextPtr make_context(const Edits& edits) {
  psa_config* raw = nullptr;
  EXPECT_EQ(psa_config_create(&raw), PSA_OK);
  ConfigPtr cfg(raw);
  for (const auto& [p, value] : edits) {
    psa_param_type type = PSA_PARAM_TYPE_INT;
    psa_param_info(p, nullptr, &type, nullptr, nullptr);
    const psa_status st = type == PSA_PARAM_TYPE_INT
                              ? psa_config_set_int(raw, p, static_cast<int64_t>(value))
                              : psa_config_set_double(raw, p, value);
    EXPECT_EQ(st, PSA_OK) << psa_last_error_message();
  }
  psa_context* ctx = nullptr;
  EXPECT_EQ(psa_context_create(raw, PSA_BACKEND_CPU, -1, &ctx), PSA_OK) << psa_last_error_message();
  return ContextPtr(ctx);
}

// Mask situations used below.
const Edits kDense = {{PSA_PARAM_METHOD, PSA_METHOD_DENSE}};
const Edits kPsaDefault = {};
// Every block at level 1 (ratio end of level 1 = 1): the sparse path computing dense attention.
const Edits kAllLevel1 = {{PSA_PARAM_RATIO_L1, 1.0}, {PSA_PARAM_RATIO_L2, 1.0}, {PSA_PARAM_RATIO_L4, 1.0},
                          {PSA_PARAM_RATIO_L8, 1.0}};
// Every block at level 2: every key is a pooled pair carrying the +ln 2 bias.
const Edits kAllLevel2 = {{PSA_PARAM_RATIO_L1, 0.0}, {PSA_PARAM_RATIO_L2, 1.0}, {PSA_PARAM_RATIO_L4, 1.0},
                          {PSA_PARAM_RATIO_L8, 1.0}};
// topk quotas that keep nothing: every block is skipped.
const Edits kKeepNothing = {{PSA_PARAM_RATIO_L1, 0.0}, {PSA_PARAM_RATIO_L2, 0.0}, {PSA_PARAM_RATIO_L4, 0.0},
                            {PSA_PARAM_RATIO_L8, 0.0}};

Edits plus(Edits a, const Edits& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

struct Problem {
  HostTensor q, k, v, out;
  std::vector<float> lse;
  Problem(psa_dtype dt, int64_t h, int64_t lq, int64_t lk, int64_t d, uint64_t seed, float scale = 1.0f)
      : q(PSA_LAYOUT_BSND, dt, 1, h, lq, d), k(PSA_LAYOUT_BSND, dt, 1, h, lk, d),
        v(PSA_LAYOUT_BSND, dt, 1, h, lk, d), out(PSA_LAYOUT_BSND, dt, 1, h, lq, d) {
    std::mt19937_64 rng(seed);
    for (int64_t i = 0; i < h; ++i) {
      q.set_head(0, i, psa_test::random_vec(rng, lq * d, scale));
      k.set_head(0, i, psa_test::random_vec(rng, lk * d, scale));
      v.set_head(0, i, psa_test::random_vec(rng, lk * d));
    }
  }
  psa_status run(psa_context* ctx) { return psa_test::forward_cpu(ctx, q, k, v, &out, &lse); }
  int64_t lq() const { return q.desc.shape[2]; }
  int64_t heads() const { return q.desc.shape[1]; }
  int64_t dim() const { return q.desc.shape[3]; }
  float lse_at(int64_t h, int64_t x) const { return lse[h * lq() + x]; }
  // -1: every entry of the row is NaN/Inf, +1: every entry is finite, 0: mixed.
  int row_kind(int64_t h, int64_t x) const {
    int finite = 0;
    for (int64_t c = 0; c < dim(); ++c) finite += std::isfinite(out.get(0, h, x, c)) ? 1 : 0;
    return finite == dim() ? 1 : (finite == 0 ? -1 : 0);
  }
};

// ---- NaN / Inf ----------------------------------------------------------------------------

struct NanCase {
  const char* name;
  Edits edits;
  bool grid;  // rearrange along a 2 x 8 x 16 video grid (L = 256)
};

class QueryRowPoison : public ::testing::TestWithParam<NanCase> {};

// A NaN or Inf in one query row reaches that row's output and LSE only: its dot products
// are NaN/Inf, every other row's are not (importance sampling drops NaN logits).
TEST_P(QueryRowPoison, OnlyThatRowIsNonFinite) {
  const NanCase& c = GetParam();
  const uint64_t seed = psa_test::fresh_seed();
  SCOPED_TRACE(seed);
  for (float poison : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
    SCOPED_TRACE(poison);
    Edits edits = c.edits;
    if (c.grid) edits.push_back({PSA_PARAM_USE_REARRANGE, 1});
    ContextPtr ctx = make_context(edits);
    if (c.grid) ASSERT_EQ(psa_context_set_video_grid(ctx.get(), 2, 8, 16, 0, PSA_TEXT_NONE), PSA_OK);
    Problem p(PSA_DTYPE_F32, 2, 256, 256, 16, seed);
    const int64_t bad_h = 1, bad_x = 37;
    p.q.set(0, bad_h, bad_x, 3, poison);
    ASSERT_EQ(p.run(ctx.get()), PSA_OK) << psa_last_error_message();
    for (int64_t h = 0; h < 2; ++h)
      for (int64_t x = 0; x < 256; ++x) {
        const bool bad = h == bad_h && x == bad_x;
        ASSERT_EQ(p.row_kind(h, x), bad ? -1 : 1) << "head " << h << " row " << x;
        ASSERT_EQ(std::isfinite(p.lse_at(h, x)), !bad) << "head " << h << " row " << x;
      }
  }
}

INSTANTIATE_TEST_SUITE_P(Masks, QueryRowPoison,
                         ::testing::Values(NanCase{"dense", kDense, false}, NanCase{"psa_default", kPsaDefault, false},
                                           NanCase{"psa_default_gilbert", kPsaDefault, true},
                                           NanCase{"all_level2", kAllLevel2, false}),
                         [](const ::testing::TestParamInfo<NanCase>& i) { return std::string(i.param.name); });

// A NaN in one key or value token poisons every row that attends to it (here: all rows of
// the heads that read that K/V head, at level 1 and through a pooled level-2 key) and no
// row of the other heads.
TEST(KeyValuePoison, EveryReadingRowAndNoOther) {
  const uint64_t seed = psa_test::fresh_seed();
  SCOPED_TRACE(seed);
  for (const Edits& edits : {kDense, kAllLevel1, kAllLevel2}) {
    for (int which = 0; which < 2; ++which) {
      SCOPED_TRACE(which == 0 ? "k" : "v");
      ContextPtr ctx = make_context(edits);
      Problem p(PSA_DTYPE_F32, 2, 192, 256, 16, seed);
      (which == 0 ? p.k : p.v).set(0, 0, 5, 0, std::numeric_limits<float>::quiet_NaN());
      ASSERT_EQ(p.run(ctx.get()), PSA_OK) << psa_last_error_message();
      for (int64_t x = 0; x < 192; ++x) {
        ASSERT_NE(p.row_kind(0, x), 1) << "row " << x << " reads the NaN token";
        ASSERT_EQ(p.row_kind(1, x), 1) << "row " << x << " of the clean head";
        ASSERT_TRUE(std::isfinite(p.lse_at(1, x)));
      }
    }
  }
}

// Causal: rows before a poisoned value token never see it and stay finite; rows after it
// read it and do not.
TEST(KeyValuePoison, CausalRowsBeforeThePoisonStayFinite) {
  const uint64_t seed = psa_test::fresh_seed();
  SCOPED_TRACE(seed);
  const int64_t poisoned = 200;
  for (const Edits& edits : {kDense, kAllLevel1}) {
    ContextPtr ctx = make_context(plus(edits, {{PSA_PARAM_CAUSAL, 1}}));
    Problem p(PSA_DTYPE_F32, 1, 256, 256, 16, seed);
    p.v.set(0, 0, poisoned, 2, std::numeric_limits<float>::quiet_NaN());
    ASSERT_EQ(p.run(ctx.get()), PSA_OK) << psa_last_error_message();
    for (int64_t x = 0; x < 256; ++x) ASSERT_EQ(p.row_kind(0, x) == 1, x < poisoned) << "row " << x;
  }
}

// NaN survives the 16-bit storage formats in both directions.
TEST(KeyValuePoison, HalfPrecisionKeepsNaN) {
  for (psa_dtype dt : {PSA_DTYPE_F16, PSA_DTYPE_BF16}) {
    ContextPtr ctx = make_context(kPsaDefault);
    Problem p(dt, 1, 256, 256, 32, psa_test::fresh_seed());
    p.q.set(0, 0, 100, 0, std::numeric_limits<float>::quiet_NaN());
    ASSERT_EQ(p.run(ctx.get()), PSA_OK) << psa_last_error_message();
    for (int64_t x = 0; x < 256; ++x) ASSERT_EQ(p.row_kind(0, x), x == 100 ? -1 : 1) << "row " << x;
  }
}

// ---- Rows that attend to nothing ----------------------------------------------------------

void expect_all_rows_empty(const Problem& p) {
  for (int64_t h = 0; h < p.heads(); ++h)
    for (int64_t x = 0; x < p.lq(); ++x) {
      for (int64_t c = 0; c < p.dim(); ++c) ASSERT_EQ(p.out.get(0, h, x, c), 0.0f);
      ASSERT_EQ(p.lse_at(h, x), -std::numeric_limits<float>::infinity());
    }
}

TEST(EmptyRows, TopkQuotasThatKeepNothingGiveZerosAndMinusInfinity) {
  // No grid; a 2 x 10 x 16 Gilbert grid (LSE goes through the inverse permutation); the same
  // grid with 20 text tokens first, whose key blocks the span rule keeps at level 1.
  for (int variant = 0; variant < 3; ++variant) {
    SCOPED_TRACE(variant);
    ContextPtr ctx = make_context(plus(kKeepNothing, {{PSA_PARAM_USE_REARRANGE, variant > 0 ? 1.0 : 0.0}}));
    if (variant == 1) ASSERT_EQ(psa_context_set_video_grid(ctx.get(), 2, 10, 16, 0, PSA_TEXT_NONE), PSA_OK);
    if (variant == 2) ASSERT_EQ(psa_context_set_video_grid(ctx.get(), 3, 10, 10, 20, PSA_TEXT_FIRST), PSA_OK);
    Problem p(PSA_DTYPE_BF16, 2, 320, 320, 32, psa_test::fresh_seed());
    std::fill(p.out.bytes.begin(), p.out.bytes.end(), uint8_t{0x7f});
    ASSERT_EQ(p.run(ctx.get()), PSA_OK) << psa_last_error_message();
    psa_stats s{};
    s.struct_size = sizeof s;
    ASSERT_EQ(psa_context_get_stats(ctx.get(), &s), PSA_OK);
    if (variant == 2) {
      EXPECT_GT(s.level_fraction[PSA_STAT_LEVEL_1], 0.0);
      for (int64_t h = 0; h < 2; ++h)
        for (int64_t x = 0; x < 320; ++x) {
          ASSERT_EQ(p.row_kind(h, x), 1);
          ASSERT_TRUE(std::isfinite(p.lse_at(h, x)));
        }
    } else {
      EXPECT_EQ(s.level_fraction[PSA_STAT_LEVEL_SKIP], 1.0);
      EXPECT_EQ(s.density, 0.0);
      expect_all_rows_empty(p);
    }
  }
}

// Causal with Lq > Lk (bottom-right aligned): the first Lq - Lk query rows see no key.
TEST(EmptyRows, CausalRowsWithNoVisibleKey) {
  for (const Edits& edits : {kDense, kPsaDefault, kAllLevel2}) {
    ContextPtr ctx = make_context(plus(edits, {{PSA_PARAM_CAUSAL, 1}}));
    Problem p(PSA_DTYPE_F32, 1, 200, 100, 16, psa_test::fresh_seed());
    ASSERT_EQ(p.run(ctx.get()), PSA_OK) << psa_last_error_message();
    for (int64_t x = 0; x < 200; ++x) {
      if (x < 100) {
        for (int64_t c = 0; c < 16; ++c) ASSERT_EQ(p.out.get(0, 0, x, c), 0.0f) << "row " << x;
        ASSERT_EQ(p.lse_at(0, x), -std::numeric_limits<float>::infinity()) << "row " << x;
      } else {
        ASSERT_EQ(p.row_kind(0, x), 1) << "row " << x;
        ASSERT_TRUE(std::isfinite(p.lse_at(0, x))) << "row " << x;
      }
    }
  }
}

// ---- Very large logits ---------------------------------------------------------------------

// q and k scaled by 1e4 in f32 put logits near 1e8: the softmax is one-hot at the winner, so
// the output row equals the winning value row (a pooled pair's mean when every key is
// pooled) and LSE equals the winning logit. Nothing overflows to Inf or NaN on the way.
TEST(LargeLogits, OutputIsTheDenseReferenceWinner) {
  const uint64_t seed = psa_test::fresh_seed();
  SCOPED_TRACE(seed);
  const int64_t lq = 128, lk = 256, d = 16;
  for (int pooled = 0; pooled < 3; ++pooled) {
    const Edits edits = pooled == 2 ? kAllLevel2 : (pooled == 1 ? kAllLevel1 : kDense);
    SCOPED_TRACE(pooled);
    ContextPtr ctx = make_context(edits);
    Problem p(PSA_DTYPE_F32, 1, lq, lk, d, seed, 1e4f);
    ASSERT_EQ(p.run(ctx.get()), PSA_OK) << psa_last_error_message();
    const int level = pooled == 2 ? 2 : 1;
    const int64_t n = lk / level;
    const std::vector<float> q = p.q.head(0, 0), k = p.k.head(0, 0), v = p.v.head(0, 0);
    const double scale = 1.0 / std::sqrt(double(d));
    int checked = 0;
    for (int64_t x = 0; x < lq; ++x) {
      ASSERT_EQ(p.row_kind(0, x), 1) << "row " << x;
      // Logits of the (pooled) keys in double; the library pools in f32 as 0.5f * (a + b).
      double best = -INFINITY, second = -INFINITY;
      int64_t win = -1;
      for (int64_t t = 0; t < n; ++t) {
        double s = 0.0;
        for (int64_t c = 0; c < d; ++c) {
          float kc = k[t * level * d + c];
          if (level == 2) kc = 0.5f * (k[(2 * t) * d + c] + k[(2 * t + 1) * d + c]);
          s += double(q[x * d + c]) * kc;
        }
        s = s * scale + (level == 2 ? std::log(2.0) : 0.0);
        if (s > best) {
          second = best;
          best = s;
          win = t;
        } else if (s > second) {
          second = s;
        }
      }
      ASSERT_TRUE(std::isfinite(p.lse_at(0, x))) << "row " << x;
      EXPECT_NEAR(p.lse_at(0, x), best, 1e-5 * std::fabs(best)) << "row " << x;
      // f32 dot products of ~1e8 carry errors of ~1e2; skip rows whose top two are that close.
      if (best - second < 1e5) continue;
      ++checked;
      for (int64_t c = 0; c < d; ++c) {
        float want = v[win * level * d + c];
        if (level == 2) want = 0.5f * (v[(2 * win) * d + c] + v[(2 * win + 1) * d + c]);
        ASSERT_NEAR(p.out.get(0, 0, x, c), want, 1e-6f) << "row " << x << " channel " << c;
      }
    }
    EXPECT_GT(checked, lq / 2);
  }
}

TEST(LargeLogits, MixedLevelsStayFinite) {
  for (psa_dtype dt : {PSA_DTYPE_F32, PSA_DTYPE_F16, PSA_DTYPE_BF16}) {
    ContextPtr ctx = make_context({{PSA_PARAM_MASK_MODE, PSA_MASK_MODE_THRESHOLDBOUND}});
    Problem p(dt, 2, 512, 512, 32, psa_test::fresh_seed(), dt == PSA_DTYPE_F32 ? 1e4f : 200.0f);
    ASSERT_EQ(p.run(ctx.get()), PSA_OK) << psa_last_error_message();
    for (int64_t h = 0; h < 2; ++h)
      for (int64_t x = 0; x < 512; ++x) {
        ASSERT_EQ(p.row_kind(h, x), 1) << "head " << h << " row " << x;
        ASSERT_TRUE(std::isfinite(p.lse_at(h, x)));
      }
  }
}

// ---- Degenerate lengths ---------------------------------------------------------------------

TEST(DegenerateLengths, SequenceOfOneToken) {
  for (const Edits& edits : {kDense, kPsaDefault, plus(kPsaDefault, {{PSA_PARAM_USE_REARRANGE, 1}})}) {
    ContextPtr ctx = make_context(edits);
    ASSERT_EQ(psa_context_set_video_grid(ctx.get(), 1, 1, 1, 0, PSA_TEXT_NONE), PSA_OK);
    Problem p(PSA_DTYPE_F32, 3, 1, 1, 8, psa_test::fresh_seed());
    ASSERT_EQ(p.run(ctx.get()), PSA_OK) << psa_last_error_message();
    psa_stats s{};
    s.struct_size = sizeof s;
    ASSERT_EQ(psa_context_get_stats(ctx.get(), &s), PSA_OK);
    for (int64_t h = 0; h < 3; ++h) {
      if (s.level_fraction[PSA_STAT_LEVEL_SKIP] == 1.0) {  // a topk quota of a 1-block row may be 0
        ASSERT_EQ(p.lse_at(h, 0), -std::numeric_limits<float>::infinity());
        continue;
      }
      // One key: softmax weight 1 (at any level, since a 1-token block pools to itself).
      for (int64_t c = 0; c < 8; ++c) ASSERT_FLOAT_EQ(p.out.get(0, h, 0, c), p.v.get(0, h, 0, c));
      ASSERT_TRUE(std::isfinite(p.lse_at(h, 0)));
    }
  }
}

// One query block and one key block: thresholdbound keeps at least one level-1 block, so the
// result is dense attention; topk may keep nothing, and the stats say which happened.
TEST(DegenerateLengths, SingleBlock) {
  const uint64_t seed = psa_test::fresh_seed();
  for (psa_mask_mode mode : {PSA_MASK_MODE_THRESHOLDBOUND, PSA_MASK_MODE_TOPK}) {
    SCOPED_TRACE(mode);
    ContextPtr ctx = make_context({{PSA_PARAM_MASK_MODE, mode}});
    Problem p(PSA_DTYPE_F32, 1, 100, 64, 16, seed);
    ASSERT_EQ(p.run(ctx.get()), PSA_OK) << psa_last_error_message();
    psa_stats s{};
    s.struct_size = sizeof s;
    ASSERT_EQ(psa_context_get_stats(ctx.get(), &s), PSA_OK);
    EXPECT_EQ(s.query_blocks, 1);
    EXPECT_EQ(s.key_blocks, 1);
    if (mode == PSA_MASK_MODE_THRESHOLDBOUND) EXPECT_EQ(s.level_fraction[PSA_STAT_LEVEL_1], 1.0);
    if (s.level_fraction[PSA_STAT_LEVEL_SKIP] == 1.0) {
      expect_all_rows_empty(p);
      continue;
    }
    ASSERT_EQ(s.level_fraction[PSA_STAT_LEVEL_1], 1.0);
    const auto want = psa_test::ref_attention(p.q.head(0, 0), 100, p.k.head(0, 0), p.v.head(0, 0), 64, 16, 0.25,
                                              [](int64_t, int64_t) { return true; });
    EXPECT_LT(psa_test::rel_l2(p.out.head(0, 0), want), 1e-5);
  }
}

// Lq = 1 against 16384 keys (256 key blocks): all-level-1 equals dense attention; the default
// mask stays finite and reports one query block.
TEST(DegenerateLengths, OneQueryLongKeys) {
  const uint64_t seed = psa_test::fresh_seed();
  SCOPED_TRACE(seed);
  const int64_t lk = 16384, d = 16;
  const std::vector<std::pair<Edits, bool>> masks = {
      {kAllLevel1, true}, {kPsaDefault, false}, {plus(kPsaDefault, {{PSA_PARAM_CAUSAL, 1}}), false}};
  for (const auto& [edits, is_dense] : masks) {
    ContextPtr ctx = make_context(edits);
    Problem p(PSA_DTYPE_F32, 2, 1, lk, d, seed);
    ASSERT_EQ(p.run(ctx.get()), PSA_OK) << psa_last_error_message();
    psa_stats s{};
    s.struct_size = sizeof s;
    ASSERT_EQ(psa_context_get_stats(ctx.get(), &s), PSA_OK);
    EXPECT_EQ(s.query_blocks, 1);
    EXPECT_EQ(s.key_blocks, lk / 64);
    for (int64_t h = 0; h < 2; ++h) {
      ASSERT_EQ(p.row_kind(h, 0), 1);
      ASSERT_TRUE(std::isfinite(p.lse_at(h, 0)));
    }
    if (is_dense) {
      const auto want = psa_test::ref_attention(p.q.head(0, 1), 1, p.k.head(0, 1), p.v.head(0, 1), lk, d, 0.25,
                                                [](int64_t, int64_t) { return true; });
      EXPECT_LT(psa_test::rel_l2(p.out.head(0, 1), want), 1e-5);
    }
  }
}

}  // namespace
}  // namespace psa_robust

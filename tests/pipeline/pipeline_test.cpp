// tests/pipeline/pipeline_test.cpp -- whole forwards through the public C API on the CPU
// backend, against the independent double reference: all-level-1 configs must equal dense
// attention for every layout, dtype, GQA, Lq != Lk, odd length, batch > 1, causal and with
// Gilbert rearrangement (attention is permutation-equivariant, so this checks the inverse
// permutation); shipped presets must run and stay close to dense on video-like inputs.
#include <gtest/gtest.h>

#include <cstdio>

#include "common/api_util.h"
#include "common/test_util.h"

namespace {

using psa_test::ConfigPtr;
using psa_test::ContextPtr;
using psa_test::HostTensor;

ConfigPtr all_level_one_config() {
  psa_config* c = nullptr;
  EXPECT_EQ(psa_config_create(&c), PSA_OK) << psa_last_error_message();
  // Level 1 takes every rank.
  for (psa_param p : {PSA_PARAM_RATIO_L1, PSA_PARAM_RATIO_L2, PSA_PARAM_RATIO_L4, PSA_PARAM_RATIO_L8,
                      PSA_PARAM_RATIO_L0})
    EXPECT_EQ(psa_config_set_double(c, p, 1.0), PSA_OK) << psa_last_error_message();
  return ConfigPtr(c);
}

struct Case {
  const char* name;
  psa_layout layout;
  psa_dtype dtype;
  int64_t b, hq, hkv, lq, lk, d;
  bool causal;
  double tol;
};

class AllLevelOne : public ::testing::TestWithParam<Case> {};

TEST_P(AllLevelOne, EqualsDenseReference) {
  const Case c = GetParam();
  const uint64_t seed = psa_test::fresh_seed();
  SCOPED_TRACE(std::string(c.name) + " seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  ConfigPtr cfg = all_level_one_config();
  PSA_ASSERT_OK(psa_config_set_int(cfg.get(), PSA_PARAM_CAUSAL, c.causal ? 1 : 0));
  psa_context* raw = nullptr;
  PSA_ASSERT_OK(psa_context_create(cfg.get(), PSA_BACKEND_CPU, -1, &raw));
  ContextPtr ctx(raw);
  HostTensor q(c.layout, c.dtype, c.b, c.hq, c.lq, c.d), k(c.layout, c.dtype, c.b, c.hkv, c.lk, c.d),
      v(c.layout, c.dtype, c.b, c.hkv, c.lk, c.d), out(c.layout, c.dtype, c.b, c.hq, c.lq, c.d);
  for (int64_t b = 0; b < c.b; ++b) {
    for (int64_t h = 0; h < c.hq; ++h) q.set_head(b, h, psa_test::random_vec(rng, c.lq * c.d));
    for (int64_t h = 0; h < c.hkv; ++h) {
      k.set_head(b, h, psa_test::random_vec(rng, c.lk * c.d));
      v.set_head(b, h, psa_test::random_vec(rng, c.lk * c.d));
    }
  }
  std::vector<float> lse;
  PSA_ASSERT_OK(psa_test::forward_cpu(ctx.get(), q, k, v, &out, &lse));
  psa_stats st{};
  st.struct_size = sizeof st;
  PSA_ASSERT_OK(psa_context_get_stats(ctx.get(), &st));
  EXPECT_EQ(st.ran_dense, 0);
  const double off = double(c.lk - c.lq);
  for (int64_t b = 0; b < c.b; ++b)
    for (int64_t h = 0; h < c.hq; ++h) {
      const int64_t hk = h / (c.hq / c.hkv);
      const auto want = psa_test::ref_attention(q.head(b, h), c.lq, k.head(b, hk), v.head(b, hk), c.lk, c.d,
                                                1.0 / std::sqrt(double(c.d)), [&](int64_t x, int64_t t) {
                                                  return !c.causal || double(t) <= double(x) + off;
                                                });
      EXPECT_LT(psa_test::rel_l2(out.head(b, h), want), c.tol) << "b " << b << " h " << h;
    }
  if (!c.causal) {
    EXPECT_NEAR(st.level_fraction[PSA_STAT_LEVEL_1], 1.0, 1e-12);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, AllLevelOne,
    ::testing::Values(Case{"bnsd_f32", PSA_LAYOUT_BNSD, PSA_DTYPE_F32, 1, 2, 2, 256, 256, 32, false, 1e-5},
                      Case{"bsnd_bf16", PSA_LAYOUT_BSND, PSA_DTYPE_BF16, 1, 2, 2, 200, 200, 64, false, 2e-2},
                      Case{"bsh_f16", PSA_LAYOUT_BSH, PSA_DTYPE_F16, 1, 2, 2, 131, 131, 16, false, 3e-3},
                      Case{"gqa", PSA_LAYOUT_BNSD, PSA_DTYPE_F32, 1, 4, 2, 190, 190, 16, false, 1e-5},
                      Case{"mqa", PSA_LAYOUT_BSND, PSA_DTYPE_F32, 1, 3, 1, 77, 77, 8, false, 1e-5},
                      Case{"cross_lq_lt_lk", PSA_LAYOUT_BNSD, PSA_DTYPE_F32, 1, 2, 2, 100, 300, 16, false, 1e-5},
                      Case{"cross_lq_gt_lk", PSA_LAYOUT_BNSD, PSA_DTYPE_F32, 1, 1, 1, 300, 70, 16, false, 1e-5},
                      Case{"batch3_odd", PSA_LAYOUT_BSND, PSA_DTYPE_F32, 3, 2, 1, 129, 129, 16, false, 1e-5},
                      Case{"causal", PSA_LAYOUT_BNSD, PSA_DTYPE_F32, 2, 2, 2, 300, 300, 16, true, 1e-5},
                      Case{"causal_cross", PSA_LAYOUT_BNSD, PSA_DTYPE_F32, 1, 2, 1, 150, 333, 16, true, 1e-5},
                      Case{"single_token", PSA_LAYOUT_BNSD, PSA_DTYPE_F32, 1, 1, 1, 1, 1, 8, false, 1e-5}),
    [](const ::testing::TestParamInfo<Case>& i) { return std::string(i.param.name); });

TEST(Pipeline, GilbertRearrangementWithTextRoundTrips) {
  // With every block at level 1 the result equals dense attention whatever the permutation,
  // so any error in the forward or inverse permutation (or text handling) shows up here.
  const uint64_t seed = psa_test::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  for (psa_text_position pos : {PSA_TEXT_NONE, PSA_TEXT_FIRST, PSA_TEXT_LAST}) {
    ConfigPtr cfg = all_level_one_config();
    PSA_ASSERT_OK(psa_config_set_int(cfg.get(), PSA_PARAM_USE_REARRANGE, 1));
    PSA_ASSERT_OK(psa_config_set_int(cfg.get(), PSA_PARAM_REARRANGE_METHOD, PSA_REARRANGE_GILBERT));
    psa_context* raw = nullptr;
    PSA_ASSERT_OK(psa_context_create(cfg.get(), PSA_BACKEND_CPU, -1, &raw));
    ContextPtr ctx(raw);
    const int64_t text = pos == PSA_TEXT_NONE ? 0 : 37, t = 3, h = 5, w = 7, d = 16;
    const int64_t L = t * h * w + text;
    PSA_ASSERT_OK(psa_context_set_video_grid(ctx.get(), t, h, w, text, pos));
    HostTensor q(PSA_LAYOUT_BNSD, PSA_DTYPE_F32, 1, 1, L, d), k = q, v = q, out = q;
    q.set_head(0, 0, psa_test::random_vec(rng, L * d));
    k.set_head(0, 0, psa_test::random_vec(rng, L * d));
    v.set_head(0, 0, psa_test::random_vec(rng, L * d));
    std::vector<float> lse;
    PSA_ASSERT_OK(psa_test::forward_cpu(ctx.get(), q, k, v, &out, &lse));
    const auto want = psa_test::ref_attention(q.head(0, 0), L, k.head(0, 0), v.head(0, 0), L, d, 0.25,
                                              [](int64_t, int64_t) { return true; });
    EXPECT_LT(psa_test::rel_l2(out.head(0, 0), want), 1e-5) << "text position " << pos;
  }
}

TEST(Pipeline, WarmupCountsCallsAndRunsDense) {
  psa_config* c = nullptr;
  PSA_ASSERT_OK(psa_config_create(&c));
  ConfigPtr cfg(c);
  PSA_ASSERT_OK(psa_config_set_int(c, PSA_PARAM_WARMUP_STEPS, 2));
  PSA_ASSERT_OK(psa_config_set_int(c, PSA_PARAM_CALLS_PER_STEP, 2));
  PSA_ASSERT_OK(psa_config_set_int(c, PSA_PARAM_INFERENCE_STEPS, 3));
  psa_context* raw = nullptr;
  PSA_ASSERT_OK(psa_context_create(c, PSA_BACKEND_CPU, -1, &raw));
  ContextPtr ctx(raw);
  std::mt19937_64 rng(psa_test::fresh_seed());
  HostTensor q(PSA_LAYOUT_BNSD, PSA_DTYPE_F32, 1, 1, 256, 16), k = q, v = q, out = q;
  q.set_head(0, 0, psa_test::random_vec(rng, 256 * 16));
  k.set_head(0, 0, psa_test::random_vec(rng, 256 * 16));
  v.set_head(0, 0, psa_test::random_vec(rng, 256 * 16));
  // calls 0-3 dense (steps 0, 1), 4-5 sparse (step 2), 6 wraps to step 0 (dense).
  const int expect_dense[7] = {1, 1, 1, 1, 0, 0, 1};
  for (int call = 0; call < 7; ++call) {
    int64_t step = -1;
    int32_t dense = -1;
    PSA_ASSERT_OK(psa_context_next_step(ctx.get(), &step, &dense));
    EXPECT_EQ(dense, expect_dense[call]) << "call " << call;
    PSA_ASSERT_OK(psa_test::forward_cpu(ctx.get(), q, k, v, &out, nullptr));
    psa_stats st{};
    st.struct_size = sizeof st;
    PSA_ASSERT_OK(psa_context_get_stats(ctx.get(), &st));
    EXPECT_EQ(st.ran_dense, expect_dense[call]) << "call " << call;
    EXPECT_EQ(st.call_index, call);
    EXPECT_EQ(st.step, (call / 2) % 3);
  }
  // Pinned step and reset.
  PSA_ASSERT_OK(psa_context_set_step(ctx.get(), 5));
  int32_t dense = -1;
  PSA_ASSERT_OK(psa_context_next_step(ctx.get(), nullptr, &dense));
  EXPECT_EQ(dense, 0);
  PSA_ASSERT_OK(psa_context_set_step(ctx.get(), -1));
  PSA_ASSERT_OK(psa_context_reset_calls(ctx.get()));
  PSA_ASSERT_OK(psa_context_next_step(ctx.get(), nullptr, &dense));
  EXPECT_EQ(dense, 1);
}

// Every preset of the shipped YAML runs on a small video-like shape; the output is close
// to dense attention and the reported density is consistent with the level fractions.
TEST(Pipeline, EveryShippedPresetRunsAndStaysCloseToDense) {
  psa_catalog* cat = nullptr;
  PSA_ASSERT_OK(psa_catalog_open(nullptr, &cat));
  const uint64_t seed = psa_test::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  int ran = 0;
  for (int32_t m = 0; m < psa_catalog_model_count(cat); ++m) {
    const char* model = psa_catalog_model_name(cat, m);
    for (int32_t p = 0; p < psa_catalog_preset_count(cat, model); ++p) {
      const char* preset = psa_catalog_preset_name(cat, model, p);
      SCOPED_TRACE(std::string(model) + "/" + preset);
      psa_config* c = nullptr;
      PSA_ASSERT_OK(psa_catalog_get_config(cat, model, preset, &c));
      ConfigPtr cfg(c);
      int64_t method = 0, text = 0, causal = 0;
      PSA_ASSERT_OK(psa_config_get_int(c, PSA_PARAM_METHOD, &method));
      PSA_ASSERT_OK(psa_config_get_int(c, PSA_PARAM_CAUSAL, &causal));
      if (method == PSA_METHOD_RF_V2 || method == PSA_METHOD_ADA_BSA) continue;  // separate suite
      PSA_ASSERT_OK(psa_config_get_int(c, PSA_PARAM_TEXT_LENGTH, &text));
      psa_context* raw = nullptr;
      PSA_ASSERT_OK(psa_context_create(c, PSA_BACKEND_CPU, -1, &raw));
      ContextPtr ctx(raw);
      int64_t warmup = 0;
      PSA_ASSERT_OK(psa_config_get_int(c, PSA_PARAM_WARMUP_STEPS, &warmup));
      PSA_ASSERT_OK(psa_context_set_step(ctx.get(), warmup));  // first sparse step
      const int64_t t = 4, h = 12, w = 16, d = 32, T = text > 0 ? 40 : 0;
      PSA_ASSERT_OK(psa_context_set_video_grid(ctx.get(), t, h, w, T, T ? PSA_TEXT_FIRST : PSA_TEXT_NONE));
      const int64_t L = t * h * w + T;
      HostTensor q(PSA_LAYOUT_BSND, PSA_DTYPE_BF16, 1, 2, L, d), k = q, v = q, out = q;
      for (int64_t hh = 0; hh < 2; ++hh) {
        // q and k share one smooth field (plus independent noise), as positional structure
        // makes them in video DiTs: attention is local, which is what PSA exploits.
        const auto field = psa_test::video_like(rng, t, h, w, d, 0.0f);
        for (HostTensor* x : {&q, &k, &v}) {
          auto vid = x == &v ? psa_test::video_like(rng, t, h, w, d) : field;
          const auto noise = psa_test::random_vec(rng, vid.size(), 0.3f);
          for (size_t e = 0; e < vid.size(); ++e) vid[e] += x == &v ? 0.0f : noise[e];
          auto txt = psa_test::random_vec(rng, T * d);
          std::vector<float> all(txt);
          all.insert(all.end(), vid.begin(), vid.end());
          x->set_head(0, hh, all);
        }
      }
      PSA_ASSERT_OK(psa_test::forward_cpu(ctx.get(), q, k, v, &out, nullptr));
      psa_stats st{};
      st.struct_size = sizeof st;
      PSA_ASSERT_OK(psa_context_get_stats(ctx.get(), &st));
      double dens = st.level_fraction[0] + st.level_fraction[1] / 2 + st.level_fraction[2] / 4 +
                    st.level_fraction[3] / 8;
      EXPECT_NEAR(st.density, dens, 1e-9);
      double fsum = 0;
      for (double f : st.level_fraction) fsum += f;
      EXPECT_NEAR(fsum, 1.0, 1e-9);
      for (int64_t hh = 0; hh < 2; ++hh) {
        const auto want = psa_test::ref_attention(q.head(0, hh), L, k.head(0, hh), v.head(0, hh), L, d,
                                                  1.0 / std::sqrt(double(d)),
                                                  [causal](int64_t x, int64_t t) { return !causal || t <= x; });
        const auto got = out.head(0, hh);
        for (float g : got) ASSERT_TRUE(std::isfinite(g));
        // Sparse attention on smooth inputs: close to dense (bf16 I/O included).
        const double err = psa_test::rel_l2(got, want);
        std::printf("  %-16s %-14s head %lld density %.3f rel-L2 vs dense %.4f\n", model, preset,
                    static_cast<long long>(hh), st.density, err);
        EXPECT_LT(err, st.ran_dense ? 2e-2 : 0.45) << "density " << st.density;
      }
      ++ran;
    }
  }
  psa_catalog_destroy(cat);
  EXPECT_GE(ran, 14);
}

TEST(Pipeline, DenseMethodEqualsReferenceAndReportsDensityOne) {
  psa_config* c = nullptr;
  PSA_ASSERT_OK(psa_config_create(&c));
  ConfigPtr cfg(c);
  PSA_ASSERT_OK(psa_config_set_int(c, PSA_PARAM_METHOD, PSA_METHOD_DENSE));
  psa_context* raw = nullptr;
  PSA_ASSERT_OK(psa_context_create(c, PSA_BACKEND_CPU, -1, &raw));
  ContextPtr ctx(raw);
  std::mt19937_64 rng(psa_test::fresh_seed());
  HostTensor q(PSA_LAYOUT_BNSD, PSA_DTYPE_F32, 1, 1, 99, 16), k = q, v = q, out = q;
  q.set_head(0, 0, psa_test::random_vec(rng, 99 * 16));
  k.set_head(0, 0, psa_test::random_vec(rng, 99 * 16));
  v.set_head(0, 0, psa_test::random_vec(rng, 99 * 16));
  std::vector<float> lse;
  PSA_ASSERT_OK(psa_test::forward_cpu(ctx.get(), q, k, v, &out, &lse));
  const auto want = psa_test::ref_attention(q.head(0, 0), 99, k.head(0, 0), v.head(0, 0), 99, 16, 0.25,
                                            [](int64_t, int64_t) { return true; });
  EXPECT_LT(psa_test::rel_l2(out.head(0, 0), want), 1e-5);
  // LSE of every row against double.
  const auto qh = q.head(0, 0), kh = k.head(0, 0);
  for (int64_t x = 0; x < 99; ++x) {
    double mx = -INFINITY, s = 0;
    std::vector<double> z(99);
    for (int64_t t = 0; t < 99; ++t) {
      double dot = 0;
      for (int c2 = 0; c2 < 16; ++c2) dot += double(qh[x * 16 + c2]) * kh[t * 16 + c2];
      z[t] = 0.25 * dot;
      mx = std::max(mx, z[t]);
    }
    for (double zz : z) s += std::exp(zz - mx);
    EXPECT_NEAR(lse[x], mx + std::log(s), 1e-4);
  }
  psa_stats st{};
  st.struct_size = sizeof st;
  PSA_ASSERT_OK(psa_context_get_stats(ctx.get(), &st));
  EXPECT_EQ(st.ran_dense, 1);
  EXPECT_EQ(st.density, 1.0);
}

TEST(Pipeline, SameSeedSameOutputDifferentSeedDifferentMask) {
  std::mt19937_64 rng(psa_test::fresh_seed());
  const int64_t L = 1024, d = 32;
  HostTensor q(PSA_LAYOUT_BNSD, PSA_DTYPE_F32, 1, 1, L, d), k = q, v = q, o1 = q, o2 = q;
  q.set_head(0, 0, psa_test::random_vec(rng, L * d));
  k.set_head(0, 0, psa_test::random_vec(rng, L * d));
  v.set_head(0, 0, psa_test::random_vec(rng, L * d));
  psa_config* c = nullptr;
  PSA_ASSERT_OK(psa_config_create(&c));
  ConfigPtr cfg(c);
  psa_context *a = nullptr, *b = nullptr;
  PSA_ASSERT_OK(psa_context_create(c, PSA_BACKEND_CPU, -1, &a));
  PSA_ASSERT_OK(psa_context_create(c, PSA_BACKEND_CPU, -1, &b));
  ContextPtr ca(a), cb(b);
  PSA_ASSERT_OK(psa_test::forward_cpu(a, q, k, v, &o1, nullptr));
  PSA_ASSERT_OK(psa_test::forward_cpu(b, q, k, v, &o2, nullptr));
  EXPECT_EQ(o1.bytes, o2.bytes);
}

}  // namespace

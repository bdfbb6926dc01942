// tests/api/level_map_test.cpp -- psa_context_get_level_map / _level_map_shape /
// _get_token_order on the CPU backend: the exported map equals an oracle rebuilt from the
// stage functions (rearrangement by the exported token order, seeded samples, importance,
// mask rows, post-processing), the token order is the Gilbert curve with text last, dense
// forwards report level 1, and the error paths leave buffers unchanged.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <cstring>
#include <random>
#include <vector>

#include "context/context.h"
#include "importance/importance.h"
#include "importance/importance_spec.h"
#include "mask/mask.h"
#include "psa.h"
#include "rearrange/rearrange.h"

namespace {

struct Grid {
  int64_t B = 1, H = 2, Hkv = 1, D = 32;
  int64_t t = 3, h = 8, w = 12, text = 20;
  psa_text_position pos = PSA_TEXT_FIRST;
  int64_t L() const { return t * h * w + text; }
};

psa_config* make_config(psa_mask_mode mode, int64_t bm, int64_t bn) {
  psa_config* cfg = nullptr;
  EXPECT_EQ(PSA_OK, psa_config_create(&cfg));
  psa_config_set_int(cfg, PSA_PARAM_BLOCK_M, bm);
  psa_config_set_int(cfg, PSA_PARAM_BLOCK_N, bn);
  psa_config_set_int(cfg, PSA_PARAM_TILE_N, std::min<int64_t>(bn, 32));
  psa_config_set_int(cfg, PSA_PARAM_MASK_MODE, mode);
  psa_config_set_int(cfg, PSA_PARAM_USE_REARRANGE, 1);
  psa_config_set_int(cfg, PSA_PARAM_REARRANGE_METHOD, PSA_REARRANGE_GILBERT);
  psa_config_set_int(cfg, PSA_PARAM_SEED, 7);
  if (mode == PSA_MASK_MODE_THRESHOLDBOUND) {
    psa_config_set_double(cfg, PSA_PARAM_RATIO_L1, 0.4);
    psa_config_set_double(cfg, PSA_PARAM_RATIO_L2, 0.5);
    psa_config_set_double(cfg, PSA_PARAM_RATIO_L4, 0.6);
    psa_config_set_double(cfg, PSA_PARAM_RATIO_L8, 0.8);
  }
  EXPECT_EQ(PSA_OK, psa_config_validate(cfg)) << psa_last_error_message();
  return cfg;
}

// Video-like f32 inputs [B, heads, L, D] (BNSD): smooth fields plus noise, so the scores vary.
std::vector<float> make_input(const Grid& s, int64_t heads, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> n(0.f, 1.f);
  std::vector<float> x(static_cast<size_t>(s.B * heads * s.L() * s.D));
  for (int64_t bh = 0; bh < s.B * heads; ++bh) {
    std::vector<float> f(static_cast<size_t>(s.D * 3));
    for (float& v : f) v = n(rng);
    for (int64_t p = 0; p < s.L(); ++p)
      for (int64_t c = 0; c < s.D; ++c)
        x[static_cast<size_t>((bh * s.L() + p) * s.D + c)] =
            2.0f * std::sin(0.3f * f[c * 3] * static_cast<float>(p % s.w) + 0.2f * f[c * 3 + 1] * static_cast<float>(p / s.w) + f[c * 3 + 2]) +
            0.3f * n(rng);
  }
  return x;
}

struct ForwardRun {
  psa_context* ctx = nullptr;
  std::vector<float> q, k, v, out;
  std::vector<char> ws;
  psa_tensor_desc qd{}, kd{}, od{};
};

psa_status forward(ForwardRun& r, const Grid& s, psa_config* cfg, uint32_t seed) {
  EXPECT_EQ(PSA_OK, psa_context_create(cfg, PSA_BACKEND_CPU, -1, &r.ctx));
  EXPECT_EQ(PSA_OK, psa_context_set_video_grid(r.ctx, s.t, s.h, s.w, s.text, s.pos));
  r.qd.struct_size = r.kd.struct_size = sizeof(psa_tensor_desc);
  psa_tensor_desc_init(&r.qd, PSA_LAYOUT_BNSD, PSA_DTYPE_F32, s.B, s.H, s.L(), s.D);
  psa_tensor_desc_init(&r.kd, PSA_LAYOUT_BNSD, PSA_DTYPE_F32, s.B, s.Hkv, s.L(), s.D);
  r.od = r.qd;
  r.q = make_input(s, s.H, seed);
  r.k = make_input(s, s.Hkv, seed + 1);
  r.v = make_input(s, s.Hkv, seed + 2);
  r.out.assign(r.q.size(), 0.f);
  uint64_t bytes = 0;
  EXPECT_EQ(PSA_OK, psa_workspace_size(r.ctx, &r.qd, &r.kd, &r.kd, &r.od, &bytes));
  r.ws.assign(bytes, 0);
  return psa_attention_forward(r.ctx, &r.qd, r.q.data(), &r.kd, r.k.data(), &r.kd, r.v.data(), &r.od,
                               r.out.data(), nullptr, r.ws.data(), bytes, nullptr);
}

// The oracle: the level map rebuilt from the stage functions, rows taken in the exported
// token order.
std::vector<int8_t> oracle(const ForwardRun& r, const Grid& s) {
  const psa::Config& cfg = r.ctx->cfg;
  const int64_t L = s.L(), d = s.D, bm = cfg.block_m, bn = cfg.block_n;
  const int64_t mq = (L + bm - 1) / bm, nk = (L + bn - 1) / bn;
  std::vector<int64_t> qo(static_cast<size_t>(L)), ko(static_cast<size_t>(L));
  int64_t len = 0, tb = 0, te = 0;
  EXPECT_EQ(PSA_OK, psa_context_get_token_order(r.ctx, 0, qo.data(), L, &len, nullptr, nullptr));
  EXPECT_EQ(PSA_OK, psa_context_get_token_order(r.ctx, 1, ko.data(), L, &len, &tb, &te));
  const int64_t qc = std::max<int64_t>(1, bm / cfg.sample_divisor), kc = std::max<int64_t>(1, bn / cfg.sample_divisor);
  std::vector<int8_t> map(static_cast<size_t>(s.B * s.H * mq * nk));
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t h = 0; h < s.H; ++h) {
      const int64_t hk = h / (s.H / s.Hkv);
      std::vector<float> qr(static_cast<size_t>(L * d)), kr(static_cast<size_t>(L * d));
      for (int64_t p = 0; p < L; ++p)
        for (int64_t c = 0; c < d; ++c) {
          qr[static_cast<size_t>(p * d + c)] = r.q[static_cast<size_t>(((b * s.H + h) * L + qo[static_cast<size_t>(p)]) * d + c)];
          kr[static_cast<size_t>(p * d + c)] = r.k[static_cast<size_t>(((b * s.Hkv + hk) * L + ko[static_cast<size_t>(p)]) * d + c)];
        }
      std::vector<int32_t> scratch(static_cast<size_t>(std::max(bm, bn))), qoff(static_cast<size_t>(qc)),
          koff(static_cast<size_t>(kc)), order(static_cast<size_t>(nk));
      psa::sample_offsets(static_cast<uint64_t>(cfg.seed), b, h, psa::kSampleQuery, static_cast<int32_t>(bm),
                          static_cast<int32_t>(qc), scratch.data(), qoff.data());
      psa::sample_offsets(static_cast<uint64_t>(cfg.seed), b, h, psa::kSampleKey, static_cast<int32_t>(bn),
                          static_cast<int32_t>(kc), scratch.data(), koff.data());
      std::vector<float> scores(static_cast<size_t>(mq * nk)), ties(scores.size());
      const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(d)));
      psa::importance_cpu(qr.data(), L, kr.data(), L, d, bm, bn, qoff.data(), static_cast<int32_t>(qc), koff.data(),
                          static_cast<int32_t>(kc), scale, scores.data(), ties.data());
      int8_t* lv = map.data() + (b * s.H + h) * mq * nk;
      const psa::MaskRowParams rp = psa::mask_row_params(cfg);
      for (int64_t i = 0; i < mq; ++i)
        psa::build_mask_row(scores.data() + i * nk, nk, rp, lv + i * nk, order.data(), nullptr, ties.data() + i * nk);
      psa::MaskPostParams post;
      post.block_m = bm;
      post.block_n = bn;
      post.lq = post.lk = L;
      post.text_rule = cfg.text_rule;
      post.text_rows_dense = cfg.text_rows_dense;
      post.text_begin = tb;
      post.text_end = te;
      psa::postprocess_levels(lv, mq, nk, post);
    }
  return map;
}

TEST(LevelMapExport, EqualsStageOracleTopkAndThresholdbound) {
  const Grid s;
  for (psa_mask_mode mode : {PSA_MASK_MODE_TOPK, PSA_MASK_MODE_THRESHOLDBOUND}) {
    for (int64_t bn : {32, 64}) {
      psa_config* cfg = make_config(mode, 64, bn);
      ForwardRun r;
      ASSERT_EQ(PSA_OK, forward(r, s, cfg, 11)) << psa_last_error_message();
      int64_t B = 0, H = 0, mq = 0, nk = 0;
      ASSERT_EQ(PSA_OK, psa_context_level_map_shape(r.ctx, &B, &H, &mq, &nk));
      EXPECT_EQ(s.B, B);
      EXPECT_EQ(s.H, H);
      EXPECT_EQ((s.L() + 63) / 64, mq);
      EXPECT_EQ((s.L() + bn - 1) / bn, nk);
      std::vector<int8_t> map(static_cast<size_t>(B * H * mq * nk), -1);
      ASSERT_EQ(PSA_OK, psa_context_get_level_map(r.ctx, map.data(), map.size())) << psa_last_error_message();
      const std::vector<int8_t> want = oracle(r, s);
      EXPECT_EQ(want, map) << "mode " << mode << " block_n " << bn;
      // The map's level fractions are the statistics' fractions.
      psa_stats st{};
      st.struct_size = sizeof(st);
      ASSERT_EQ(PSA_OK, psa_context_get_stats(r.ctx, &st));
      const int lv[5] = {1, 2, 4, 8, 0};
      for (int i = 0; i < 5; ++i)
        EXPECT_DOUBLE_EQ(st.level_fraction[i],
                         static_cast<double>(std::count(map.begin(), map.end(), lv[i])) / static_cast<double>(map.size()));
      EXPECT_LT(st.level_fraction[PSA_STAT_LEVEL_1], 1.0);  // really sparse
      psa_context_destroy(r.ctx);
      psa_config_destroy(cfg);
    }
  }
}

TEST(LevelMapExport, TokenOrderIsGilbertWithTextLast) {
  const Grid s;  // text first in the caller's sequence
  psa_config* cfg = make_config(PSA_MASK_MODE_TOPK, 64, 32);
  ForwardRun r;
  ASSERT_EQ(PSA_OK, forward(r, s, cfg, 3)) << psa_last_error_message();
  int64_t len = 0, tb = -1, te = -1;
  ASSERT_EQ(PSA_OK, psa_context_get_token_order(r.ctx, 1, nullptr, 0, &len, &tb, &te));
  EXPECT_EQ(s.L(), len);
  EXPECT_EQ(s.t * s.h * s.w, tb);
  EXPECT_EQ(s.L(), te);
  std::vector<int64_t> order(static_cast<size_t>(len));
  ASSERT_EQ(PSA_OK, psa_context_get_token_order(r.ctx, 1, order.data(), len, nullptr, nullptr, nullptr));
  const std::vector<int64_t> curve = psa::gilbert3d_order(s.w, s.h, s.t);
  for (int64_t p = 0; p < tb; ++p) EXPECT_EQ(curve[static_cast<size_t>(p)] + s.text, order[static_cast<size_t>(p)]) << p;
  for (int64_t p = tb; p < te; ++p) EXPECT_EQ(p - tb, order[static_cast<size_t>(p)]);  // the text tokens, in order
  std::vector<int64_t> qorder(static_cast<size_t>(len));
  ASSERT_EQ(PSA_OK, psa_context_get_token_order(r.ctx, 0, qorder.data(), len, nullptr, nullptr, nullptr));
  EXPECT_EQ(order, qorder);
  // Too small a buffer: PSA_ERR_BUFFER_TOO_SMALL, buffer untouched.
  std::vector<int64_t> small(4, -5);
  EXPECT_EQ(PSA_ERR_BUFFER_TOO_SMALL, psa_context_get_token_order(r.ctx, 1, small.data(), 4, nullptr, nullptr, nullptr));
  EXPECT_EQ(std::vector<int64_t>(4, -5), small);
  EXPECT_EQ(PSA_ERR_INVALID_ARGUMENT, psa_context_get_token_order(r.ctx, 2, nullptr, 0, &len, nullptr, nullptr));
  psa_context_destroy(r.ctx);
  psa_config_destroy(cfg);
}

TEST(LevelMapExport, ErrorsAndDenseForward) {
  const Grid s;
  psa_config* cfg = make_config(PSA_MASK_MODE_TOPK, 64, 64);
  psa_context* fresh = nullptr;
  ASSERT_EQ(PSA_OK, psa_context_create(cfg, PSA_BACKEND_CPU, -1, &fresh));
  int8_t one = 0;
  EXPECT_EQ(PSA_ERR_INVALID_STATE, psa_context_get_level_map(fresh, &one, 1));
  EXPECT_EQ(PSA_ERR_INVALID_STATE, psa_context_level_map_shape(fresh, nullptr, nullptr, nullptr, nullptr));
  EXPECT_EQ(PSA_ERR_INVALID_STATE, psa_context_get_token_order(fresh, 0, nullptr, 0, nullptr, nullptr, nullptr));
  EXPECT_EQ(PSA_ERR_NULL_POINTER, psa_context_get_level_map(nullptr, &one, 1));
  psa_context_destroy(fresh);

  // Warm-up: the forward runs dense and reports level 1 everywhere.
  psa_config_set_int(cfg, PSA_PARAM_WARMUP_STEPS, 1);
  ForwardRun r;
  ASSERT_EQ(PSA_OK, forward(r, s, cfg, 5));
  int64_t B = 0, H = 0, mq = 0, nk = 0;
  ASSERT_EQ(PSA_OK, psa_context_level_map_shape(r.ctx, &B, &H, &mq, &nk));
  std::vector<int8_t> map(static_cast<size_t>(B * H * mq * nk), 9);
  std::vector<int8_t> before = map;
  EXPECT_EQ(PSA_ERR_BUFFER_TOO_SMALL, psa_context_get_level_map(r.ctx, map.data(), map.size() - 1));
  EXPECT_NE(std::string::npos, std::string(psa_last_error_message()).find(std::to_string(map.size())));
  EXPECT_EQ(before, map);
  EXPECT_EQ(PSA_ERR_NULL_POINTER, psa_context_get_level_map(r.ctx, nullptr, map.size()));
  ASSERT_EQ(PSA_OK, psa_context_get_level_map(r.ctx, map.data(), map.size()));
  EXPECT_EQ(std::vector<int8_t>(map.size(), 1), map);
  // The next forward (step 1) runs sparse: the map follows the last forward.
  ASSERT_EQ(PSA_OK, psa_attention_forward(r.ctx, &r.qd, r.q.data(), &r.kd, r.k.data(), &r.kd, r.v.data(), &r.od,
                                          r.out.data(), nullptr, r.ws.data(), r.ws.size(), nullptr));
  ASSERT_EQ(PSA_OK, psa_context_get_level_map(r.ctx, map.data(), map.size()));
  EXPECT_GT(std::count(map.begin(), map.end(), 0), 0);
  psa_context_destroy(r.ctx);
  psa_config_destroy(cfg);
}

TEST(LevelMapExport, SurvivesPlanCacheEviction) {
  // Nine other shapes are planned after the forward: the forward's plan leaves the cache
  // (8 plans) but its level map stays readable.
  Grid s;
  s.text = 0;
  s.pos = PSA_TEXT_NONE;
  psa_config* cfg = make_config(PSA_MASK_MODE_TOPK, 64, 64);
  psa_config_set_int(cfg, PSA_PARAM_USE_REARRANGE, 0);
  ForwardRun r;
  ASSERT_EQ(PSA_OK, forward(r, s, cfg, 9));
  ASSERT_EQ(PSA_OK, psa_context_clear_video_grid(r.ctx));
  int64_t B = 0, H = 0, mq = 0, nk = 0;
  ASSERT_EQ(PSA_OK, psa_context_level_map_shape(r.ctx, &B, &H, &mq, &nk));
  std::vector<int8_t> first(static_cast<size_t>(B * H * mq * nk));
  ASSERT_EQ(PSA_OK, psa_context_get_level_map(r.ctx, first.data(), first.size()));
  for (int64_t extra = 1; extra <= 9; ++extra) {
    psa_tensor_desc q = r.qd, k = r.kd;
    ASSERT_EQ(PSA_OK, psa_tensor_desc_init(&q, PSA_LAYOUT_BNSD, PSA_DTYPE_F32, s.B, s.H, 64 * extra, s.D));
    ASSERT_EQ(PSA_OK, psa_tensor_desc_init(&k, PSA_LAYOUT_BNSD, PSA_DTYPE_F32, s.B, s.Hkv, 64 * extra, s.D));
    uint64_t bytes = 0;
    ASSERT_EQ(PSA_OK, psa_workspace_size(r.ctx, &q, &k, &k, &q, &bytes)) << psa_last_error_message();
  }
  std::vector<int8_t> again(first.size());
  ASSERT_EQ(PSA_OK, psa_context_get_level_map(r.ctx, again.data(), again.size()));
  EXPECT_EQ(first, again);
  psa_context_destroy(r.ctx);
  psa_config_destroy(cfg);
}

}  // namespace

// tests/parallel/parallel_api_test.cpp -- the sequence-parallel building blocks on the CPU
// backend: a forward on a shard of heads / batch items with PSA_PARAM_HEAD_OFFSET /
// PSA_PARAM_BATCH_OFFSET equals those rows of the whole forward bit for bit;
// psa_context_sequence_order is the permutation the context computes in (a forward on the
// permuted sequence with use_rearrange = 0 gives the same floats, and a query shard against
// the whole K/V gives those rows); psa_merge_attention equals a double reference and the
// whole attention when the keys are split; bad arguments name themselves.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <string>

#include "common/api_util.h"
#include "common/test_util.h"

namespace {

using psa_test::ConfigPtr;
using psa_test::ContextPtr;
using psa_test::HostTensor;

ConfigPtr preset(const char* model, const char* name) {
  psa_config* c = nullptr;
  EXPECT_EQ(psa_config_load_embedded(model, name, &c), PSA_OK) << psa_last_error_message();
  return ConfigPtr(c);
}

ContextPtr make_ctx(const psa_config* cfg) {
  psa_context* raw = nullptr;
  EXPECT_EQ(psa_context_create(cfg, PSA_BACKEND_CPU, -1, &raw), PSA_OK) << psa_last_error_message();
  EXPECT_EQ(psa_context_set_step(raw, 1000), PSA_OK);  // past warm-up: sparse
  return ContextPtr(raw);
}

HostTensor random_tensor(std::mt19937_64& rng, int64_t b, int64_t h, int64_t l, int64_t d) {
  HostTensor t(PSA_LAYOUT_BNSD, PSA_DTYPE_F32, b, h, l, d);
  for (int64_t i = 0; i < b; ++i)
    for (int64_t j = 0; j < h; ++j) t.set_head(i, j, psa_test::random_vec(rng, l * d));
  return t;
}

// Video-like heads (smooth fields over a 4 x 8 x (l / 32) grid plus text rows in front), so
// the masks are sparse and depend on the sampled rows.
HostTensor video_tensor(std::mt19937_64& rng, int64_t b, int64_t h, int64_t l, int64_t d,
                        int64_t text = 0) {
  HostTensor t(PSA_LAYOUT_BNSD, PSA_DTYPE_F32, b, h, l, d);
  const int64_t w = (l - text) / 32;
  for (int64_t i = 0; i < b; ++i)
    for (int64_t j = 0; j < h; ++j) {
      std::vector<float> head = psa_test::random_vec(rng, text * d);
      std::vector<float> video = psa_test::video_like(rng, 4, 8, w, d);
      for (float& x : video) x *= 3.0f;
      head.insert(head.end(), video.begin(), video.end());
      t.set_head(i, j, head);
    }
  return t;
}

// Rows [h0, h0 + n) of heads / [b0, b0 + m) of batch items as a new tensor.
HostTensor slice(const HostTensor& t, int64_t b0, int64_t m, int64_t h0, int64_t n) {
  HostTensor r(PSA_LAYOUT_BNSD, PSA_DTYPE_F32, m, n, t.desc.shape[2], t.desc.shape[3]);
  for (int64_t b = 0; b < m; ++b)
    for (int64_t h = 0; h < n; ++h) r.set_head(b, h, t.head(b0 + b, h0 + h));
  return r;
}

TEST(HeadOffset, ShardOfHeadsEqualsWholeForwardBitForBit) {
  std::mt19937_64 rng(15);
  const int64_t B = 2, H = 8, L = 4 * 8 * 32, D = 64;
  HostTensor q = video_tensor(rng, B, H, L, D), k = video_tensor(rng, B, H, L, D),
             v = video_tensor(rng, B, H, L, D);
  ConfigPtr cfg = preset("Wan2.1_1.3b", "psa_balanced");
  ContextPtr whole = make_ctx(cfg.get());
  PSA_ASSERT_OK(psa_context_set_video_grid(whole.get(), 4, 8, 32, 0, PSA_TEXT_NONE));
  HostTensor out(PSA_LAYOUT_BNSD, PSA_DTYPE_F32, B, H, L, D);
  PSA_ASSERT_OK(psa_test::forward_cpu(whole.get(), q, k, v, &out, nullptr));

  for (int64_t b0 : {0, 1}) {
    ConfigPtr shard_cfg = preset("Wan2.1_1.3b", "psa_balanced");
    PSA_ASSERT_OK(psa_config_set_int(shard_cfg.get(), PSA_PARAM_HEAD_OFFSET, 4));
    PSA_ASSERT_OK(psa_config_set_int(shard_cfg.get(), PSA_PARAM_BATCH_OFFSET, b0));
    ContextPtr shard = make_ctx(shard_cfg.get());
    PSA_ASSERT_OK(psa_context_set_video_grid(shard.get(), 4, 8, 32, 0, PSA_TEXT_NONE));
    HostTensor qs = slice(q, b0, 1, 4, 4), ks = slice(k, b0, 1, 4, 4), vs = slice(v, b0, 1, 4, 4);
    HostTensor os(PSA_LAYOUT_BNSD, PSA_DTYPE_F32, 1, 4, L, D);
    PSA_ASSERT_OK(psa_test::forward_cpu(shard.get(), qs, ks, vs, &os, nullptr));
    for (int64_t h = 0; h < 4; ++h)
      EXPECT_EQ(os.head(0, h), out.head(b0, 4 + h)) << "batch " << b0 << " head " << 4 + h;
  }
  // Without the offset the shard draws heads 0..3's samples: some row differs.
  ContextPtr local = make_ctx(cfg.get());
  PSA_ASSERT_OK(psa_context_set_video_grid(local.get(), 4, 8, 32, 0, PSA_TEXT_NONE));
  HostTensor qs = slice(q, 0, 1, 4, 4), ks = slice(k, 0, 1, 4, 4), vs = slice(v, 0, 1, 4, 4);
  HostTensor os(PSA_LAYOUT_BNSD, PSA_DTYPE_F32, 1, 4, L, D);
  PSA_ASSERT_OK(psa_test::forward_cpu(local.get(), qs, ks, vs, &os, nullptr));
  bool differs = false;
  for (int64_t h = 0; h < 4; ++h) differs = differs || os.head(0, h) != out.head(0, 4 + h);
  EXPECT_TRUE(differs);
}

TEST(HeadOffset, ParamsAreNamedAndBounded) {
  psa_param p;
  PSA_ASSERT_OK(psa_param_from_name("head_offset", &p));
  EXPECT_EQ(p, PSA_PARAM_HEAD_OFFSET);
  PSA_ASSERT_OK(psa_param_from_name("batch_offset", &p));
  EXPECT_EQ(p, PSA_PARAM_BATCH_OFFSET);
  ConfigPtr cfg = preset("Wan2.1_1.3b", "psa_balanced");
  EXPECT_EQ(psa_config_set_int(cfg.get(), PSA_PARAM_HEAD_OFFSET, -1), PSA_ERR_INVALID_ARGUMENT);
  int64_t value = -1;
  PSA_ASSERT_OK(psa_config_get_int(cfg.get(), PSA_PARAM_BATCH_OFFSET, &value));
  EXPECT_EQ(value, 0);
}

TEST(SequenceOrder, PermutedOutsideGivesTheSameFloatsAndQueryShardsTheSameRows) {
  std::mt19937_64 rng(16);
  const int64_t H = 2, D = 64, T = 40, L = 4 * 8 * 24 + T;
  for (const char* model : {"Wan2.1_1.3b", "CogVideo1.5_5b"}) {
    SCOPED_TRACE(model);
    const int64_t text = std::string(model).rfind("Cog", 0) == 0 ? T : 0;
    const int64_t len = L - T + text;
    const psa_text_position pos = text ? PSA_TEXT_FIRST : PSA_TEXT_NONE;
    HostTensor q = video_tensor(rng, 1, H, len, D, text), k = video_tensor(rng, 1, H, len, D, text),
               v = video_tensor(rng, 1, H, len, D, text);
    ConfigPtr cfg = preset(model, "psa_balanced");
    ContextPtr ctx = make_ctx(cfg.get());
    PSA_ASSERT_OK(psa_context_set_video_grid(ctx.get(), 4, 8, 24, text, pos));
    HostTensor out(PSA_LAYOUT_BNSD, PSA_DTYPE_F32, 1, H, len, D);
    PSA_ASSERT_OK(psa_test::forward_cpu(ctx.get(), q, k, v, &out, nullptr));
    std::vector<int64_t> order(static_cast<size_t>(len));
    int64_t tb = -1, te = -1;
    PSA_ASSERT_OK(psa_context_sequence_order(ctx.get(), len, order.data(), &tb, &te));
    std::vector<int64_t> sorted = order;
    std::sort(sorted.begin(), sorted.end());
    for (int64_t i = 0; i < len; ++i) ASSERT_EQ(sorted[i], i);
    EXPECT_EQ(te - tb, text);
    if (text) EXPECT_EQ(te, len);  // Gilbert moves the text last

    auto permute = [&](const HostTensor& t, int64_t from, int64_t n) {
      HostTensor r(PSA_LAYOUT_BNSD, PSA_DTYPE_F32, 1, H, n, D);
      for (int64_t h = 0; h < H; ++h)
        for (int64_t i = 0; i < n; ++i)
          for (int64_t c = 0; c < D; ++c) r.set(0, h, i, c, t.get(0, h, order[from + i], c));
      return r;
    };
    ConfigPtr flat = preset(model, "psa_balanced");
    PSA_ASSERT_OK(psa_config_set_int(flat.get(), PSA_PARAM_USE_REARRANGE, 0));
    ContextPtr fctx = make_ctx(flat.get());
    PSA_ASSERT_OK(psa_context_set_video_grid(fctx.get(), 4, 8, 24, text,
                                             text ? (tb == 0 ? PSA_TEXT_FIRST : PSA_TEXT_LAST)
                                                  : PSA_TEXT_NONE));
    HostTensor kp = permute(k, 0, len), vp = permute(v, 0, len);
    // The whole permuted sequence, then the second half of the query blocks alone.
    const int64_t split = 4 * 128;
    for (int64_t q0 : {int64_t{0}, split}) {
      const int64_t n = q0 == 0 ? len : len - split;
      HostTensor qp = permute(q, q0, n);
      HostTensor op(PSA_LAYOUT_BNSD, PSA_DTYPE_F32, 1, H, n, D);
      PSA_ASSERT_OK(psa_test::forward_cpu(fctx.get(), qp, kp, vp, &op, nullptr));
      for (int64_t h = 0; h < H; ++h)
        for (int64_t i = 0; i < n; ++i)
          for (int64_t c = 0; c < D; ++c)
            ASSERT_EQ(op.get(0, h, i, c), out.get(0, h, order[q0 + i], c))
                << "q0 " << q0 << " head " << h << " row " << i;
    }
  }
}

TEST(SequenceOrder, IdentityWithoutGridAndErrors) {
  ConfigPtr cfg = preset("Wan2.1_1.3b", "psa_balanced");
  ContextPtr ctx = make_ctx(cfg.get());
  std::vector<int64_t> order(10);
  PSA_ASSERT_OK(psa_context_sequence_order(ctx.get(), 10, order.data(), nullptr, nullptr));
  for (int64_t i = 0; i < 10; ++i) EXPECT_EQ(order[i], i);
  PSA_ASSERT_OK(psa_context_set_video_grid(ctx.get(), 2, 4, 4, 0, PSA_TEXT_NONE));
  EXPECT_EQ(psa_context_sequence_order(ctx.get(), 33, nullptr, nullptr, nullptr),
            PSA_ERR_INVALID_SHAPE);
  EXPECT_EQ(psa_context_sequence_order(nullptr, 32, nullptr, nullptr, nullptr),
            PSA_ERR_NULL_POINTER);
}

// Without an order buffer the call gives the same text span and errors, and allocates nothing
// in seq_len: a grid of 2^40 video tokens (+ text) answers at once.
TEST(SequenceOrder, TextSpanWithoutOrderBuffer) {
  struct Way {
    psa_method method;
    int use_rearrange;
    psa_rearrange rearrange;
  };
  const Way ways[] = {{PSA_METHOD_PSA, 1, PSA_REARRANGE_GILBERT},
                      {PSA_METHOD_PSA, 1, PSA_REARRANGE_STA},
                      {PSA_METHOD_PSA, 0, PSA_REARRANGE_GILBERT},
                      {PSA_METHOD_RF_V2, 1, PSA_REARRANGE_GILBERT}};
  for (const Way& w : ways) {
    ConfigPtr cfg = preset("Wan2.1_1.3b", "psa_balanced");
    PSA_ASSERT_OK(psa_config_set_int(cfg.get(), PSA_PARAM_METHOD, w.method));
    PSA_ASSERT_OK(psa_config_set_int(cfg.get(), PSA_PARAM_USE_REARRANGE, w.use_rearrange));
    PSA_ASSERT_OK(psa_config_set_int(cfg.get(), PSA_PARAM_REARRANGE_METHOD, w.rearrange));
    PSA_ASSERT_OK(psa_config_set_int(cfg.get(), PSA_PARAM_STA_TILE_T, 1));
    PSA_ASSERT_OK(psa_config_set_int(cfg.get(), PSA_PARAM_STA_TILE_H, 4));
    PSA_ASSERT_OK(psa_config_set_int(cfg.get(), PSA_PARAM_STA_TILE_W, 4));
    ContextPtr ctx = make_ctx(cfg.get());
    for (psa_text_position pos : {PSA_TEXT_FIRST, PSA_TEXT_LAST}) {
      SCOPED_TRACE(std::to_string(w.method) + "/" + std::to_string(w.use_rearrange) + "/" +
                   std::to_string(w.rearrange) + " text " + std::to_string(pos));
      PSA_ASSERT_OK(psa_context_set_video_grid(ctx.get(), 2, 8, 8, 5, pos));
      std::vector<int64_t> order(133);
      int64_t b0 = -1, e0 = -1, b1 = -2, e1 = -2;
      PSA_ASSERT_OK(psa_context_sequence_order(ctx.get(), 133, order.data(), &b0, &e0));
      PSA_ASSERT_OK(psa_context_sequence_order(ctx.get(), 133, nullptr, &b1, &e1));
      EXPECT_EQ(b0, b1);
      EXPECT_EQ(e0, e1);
      EXPECT_EQ(5, e0 - b0);
      for (int64_t x = b0; x < e0; ++x) {  // the caller's text tokens
        const int64_t src = order[static_cast<size_t>(x)];
        EXPECT_TRUE(pos == PSA_TEXT_FIRST ? src < 5 : src >= 128) << src;
      }
      EXPECT_EQ(PSA_ERR_INVALID_SHAPE, psa_context_sequence_order(ctx.get(), 132, nullptr, &b1, &e1));
      // 2^40 video tokens and 3 text tokens.
      const int64_t side = int64_t{1} << 20;
      PSA_ASSERT_OK(psa_context_set_video_grid(ctx.get(), 1, side, side, 3, pos));
      PSA_ASSERT_OK(psa_context_sequence_order(ctx.get(), side * side + 3, nullptr, &b1, &e1));
      EXPECT_EQ(3, e1 - b1);
      EXPECT_TRUE(b1 == 0 || b1 == side * side) << b1;
    }
  }
}

// Double reference of the merge.
void merge_reference(const std::vector<std::vector<float>>& outs,
                     const std::vector<std::vector<float>>& lses, int64_t rows, int64_t d,
                     std::vector<double>* out, std::vector<double>* lse) {
  out->assign(static_cast<size_t>(rows * d), 0.0);
  lse->assign(static_cast<size_t>(rows), -std::numeric_limits<double>::infinity());
  for (int64_t r = 0; r < rows; ++r) {
    double m = -std::numeric_limits<double>::infinity();
    for (const auto& l : lses) m = std::max(m, static_cast<double>(l[r]));
    if (std::isinf(m)) continue;
    double s = 0.0;
    for (const auto& l : lses) s += std::exp(static_cast<double>(l[r]) - m);
    const double total = m + std::log(s);
    (*lse)[r] = total;
    for (size_t i = 0; i < outs.size(); ++i)
      for (int64_t c = 0; c < d; ++c)
        (*out)[r * d + c] += std::exp(static_cast<double>(lses[i][r]) - total) * outs[i][r * d + c];
  }
}

TEST(MergeAttention, EqualsDoubleReferenceWithEmptyRowsAndInPlace) {
  std::mt19937_64 rng(17);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  const int64_t B = 2, H = 3, L = 37, D = 64, rows = B * H * L;
  for (int parts : {1, 2, 5}) {
    std::vector<std::vector<float>> outs(parts), lses(parts);
    for (int i = 0; i < parts; ++i) {
      outs[i].resize(static_cast<size_t>(rows * D));
      lses[i].resize(static_cast<size_t>(rows));
      for (auto& x : outs[i]) x = nd(rng);
      for (int64_t r = 0; r < rows; ++r)
        lses[i][r] = (r % 7 == i) ? -std::numeric_limits<float>::infinity() : 3.0f * nd(rng);
    }
    for (int i = 0; i < parts; ++i) lses[i][5] = -std::numeric_limits<float>::infinity();
    std::vector<double> ref, ref_lse;
    merge_reference(outs, lses, rows, D, &ref, &ref_lse);
    psa_tensor_desc desc;
    PSA_ASSERT_OK(psa_tensor_desc_init(&desc, PSA_LAYOUT_BNSD, PSA_DTYPE_F32, B, H, L, D));
    std::vector<const void*> op(parts);
    std::vector<const float*> lp(parts);
    for (int i = 0; i < parts; ++i) {
      op[i] = outs[i].data();
      lp[i] = lses[i].data();
    }
    std::vector<float> out(static_cast<size_t>(rows * D), 7.0f), lse(static_cast<size_t>(rows));
    PSA_ASSERT_OK(psa_merge_attention(parts, &desc, op.data(), lp.data(), out.data(), lse.data(),
                                      PSA_BACKEND_AUTO, nullptr));
    for (int64_t r = 0; r < rows; ++r) {
      if (std::isinf(ref_lse[r])) {
        EXPECT_TRUE(std::isinf(lse[r]) && lse[r] < 0) << r;
      } else {
        EXPECT_NEAR(lse[r], ref_lse[r], 1e-5 * (1.0 + std::fabs(ref_lse[r]))) << r;
      }
      for (int64_t c = 0; c < D; ++c) EXPECT_NEAR(out[r * D + c], ref[r * D + c], 2e-6) << r;
    }
    // In place into the first part and its lse.
    PSA_ASSERT_OK(psa_merge_attention(parts, &desc, op.data(), lp.data(), outs[0].data(),
                                      lses[0].data(), PSA_BACKEND_CPU, nullptr));
    EXPECT_EQ(outs[0], out);
    EXPECT_EQ(lses[0], lse);
  }
}

TEST(MergeAttention, SplitKeysGiveTheWholeAttention) {
  std::mt19937_64 rng(18);
  const int64_t H = 2, L = 300, D = 64;
  HostTensor q = random_tensor(rng, 1, H, L, D), k = random_tensor(rng, 1, H, L, D),
             v = random_tensor(rng, 1, H, L, D);
  psa_config* raw = nullptr;
  PSA_ASSERT_OK(psa_config_create(&raw));
  ConfigPtr cfg(raw);
  PSA_ASSERT_OK(psa_config_set_int(cfg.get(), PSA_PARAM_METHOD, PSA_METHOD_DENSE));
  ContextPtr ctx = make_ctx(cfg.get());
  HostTensor whole(PSA_LAYOUT_BNSD, PSA_DTYPE_F32, 1, H, L, D);
  std::vector<float> whole_lse;
  PSA_ASSERT_OK(psa_test::forward_cpu(ctx.get(), q, k, v, &whole, &whole_lse));
  const int64_t cuts[3] = {0, 110, L};
  std::vector<HostTensor> outs;
  std::vector<std::vector<float>> lses(2);
  for (int p = 0; p < 2; ++p) {
    const int64_t n = cuts[p + 1] - cuts[p];
    HostTensor kp(PSA_LAYOUT_BNSD, PSA_DTYPE_F32, 1, H, n, D), vp = kp;
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < n; ++i)
        for (int64_t c = 0; c < D; ++c) {
          kp.set(0, h, i, c, k.get(0, h, cuts[p] + i, c));
          vp.set(0, h, i, c, v.get(0, h, cuts[p] + i, c));
        }
    outs.emplace_back(PSA_LAYOUT_BNSD, PSA_DTYPE_F32, 1, H, L, D);
    PSA_ASSERT_OK(psa_test::forward_cpu(ctx.get(), q, kp, vp, &outs.back(), &lses[p]));
  }
  const void* op[2] = {outs[0].bytes.data(), outs[1].bytes.data()};
  const float* lp[2] = {lses[0].data(), lses[1].data()};
  HostTensor merged(PSA_LAYOUT_BNSD, PSA_DTYPE_F32, 1, H, L, D);
  std::vector<float> merged_lse(static_cast<size_t>(H * L));
  PSA_ASSERT_OK(psa_merge_attention(2, &merged.desc, op, lp, merged.bytes.data(),
                                    merged_lse.data(), PSA_BACKEND_CPU, nullptr));
  for (int64_t h = 0; h < H; ++h)
    for (int64_t i = 0; i < L; ++i) {
      EXPECT_NEAR(merged_lse[h * L + i], whole_lse[h * L + i], 2e-5);
      for (int64_t c = 0; c < D; ++c) EXPECT_NEAR(merged.get(0, h, i, c), whole.get(0, h, i, c), 2e-6);
    }
}

TEST(MergeAttention, BadArgumentsAreNamed) {
  psa_tensor_desc desc;
  PSA_ASSERT_OK(psa_tensor_desc_init(&desc, PSA_LAYOUT_BNSD, PSA_DTYPE_F32, 1, 1, 4, 8));
  std::vector<float> a(32), l(4), out(32);
  const void* op[1] = {a.data()};
  const float* lp[1] = {l.data()};
  EXPECT_EQ(psa_merge_attention(0, &desc, op, lp, out.data(), nullptr, PSA_BACKEND_CPU, nullptr),
            PSA_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(psa_last_error_message()).find("count = 0"), std::string::npos);
  EXPECT_EQ(psa_merge_attention(65, &desc, op, lp, out.data(), nullptr, PSA_BACKEND_CPU, nullptr),
            PSA_ERR_INVALID_ARGUMENT);
  const void* bad[1] = {nullptr};
  EXPECT_EQ(psa_merge_attention(1, &desc, bad, lp, out.data(), nullptr, PSA_BACKEND_CPU, nullptr),
            PSA_ERR_NULL_POINTER);
  EXPECT_NE(std::string(psa_last_error_message()).find("outs[0]"), std::string::npos);
  EXPECT_EQ(psa_merge_attention(1, nullptr, op, lp, out.data(), nullptr, PSA_BACKEND_CPU, nullptr),
            PSA_ERR_NULL_POINTER);
#if !defined(PSA_WITH_CUDA)
  EXPECT_EQ(psa_merge_attention(1, &desc, op, lp, out.data(), nullptr, PSA_BACKEND_CUDA, nullptr),
            PSA_ERR_BACKEND_UNAVAILABLE);
#endif
}

}  // namespace

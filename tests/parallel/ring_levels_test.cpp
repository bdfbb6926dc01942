// tests/parallel/ring_levels_test.cpp -- the PSA ring on the CPU backend: the level map of a
// query shard against the whole K (psa_compute_level_map) is those rows of the whole
// forward's map, and the attention of that query shard against 2..4 K/V shards at the map's
// levels (psa_shard_attention), merged through the LSE (psa_merge_attention), equals the
// whole forward (inputs permuted with psa_context_sequence_order; presets with and without
// Gilbert, text tokens, GQA, fp32 and bf16); bad arguments name themselves.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>

#include "common/api_util.h"
#include "common/test_util.h"

namespace {

using psa_test::ConfigPtr;
using psa_test::ContextPtr;
using psa_test::HostTensor;

ConfigPtr preset(const char* model, bool rearrange) {
  psa_config* c = nullptr;
  EXPECT_EQ(psa_config_load_embedded(model, "psa_balanced", &c), PSA_OK) << psa_last_error_message();
  EXPECT_EQ(psa_config_set_int(c, PSA_PARAM_USE_REARRANGE, rearrange ? 1 : 0), PSA_OK);
  return ConfigPtr(c);
}

ContextPtr make_ctx(const psa_config* cfg) {
  psa_context* raw = nullptr;
  EXPECT_EQ(psa_context_create(cfg, PSA_BACKEND_CPU, -1, &raw), PSA_OK) << psa_last_error_message();
  EXPECT_EQ(psa_context_set_step(raw, 1000), PSA_OK);  // past warm-up: sparse
  return ContextPtr(raw);
}

// Video-like heads over a 4 x 8 x w grid with `text` random rows in front.
HostTensor video_tensor(std::mt19937_64& rng, psa_dtype dt, int64_t h, int64_t w, int64_t d,
                        int64_t text) {
  const int64_t l = 4 * 8 * w + text;
  HostTensor t(PSA_LAYOUT_BNSD, dt, 1, h, l, d);
  for (int64_t j = 0; j < h; ++j) {
    std::vector<float> head = psa_test::random_vec(rng, static_cast<size_t>(text * d));
    std::vector<float> video = psa_test::video_like(rng, 4, 8, w, d);
    for (float& x : video) x *= 3.0f;
    head.insert(head.end(), video.begin(), video.end());
    t.set_head(0, j, head);
  }
  return t;
}

// Rows order[from .. from + n) of t (the computing order) as a new tensor.
HostTensor permuted(const HostTensor& t, const std::vector<int64_t>& order, int64_t from, int64_t n) {
  const int64_t h = t.desc.shape[1], d = t.desc.shape[3];
  HostTensor r(PSA_LAYOUT_BNSD, t.desc.dtype, 1, h, n, d);
  for (int64_t j = 0; j < h; ++j)
    for (int64_t i = 0; i < n; ++i)
      for (int64_t c = 0; c < d; ++c) r.set(0, j, i, c, t.get(0, j, order[from + i], c));
  return r;
}

struct Case {
  const char* model;
  bool gilbert;
  psa_dtype dtype;
  int64_t hq, hkv;
};

std::string name(const Case& c) {
  return std::string(c.model) + (c.gilbert ? " gilbert" : " raster") +
         (c.dtype == PSA_DTYPE_F32 ? " f32" : " bf16") + " hq " + std::to_string(c.hq) + " hkv " +
         std::to_string(c.hkv);
}

void check_ring(const Case& cs) {
  SCOPED_TRACE(name(cs));
  std::mt19937_64 rng(psa_test::fresh_seed());
  const int64_t D = 64, W = 24;
  const int64_t text = std::string(cs.model).rfind("Cog", 0) == 0 ? 40 : 0;
  const psa_text_position pos = text ? PSA_TEXT_FIRST : PSA_TEXT_NONE;
  HostTensor q = video_tensor(rng, cs.dtype, cs.hq, W, D, text);
  HostTensor k = video_tensor(rng, cs.dtype, cs.hkv, W, D, text);
  HostTensor v = video_tensor(rng, cs.dtype, cs.hkv, W, D, text);
  const int64_t L = q.desc.shape[2];

  // The whole forward in the caller's order (Gilbert inside libpsa when the preset has it).
  ConfigPtr cfg = preset(cs.model, cs.gilbert);
  ContextPtr whole = make_ctx(cfg.get());
  PSA_ASSERT_OK(psa_context_set_video_grid(whole.get(), 4, 8, W, text, pos));
  HostTensor out(PSA_LAYOUT_BNSD, cs.dtype, 1, cs.hq, L, D);
  PSA_ASSERT_OK(psa_test::forward_cpu(whole.get(), q, k, v, &out, nullptr));
  psa_stats st{};
  st.struct_size = sizeof(st);
  PSA_ASSERT_OK(psa_context_get_stats(whole.get(), &st));
  const int64_t mq = st.query_blocks, nk = st.key_blocks;
  std::vector<int8_t> whole_map(static_cast<size_t>(cs.hq * mq * nk));
  PSA_ASSERT_OK(psa_context_get_level_map(whole.get(), whole_map.data(), whole_map.size()));
  std::vector<int64_t> order(static_cast<size_t>(L));
  int64_t tb = 0, te = 0;
  PSA_ASSERT_OK(psa_context_sequence_order(whole.get(), L, order.data(), &tb, &te));
  if (!cs.gilbert)
    for (int64_t i = 0; i < L; ++i) ASSERT_EQ(order[i], i);

  // The ring's context: computing order outside, no rearrangement inside.
  ConfigPtr flat_cfg = preset(cs.model, false);
  ContextPtr flat = make_ctx(flat_cfg.get());
  PSA_ASSERT_OK(psa_context_set_video_grid(
      flat.get(), 4, 8, W, text, text ? (tb == 0 ? PSA_TEXT_FIRST : PSA_TEXT_LAST) : PSA_TEXT_NONE));
  int64_t bm = 0, bn = 0;
  PSA_ASSERT_OK(psa_config_get_int(flat_cfg.get(), PSA_PARAM_BLOCK_M, &bm));
  PSA_ASSERT_OK(psa_config_get_int(flat_cfg.get(), PSA_PARAM_BLOCK_N, &bn));
  const HostTensor kp = permuted(k, order, 0, L), vp = permuted(v, order, 0, L);

  // Query shards: the whole sequence and its second half of query blocks.
  for (int64_t q0 : {int64_t{0}, (mq / 2) * bm}) {
    SCOPED_TRACE("q0 " + std::to_string(q0));
    const int64_t lq = L - q0, mqs = (lq + bm - 1) / bm;
    const HostTensor qp = permuted(q, order, q0, lq);
    uint64_t bytes = 0;
    PSA_ASSERT_OK(psa_level_map_workspace_size(flat.get(), &qp.desc, &kp.desc, &bytes));
    std::vector<uint8_t> ws(bytes);
    std::vector<int8_t> map(static_cast<size_t>(cs.hq * mqs * nk), -1);
    PSA_ASSERT_OK(psa_compute_level_map(flat.get(), &qp.desc, qp.bytes.data(), &kp.desc,
                                        kp.bytes.data(), map.data(), ws.data(), bytes, nullptr));
    for (int64_t h = 0; h < cs.hq; ++h)
      for (int64_t i = 0; i < mqs; ++i)
        for (int64_t j = 0; j < nk; ++j)
          ASSERT_EQ(map[(h * mqs + i) * nk + j], whole_map[(h * mq + q0 / bm + i) * nk + j])
              << "head " << h << " query block " << i << " key block " << j;
    // The map counts as the context's forward: its statistics are the map's.
    psa_stats ms{};
    ms.struct_size = sizeof(ms);
    PSA_ASSERT_OK(psa_context_get_stats(flat.get(), &ms));
    EXPECT_EQ(ms.query_blocks, mqs);
    EXPECT_EQ(ms.key_blocks, nk);

    for (int64_t shards = 2; shards <= 4; ++shards) {
      SCOPED_TRACE("shards " + std::to_string(shards));
      // Shards of whole key blocks (the last one holds the partial block).
      const int64_t per = (nk + shards - 1) / shards;
      std::vector<HostTensor> outs;
      std::vector<std::vector<float>> lses;
      for (int64_t s = 0; s < shards; ++s) {
        const int64_t b0 = s * per, b1 = std::min(nk, b0 + per);
        if (b0 >= b1) continue;
        const int64_t t0 = b0 * bn, t1 = std::min(L, b1 * bn);
        const HostTensor ks = permuted(k, order, t0, t1 - t0), vs = permuted(v, order, t0, t1 - t0);
        HostTensor o(PSA_LAYOUT_BNSD, cs.dtype, 1, cs.hq, lq, D);
        std::vector<float> lse(static_cast<size_t>(cs.hq * lq));
        uint64_t sb = 0;
        PSA_ASSERT_OK(psa_shard_attention_workspace_size(flat.get(), &qp.desc, &ks.desc, &vs.desc,
                                                         &o.desc, &sb));
        std::vector<uint8_t> sws(sb);
        PSA_ASSERT_OK(psa_shard_attention(flat.get(), &qp.desc, qp.bytes.data(), &ks.desc,
                                          ks.bytes.data(), &vs.desc, vs.bytes.data(), map.data(),
                                          nk, b0, &o.desc, o.bytes.data(), lse.data(), sws.data(),
                                          sb, nullptr));
        outs.push_back(std::move(o));
        lses.push_back(std::move(lse));
      }
      std::vector<const void*> op;
      std::vector<const float*> lp;
      for (size_t i = 0; i < outs.size(); ++i) {
        op.push_back(outs[i].bytes.data());
        lp.push_back(lses[i].data());
      }
      HostTensor merged(PSA_LAYOUT_BNSD, cs.dtype, 1, cs.hq, lq, D);
      PSA_ASSERT_OK(psa_merge_attention(static_cast<int32_t>(outs.size()), &merged.desc, op.data(),
                                        lp.data(), merged.bytes.data(), nullptr, PSA_BACKEND_CPU,
                                        nullptr));
      // The whole forward's rows, in the computing order.
      std::vector<float> got, want;
      for (int64_t h = 0; h < cs.hq; ++h)
        for (int64_t i = 0; i < lq; ++i)
          for (int64_t c = 0; c < D; ++c) {
            got.push_back(merged.get(0, h, i, c));
            want.push_back(out.get(0, h, order[q0 + i], c));
          }
      const double tol = cs.dtype == PSA_DTYPE_F32 ? 1e-5 : 1e-2;
      EXPECT_LE(psa_test::rel_l2(got, want), tol);
    }
  }
}

TEST(RingLevels, ShardsMergedEqualTheWholeForwardF32) {
  for (bool gilbert : {true, false}) {
    check_ring({"Wan2.1_1.3b", gilbert, PSA_DTYPE_F32, 2, 2});
    check_ring({"CogVideo1.5_5b", gilbert, PSA_DTYPE_F32, 2, 2});  // text tokens
    check_ring({"Wan2.1_1.3b", gilbert, PSA_DTYPE_F32, 4, 2});     // GQA
  }
}

TEST(RingLevels, ShardsMergedEqualTheWholeForwardBf16) {
  check_ring({"Wan2.1_1.3b", true, PSA_DTYPE_BF16, 4, 2});
  check_ring({"CogVideo1.5_5b", false, PSA_DTYPE_BF16, 2, 1});
}

// Half 1 on 2 heads of 256 tokens (d 32, Wan2.1_1.3b psa_balanced without rearrangement),
// then what half 2 needs for a shard of the map's last two key blocks: its K/V, an output
// filled with 0x5a bytes, lse filled with 7 and the shard's workspace.
struct ShardSetup {
  static constexpr int64_t kD = 32;
  explicit ShardSetup(uint64_t seed)
      : rng(seed),
        q(video_tensor(rng, PSA_DTYPE_F32, 2, 8, kD, 0)),
        k(video_tensor(rng, PSA_DTYPE_F32, 2, 8, kD, 0)),
        cfg(preset("Wan2.1_1.3b", false)),
        ctx(make_ctx(cfg.get())) {
    EXPECT_EQ(psa_config_get_int(cfg.get(), PSA_PARAM_BLOCK_M, &bm), PSA_OK) << psa_last_error_message();
    EXPECT_EQ(psa_config_get_int(cfg.get(), PSA_PARAM_BLOCK_N, &bn), PSA_OK) << psa_last_error_message();
    nk = 256 / bn;
    rows = 2 * (256 / bm);
    EXPECT_EQ(psa_level_map_workspace_size(ctx.get(), &q.desc, &k.desc, &map_ws_bytes), PSA_OK) << psa_last_error_message();
    map_ws.resize(map_ws_bytes);
    map.assign(static_cast<size_t>(rows * nk), 0);
    EXPECT_EQ(psa_compute_level_map(ctx.get(), &q.desc, q.bytes.data(), &k.desc,
                                        k.bytes.data(), map.data(), map_ws.data(), map_ws_bytes,
                                        nullptr), PSA_OK) << psa_last_error_message();
    ks = HostTensor(PSA_LAYOUT_BNSD, PSA_DTYPE_F32, 1, 2, 2 * bn, kD);
    vs = ks;
    for (int64_t j = 0; j < 2; ++j) {
      ks.set_head(0, j, psa_test::random_vec(rng, static_cast<size_t>(2 * bn * kD)));
      vs.set_head(0, j, psa_test::random_vec(rng, static_cast<size_t>(2 * bn * kD)));
    }
    for (uint8_t& b : o.bytes) b = 0x5a;
    EXPECT_EQ(psa_shard_attention_workspace_size(ctx.get(), &q.desc, &ks.desc, &vs.desc,
                                                     &o.desc, &shard_ws_bytes), PSA_OK) << psa_last_error_message();
    shard_ws.resize(shard_ws_bytes);
  }
  // Half 2 with q's data at `qp` and the map `m` (map_nk key blocks, the shard at `begin`).
  psa_status shard(const void* qp, const std::vector<int8_t>& m, int64_t map_nk, int64_t begin) {
    return psa_shard_attention(ctx.get(), &q.desc, qp, &ks.desc, ks.bytes.data(), &vs.desc,
                               vs.bytes.data(), m.data(), map_nk, begin, &o.desc, o.bytes.data(),
                               lse.data(), shard_ws.data(), shard_ws_bytes, nullptr);
  }
  psa_status shard(int64_t map_nk, int64_t begin) { return shard(q.bytes.data(), map, map_nk, begin); }

  std::mt19937_64 rng;
  HostTensor q, k;
  ConfigPtr cfg;
  ContextPtr ctx;
  int64_t bm = 0, bn = 0, nk = 0, rows = 0;
  uint64_t map_ws_bytes = 0, shard_ws_bytes = 0;
  std::vector<uint8_t> map_ws, shard_ws;
  std::vector<int8_t> map;
  HostTensor ks{PSA_LAYOUT_BNSD, PSA_DTYPE_F32, 1, 2, 1, kD}, vs = ks;
  HostTensor o{PSA_LAYOUT_BNSD, PSA_DTYPE_F32, 1, 2, 256, kD};
  std::vector<float> lse = std::vector<float>(2 * 256, 7.0f);
};

TEST(RingLevels, BadArgumentsAreNamed) {
  ShardSetup t(15);
  const int64_t nk = t.nk;
  uint64_t bytes = 0, sb = 0;
  const std::vector<uint8_t> untouched = t.o.bytes;
  EXPECT_EQ(t.shard(nk, nk - 1), PSA_ERR_INVALID_ARGUMENT);  // leaves the map
  EXPECT_NE(std::string(psa_last_error_message()).find("key_block_begin = " + std::to_string(nk - 1)),
            std::string::npos)
      << psa_last_error_message();
  EXPECT_EQ(t.shard(nk, -1), PSA_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(psa_last_error_message()).find("key_block_begin = -1"), std::string::npos);
  EXPECT_EQ(t.shard(1, 0), PSA_ERR_INVALID_ARGUMENT);  // a map narrower than the shard
  EXPECT_NE(std::string(psa_last_error_message()).find("map's 1 key blocks"), std::string::npos)
      << psa_last_error_message();
  EXPECT_EQ(t.shard(0, 0), PSA_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(psa_last_error_message()).find("map_key_blocks = 0"), std::string::npos);
  EXPECT_EQ(t.o.bytes, untouched);
  EXPECT_EQ(t.lse[0], 7.0f);
  EXPECT_EQ(psa_shard_attention(t.ctx.get(), &t.q.desc, t.q.bytes.data(), &t.ks.desc, t.ks.bytes.data(),
                                &t.vs.desc, t.vs.bytes.data(), t.map.data(), nk, 0, &t.o.desc,
                                t.o.bytes.data(), nullptr, t.shard_ws.data(), t.shard_ws_bytes, nullptr),
            PSA_ERR_NULL_POINTER);
  EXPECT_NE(std::string(psa_last_error_message()).find("lse"), std::string::npos);
  EXPECT_EQ(t.shard(nk, nk - 2), PSA_OK) << psa_last_error_message();

  // Causal and the rearranging config are refused by both halves.
  ConfigPtr causal = preset("Wan2.1_1.3b", false);
  PSA_ASSERT_OK(psa_config_set_int(causal.get(), PSA_PARAM_CAUSAL, 1));
  ContextPtr cctx = make_ctx(causal.get());
  EXPECT_EQ(psa_level_map_workspace_size(cctx.get(), &t.q.desc, &t.k.desc, &bytes), PSA_ERR_UNSUPPORTED);
  EXPECT_NE(std::string(psa_last_error_message()).find("causal = 1"), std::string::npos);
  EXPECT_EQ(psa_shard_attention_workspace_size(cctx.get(), &t.q.desc, &t.ks.desc, &t.vs.desc, &t.o.desc, &sb),
            PSA_ERR_UNSUPPORTED);
  ConfigPtr gil = preset("Wan2.1_1.3b", true);
  ContextPtr gctx = make_ctx(gil.get());
  PSA_ASSERT_OK(psa_context_set_video_grid(gctx.get(), 4, 8, 8, 0, PSA_TEXT_NONE));
  EXPECT_EQ(psa_level_map_workspace_size(gctx.get(), &t.q.desc, &t.k.desc, &bytes), PSA_ERR_INVALID_STATE);
  EXPECT_NE(std::string(psa_last_error_message()).find("use_rearrange = 1"), std::string::npos);
  // Too small a workspace names both sizes.
  EXPECT_EQ(psa_compute_level_map(t.ctx.get(), &t.q.desc, t.q.bytes.data(), &t.k.desc, t.k.bytes.data(),
                                  t.map.data(), t.map_ws.data(), 1, nullptr),
            PSA_ERR_WORKSPACE_TOO_SMALL);
  EXPECT_NE(std::string(psa_last_error_message()).find("workspace_bytes = 1"), std::string::npos);
}

// Hostile half-2 inputs on the CPU backend: a map entry that is not a level (0, 1, 2, 4, 8)
// inside the shard's columns, a misaligned tensor, or a map_key_blocks whose map overflows
// int64 bytes: each is refused, named, and nothing is written. A bad entry outside the
// shard's columns is not read.
TEST(RingLevels, HostileMapsAndPointersAreRefusedBeforeWriting) {
  ShardSetup t(std::random_device{}());
  const int64_t nk = t.nk;
  const std::vector<uint8_t> untouched = t.o.bytes;
  auto unwritten = [&] {
    EXPECT_EQ(t.o.bytes, untouched);
    for (float x : t.lse) ASSERT_EQ(x, 7.0f);
  };
  const int bad_values[] = {3, 5, 6, 7, 9, 16, 64, -1, 127, -128};
  std::uniform_int_distribution<int64_t> row_of(0, t.rows - 1), col_of(nk - 2, nk - 1);
  for (int bad : bad_values) {
    std::vector<int8_t> m = t.map;
    const int64_t r = row_of(t.rng), c = col_of(t.rng);
    m[static_cast<size_t>(r * nk + c)] = static_cast<int8_t>(bad);
    EXPECT_EQ(t.shard(t.q.bytes.data(), m, nk, nk - 2), PSA_ERR_INVALID_ARGUMENT) << bad;
    const std::string msg = psa_last_error_message();
    EXPECT_NE(msg.find("levels[" + std::to_string(r * nk + c) + "] = " + std::to_string(bad)),
              std::string::npos) << msg;
    EXPECT_NE(msg.find("allowed: 0 (skipped), 1, 2, 4, 8"), std::string::npos) << msg;
    unwritten();
    // The same value in a column of another shard is not this call's business.
    std::vector<int8_t> other = t.map;
    other[static_cast<size_t>(r * nk)] = static_cast<int8_t>(bad);  // key block 0
    if (nk > 2) {
      EXPECT_EQ(t.shard(t.q.bytes.data(), other, nk, nk - 2), PSA_OK) << psa_last_error_message();
      t.o.bytes = untouched;
      std::fill(t.lse.begin(), t.lse.end(), 7.0f);
    }
  }
  // A q one byte off its float alignment.
  std::vector<uint8_t> shifted(t.q.bytes.size() + 4);
  std::memcpy(shifted.data() + 1, t.q.bytes.data(), t.q.bytes.size());
  EXPECT_EQ(t.shard(shifted.data() + 1, t.map, nk, nk - 2), PSA_ERR_MISALIGNED_POINTER);
  EXPECT_NE(std::string(psa_last_error_message()).find("q: address"), std::string::npos)
      << psa_last_error_message();
  unwritten();
  EXPECT_EQ(psa_compute_level_map(t.ctx.get(), &t.q.desc, shifted.data() + 1, &t.k.desc,
                                  t.k.bytes.data(), t.map.data(), t.map_ws.data(), t.map_ws_bytes,
                                  nullptr),
            PSA_ERR_MISALIGNED_POINTER);
  EXPECT_NE(std::string(psa_last_error_message()).find("q: address"), std::string::npos);
  // map_key_blocks whose map size overflows: named, not a wrapped overlap.
  const int64_t huge = (int64_t{1} << 62) + 1;
  EXPECT_EQ(t.shard(t.q.bytes.data(), t.map, huge, 0), PSA_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(psa_last_error_message()).find("map_key_blocks = " + std::to_string(huge)),
            std::string::npos) << psa_last_error_message();
  unwritten();
}

}  // namespace

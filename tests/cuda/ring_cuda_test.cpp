// tests/cuda/ring_cuda_test.cpp -- the PSA ring entries (psa_compute_level_map,
// psa_shard_attention) on the CUDA backend, against the CPU backend on the same inputs:
// the level map of a query shard equals the CPU backend's exactly on inputs whose logits
// are exact (integer values; presets with and without the similarity cap, text tokens,
// GQA, batch 2, bf16 and f16, uneven query shards), with the same statistics; the shard
// attention of a query shard against each K/V shard at one map equals the CPU backend's out
// and LSE within the bf16 budget; a ring emulated in one process (2 and 4 shards: a map per
// query shard, the attention of every K/V shard, psa_merge_attention on the device) equals
// the whole CUDA forward (Gilbert order permuted outside with psa_context_sequence_order);
// the ring halves replay from a CUDA graph; warm-up maps are all level 1; bad arguments
// are named and write nothing. Skips without a device.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "cuda_test_util.h"
#include "psa.h"

namespace {

using psa::test::DevBuf;
using psa::test::Tensor16;

uint32_t fresh() {
  std::random_device rd;
  const uint32_t s = rd();
  std::printf("[ring cuda] seed %u\n", s);
  return s;
}

// [n] integers in [-2, 2]: every dot product over d <= 128 is exact in fp32, so the block
// scores of both backends agree bit for bit (cf. tie_rank_cuda_test.cpp).
Tensor16 small_ints(size_t n, psa_dtype dt, uint32_t seed) {
  std::mt19937 gen(seed);
  Tensor16 t;
  t.bits.resize(n);
  t.f.resize(n);
  for (size_t i = 0; i < n; ++i) {
    t.f[i] = static_cast<float>(static_cast<int>(gen() % 5) - 2);
    t.bits[i] = psa::test::to16(t.f[i], dt);
  }
  return t;
}

// Rows [from, from + n) of every head of a [heads, len, d] tensor; with `order`, row i is
// source row order[from + i] (the computing order).
std::vector<uint16_t> rows(const Tensor16& t, int64_t heads, int64_t len, int64_t d, int64_t from, int64_t n,
                           const std::vector<int64_t>* order = nullptr) {
  std::vector<uint16_t> r(static_cast<size_t>(heads * n * d));
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t i = 0; i < n; ++i) {
      const int64_t src = order ? (*order)[static_cast<size_t>(from + i)] : from + i;
      std::copy_n(t.bits.begin() + (h * len + src) * d, d, r.begin() + (h * n + i) * d);
    }
  return r;
}

psa_tensor_desc desc(psa_dtype dt, int64_t b, int64_t h, int64_t l, int64_t d) {
  psa_tensor_desc x{};
  x.struct_size = sizeof x;
  psa_tensor_desc_init(&x, PSA_LAYOUT_BNSD, dt, b, h, l, d);
  return x;
}

struct Case {
  const char* model;
  psa_dtype dtype;
  int64_t batch, hq, hkv;
  int64_t w;     // grid 4 x 8 x w
  int64_t text;  // text tokens (first)
  bool gilbert;
  int64_t video() const { return 4 * 8 * w; }
  int64_t L() const { return video() + text; }
  std::string name() const {
    return std::string(model) + (dtype == PSA_DTYPE_F16 ? " f16" : " bf16") + " B" + std::to_string(batch) + " hq" +
           std::to_string(hq) + " hkv" + std::to_string(hkv) + " text" + std::to_string(text) +
           (gilbert ? " gilbert" : " raster");
  }
};

psa_config* preset(const Case& c, bool rearrange) {
  psa_config* cfg = nullptr;
  EXPECT_EQ(PSA_OK, psa_config_load_embedded(c.model, "psa_balanced", &cfg)) << psa_last_error_message();
  EXPECT_EQ(PSA_OK, psa_config_set_int(cfg, PSA_PARAM_USE_REARRANGE, rearrange ? 1 : 0));
  return cfg;
}

// A context past warm-up with the case's grid; text first, or where `text_begin` says.
psa_context* context(psa_config* cfg, psa_backend be, const Case& c, int64_t text_begin = 0) {
  psa_context* ctx = nullptr;
  EXPECT_EQ(PSA_OK, psa_context_create(cfg, be, -1, &ctx)) << psa_last_error_message();
  const psa_text_position pos = c.text == 0 ? PSA_TEXT_NONE : text_begin == 0 ? PSA_TEXT_FIRST : PSA_TEXT_LAST;
  EXPECT_EQ(PSA_OK, psa_context_set_video_grid(ctx, 4, 8, c.w, c.text, pos)) << psa_last_error_message();
  EXPECT_EQ(PSA_OK, psa_context_set_step(ctx, 1000));
  return ctx;
}

int64_t block(psa_config* cfg, psa_param p) {
  int64_t v = 0;
  EXPECT_EQ(PSA_OK, psa_config_get_int(cfg, p, &v));
  return v;
}

psa_stats stats_of(psa_context* ctx) {
  psa_stats s{};
  s.struct_size = sizeof s;
  EXPECT_EQ(PSA_OK, psa_context_get_stats(ctx, &s)) << psa_last_error_message();
  return s;
}

// psa_compute_level_map on the CPU backend (host) and on the CUDA backend (device).
std::vector<int8_t> cpu_level_map(psa_context* ctx, const psa_tensor_desc& qd, const std::vector<uint16_t>& q,
                                  const psa_tensor_desc& kd, const std::vector<uint16_t>& k, size_t n) {
  uint64_t bytes = 0;
  EXPECT_EQ(PSA_OK, psa_level_map_workspace_size(ctx, &qd, &kd, &bytes)) << psa_last_error_message();
  std::vector<char> ws(bytes);
  std::vector<int8_t> map(n, -1);
  EXPECT_EQ(PSA_OK, psa_compute_level_map(ctx, &qd, q.data(), &kd, k.data(), map.data(), ws.data(), bytes, nullptr))
      << psa_last_error_message();
  return map;
}

psa_status cuda_level_map(psa_context* ctx, const psa_tensor_desc& qd, const DevBuf<uint16_t>& q,
                          const psa_tensor_desc& kd, const DevBuf<uint16_t>& k, DevBuf<int8_t>* map) {
  uint64_t bytes = 0;
  psa_status st = psa_level_map_workspace_size(ctx, &qd, &kd, &bytes);
  if (st != PSA_OK) return st;
  DevBuf<char> ws(bytes);
  map->fill_bytes(0x7f);
  st = psa_compute_level_map(ctx, &qd, q.get(), &kd, k.get(), map->get(), ws.get(), bytes, nullptr);
  cudaDeviceSynchronize();
  return st;
}

// Query shards of whole query blocks: [0, mq) and an uneven split of the blocks.
std::vector<std::pair<int64_t, int64_t>> query_shards(int64_t mq) {
  std::vector<std::pair<int64_t, int64_t>> s = {{0, mq}};
  if (mq >= 3) {
    s.push_back({0, 1});
    s.push_back({1, mq});
  }
  if (mq >= 5) s.push_back({2, mq - 1});
  return s;
}

void check_level_map(const Case& c) {
  SCOPED_TRACE(c.name());
  const uint32_t seed = fresh();
  const int64_t B = c.batch, L = c.L(), D = 64;
  const Tensor16 q = small_ints(static_cast<size_t>(B * c.hq * L * D), c.dtype, seed);
  const Tensor16 k = small_ints(static_cast<size_t>(B * c.hkv * L * D), c.dtype, seed + 1);
  psa_config* cfg = preset(c, false);
  const int64_t bm = block(cfg, PSA_PARAM_BLOCK_M), bn = block(cfg, PSA_PARAM_BLOCK_N);
  const int64_t mq = (L + bm - 1) / bm, nk = (L + bn - 1) / bn;
  psa_context* cpu = context(cfg, PSA_BACKEND_CPU, c);
  psa_context* gpu = context(cfg, PSA_BACKEND_CUDA, c);
  const psa_tensor_desc kd = desc(c.dtype, B, c.hkv, L, D);
  DevBuf<uint16_t> dk(k.bits);
  int compared = 0;
  for (auto [b0, b1] : query_shards(mq)) {
    SCOPED_TRACE("query blocks " + std::to_string(b0) + ".." + std::to_string(b1));
    const int64_t t0 = b0 * bm, t1 = std::min(L, b1 * bm), lq = t1 - t0, mqs = b1 - b0;
    const psa_tensor_desc qd = desc(c.dtype, B, c.hq, lq, D);
    const std::vector<uint16_t> qs = rows(q, B * c.hq, L, D, t0, lq);
    const size_t n = static_cast<size_t>(B * c.hq * mqs * nk);
    const std::vector<int8_t> want = cpu_level_map(cpu, qd, qs, kd, k.bits, n);
    DevBuf<uint16_t> dq(qs);
    DevBuf<int8_t> map(n);
    ASSERT_EQ(PSA_OK, cuda_level_map(gpu, qd, dq, kd, dk, &map)) << psa_last_error_message();
    const std::vector<int8_t> got = map.download();
    int64_t differ = 0;
    for (size_t e = 0; e < n; ++e) differ += got[e] != want[e];
    EXPECT_EQ(0, differ) << "of " << n << " entries";
    // The map is the context's forward: the same statistics and exported map as the CPU's.
    const psa_stats sc = stats_of(cpu), sg = stats_of(gpu);
    EXPECT_EQ(sg.query_blocks, mqs);
    EXPECT_EQ(sg.key_blocks, nk);
    EXPECT_EQ(sg.ran_dense, 0);
    EXPECT_EQ(sc.step, sg.step);
    for (int i = 0; i < 5; ++i) EXPECT_EQ(sc.level_fraction[i], sg.level_fraction[i]) << "slot " << i;
    EXPECT_DOUBLE_EQ(sc.density, sg.density);
    std::vector<int8_t> exported(n, -1);
    ASSERT_EQ(PSA_OK, psa_context_get_level_map(gpu, exported.data(), exported.size())) << psa_last_error_message();
    EXPECT_EQ(exported, got);
    ++compared;
  }
  EXPECT_GE(compared, 3);
  psa_context_destroy(cpu);
  psa_context_destroy(gpu);
  psa_config_destroy(cfg);
}

TEST(RingCuda, LevelMapEqualsCpuBackendExactly) {
  PSA_REQUIRE_GPU();
  check_level_map({"Wan2.1_1.3b", PSA_DTYPE_BF16, 1, 2, 2, 24, 0, false});     // similarity cap
  check_level_map({"Wan2.1_1.3b", PSA_DTYPE_F16, 2, 4, 2, 20, 0, false});      // GQA, batch 2, f16
  check_level_map({"CogVideo1.5_5b", PSA_DTYPE_BF16, 1, 4, 1, 24, 40, false}); // text, bn 32, GQA
  check_level_map({"CogVideo1.5_5b", PSA_DTYPE_F16, 1, 2, 2, 17, 40, false});  // partial blocks
}

// Out (16-bit) and fp32 LSE of one shard attention.
struct Partial {
  std::vector<float> out, lse;
};

void expect_close(const Partial& got, const Partial& want, const std::string& what) {
  EXPECT_TRUE(psa::test::all_finite(got.out)) << what;
  const double err = psa::test::rel_l2(got.out, want.out);
  double lse_err = 0;
  int64_t inf_diff = 0;
  for (size_t i = 0; i < want.lse.size(); ++i) {
    if (std::isinf(want.lse[i]) || std::isinf(got.lse[i])) {
      inf_diff += want.lse[i] != got.lse[i];
      continue;
    }
    lse_err = std::max(lse_err, std::fabs(static_cast<double>(want.lse[i]) - got.lse[i]));
  }
  std::printf("[ring cuda] %-60s rel-L2 %.3e  max|lse diff| %.2e\n", what.c_str(), err, lse_err);
  EXPECT_LE(err, 2e-2) << what;
  EXPECT_LE(lse_err, 3e-2) << what;
  EXPECT_EQ(0, inf_diff) << what;
}

std::vector<float> to_float(const std::vector<uint16_t>& bits, psa_dtype dt) {
  std::vector<float> f(bits.size());
  for (size_t i = 0; i < bits.size(); ++i) f[i] = psa::test::from16(bits[i], dt);
  return f;
}

TEST(RingCuda, ShardAttentionEqualsCpuBackend) {
  PSA_REQUIRE_GPU();
  const Case cases[] = {{"Wan2.1_1.3b", PSA_DTYPE_BF16, 1, 4, 2, 24, 0, false},
                        {"CogVideo1.5_5b", PSA_DTYPE_BF16, 2, 2, 2, 24, 40, false},
                        {"CogVideo1.5_5b", PSA_DTYPE_F16, 1, 2, 1, 17, 40, false}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name());
    const uint32_t seed = fresh();
    const int64_t B = c.batch, L = c.L(), D = 64;
    const Tensor16 q = psa::test::make_video_like(B * c.hq, L, D, c.dtype, seed);
    const Tensor16 k = psa::test::make_video_like(B * c.hkv, L, D, c.dtype, seed + 1);
    const Tensor16 v = psa::test::make_random(static_cast<size_t>(B * c.hkv * L * D), c.dtype, seed + 2);
    psa_config* cfg = preset(c, false);
    const int64_t bm = block(cfg, PSA_PARAM_BLOCK_M), bn = block(cfg, PSA_PARAM_BLOCK_N);
    const int64_t mq = (L + bm - 1) / bm, nk = (L + bn - 1) / bn;
    psa_context* cpu = context(cfg, PSA_BACKEND_CPU, c);
    psa_context* gpu = context(cfg, PSA_BACKEND_CUDA, c);
    // One map for both backends: the CPU's, of the query blocks [1, mq).
    const int64_t t0 = bm, lq = L - t0, mqs = mq - 1;
    const psa_tensor_desc qd = desc(c.dtype, B, c.hq, lq, D), kd = desc(c.dtype, B, c.hkv, L, D);
    const std::vector<uint16_t> qs = rows(q, B * c.hq, L, D, t0, lq);
    const std::vector<int8_t> map =
        cpu_level_map(cpu, qd, qs, kd, k.bits, static_cast<size_t>(B * c.hq * mqs * nk));
    DevBuf<uint16_t> dq(qs);
    DevBuf<int8_t> dmap(map);
    // Uneven K/V shards of whole key blocks; the last holds the partial block.
    const int64_t cut[4] = {0, 1, nk / 2 + 1, nk};
    for (int s = 0; s < 3; ++s) {
      const int64_t k0 = cut[s], k1 = cut[s + 1];
      const int64_t a = k0 * bn, lk = std::min(L, k1 * bn) - a;
      const std::string what = c.name() + " key blocks " + std::to_string(k0) + ".." + std::to_string(k1);
      const psa_tensor_desc sd = desc(c.dtype, B, c.hkv, lk, D);
      const std::vector<uint16_t> ks = rows(k, B * c.hkv, L, D, a, lk), vs = rows(v, B * c.hkv, L, D, a, lk);
      Partial want, got;
      {
        uint64_t bytes = 0;
        ASSERT_EQ(PSA_OK, psa_shard_attention_workspace_size(cpu, &qd, &sd, &sd, &qd, &bytes));
        std::vector<char> ws(bytes);
        std::vector<uint16_t> out(qs.size());
        want.lse.assign(static_cast<size_t>(B * c.hq * lq), 0.0f);
        ASSERT_EQ(PSA_OK, psa_shard_attention(cpu, &qd, qs.data(), &sd, ks.data(), &sd, vs.data(), map.data(), nk,
                                              k0, &qd, out.data(), want.lse.data(), ws.data(), bytes, nullptr))
            << psa_last_error_message();
        want.out = to_float(out, c.dtype);
      }
      {
        uint64_t bytes = 0;
        ASSERT_EQ(PSA_OK, psa_shard_attention_workspace_size(gpu, &qd, &sd, &sd, &qd, &bytes))
            << psa_last_error_message();
        DevBuf<char> ws(bytes);
        DevBuf<uint16_t> dks(ks), dvs(vs), out(qs.size());
        DevBuf<float> lse(static_cast<size_t>(B * c.hq * lq));
        out.fill_bytes(0xff);
        lse.fill_bytes(0xff);
        ASSERT_EQ(PSA_OK, psa_shard_attention(gpu, &qd, dq.get(), &sd, dks.get(), &sd, dvs.get(), dmap.get(), nk, k0,
                                              &qd, out.get(), lse.get(), ws.get(), bytes, nullptr))
            << psa_last_error_message();
        got.out = to_float(out.download(), c.dtype);
        got.lse = lse.download();
      }
      expect_close(got, want, what);
    }
    psa_context_destroy(cpu);
    psa_context_destroy(gpu);
    psa_config_destroy(cfg);
  }
}

// The ring of `shards` ranks in one process against the whole CUDA forward.
void check_ring(const Case& c, int shards) {
  SCOPED_TRACE(c.name() + " shards " + std::to_string(shards));
  const uint32_t seed = fresh();
  const int64_t B = c.batch, L = c.L(), D = 64;
  const Tensor16 q = psa::test::make_video_like(B * c.hq, L, D, c.dtype, seed);
  const Tensor16 k = psa::test::make_video_like(B * c.hkv, L, D, c.dtype, seed + 1);
  const Tensor16 v = psa::test::make_video_like(B * c.hkv, L, D, c.dtype, seed + 2);
  const int64_t rq = B * c.hq;

  // The whole forward in the caller's order (Gilbert inside when the case has it).
  psa_config* whole_cfg = preset(c, c.gilbert);
  psa_context* whole = context(whole_cfg, PSA_BACKEND_CUDA, c);
  const psa_tensor_desc qd = desc(c.dtype, B, c.hq, L, D), kd = desc(c.dtype, B, c.hkv, L, D);
  DevBuf<uint16_t> dq(q.bits), dk(k.bits), dv(v.bits), dout(q.bits.size());
  DevBuf<float> dlse(static_cast<size_t>(rq * L));
  uint64_t bytes = 0;
  ASSERT_EQ(PSA_OK, psa_workspace_size(whole, &qd, &kd, &kd, &qd, &bytes)) << psa_last_error_message();
  {
    DevBuf<char> ws(bytes);
    ASSERT_EQ(PSA_OK, psa_attention_forward(whole, &qd, dq.get(), &kd, dk.get(), &kd, dv.get(), &qd, dout.get(),
                                            dlse.get(), ws.get(), bytes, nullptr))
        << psa_last_error_message();
  }
  const std::vector<float> whole_out = to_float(dout.download(), c.dtype);
  const std::vector<float> whole_lse = dlse.download();
  const psa_stats ws_stats = stats_of(whole);
  const int64_t mq = ws_stats.query_blocks, nk = ws_stats.key_blocks;
  std::vector<int8_t> whole_map(static_cast<size_t>(rq * mq * nk));
  ASSERT_EQ(PSA_OK, psa_context_get_level_map(whole, whole_map.data(), whole_map.size())) << psa_last_error_message();
  std::vector<int64_t> order(static_cast<size_t>(L));
  int64_t tb = 0, te = 0;
  ASSERT_EQ(PSA_OK, psa_context_sequence_order(whole, L, order.data(), &tb, &te)) << psa_last_error_message();

  // The ring's context: inputs permuted outside, no rearrangement inside.
  psa_config* cfg = preset(c, false);
  psa_context* ring = context(cfg, PSA_BACKEND_CUDA, c, tb);
  const int64_t bm = block(cfg, PSA_PARAM_BLOCK_M), bn = block(cfg, PSA_PARAM_BLOCK_N);
  ASSERT_EQ(mq, (L + bm - 1) / bm);
  const std::vector<uint16_t> kp = rows(k, B * c.hkv, L, D, 0, L, &order);
  DevBuf<uint16_t> dkp(kp);
  // K/V shards of whole key blocks, as even as blocks allow.
  std::vector<int64_t> kcut;
  for (int s = 0; s <= shards; ++s) kcut.push_back(nk * s / shards);
  std::vector<DevBuf<uint16_t>> ks(static_cast<size_t>(shards)), vs(static_cast<size_t>(shards));
  for (int s = 0; s < shards; ++s) {
    const int64_t a = kcut[s] * bn, n = std::min(L, kcut[s + 1] * bn) - a;
    ks[s].alloc(static_cast<size_t>(B * c.hkv * n * D));
    ks[s].upload(rows(k, B * c.hkv, L, D, a, n, &order));
    vs[s].alloc(static_cast<size_t>(B * c.hkv * n * D));
    vs[s].upload(rows(v, B * c.hkv, L, D, a, n, &order));
  }
  // Query shards of whole query blocks: ceil(Mq / R) per rank, the last shorter.
  const int64_t per = (mq + shards - 1) / shards;
  int64_t map_differ = 0, map_total = 0;
  std::vector<float> got, want, got_lse, want_lse;
  for (int r = 0; r < shards; ++r) {
    const int64_t b0 = r * per, b1 = std::min(mq, b0 + per);
    if (b0 >= b1) continue;
    const int64_t t0 = b0 * bm, lq = std::min(L, b1 * bm) - t0, mqs = b1 - b0;
    const psa_tensor_desc sqd = desc(c.dtype, B, c.hq, lq, D);
    DevBuf<uint16_t> sq(rows(q, rq, L, D, t0, lq, &order));
    DevBuf<int8_t> map(static_cast<size_t>(rq * mqs * nk));
    ASSERT_EQ(PSA_OK, cuda_level_map(ring, sqd, sq, kd, dkp, &map)) << psa_last_error_message();
    const std::vector<int8_t> m = map.download();
    for (int64_t h = 0; h < rq; ++h)
      for (int64_t i = 0; i < mqs; ++i)
        for (int64_t j = 0; j < nk; ++j) {
          map_differ += m[static_cast<size_t>((h * mqs + i) * nk + j)] !=
                        whole_map[static_cast<size_t>((h * mq + b0 + i) * nk + j)];
          ++map_total;
        }
    std::vector<DevBuf<uint16_t>> outs(static_cast<size_t>(shards));
    std::vector<DevBuf<float>> lses(static_cast<size_t>(shards));
    std::vector<const void*> op;
    std::vector<const float*> lp;
    for (int s = 0; s < shards; ++s) {
      const int64_t a = kcut[s] * bn, n = std::min(L, kcut[s + 1] * bn) - a;
      const psa_tensor_desc sd = desc(c.dtype, B, c.hkv, n, D);
      uint64_t sb = 0;
      ASSERT_EQ(PSA_OK, psa_shard_attention_workspace_size(ring, &sqd, &sd, &sd, &sqd, &sb))
          << psa_last_error_message();
      DevBuf<char> sws(sb);
      outs[s].alloc(static_cast<size_t>(rq * lq * D));
      lses[s].alloc(static_cast<size_t>(rq * lq));
      ASSERT_EQ(PSA_OK, psa_shard_attention(ring, &sqd, sq.get(), &sd, ks[s].get(), &sd, vs[s].get(), map.get(), nk,
                                            kcut[s], &sqd, outs[s].get(), lses[s].get(), sws.get(), sb, nullptr))
          << psa_last_error_message();
      cudaDeviceSynchronize();  // the workspace is freed next
      op.push_back(outs[s].get());
      lp.push_back(lses[s].get());
    }
    DevBuf<uint16_t> merged(static_cast<size_t>(rq * lq * D));
    DevBuf<float> merged_lse(static_cast<size_t>(rq * lq));
    ASSERT_EQ(PSA_OK, psa_merge_attention(shards, &sqd, op.data(), lp.data(), merged.get(), merged_lse.get(),
                                          PSA_BACKEND_CUDA, nullptr))
        << psa_last_error_message();
    const std::vector<float> mo = to_float(merged.download(), c.dtype);
    const std::vector<float> ml = merged_lse.download();
    for (int64_t h = 0; h < rq; ++h)
      for (int64_t i = 0; i < lq; ++i) {
        const int64_t src = order[static_cast<size_t>(t0 + i)];
        got_lse.push_back(ml[static_cast<size_t>(h * lq + i)]);
        want_lse.push_back(whole_lse[static_cast<size_t>(h * L + src)]);
        for (int64_t e = 0; e < D; ++e) {
          got.push_back(mo[static_cast<size_t>((h * lq + i) * D + e)]);
          want.push_back(whole_out[static_cast<size_t>((h * L + src) * D + e)]);
        }
      }
  }
  ASSERT_EQ(got.size(), want.size());
  ASSERT_EQ(static_cast<int64_t>(got.size()), rq * L * D);
  // The same importance kernels on the same query blocks: the same map up to the last bit of
  // a score where the GEMM path and the per-block kernel would split a near tie.
  std::printf("[ring cuda] %s, %d shards: %lld of %lld map entries differ from the whole forward's\n",
              c.name().c_str(), shards, static_cast<long long>(map_differ), static_cast<long long>(map_total));
  EXPECT_LE(static_cast<double>(map_differ), 1e-3 * static_cast<double>(map_total));
  Partial g{got, got_lse}, w{want, want_lse};
  expect_close(g, w, c.name() + " ring of " + std::to_string(shards));
  EXPECT_LE(psa::test::rel_l2(got, want), 1e-2);
  psa_context_destroy(whole);
  psa_context_destroy(ring);
  psa_config_destroy(whole_cfg);
  psa_config_destroy(cfg);
}

TEST(RingCuda, EmulatedRingEqualsTheWholeCudaForward) {
  PSA_REQUIRE_GPU();
  for (int shards : {2, 4}) {
    check_ring({"Wan2.1_1.3b", PSA_DTYPE_BF16, 1, 2, 2, 24, 0, true}, shards);     // Gilbert, sim cap
    check_ring({"Wan2.1_1.3b", PSA_DTYPE_BF16, 1, 4, 2, 24, 0, false}, shards);    // GQA
    check_ring({"CogVideo1.5_5b", PSA_DTYPE_BF16, 1, 2, 1, 24, 40, true}, shards); // text, GQA
    check_ring({"CogVideo1.5_5b", PSA_DTYPE_F16, 2, 2, 2, 17, 40, false}, shards); // batch 2, partial
  }
}

// Both halves enqueue only: captured into a CUDA graph and replayed, they rewrite the same
// map, out and LSE.
TEST(RingCuda, HalvesReplayFromACudaGraph) {
  PSA_REQUIRE_GPU();
  const Case c{"Wan2.1_1.3b", PSA_DTYPE_BF16, 1, 2, 2, 24, 0, false};
  const int64_t L = c.L(), D = 64;
  const Tensor16 q = psa::test::make_video_like(c.hq, L, D, c.dtype, fresh());
  const Tensor16 k = psa::test::make_video_like(c.hkv, L, D, c.dtype, 5u);
  psa_config* cfg = preset(c, false);
  const int64_t bn = block(cfg, PSA_PARAM_BLOCK_N), nk = (L + bn - 1) / bn;
  psa_context* ctx = context(cfg, PSA_BACKEND_CUDA, c);
  const psa_tensor_desc qd = desc(c.dtype, 1, c.hq, L, D), kd = desc(c.dtype, 1, c.hkv, L, D);
  const int64_t n = nk / 2 * bn;
  const psa_tensor_desc sd = desc(c.dtype, 1, c.hkv, L - n, D);
  DevBuf<uint16_t> dq(q.bits), dk(k.bits), ks(rows(k, c.hkv, L, D, n, L - n)), out(q.bits.size());
  DevBuf<float> lse(static_cast<size_t>(c.hq * L));
  uint64_t mb = 0, sb = 0;
  ASSERT_EQ(PSA_OK, psa_level_map_workspace_size(ctx, &qd, &kd, &mb));
  ASSERT_EQ(PSA_OK, psa_shard_attention_workspace_size(ctx, &qd, &sd, &sd, &qd, &sb));
  DevBuf<char> mws(mb), sws(sb);
  const int64_t bm = block(cfg, PSA_PARAM_BLOCK_M), mq = (L + bm - 1) / bm;
  DevBuf<int8_t> map(static_cast<size_t>(c.hq * mq * nk));
  cudaStream_t stream = nullptr;
  PSA_CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  auto enqueue = [&]() {
    EXPECT_EQ(PSA_OK, psa_compute_level_map(ctx, &qd, dq.get(), &kd, dk.get(), map.get(), mws.get(), mb, stream))
        << psa_last_error_message();
    EXPECT_EQ(PSA_OK, psa_shard_attention(ctx, &qd, dq.get(), &sd, ks.get(), &sd, ks.get(), map.get(), nk, nk / 2,
                                          &qd, out.get(), lse.get(), sws.get(), sb, stream))
        << psa_last_error_message();
  };
  enqueue();
  PSA_CUDA_OK(cudaStreamSynchronize(stream));
  const std::vector<int8_t> ref_map = map.download();
  const std::vector<uint16_t> ref_out = out.download();
  const std::vector<float> ref_lse = lse.download();
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  PSA_CUDA_OK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  enqueue();
  PSA_CUDA_OK(cudaStreamEndCapture(stream, &graph));
  PSA_CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
  for (int rep = 0; rep < 2; ++rep) {
    map.fill_bytes(0x7f);
    out.fill_bytes(0xff);
    lse.fill_bytes(0xff);
    PSA_CUDA_OK(cudaDeviceSynchronize());
    PSA_CUDA_OK(cudaGraphLaunch(exec, stream));
    PSA_CUDA_OK(cudaStreamSynchronize(stream));
    EXPECT_EQ(ref_map, map.download()) << "replay " << rep;
    EXPECT_EQ(ref_out, out.download()) << "replay " << rep;
    EXPECT_EQ(ref_lse, lse.download()) << "replay " << rep;
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
  psa_context_destroy(ctx);
  psa_config_destroy(cfg);
}

// A warm-up step's map is all level 1 (dense) and reports a dense forward.
TEST(RingCuda, WarmupMapIsAllLevelOne) {
  PSA_REQUIRE_GPU();
  const Case c{"Wan2.1_1.3b", PSA_DTYPE_BF16, 1, 2, 2, 8, 0, false};
  psa_config* cfg = preset(c, false);
  PSA_OK_MSG(psa_config_set_int(cfg, PSA_PARAM_WARMUP_STEPS, 3));
  psa_context* ctx = context(cfg, PSA_BACKEND_CUDA, c);
  PSA_OK_MSG(psa_context_set_step(ctx, 0));
  const int64_t L = c.L(), D = 64;
  const Tensor16 q = psa::test::make_random(static_cast<size_t>(c.hq * L * D), c.dtype, fresh());
  const psa_tensor_desc d = desc(c.dtype, 1, c.hq, L, D);
  DevBuf<uint16_t> dq(q.bits);
  const int64_t bm = block(cfg, PSA_PARAM_BLOCK_M), bn = block(cfg, PSA_PARAM_BLOCK_N);
  DevBuf<int8_t> map(static_cast<size_t>(c.hq * ((L + bm - 1) / bm) * ((L + bn - 1) / bn)));
  ASSERT_EQ(PSA_OK, cuda_level_map(ctx, d, dq, d, dq, &map)) << psa_last_error_message();
  for (int8_t x : map.download()) ASSERT_EQ(x, 1);
  const psa_stats s = stats_of(ctx);
  EXPECT_EQ(s.ran_dense, 1);
  EXPECT_EQ(s.step, 0);
  psa_context_destroy(ctx);
  psa_config_destroy(cfg);
}

bool names(const char* part) {
  const std::string m = psa_last_error_message();
  const bool ok = m.find(part) != std::string::npos;
  if (!ok) std::printf("message '%s' lacks '%s'\n", m.c_str(), part);
  return ok;
}

TEST(RingCuda, BadArgumentsAreNamedAndWriteNothing) {
  PSA_REQUIRE_GPU();
  const Case c{"Wan2.1_1.3b", PSA_DTYPE_BF16, 1, 2, 2, 8, 0, false};  // 256 tokens
  psa_config* cfg = preset(c, false);
  psa_context* ctx = context(cfg, PSA_BACKEND_CUDA, c);
  const int64_t L = c.L(), D = 64;
  const int64_t bm = block(cfg, PSA_PARAM_BLOCK_M), bn = block(cfg, PSA_PARAM_BLOCK_N);
  const int64_t mq = (L + bm - 1) / bm, nk = (L + bn - 1) / bn;
  const psa_tensor_desc d = desc(c.dtype, 1, c.hq, L, D);
  const Tensor16 q = psa::test::make_random(static_cast<size_t>(c.hq * L * D), c.dtype, fresh());
  DevBuf<uint16_t> dq(q.bits.size() + 8), dk(q.bits);
  dq.upload(q.bits);
  uint64_t mb = 0;
  PSA_OK_MSG(psa_level_map_workspace_size(ctx, &d, &d, &mb));
  DevBuf<char> mws(mb);
  const std::vector<int8_t> sentinel(static_cast<size_t>(c.hq * mq * nk), 5);
  DevBuf<int8_t> map(sentinel);
  psa_stats st{};
  st.struct_size = sizeof st;
  // Host memory, misalignment, a short workspace: named, nothing written, no forward counted.
  EXPECT_EQ(PSA_ERR_WRONG_MEMORY_SPACE,
            psa_compute_level_map(ctx, &d, q.bits.data(), &d, dk.get(), map.get(), mws.get(), mb, nullptr));
  EXPECT_TRUE(names("q: ") && names("host memory"));
  std::vector<int8_t> host_map(sentinel);
  EXPECT_EQ(PSA_ERR_WRONG_MEMORY_SPACE,
            psa_compute_level_map(ctx, &d, dq.get(), &d, dk.get(), host_map.data(), mws.get(), mb, nullptr));
  EXPECT_TRUE(names("levels: "));
  EXPECT_EQ(PSA_ERR_MISALIGNED_POINTER,
            psa_compute_level_map(ctx, &d, dq.get() + 1, &d, dk.get(), map.get(), mws.get(), mb, nullptr));
  EXPECT_TRUE(names("q: ") && names("16-byte aligned"));
  EXPECT_EQ(PSA_ERR_WORKSPACE_TOO_SMALL,
            psa_compute_level_map(ctx, &d, dq.get(), &d, dk.get(), map.get(), mws.get(), 1, nullptr));
  EXPECT_TRUE(names("workspace_bytes = 1"));
  EXPECT_EQ(map.download(), sentinel);
  EXPECT_EQ(host_map, sentinel);
  EXPECT_EQ(PSA_ERR_INVALID_STATE, psa_context_get_stats(ctx, &st));  // no forward ran

  // fp32 is not run by the CUDA kernels: refused when the workspace is queried.
  const psa_tensor_desc f = desc(PSA_DTYPE_F32, 1, c.hq, L, D);
  EXPECT_EQ(PSA_ERR_UNSUPPORTED, psa_level_map_workspace_size(ctx, &f, &f, &mb));
  EXPECT_TRUE(names("dtype"));
  uint64_t sb = 0;
  EXPECT_EQ(PSA_ERR_UNSUPPORTED, psa_shard_attention_workspace_size(ctx, &f, &f, &f, &f, &sb));
  EXPECT_TRUE(names("dtype"));

  // Shard attention: a shard of the last two key blocks.
  PSA_OK_MSG(psa_compute_level_map(ctx, &d, dq.get(), &d, dk.get(), map.get(), mws.get(), mb, nullptr));
  const psa_tensor_desc sd = desc(c.dtype, 1, c.hkv, 2 * bn, D);
  DevBuf<uint16_t> ks(static_cast<size_t>(c.hkv * 2 * bn * D)), out(q.bits.size());
  ks.fill_bytes(0);
  PSA_OK_MSG(psa_shard_attention_workspace_size(ctx, &d, &sd, &sd, &d, &sb));
  DevBuf<char> sws(sb);
  const std::vector<float> lse_sentinel(static_cast<size_t>(c.hq * L), 7.0f);
  DevBuf<float> lse(lse_sentinel);
  out.fill_bytes(0x11);
  const std::vector<uint16_t> out_sentinel = out.download();
  auto shard = [&](int64_t map_nk, int64_t begin, const void* kp, float* lp, uint64_t bytes) {
    return psa_shard_attention(ctx, &d, dq.get(), &sd, kp, &sd, ks.get(), map.get(), map_nk, begin, &d, out.get(),
                               lp, sws.get(), bytes, nullptr);
  };
  EXPECT_EQ(PSA_ERR_INVALID_ARGUMENT, shard(nk, nk - 1, ks.get(), lse.get(), sb));
  EXPECT_TRUE(names(("key_block_begin = " + std::to_string(nk - 1)).c_str()));
  EXPECT_EQ(PSA_ERR_INVALID_ARGUMENT, shard(0, 0, ks.get(), lse.get(), sb));
  EXPECT_TRUE(names("map_key_blocks = 0"));
  EXPECT_EQ(PSA_ERR_NULL_POINTER, shard(nk, nk - 2, ks.get(), nullptr, sb));
  EXPECT_TRUE(names("lse"));
  std::vector<uint16_t> host_k(static_cast<size_t>(c.hkv * 2 * bn * D), 0);
  EXPECT_EQ(PSA_ERR_WRONG_MEMORY_SPACE, shard(nk, nk - 2, host_k.data(), lse.get(), sb));
  EXPECT_TRUE(names("k: ") && names("host memory"));
  EXPECT_EQ(PSA_ERR_WORKSPACE_TOO_SMALL, shard(nk, nk - 2, ks.get(), lse.get(), 1));
  EXPECT_TRUE(names("workspace_bytes = 1"));
  EXPECT_EQ(out.download(), out_sentinel);
  EXPECT_EQ(lse.download(), lse_sentinel);
  EXPECT_EQ(PSA_OK, shard(nk, nk - 2, ks.get(), lse.get(), sb)) << psa_last_error_message();
  cudaDeviceSynchronize();
  EXPECT_NE(lse.download(), lse_sentinel);

  // Causal is refused by both halves on CUDA as on the CPU.
  psa_config* causal = preset(c, false);
  PSA_OK_MSG(psa_config_set_int(causal, PSA_PARAM_CAUSAL, 1));
  psa_context* cctx = context(causal, PSA_BACKEND_CUDA, c);
  EXPECT_EQ(PSA_ERR_UNSUPPORTED, psa_level_map_workspace_size(cctx, &d, &d, &mb));
  EXPECT_TRUE(names("causal = 1"));
  EXPECT_EQ(PSA_ERR_UNSUPPORTED, psa_shard_attention_workspace_size(cctx, &d, &sd, &sd, &d, &sb));
  psa_context_destroy(cctx);
  psa_config_destroy(causal);
  psa_context_destroy(ctx);
  psa_config_destroy(cfg);
}

}  // namespace

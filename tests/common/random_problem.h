// tests/common/random_problem.h -- forward problems drawn at random for the tests of both
// backends: a shipped preset with parameters drawn over it (block sizes, mask mode, ratio ends,
// sampling, rearrangement, similarity cap, causal, scale, precision; each set may be refused,
// and the refusal is part of what the tests compare), a shape (batch, grouped heads, head dim,
// dtype, layout and row padding, a video grid with text tokens or none, Lq != Lk), operands
// (video-like Q and K, random V, sometimes one NaN in V), and one forward on a backend with what
// it reports (status, output, lse, stats, level map, token orders). Test-only.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "common/tensor16.h"
#include "psa.h"

namespace psa {
namespace test {

// A sweep's seed (fresh per run unless PSA_TEST_SEED is set; printed with how to replay it,
// under the test's `tag`) and its problem count (the environment variable `count_env`, else
// `fallback`).
struct Sweep {
  uint64_t seed = 0;
  int problems = 0;
};
inline Sweep begin_sweep(const char* tag, const char* count_env, int fallback) {
  Sweep w;
  if (const char* s = std::getenv("PSA_TEST_SEED")) {
    w.seed = std::strtoull(s, nullptr, 10);
  } else {
    std::random_device rd;
    w.seed = (uint64_t{rd()} << 32) ^ rd();
  }
  std::printf("[%s] seed %llu (PSA_TEST_SEED=%llu replays it)\n", tag, static_cast<unsigned long long>(w.seed),
              static_cast<unsigned long long>(w.seed));
  w.problems = fallback;
  if (const char* n = std::getenv(count_env)) w.problems = std::max(1, std::atoi(n));
  return w;
}

struct Problem {
  int64_t B = 1, Hq = 1, Hkv = 1, D = 128, Lq = 0, Lk = 0;
  bool grid = true;  // a video grid set (Lq = Lk = t h w + text)
  int64_t t = 1, h = 1, w = 1, text = 0;
  psa_text_position pos = PSA_TEXT_NONE;
  psa_dtype dtype = PSA_DTYPE_BF16;
  psa_layout layout = PSA_LAYOUT_BNSD;
  int64_t pad = 0;         // elements past each row of D (BNSD: between tokens; BSND: between tokens' head rows)
  float amplitude = 1.0f;  // Q and K scaled (sharper softmax)
  bool nan_v = false;      // one V value NaN: NaN rows exactly where the CPU backend has them
  int64_t step = 1000;
  std::string model, preset;
  psa_config* cfg = nullptr;
  std::string describe;
};

// A descriptor of [B, H, L, D] with `pad` elements after each D row (BNSD) or after each token's
// H rows (BSND).
inline psa_tensor_desc make_desc(const Problem& p, int64_t heads, int64_t len) {
  psa_tensor_desc d{};
  psa_tensor_desc_init(&d, p.layout, p.dtype, p.B, heads, len, p.D);
  if (p.layout == PSA_LAYOUT_BNSD) {
    d.strides[2] = p.D + p.pad;
    d.strides[1] = len * d.strides[2];
    d.strides[0] = heads * d.strides[1];
  } else {
    d.strides[1] = p.D;
    d.strides[2] = heads * p.D + p.pad;
    d.strides[0] = len * d.strides[2];
  }
  return d;
}

struct Operands {
  psa_tensor_desc qd{}, kd{}, vd{}, od{};
  std::vector<uint16_t> q, k, v;
  int64_t nan_b = -1, nan_h = -1, nan_x = -1;  // the NaN V value's batch, K/V head and token
};

inline Operands make_operands(const Problem& p, uint32_t seed) {
  Operands o;
  o.qd = make_desc(p, p.Hq, p.Lq);
  o.kd = make_desc(p, p.Hkv, p.Lk);
  o.vd = o.kd;
  o.od = o.qd;
  auto fill = [&](const psa_tensor_desc& d, bool video, float amp, uint32_t s) {
    const int64_t heads = d.shape[1], len = d.shape[2];
    const test::Tensor16 x = video ? test::make_video_like(p.B * heads, len, p.D, p.dtype, s)
                                   : test::make_random(static_cast<size_t>(p.B * heads * len * p.D), p.dtype, s);
    std::vector<float> f = x.f;
    for (float& e : f) e *= amp;
    return test::pack<uint16_t>(f, d, [&](float e) { return test::to16(e, p.dtype); });
  };
  o.q = fill(o.qd, true, p.amplitude, seed);
  o.k = fill(o.kd, true, p.amplitude, seed + 1);
  o.v = fill(o.vd, false, 1.0f, seed + 2);
  if (p.nan_v) {
    std::mt19937 gen(seed + 3);
    const int64_t b = gen() % p.B, h = gen() % p.Hkv, x = gen() % p.Lk, e = gen() % p.D;
    o.v[static_cast<size_t>(b * o.vd.strides[0] + h * o.vd.strides[1] + x * o.vd.strides[2] + e)] = 0x7fc0u;
    o.nan_b = b;
    o.nan_h = h;
    o.nan_x = x;
  }
  return o;
}

struct Outcome {
  psa_status status = PSA_OK;
  std::string message;
  std::vector<float> out;  // logical [B, H, Lq, D]
  std::vector<float> lse;
  std::vector<int8_t> levels;
  std::vector<int64_t> q_order, k_order;  // the computing order's tokens
  psa_stats stats{};
  bool untouched = true;  // on an error: the output buffer holds its poison still
};

inline psa_context* make_context(const Problem& p, const psa_config* cfg, psa_backend backend) {
  psa_context* ctx = nullptr;
  if (psa_context_create(cfg, backend, -1, &ctx) != PSA_OK) return nullptr;
  if (p.grid) psa_context_set_video_grid(ctx, p.t, p.h, p.w, p.text, p.pos);
  psa_context_set_step(ctx, p.step);
  return ctx;
}

inline void read_back(psa_context* ctx, Outcome* r) {
  r->stats.struct_size = sizeof(psa_stats);
  EXPECT_EQ(PSA_OK, psa_context_get_stats(ctx, &r->stats)) << psa_last_error_message();
  int64_t b = 0, h = 0, mq = 0, nk = 0;
  if (psa_context_level_map_shape(ctx, &b, &h, &mq, &nk) == PSA_OK) {
    r->levels.assign(static_cast<size_t>(b * h * mq * nk), 0);
    EXPECT_EQ(PSA_OK, psa_context_get_level_map(ctx, r->levels.data(), r->levels.size())) << psa_last_error_message();
  }
  for (int32_t seq = 0; seq < 2; ++seq) {
    int64_t len = 0;
    EXPECT_EQ(PSA_OK, psa_context_get_token_order(ctx, seq, nullptr, 0, &len, nullptr, nullptr));
    std::vector<int64_t>& order = seq == 0 ? r->q_order : r->k_order;
    order.assign(static_cast<size_t>(len), 0);
    EXPECT_EQ(PSA_OK, psa_context_get_token_order(ctx, seq, order.data(), len, &len, nullptr, nullptr));
  }
}

// Position of each token in the computing order (the inverse of `order`).
inline std::vector<int64_t> positions(const std::vector<int64_t>& order) {
  std::vector<int64_t> pos(order.size(), -1);
  for (size_t x = 0; x < order.size(); ++x)
    if (order[x] >= 0 && static_cast<size_t>(order[x]) < pos.size())
      pos[static_cast<size_t>(order[x])] = static_cast<int64_t>(x);
  return pos;
}

inline Outcome run_cpu(const Problem& p, const psa_config* cfg, const Operands& in) {
  Outcome r;
  psa_context* ctx = make_context(p, cfg, PSA_BACKEND_CPU);
  if (ctx == nullptr) {
    r.status = psa_last_error_status();
    r.message = psa_last_error_message();
    return r;
  }
  uint64_t bytes = 0;
  r.status = psa_workspace_size(ctx, &in.qd, &in.kd, &in.vd, &in.od, &bytes);
  std::vector<uint16_t> out(in.q.size(), 0xffffu);
  std::vector<float> lse(static_cast<size_t>(p.B * p.Hq * p.Lq), 0.0f);
  if (r.status == PSA_OK) {
    std::vector<unsigned char> ws(std::max<uint64_t>(bytes, 1));
    r.status = psa_attention_forward(ctx, &in.qd, in.q.data(), &in.kd, in.k.data(), &in.vd, in.v.data(), &in.od,
                                     out.data(), lse.data(), ws.data(), bytes, nullptr);
  }
  r.message = psa_last_error_message();
  if (r.status == PSA_OK) {
    r.out = test::unpack(out, in.od, [&](uint16_t e) { return test::from16(e, p.dtype); });
    r.lse = lse;
    read_back(ctx, &r);
  } else {
    r.untouched = std::all_of(out.begin(), out.end(), [](uint16_t e) { return e == 0xffffu; });
  }
  psa_context_destroy(ctx);
  return r;
}

template <typename T>
inline T pick(std::mt19937_64& rng, std::initializer_list<T> xs) {
  std::uniform_int_distribution<size_t> u(0, xs.size() - 1);
  return *(xs.begin() + u(rng));
}
inline int64_t uniform(std::mt19937_64& rng, int64_t lo, int64_t hi) {
  return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
}
inline double unit(std::mt19937_64& rng) { return std::uniform_real_distribution<double>(0.0, 1.0)(rng); }

// Draws problem n: a shipped preset, then parameters over it (each set call may be refused:
// the validation is part of what is compared).
inline Problem draw(std::mt19937_64& rng, psa_catalog* cat) {
  Problem p;
  const int32_t m = static_cast<int32_t>(uniform(rng, 0, psa_catalog_model_count(cat) - 1));
  p.model = psa_catalog_model_name(cat, m);
  const int32_t np = psa_catalog_preset_count(cat, p.model.c_str());
  p.preset = psa_catalog_preset_name(cat, p.model.c_str(), static_cast<int32_t>(uniform(rng, 0, np - 1)));
  EXPECT_EQ(PSA_OK, psa_catalog_get_config(cat, p.model.c_str(), p.preset.c_str(), &p.cfg)) << psa_last_error_message();
  std::string over;
  auto set_i = [&](psa_param id, int64_t value) {
    const char* name = nullptr;
    psa_param_info(id, &name, nullptr, nullptr, nullptr);
    const bool ok = psa_config_set_int(p.cfg, id, value) == PSA_OK;
    over += std::string(" ") + name + "=" + std::to_string(value) + (ok ? "" : "(refused)");
  };
  auto set_d = [&](psa_param id, double value) {
    const char* name = nullptr;
    psa_param_info(id, &name, nullptr, nullptr, nullptr);
    const bool ok = psa_config_set_double(p.cfg, id, value) == PSA_OK;
    char buf[64];
    std::snprintf(buf, sizeof buf, "%s=%.3g%s", name, value, ok ? "" : "(refused)");
    over += std::string(" ") + buf;
  };
  int64_t method = 0;
  psa_config_get_int(p.cfg, PSA_PARAM_METHOD, &method);
  // rf_v2 and ada_bsa keep every block of a short sequence: theirs are longer, with fewer heads.
  const bool long_seq = method == PSA_METHOD_RF_V2 || method == PSA_METHOD_ADA_BSA;
  const bool fp8 = method == PSA_METHOD_PSA && unit(rng) < 0.3;

  p.B = uniform(rng, 1, 2);
  p.Hkv = uniform(rng, 1, long_seq ? 2 : 3);
  p.Hq = p.Hkv * (long_seq ? pick<int64_t>(rng, {1, 2}) : pick<int64_t>(rng, {1, 1, 2, 4}));
  p.D = fp8 && unit(rng) < 0.85 ? 128 : pick<int64_t>(rng, {64, 128, 128});
  p.dtype = pick(rng, {PSA_DTYPE_BF16, PSA_DTYPE_BF16, PSA_DTYPE_F16});
  p.layout = pick(rng, {PSA_LAYOUT_BNSD, PSA_LAYOUT_BSND});
  p.pad = pick<int64_t>(rng, {0, 0, 0, 8, 3});
  p.amplitude = static_cast<float>(pick<double>(rng, {1.0, 1.0, 0.3, 3.0}));
  p.nan_v = unit(rng) < 0.08;
  p.grid = unit(rng) < 0.85;
  if (p.grid) {
    p.t = long_seq ? uniform(rng, 2, 6) : uniform(rng, 1, 5);
    p.h = long_seq ? uniform(rng, 4, 12) : uniform(rng, 1, 10);
    p.w = long_seq ? uniform(rng, 8, 24) : uniform(rng, 1, 18);
    if (unit(rng) < 0.4) {
      p.text = uniform(rng, 1, 90);
      p.pos = pick(rng, {PSA_TEXT_FIRST, PSA_TEXT_LAST});
    }
    p.Lq = p.Lk = p.t * p.h * p.w + p.text;
  } else {
    const int64_t most = long_seq ? 2000 : 700;
    p.Lq = uniform(rng, 1, most);
    p.Lk = unit(rng) < 0.5 ? p.Lq : uniform(rng, 1, most);
  }
  set_i(PSA_PARAM_TEXT_LENGTH, p.text);
  p.step = unit(rng) < 0.1 ? 0 : 1000;

  if (method == PSA_METHOD_PSA || method == PSA_METHOD_PSA_CAUSAL) {
    if (unit(rng) < 0.7) set_i(PSA_PARAM_BLOCK_M, pick<int64_t>(rng, {64, 128}));
    if (unit(rng) < 0.7) {
      const int64_t bn = pick<int64_t>(rng, {32, 64, 128});
      set_i(PSA_PARAM_BLOCK_N, bn);
      set_i(PSA_PARAM_TILE_N, std::min<int64_t>(bn, pick<int64_t>(rng, {16, 32, 32, 64, 128})));
    }
    if (method == PSA_METHOD_PSA && unit(rng) < 0.6) {
      set_i(PSA_PARAM_MASK_MODE, pick<int64_t>(rng, {PSA_MASK_MODE_TOPK, PSA_MASK_MODE_THRESHOLDBOUND}));
      double e[5];
      for (double& x : e) x = unit(rng) < 0.15 ? 1.0 : unit(rng);
      std::sort(e, e + 5);
      const psa_param ends[5] = {PSA_PARAM_RATIO_L1, PSA_PARAM_RATIO_L2, PSA_PARAM_RATIO_L4, PSA_PARAM_RATIO_L8,
                                 PSA_PARAM_RATIO_L0};
      // Widen first so that each set keeps the ends non-decreasing.
      for (const psa_param r : {PSA_PARAM_RATIO_L0, PSA_PARAM_RATIO_L8, PSA_PARAM_RATIO_L4, PSA_PARAM_RATIO_L2})
        psa_config_set_double(p.cfg, r, 1.0);
      for (int s = 0; s < 5; ++s) set_d(ends[s], e[s]);
    }
    if (unit(rng) < 0.4) set_i(PSA_PARAM_SAMPLE_DIVISOR, pick<int64_t>(rng, {1, 2, 4, 8, 16}));
    // (rearrangement needs a grid: without one, mostly off, so that the forward runs)
    if (!p.grid && unit(rng) < 0.8) {
      set_i(PSA_PARAM_USE_REARRANGE, 0);
    } else if (unit(rng) < 0.3) {
      set_i(PSA_PARAM_USE_REARRANGE, uniform(rng, 0, 1));
    }
    if (unit(rng) < 0.3) set_i(PSA_PARAM_USE_SIM_MASK, uniform(rng, 0, 1));
    if (unit(rng) < 0.2) set_i(PSA_PARAM_TEXT_ROWS_DENSE, uniform(rng, 0, 1));
    if (method == PSA_METHOD_PSA && unit(rng) < (fp8 ? 0.05 : 0.15)) set_i(PSA_PARAM_CAUSAL, 1);
    if (fp8) set_i(PSA_PARAM_PRECISION, PSA_PRECISION_FP8);
  } else if (method == PSA_METHOD_RF_V2 || method == PSA_METHOD_ADA_BSA) {
    if (unit(rng) < 0.6) set_d(PSA_PARAM_SPARSITY, 0.9 * unit(rng));
    if (method == PSA_METHOD_ADA_BSA && unit(rng) < 0.5) set_d(PSA_PARAM_CDF_THRESHOLD, 0.5 + 0.5 * unit(rng));
  }
  if (unit(rng) < 0.2) set_d(PSA_PARAM_SCALE, 0.02 + 0.3 * unit(rng));
  set_i(PSA_PARAM_SEED, uniform(rng, 0, 1000));

  char buf[256];
  std::snprintf(buf, sizeof buf, "%s/%s B%lld Hq%lld Hkv%lld D%lld Lq%lld Lk%lld %s %s pad%lld amp%.1f step%lld",
                p.model.c_str(), p.preset.c_str(), static_cast<long long>(p.B), static_cast<long long>(p.Hq),
                static_cast<long long>(p.Hkv), static_cast<long long>(p.D), static_cast<long long>(p.Lq),
                static_cast<long long>(p.Lk), p.dtype == PSA_DTYPE_F16 ? "f16" : "bf16",
                p.layout == PSA_LAYOUT_BNSD ? "BNSD" : "BSND", static_cast<long long>(p.pad), p.amplitude,
                static_cast<long long>(p.step));
  p.describe = buf;
  if (p.nan_v) p.describe += " NaN-in-V";
  if (p.grid) {
    std::snprintf(buf, sizeof buf, " grid %lldx%lldx%lld text %lld%s", static_cast<long long>(p.t),
                  static_cast<long long>(p.h), static_cast<long long>(p.w), static_cast<long long>(p.text),
                  p.text == 0               ? ""
                  : p.pos == PSA_TEXT_FIRST ? " first"
                                            : " last");
    p.describe += buf;
  } else {
    p.describe += " no grid";
  }
  p.describe += over;
  return p;
}

}  // namespace test
}  // namespace psa

// tests/robustness/robust_env.h -- the environment every bad-input case runs in: a working
// CPU context with valid q/k/v/out, a catalog, a small YAML document, and a sentinel in every
// out parameter a failing call might wrongly write. Public C API only (include/psa.h).
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "common/api_util.h"
#include "common/test_util.h"

namespace psa_robust {

using psa_test::ConfigPtr;
using psa_test::ContextPtr;
using psa_test::HostTensor;

// A one-model document with a PSA preset and the two block-sparse presets; cases replace
// one substring (yaml_with) to make it invalid in exactly one place.
inline const char* mini_yaml() {
  return "M:\n"
         "  default_attention: p\n"
         "  video_scale:\n"
         "    width_divisor: 16\n"
         "    height_divisor: 16\n"
         "    depth_divisor: 4\n"
         "  text_length: 0\n"
         "  attention_configs:\n"
         "    p:\n"
         "      type: psa\n"
         "      use_rearrange: false\n"
         "      block_size:\n"
         "        m: 128\n"
         "        n: 64\n"
         "        tile_n: 32\n"
         "      mask_ratios:\n"
         "        1: [0.0, 0.1]\n"
         "        2: [0.1, 0.15]\n"
         "        4: [0.15, 0.15]\n"
         "        8: [0.15, 0.35]\n"
         "        0: [0.35, 1.0]\n"
         "      mask_mode: topk\n"
         "      sim_thresholds:\n"
         "        x2: 0.7\n"
         "        x4: 0.65\n"
         "        x8: 0.6\n"
         "    b:\n"
         "      type: rf_v2\n"
         "      use_rearrange: false\n"
         "      block_size:\n"
         "        m: 128\n"
         "        n: 128\n"
         "      sparsity: 0.5\n"
         "    a:\n"
         "      type: ada_bsa\n"
         "      use_rearrange: false\n"
         "      block_size:\n"
         "        m: 128\n"
         "        n: 128\n"
         "      cdf_threshold: 0.9\n"
         "      sparsity: 0.5\n";
}

// mini_yaml() with the first occurrence of `from` replaced by `to` (fails the test when
// `from` is absent, so a case cannot silently test the unmodified document).
inline std::string yaml_with(const std::string& from, const std::string& to) {
  std::string y = mini_yaml();
  const size_t at = y.find(from);
  EXPECT_NE(at, std::string::npos) << "mini_yaml has no '" << from << "'";
  if (at != std::string::npos) y.replace(at, from.size(), to);
  return y;
}

// Sentinels: values no successful call would write. Pointers are never dereferenced.
inline psa_config* sentinel_config() { return reinterpret_cast<psa_config*>(uintptr_t{0x5a5a50}); }
inline psa_catalog* sentinel_catalog() { return reinterpret_cast<psa_catalog*>(uintptr_t{0x5a5a60}); }
inline psa_context* sentinel_context() { return reinterpret_cast<psa_context*>(uintptr_t{0x5a5a70}); }
constexpr int64_t kSentinelI64 = 0x5a5a5a5a5a5a5a5a;
constexpr double kSentinelF64 = -12345.678;
constexpr uint64_t kSentinelU64 = 0xa5a5a5a5a5a5a5a5u;
constexpr int32_t kSentinelI32 = 0x5a5a5a5a;
constexpr float kSentinelLse = -7777.0f;

struct Env {
  static constexpr int64_t kHeads = 2, kLen = 160, kDim = 16;
  ConfigPtr cfg;
  ContextPtr ctx;
  psa_catalog* cat = nullptr;
  HostTensor q{PSA_LAYOUT_BNSD, PSA_DTYPE_F32, 1, kHeads, kLen, kDim};
  HostTensor k{PSA_LAYOUT_BNSD, PSA_DTYPE_F32, 1, kHeads, kLen, kDim};
  HostTensor v{PSA_LAYOUT_BNSD, PSA_DTYPE_F32, 1, kHeads, kLen, kDim};
  HostTensor out{PSA_LAYOUT_BNSD, PSA_DTYPE_F32, 1, kHeads, kLen, kDim};
  std::vector<uint8_t> ws;
  std::vector<float> lse = std::vector<float>(kHeads * kLen, kSentinelLse);

  // Out-parameter sentinels.
  psa_config* cfg_out = sentinel_config();
  psa_catalog* cat_out = sentinel_catalog();
  psa_context* ctx_out = sentinel_context();
  int64_t i64 = kSentinelI64, i64b = kSentinelI64;
  int32_t i32 = kSentinelI32;
  double f64 = kSentinelF64, f64b = kSentinelF64;
  uint64_t u64 = kSentinelU64;
  // Enum out parameters live in int32 storage: a sentinel outside an enum's range, read as
  // that enum, would itself be undefined behaviour (UBSan -fsanitize=enum).
  int32_t param_raw = kSentinelI32, type_raw = kSentinelI32;
  psa_param* param_out = reinterpret_cast<psa_param*>(&param_raw);
  psa_param_type* type_out = reinterpret_cast<psa_param_type*>(&type_raw);
  const char* name_out = reinterpret_cast<const char*>(uintptr_t{0x5a5a80});
  psa_tensor_desc desc_out{};
  psa_stats stats{};

  Env() {
    psa_config* c = nullptr;
    EXPECT_EQ(psa_config_create(&c), PSA_OK);
    cfg.reset(c);
    psa_context* x = nullptr;
    EXPECT_EQ(psa_context_create(c, PSA_BACKEND_CPU, -1, &x), PSA_OK) << psa_last_error_message();
    ctx.reset(x);
    EXPECT_EQ(psa_catalog_open_string(mini_yaml(), &cat), PSA_OK) << psa_last_error_message();
    std::mt19937_64 rng(psa_test::fresh_seed());
    for (HostTensor* t : {&q, &k, &v})
      for (int64_t h = 0; h < kHeads; ++h) t->set_head(0, h, psa_test::random_vec(rng, kLen * kDim));
    uint64_t bytes = 0;
    EXPECT_EQ(psa_workspace_size(ctx.get(), &q.desc, &k.desc, &v.desc, &out.desc, &bytes), PSA_OK);
    ws.assign(bytes, 0);
    std::memset(out.bytes.data(), 0x5a, out.bytes.size());
    std::memset(&desc_out, 0x5a, sizeof desc_out);
    std::memset(&stats, 0x5a, sizeof stats);
    stats.struct_size = sizeof stats;
  }
  ~Env() { psa_catalog_destroy(cat); }
  Env(const Env&) = delete;
  Env& operator=(const Env&) = delete;

  psa_status forward(const psa_tensor_desc& qd, const psa_tensor_desc& kd,
                     const psa_tensor_desc& vd, const psa_tensor_desc& od) {
    return psa_attention_forward(ctx.get(), &qd, q.bytes.data(), &kd, k.bytes.data(), &vd,
                                 v.bytes.data(), &od, out.bytes.data(), lse.data(), ws.data(),
                                 ws.size(), nullptr);
  }
  psa_status forward() { return forward(q.desc, k.desc, v.desc, out.desc); }

  // A clone of the environment's config (released by the caller through ConfigPtr).
  ConfigPtr clone() const {
    psa_config* c = nullptr;
    EXPECT_EQ(psa_config_clone(cfg.get(), &c), PSA_OK);
    return ConfigPtr(c);
  }
};

// Every parameter of a config, read through the public getters: equal snapshots mean a
// failing set call changed nothing.
struct ConfigSnapshot {
  std::vector<int64_t> ints;
  std::vector<double> reals;
  explicit ConfigSnapshot(const psa_config* c) {
    for (int i = 0; i < PSA_PARAM_COUNT_; ++i) {
      psa_param_type type = PSA_PARAM_TYPE_INT;
      psa_param_info(static_cast<psa_param>(i), nullptr, &type, nullptr, nullptr);
      int64_t iv = 0;
      double dv = 0.0;
      if (type == PSA_PARAM_TYPE_INT)
        psa_config_get_int(c, static_cast<psa_param>(i), &iv);
      else
        psa_config_get_double(c, static_cast<psa_param>(i), &dv);
      ints.push_back(iv);
      reals.push_back(dv);
    }
  }
  bool operator==(const ConfigSnapshot& o) const { return ints == o.ints && reals == o.reals; }
};

// A copy of a descriptor with one change.
inline psa_tensor_desc with(psa_tensor_desc d, const std::function<void(psa_tensor_desc&)>& f) {
  f(d);
  return d;
}

}  // namespace psa_robust

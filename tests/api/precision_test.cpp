// tests/api/precision_test.cpp -- PSA_PARAM_PRECISION: on the CPU backend, a forward with
// precision = fp8 gives exactly the 8-bit oracle (fp8_quantize_head_cpu + sparse_attention_fp8_cpu)
// on the forward's own pyramid and exported level map, bit for bit, for the PSA route and a block
// method (level 1 only); its distance to the default-precision forward is that of an 8-bit path
// (non-zero, a few percent at most); the key reads and writes through YAML and the API; the PSA
// ring refuses it.
#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "attention/attention.h"
#include "attention/attention_fp8.h"
#include "pool/pool.h"
#include "pool/pool_spec.h"
#include "psa.h"

namespace {

struct Shape {
  int64_t B = 1, H = 2, Hkv = 1, L = 700, D = 64;
};

std::vector<float> random_input(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> x(n);
  for (float& v : x) v = nd(rng);
  return x;
}

// Block of 128 x bn (rf_v2 takes square blocks only).
int64_t block_n_of(psa_method method) { return method == PSA_METHOD_RF_V2 ? 128 : 64; }

psa_config* make_config(psa_method method, psa_precision precision) {
  psa_config* cfg = nullptr;
  EXPECT_EQ(PSA_OK, psa_config_create(&cfg));
  EXPECT_EQ(PSA_OK, psa_config_set_int(cfg, PSA_PARAM_METHOD, method));
  EXPECT_EQ(PSA_OK, psa_config_set_int(cfg, PSA_PARAM_BLOCK_N, block_n_of(method)));
  EXPECT_EQ(PSA_OK, psa_config_set_int(cfg, PSA_PARAM_SEED, 3));
  if (method == PSA_METHOD_RF_V2) EXPECT_EQ(PSA_OK, psa_config_set_double(cfg, PSA_PARAM_SPARSITY, 0.6));
  EXPECT_EQ(PSA_OK, psa_config_set_int(cfg, PSA_PARAM_PRECISION, precision));
  EXPECT_EQ(PSA_OK, psa_config_validate(cfg)) << psa_last_error_message();
  return cfg;
}

struct ForwardResult {
  std::vector<float> out;
  std::vector<int8_t> levels;
  std::vector<int64_t> q_order, k_order;  // computing position x holds the caller's token order[x]
};

ForwardResult forward(const Shape& s, psa_method method, psa_precision precision, const std::vector<float>& q,
            const std::vector<float>& k, const std::vector<float>& v) {
  psa_config* cfg = make_config(method, precision);
  psa_context* ctx = nullptr;
  EXPECT_EQ(PSA_OK, psa_context_create(cfg, PSA_BACKEND_CPU, -1, &ctx)) << psa_last_error_message();
  // A latent grid of s.L tokens (rf_v2 needs one; no rearrangement: the config keeps the default).
  EXPECT_EQ(PSA_OK, psa_context_set_video_grid(ctx, 7, 10, 10, 0, PSA_TEXT_FIRST)) << psa_last_error_message();
  psa_tensor_desc qd{}, kd{};
  qd.struct_size = kd.struct_size = sizeof(psa_tensor_desc);
  psa_tensor_desc_init(&qd, PSA_LAYOUT_BNSD, PSA_DTYPE_F32, s.B, s.H, s.L, s.D);
  psa_tensor_desc_init(&kd, PSA_LAYOUT_BNSD, PSA_DTYPE_F32, s.B, s.Hkv, s.L, s.D);
  ForwardResult r;
  r.out.assign(q.size(), 0.0f);
  uint64_t bytes = 0;
  EXPECT_EQ(PSA_OK, psa_workspace_size(ctx, &qd, &kd, &kd, &qd, &bytes));
  std::vector<char> ws(bytes);
  EXPECT_EQ(PSA_OK, psa_attention_forward(ctx, &qd, q.data(), &kd, k.data(), &kd, v.data(), &qd, r.out.data(),
                                          nullptr, ws.data(), bytes, nullptr))
      << psa_last_error_message();
  const int64_t bn = block_n_of(method), mq = (s.L + 127) / 128, nk = (s.L + bn - 1) / bn;
  r.levels.assign(static_cast<size_t>(s.B * s.H * mq * nk), 0);
  EXPECT_EQ(PSA_OK, psa_context_get_level_map(ctx, r.levels.data(), r.levels.size())) << psa_last_error_message();
  r.q_order.assign(static_cast<size_t>(s.L), 0);
  r.k_order.assign(static_cast<size_t>(s.L), 0);
  int64_t len = 0;
  EXPECT_EQ(PSA_OK, psa_context_get_token_order(ctx, 0, r.q_order.data(), s.L, &len, nullptr, nullptr));
  EXPECT_EQ(PSA_OK, psa_context_get_token_order(ctx, 1, r.k_order.data(), s.L, &len, nullptr, nullptr));
  psa_context_destroy(ctx);
  psa_config_destroy(cfg);
  return r;
}

double rel_l2(const float* a, const float* ref, size_t n) {
  double num = 0, den = 0;
  for (size_t i = 0; i < n; ++i) {
    num += (static_cast<double>(a[i]) - ref[i]) * (static_cast<double>(a[i]) - ref[i]);
    den += static_cast<double>(ref[i]) * ref[i];
  }
  return std::sqrt(num / den);
}

TEST(Precision, Fp8ForwardIsTheOracleOnTheCpu) {
  const Shape s;
  const size_t nq = static_cast<size_t>(s.B * s.H * s.L * s.D), nkv = static_cast<size_t>(s.B * s.Hkv * s.L * s.D);
  const std::vector<float> q = random_input(nq, 1), k = random_input(nkv, 2), v = random_input(nkv, 3);
  for (psa_method method : {PSA_METHOD_PSA, PSA_METHOD_RF_V2}) {
    SCOPED_TRACE(method == PSA_METHOD_PSA ? "psa" : "rf_v2");
    const int64_t bn = block_n_of(method), mq = (s.L + 127) / 128, nk = (s.L + bn - 1) / bn;
    const ForwardResult r8 = forward(s, method, PSA_PRECISION_FP8, q, k, v);
    const ForwardResult r16 = forward(s, method, PSA_PRECISION_DEFAULT, q, k, v);
    EXPECT_EQ(r8.levels, r16.levels) << "the precision does not change the mask";
    bool pooled_levels = false;
    for (int8_t l : r8.levels) pooled_levels = pooled_levels || l > 1;
    EXPECT_EQ(method == PSA_METHOD_PSA, pooled_levels);
    for (int64_t b = 0; b < s.B; ++b)
      for (int64_t h = 0; h < s.H; ++h) {
        const int64_t hk = b * s.Hkv + h / (s.H / s.Hkv), hq = b * s.H + h;
        // The head in the forward's computing order (rf_v2 reorders tokens; PSA here does not).
        std::vector<float> qh(static_cast<size_t>(s.L * s.D)), kh(qh.size()), vh(qh.size());
        for (int64_t x = 0; x < s.L; ++x) {
          const size_t qs = static_cast<size_t>(r8.q_order[static_cast<size_t>(x)]);
          const size_t ks = static_cast<size_t>(r8.k_order[static_cast<size_t>(x)]);
          std::memcpy(&qh[static_cast<size_t>(x * s.D)], q.data() + (static_cast<size_t>(hq * s.L) + qs) * s.D, s.D * 4);
          std::memcpy(&kh[static_cast<size_t>(x * s.D)], k.data() + (static_cast<size_t>(hk * s.L) + ks) * s.D, s.D * 4);
          std::memcpy(&vh[static_cast<size_t>(x * s.D)], v.data() + (static_cast<size_t>(hk * s.L) + ks) * s.D, s.D * 4);
        }
        // The oracle on the same pyramid (only level 1 for the block method, as the forward).
        std::vector<float> kp[3], vp[3];
        for (int l = 0; l < 3; ++l) {
          kp[l].resize(static_cast<size_t>(psa::pooled_length(nk, bn, 2 << l) * s.D));
          vp[l].resize(kp[l].size());
        }
        float* const ko[3] = {kp[0].data(), kp[1].data(), kp[2].data()};
        float* const vo[3] = {vp[0].data(), vp[1].data(), vp[2].data()};
        psa::pool_kv_cpu(kh.data(), vh.data(), s.L, s.D, nk, bn, ko, vo);
        psa::Pyramid K, V;
        K.level[0] = kh.data();
        V.level[0] = vh.data();
        if (method == PSA_METHOD_PSA)
          for (int l = 0; l < 3; ++l) {
            K.level[l + 1] = kp[l].data();
            V.level[l + 1] = vp[l].data();
          }
        const psa::Fp8HeadCpu h8 = psa::fp8_quantize_head_cpu(qh.data(), s.L, K, V, s.L, s.D, 128, bn);
        std::vector<float> computed(static_cast<size_t>(s.L * s.D)), want(computed.size());
        const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(s.D)));
        psa::sparse_attention_fp8_cpu(h8, r8.levels.data() + hq * mq * nk, scale, false, 0, s.L, computed.data(),
                                      nullptr);
        for (int64_t x = 0; x < s.L; ++x)  // back to the caller's token order
          std::memcpy(&want[static_cast<size_t>(r8.q_order[static_cast<size_t>(x)] * s.D)],
                      &computed[static_cast<size_t>(x * s.D)], s.D * 4);
        const float* got = r8.out.data() + hq * s.L * s.D;
        EXPECT_EQ(0, std::memcmp(want.data(), got, want.size() * sizeof(float))) << "head " << h;
        // An 8-bit path: close to the default precision, not equal to it.
        const double d = rel_l2(got, r16.out.data() + hq * s.L * s.D, want.size());
        EXPECT_GT(d, 1e-4) << "head " << h;
        EXPECT_LT(d, 5e-2) << "head " << h;
      }
  }
}

std::string preset_yaml(const char* precision) {
  return std::string(
             "M:\n"
             "  video_scale: {width_divisor: 16, height_divisor: 16, depth_divisor: 4}\n"
             "  attention_configs:\n"
             "    p:\n"
             "      type: psa\n"
             "      mask_ratios:\n"
             "        1: [0.0, 0.1]\n"
             "        2: [0.1, 0.15]\n"
             "        4: [0.15, 0.15]\n"
             "        8: [0.15, 0.35]\n"
             "        0: [0.35, 1.0]\n"
             "      precision: ") +
         precision + "\n";
}

TEST(Precision, KeyReadsAndWritesThroughYamlAndApi) {
  psa_config* cfg = nullptr;
  ASSERT_EQ(PSA_OK, psa_config_load_string(preset_yaml("fp8").c_str(), "M", "p", &cfg)) << psa_last_error_message();
  int64_t value = -1;
  EXPECT_EQ(PSA_OK, psa_config_get_int(cfg, PSA_PARAM_PRECISION, &value));
  EXPECT_EQ(PSA_PRECISION_FP8, value);
  EXPECT_EQ(PSA_ERR_INVALID_ARGUMENT, psa_config_set_int(cfg, PSA_PARAM_PRECISION, 2));
  const std::string msg = psa_last_error_message();
  EXPECT_NE(std::string::npos, msg.find("precision")) << msg;
  EXPECT_EQ(PSA_OK, psa_config_get_int(cfg, PSA_PARAM_PRECISION, &value));
  EXPECT_EQ(PSA_PRECISION_FP8, value) << "a refused value leaves the config as it was";
  psa_config_destroy(cfg);
  psa_config* bad = nullptr;
  EXPECT_EQ(PSA_ERR_INVALID_CONFIG, psa_config_load_string(preset_yaml("int4").c_str(), "M", "p", &bad));
  const std::string bad_msg = psa_last_error_message();
  EXPECT_NE(std::string::npos, bad_msg.find("int4")) << bad_msg;
  EXPECT_NE(std::string::npos, bad_msg.find("fp8")) << bad_msg;
  EXPECT_EQ(nullptr, bad);
}

TEST(Precision, RingRefusesFp8) {
  psa_config* cfg = make_config(PSA_METHOD_PSA, PSA_PRECISION_FP8);
  psa_context* ctx = nullptr;
  ASSERT_EQ(PSA_OK, psa_context_create(cfg, PSA_BACKEND_CPU, -1, &ctx));
  psa_tensor_desc qd{};
  qd.struct_size = sizeof(psa_tensor_desc);
  psa_tensor_desc_init(&qd, PSA_LAYOUT_BNSD, PSA_DTYPE_F32, 1, 2, 256, 64);
  uint64_t bytes = 0;
  EXPECT_EQ(PSA_ERR_UNSUPPORTED, psa_level_map_workspace_size(ctx, &qd, &qd, &bytes));
  EXPECT_NE(std::string::npos, std::string(psa_last_error_message()).find("precision")) << psa_last_error_message();
  psa_context_destroy(ctx);
  psa_config_destroy(cfg);
}

// psa_stats.precision: what the attention ran (FP8 for a sparse CPU forward asked for it, the
// default for a warm-up step or when not asked); the earlier struct (without the field) is
// still accepted and filled up to stage_ms, nothing written past it.
TEST(Precision, StatsReportWhatRanAndAcceptTheEarlierStruct) {
  const Shape s;
  const size_t nq = static_cast<size_t>(s.B * s.H * s.L * s.D), nkv = static_cast<size_t>(s.B * s.Hkv * s.L * s.D);
  const std::vector<float> q = random_input(nq, 11), k = random_input(nkv, 12), v = random_input(nkv, 13);
  for (psa_precision asked : {PSA_PRECISION_DEFAULT, PSA_PRECISION_FP8}) {
    psa_config* cfg = make_config(PSA_METHOD_PSA, asked);
    ASSERT_EQ(PSA_OK, psa_config_set_int(cfg, PSA_PARAM_WARMUP_STEPS, 1));
    psa_context* ctx = nullptr;
    ASSERT_EQ(PSA_OK, psa_context_create(cfg, PSA_BACKEND_CPU, -1, &ctx)) << psa_last_error_message();
    psa_tensor_desc qd{}, kd{};
    psa_tensor_desc_init(&qd, PSA_LAYOUT_BNSD, PSA_DTYPE_F32, s.B, s.H, s.L, s.D);
    psa_tensor_desc_init(&kd, PSA_LAYOUT_BNSD, PSA_DTYPE_F32, s.B, s.Hkv, s.L, s.D);
    uint64_t bytes = 0;
    ASSERT_EQ(PSA_OK, psa_workspace_size(ctx, &qd, &kd, &kd, &qd, &bytes));
    std::vector<char> ws(bytes);
    std::vector<float> out(q.size());
    for (int64_t step = 0; step < 2; ++step) {  // step 0 is the warm-up (dense)
      ASSERT_EQ(PSA_OK, psa_context_set_step(ctx, step));
      ASSERT_EQ(PSA_OK, psa_attention_forward(ctx, &qd, q.data(), &kd, k.data(), &kd, v.data(), &qd, out.data(),
                                              nullptr, ws.data(), bytes, nullptr))
          << psa_last_error_message();
      psa_stats st{};
      st.struct_size = sizeof(psa_stats);
      st.precision = -7;
      ASSERT_EQ(PSA_OK, psa_context_get_stats(ctx, &st));
      EXPECT_EQ(step == 0, st.ran_dense != 0);
      EXPECT_EQ(step == 0 ? PSA_PRECISION_DEFAULT : asked, st.precision) << "step " << step;
      // The earlier struct: struct_size = offsetof(psa_stats, precision); the field stays untouched.
      psa_stats old{};
      old.struct_size = static_cast<uint32_t>(offsetof(psa_stats, precision));
      old.precision = -7;
      ASSERT_EQ(PSA_OK, psa_context_get_stats(ctx, &old)) << psa_last_error_message();
      EXPECT_EQ(-7, old.precision);
      EXPECT_EQ(st.density, old.density);
      EXPECT_EQ(st.step, old.step);
      EXPECT_EQ(old.struct_size, offsetof(psa_stats, precision));
      psa_stats bad{};
      bad.struct_size = static_cast<uint32_t>(sizeof(psa_stats) + 8);
      EXPECT_EQ(PSA_ERR_INVALID_ARGUMENT, psa_context_get_stats(ctx, &bad));
      EXPECT_NE(std::string::npos, std::string(psa_last_error_message()).find("struct_size"));
    }
    psa_context_destroy(ctx);
    psa_config_destroy(cfg);
  }
}

}  // namespace

// tests/pipeline/injected_offsets_test.cpp -- the experimental sampler injection: injecting
// exactly the offsets the seeded sampler draws reproduces its output bit for bit; other
// offsets change the mask; bad injections are rejected with named arguments.
#define PSA_EXPERIMENTAL_API
#include <gtest/gtest.h>

#include "common/api_util.h"
#include "common/test_util.h"
#include "importance/importance_spec.h"

namespace {

using psa_test::ConfigPtr;
using psa_test::ContextPtr;
using psa_test::HostTensor;

TEST(InjectedOffsets, SeededOffsetsReproduceTheSamplerExactly) {
  const uint64_t seed = psa_test::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  psa_config* c = nullptr;
  PSA_ASSERT_OK(psa_config_create(&c));
  ConfigPtr cfg(c);
  PSA_ASSERT_OK(psa_config_set_int(c, PSA_PARAM_SEED, int64_t(seed & 0xffffff)));
  psa_context *a = nullptr, *b = nullptr;
  PSA_ASSERT_OK(psa_context_create(c, PSA_BACKEND_CPU, -1, &a));
  PSA_ASSERT_OK(psa_context_create(c, PSA_BACKEND_CPU, -1, &b));
  ContextPtr ca(a), cb(b);
  const int64_t B = 2, H = 2, L = 700, D = 16;
  HostTensor q(PSA_LAYOUT_BNSD, PSA_DTYPE_F32, B, H, L, D), k = q, v = q, o1 = q, o2 = q;
  for (int64_t bb = 0; bb < B; ++bb)
    for (int64_t h = 0; h < H; ++h)
      for (HostTensor* t : {&q, &k, &v}) t->set_head(bb, h, psa_test::random_vec(rng, L * D));
  // Defaults: block_m 128, block_n 64, sample_divisor 4 -> 32 and 16 samples.
  std::vector<int32_t> qo(B * H * 32), ko(B * H * 16), scratch(128);
  for (int64_t bb = 0; bb < B; ++bb)
    for (int64_t h = 0; h < H; ++h) {
      psa::sample_offsets(seed & 0xffffff, bb, h, psa::kSampleQuery, 128, 32, scratch.data(),
                          qo.data() + (bb * H + h) * 32);
      psa::sample_offsets(seed & 0xffffff, bb, h, psa::kSampleKey, 64, 16, scratch.data(),
                          ko.data() + (bb * H + h) * 16);
    }
  PSA_ASSERT_OK(psa_context_set_sampling_offsets(b, B, H, 32, qo.data(), 16, ko.data()));
  PSA_ASSERT_OK(psa_test::forward_cpu(a, q, k, v, &o1, nullptr));
  PSA_ASSERT_OK(psa_test::forward_cpu(b, q, k, v, &o2, nullptr));
  EXPECT_EQ(o1.bytes, o2.bytes);
  // Different offsets: the forward still runs; NULL restores the sampler.
  for (auto& x : qo) x = 0;
  for (auto& x : ko) x = 63;
  PSA_ASSERT_OK(psa_context_set_sampling_offsets(b, B, H, 32, qo.data(), 16, ko.data()));
  PSA_ASSERT_OK(psa_test::forward_cpu(b, q, k, v, &o2, nullptr));
  PSA_ASSERT_OK(psa_context_set_sampling_offsets(b, 0, 0, 0, nullptr, 0, nullptr));
  PSA_ASSERT_OK(psa_test::forward_cpu(b, q, k, v, &o2, nullptr));
  EXPECT_EQ(o1.bytes, o2.bytes);
}

TEST(InjectedOffsets, BadInjectionsAreRejected) {
  psa_config* c = nullptr;
  PSA_ASSERT_OK(psa_config_create(&c));
  ConfigPtr cfg(c);
  psa_context* x = nullptr;
  PSA_ASSERT_OK(psa_context_create(c, PSA_BACKEND_CPU, -1, &x));
  ContextPtr ctx(x);
  std::vector<int32_t> qo(32, 0), ko(16, 0);
  EXPECT_EQ(psa_context_set_sampling_offsets(x, 1, 1, 31, qo.data(), 16, ko.data()), PSA_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(psa_last_error_message()).find("q_count = 31"), std::string::npos);
  qo[5] = 128;
  EXPECT_EQ(psa_context_set_sampling_offsets(x, 1, 1, 32, qo.data(), 16, ko.data()), PSA_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(psa_last_error_message()).find("q_offsets[5] = 128"), std::string::npos);
  EXPECT_EQ(psa_context_set_sampling_offsets(x, 1, 1, 32, qo.data(), 16, nullptr), PSA_ERR_NULL_POINTER);
  qo[5] = 0;
  // Injected for batch 1 x heads 1; a forward with 2 heads must refuse.
  PSA_ASSERT_OK(psa_context_set_sampling_offsets(x, 1, 1, 32, qo.data(), 16, ko.data()));
  HostTensor q(PSA_LAYOUT_BNSD, PSA_DTYPE_F32, 1, 2, 200, 8), k = q, v = q, o = q;
  EXPECT_EQ(psa_test::forward_cpu(x, q, k, v, &o, nullptr), PSA_ERR_INVALID_STATE);
  EXPECT_NE(std::string(psa_last_error_message()).find("heads 2"), std::string::npos);
}

}  // namespace

namespace {

// Stage timing switch (experimental API): bad arguments are named; on the CPU backend it is a
// no-op (stage_ms is host time either way) and changes no output bit.
TEST(StageTiming, CpuSwitchIsCheckedAndChangesNothing) {
  const uint64_t seed = psa_test::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  EXPECT_EQ(PSA_ERR_NULL_POINTER, psa_context_set_stage_timing(nullptr, 1));
  psa_config* c = nullptr;
  PSA_ASSERT_OK(psa_config_create(&c));
  ConfigPtr cfg(c);
  psa_context *a = nullptr, *b = nullptr;
  PSA_ASSERT_OK(psa_context_create(c, PSA_BACKEND_CPU, -1, &a));
  PSA_ASSERT_OK(psa_context_create(c, PSA_BACKEND_CPU, -1, &b));
  ContextPtr ca(a), cb(b);
  EXPECT_EQ(PSA_ERR_INVALID_ARGUMENT, psa_context_set_stage_timing(a, -1));
  EXPECT_NE(std::string(psa_last_error_message()).find("enable = -1"), std::string::npos);
  PSA_ASSERT_OK(psa_context_set_stage_timing(a, 1));
  HostTensor q(PSA_LAYOUT_BNSD, PSA_DTYPE_F32, 1, 2, 300, 16), k = q, v = q, o1 = q, o2 = q;
  for (int64_t h = 0; h < 2; ++h)
    for (HostTensor* t : {&q, &k, &v}) t->set_head(0, h, psa_test::random_vec(rng, 300 * 16));
  PSA_ASSERT_OK(psa_test::forward_cpu(a, q, k, v, &o1, nullptr));
  PSA_ASSERT_OK(psa_test::forward_cpu(b, q, k, v, &o2, nullptr));
  EXPECT_EQ(o1.bytes, o2.bytes);
  psa_stats st{};
  st.struct_size = sizeof(st);
  PSA_ASSERT_OK(psa_context_get_stats(a, &st));
  EXPECT_GT(st.stage_ms[PSA_STAGE_TOTAL], 0.0);
  EXPECT_GT(st.stage_ms[PSA_STAGE_ATTENTION], 0.0);
}

}  // namespace

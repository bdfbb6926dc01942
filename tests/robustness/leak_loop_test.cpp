// tests/robustness/leak_loop_test.cpp -- create/use/destroy loops over every object of the
// API, on success and on failure paths (a failing load, create or forward must free what it
// built). Under AddressSanitizer (scripts/sanitize.sh) each loop ends with a LeakSanitizer
// check of its own; in other builds it still runs, as a smoke test.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "robustness/robust_env.h"

#if defined(__SANITIZE_ADDRESS__)
#define PSA_TEST_LSAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define PSA_TEST_LSAN 1
#endif
#endif
#if defined(PSA_TEST_LSAN)
#include <sanitizer/lsan_interface.h>
#endif

namespace psa_robust {
namespace {

// Fails the test when LeakSanitizer finds unreachable blocks now (ASan builds only).
void expect_no_leaks(const char* where) {
#if defined(PSA_TEST_LSAN)
  EXPECT_EQ(__lsan_do_recoverable_leak_check(), 0) << "leaks after " << where << " (report above)";
#else
  (void)where;
#endif
}

constexpr int kRounds = 12;

TEST(LeakLoop, ConfigAndCatalogObjects) {
  for (int n = 0; n < kRounds; ++n) {
    psa_config* a = nullptr;
    psa_config* b = nullptr;
    ASSERT_EQ(psa_config_create(&a), PSA_OK);
    ASSERT_EQ(psa_config_clone(a, &b), PSA_OK);
    psa_config_destroy(a);
    psa_config_destroy(b);
    ASSERT_EQ(psa_config_load_embedded("Wan2.1_1.3b", nullptr, &a), PSA_OK);
    psa_config_destroy(a);
    psa_catalog* cat = nullptr;
    ASSERT_EQ(psa_catalog_open(nullptr, &cat), PSA_OK);
    ASSERT_EQ(psa_catalog_get_config(cat, "Wan2.1_14b", "psa_balanced", &a), PSA_OK);
    psa_catalog_destroy(cat);  // the config outlives its catalog
    psa_config_destroy(a);
    // Failure paths: parse error, invalid preset, unknown model, missing file.
    a = nullptr;
    EXPECT_EQ(psa_config_load_string("M: [", "M", nullptr, &a), PSA_ERR_YAML_PARSE);
    EXPECT_EQ(psa_config_load_string(yaml_with("cdf_threshold: 0.9", "cdf_threshold: 0").c_str(), "M", "a", &a),
              PSA_ERR_INVALID_CONFIG);
    EXPECT_EQ(psa_config_load_embedded("nope", nullptr, &a), PSA_ERR_NOT_FOUND);
    EXPECT_EQ(psa_catalog_open_string(yaml_with("sparsity: 0.5", "sparsity: [").c_str(), &cat), PSA_ERR_YAML_PARSE);
    EXPECT_EQ(psa_catalog_open_string(yaml_with("m: 128", "m: 100").c_str(), &cat), PSA_ERR_INVALID_CONFIG);
    EXPECT_EQ(psa_catalog_open("/nonexistent/psa.yaml", &cat), PSA_ERR_IO);
    EXPECT_EQ(a, nullptr);
  }
  expect_no_leaks("config and catalog loops");
}

TEST(LeakLoop, ContextCreateForwardDestroy) {
  HostTensor q(PSA_LAYOUT_BSND, PSA_DTYPE_BF16, 1, 2, 256, 32), k = q, v = q, out = q;
  std::mt19937_64 rng(5);
  for (HostTensor* t : {&q, &k, &v})
    for (int64_t h = 0; h < 2; ++h) t->set_head(0, h, psa_test::video_like(rng, 2, 8, 16, 32));
  const char* presets[] = {"psa_balanced", "psa_topk", "baseline", "ada_bsa_cdf", "rf_v2_080"};
  for (int n = 0; n < kRounds; ++n) {
    psa_config* cfg = nullptr;
    ASSERT_EQ(psa_config_load_embedded("Wan2.1_1.3b", presets[n % 5], &cfg), PSA_OK);
    psa_context* ctx = nullptr;
    ASSERT_EQ(psa_context_create(cfg, PSA_BACKEND_CPU, -1, &ctx), PSA_OK) << psa_last_error_message();
    psa_config_destroy(cfg);  // the context keeps its own copy
    ASSERT_EQ(psa_context_set_video_grid(ctx, 2, 8, 16, 0, PSA_TEXT_NONE), PSA_OK);
    ASSERT_EQ(psa_context_set_step(ctx, 20), PSA_OK);
    std::vector<float> lse;
    ASSERT_EQ(psa_test::forward_cpu(ctx, q, k, v, &out, &lse), PSA_OK) << psa_last_error_message();
    psa_stats s{};
    s.struct_size = sizeof s;
    EXPECT_EQ(psa_context_get_stats(ctx, &s), PSA_OK);
    ASSERT_EQ(psa_context_get_config(ctx, &cfg), PSA_OK);
    psa_config_destroy(cfg);
    // A failing forward after a successful plan, then a failing plan (grid mismatch).
    EXPECT_EQ(psa_attention_forward(ctx, &q.desc, q.bytes.data(), &k.desc, k.bytes.data(), &v.desc, v.bytes.data(),
                                    &out.desc, out.bytes.data(), nullptr, nullptr, 0, nullptr),
              PSA_ERR_WORKSPACE_TOO_SMALL);
    ASSERT_EQ(psa_context_set_video_grid(ctx, 2, 8, 15, 0, PSA_TEXT_NONE), PSA_OK);
    EXPECT_NE(psa_test::forward_cpu(ctx, q, k, v, &out, nullptr), PSA_OK);
    psa_context_destroy(ctx);
  }
  // Context creation that fails after the config was validated (bad backend) or before.
  psa_config* cfg = nullptr;
  ASSERT_EQ(psa_config_create(&cfg), PSA_OK);
  psa_context* ctx = nullptr;
  EXPECT_EQ(psa_context_create(cfg, psa_backend(5), -1, &ctx), PSA_ERR_INVALID_ARGUMENT);
  const psa_status cuda = psa_context_create(cfg, PSA_BACKEND_CUDA, 0, &ctx);  // no device here
  EXPECT_EQ(cuda == PSA_OK, ctx != nullptr);
  psa_context_destroy(ctx);
  ctx = nullptr;
  ASSERT_EQ(psa_config_set_double(cfg, PSA_PARAM_RATIO_L0, 0.0), PSA_OK);
  EXPECT_EQ(psa_context_create(cfg, PSA_BACKEND_CPU, -1, &ctx), PSA_ERR_INVALID_CONFIG);
  psa_config_destroy(cfg);
  expect_no_leaks("context loops");
}

// More shapes than the context caches plans for: evicted plans are freed with their data.
TEST(LeakLoop, PlanCacheEviction) {
  psa_config* cfg = nullptr;
  ASSERT_EQ(psa_config_create(&cfg), PSA_OK);
  psa_context* ctx = nullptr;
  ASSERT_EQ(psa_context_create(cfg, PSA_BACKEND_CPU, -1, &ctx), PSA_OK);
  for (int64_t len = 64; len < 64 + 24; ++len) {
    HostTensor q(PSA_LAYOUT_BNSD, PSA_DTYPE_F32, 1, 1, len, 8), out = q;
    ASSERT_EQ(psa_test::forward_cpu(ctx, q, q, q, &out, nullptr), PSA_OK) << psa_last_error_message();
  }
  psa_context_destroy(ctx);
  psa_config_destroy(cfg);
  expect_no_leaks("plan cache eviction");
}

TEST(LeakLoop, OneShotVendorCall) {
  HostTensor q(PSA_LAYOUT_BNSD, PSA_DTYPE_F32, 1, 1, 256, 16), out = q;
  const int64_t latent[3] = {1, 16, 16};
  for (int n = 0; n < 4; ++n) {
    EXPECT_EQ(psa_sparse_attention(q.bytes.data(), q.bytes.data(), q.bytes.data(), out.bytes.data(), PSA_DTYPE_F32, 1,
                                   1, 256, 16, PSA_LAYOUT_BNSD, PSA_METHOD_RF_V2, 0.5, 0, latent, 1, 1, 1.0, 0.0, 0,
                                   PSA_BACKEND_CPU, nullptr),
              PSA_OK)
        << psa_last_error_message();
    const int64_t wrong[3] = {1, 16, 15};
    EXPECT_EQ(psa_sparse_attention(q.bytes.data(), q.bytes.data(), q.bytes.data(), out.bytes.data(), PSA_DTYPE_F32, 1,
                                   1, 256, 16, PSA_LAYOUT_BNSD, PSA_METHOD_RF_V2, 0.5, 0, wrong, 1, 1, 1.0, 0.0, 0,
                                   PSA_BACKEND_CPU, nullptr),
              PSA_ERR_INVALID_SHAPE);
  }
  expect_no_leaks("psa_sparse_attention");
}

}  // namespace
}  // namespace psa_robust

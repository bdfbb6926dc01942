// tests/config/config_api_test.cpp -- configuration stage, C ABI contract: create defaults, clone,
// NULL arguments (PSA_ERR_NULL_POINTER naming the argument), NULL destroys, catalog accessors.
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "psa.h"

namespace {

int64_t get_int(const psa_config* c, psa_param p) {
  int64_t v = -1;
  EXPECT_EQ(psa_config_get_int(c, p, &v), PSA_OK) << psa_last_error_message();
  return v;
}

double get_double(const psa_config* c, psa_param p) {
  double v = -1;
  EXPECT_EQ(psa_config_get_double(c, p, &v), PSA_OK) << psa_last_error_message();
  return v;
}

TEST(ConfigApi, CreateHoldsTheDocumentedDefaults) {
  psa_config* c = nullptr;
  ASSERT_EQ(psa_config_create(&c), PSA_OK);
  EXPECT_EQ(get_int(c, PSA_PARAM_METHOD), PSA_METHOD_PSA);
  EXPECT_EQ(get_int(c, PSA_PARAM_MASK_MODE), PSA_MASK_MODE_TOPK);
  EXPECT_EQ(get_int(c, PSA_PARAM_MASK_FORMAT), PSA_MASK_FORMAT_SEGMENTS);
  EXPECT_EQ(get_int(c, PSA_PARAM_BLOCK_M), 128);
  EXPECT_EQ(get_int(c, PSA_PARAM_BLOCK_N), 64);
  EXPECT_EQ(get_int(c, PSA_PARAM_TILE_N), 32);
  const double ends[5] = {0.1, 0.15, 0.15, 0.35, 1.0};
  const psa_param ids[5] = {PSA_PARAM_RATIO_L1, PSA_PARAM_RATIO_L2, PSA_PARAM_RATIO_L4,
                            PSA_PARAM_RATIO_L8, PSA_PARAM_RATIO_L0};
  for (int i = 0; i < 5; ++i) EXPECT_DOUBLE_EQ(get_double(c, ids[i]), ends[i]);
  EXPECT_EQ(get_int(c, PSA_PARAM_USE_REARRANGE), 0);
  EXPECT_EQ(get_int(c, PSA_PARAM_WARMUP_STEPS), 0);
  EXPECT_EQ(get_int(c, PSA_PARAM_CALLS_PER_STEP), 1);
  EXPECT_EQ(get_int(c, PSA_PARAM_SAMPLE_DIVISOR), 4);
  EXPECT_DOUBLE_EQ(get_double(c, PSA_PARAM_MIN_FULL_RATIO), 0.06);
  EXPECT_DOUBLE_EQ(get_double(c, PSA_PARAM_SCALE), 0.0);
  EXPECT_DOUBLE_EQ(get_double(c, PSA_PARAM_CDF_THRESHOLD), 1.0);
  EXPECT_EQ(psa_config_validate(c), PSA_OK);
  psa_config_destroy(c);
}

TEST(ConfigApi, CloneIsADeepCopy) {
  psa_config* a = nullptr;
  psa_config* b = nullptr;
  ASSERT_EQ(psa_config_load_embedded("Wan2.1_1.3b", "psa_topk", &a), PSA_OK);
  ASSERT_EQ(psa_config_clone(a, &b), PSA_OK);
  ASSERT_NE(a, b);
  EXPECT_EQ(psa_config_set_int(a, PSA_PARAM_WARMUP_STEPS, 99), PSA_OK);
  EXPECT_EQ(get_int(b, PSA_PARAM_WARMUP_STEPS), 15);
  psa_config_destroy(a);
  EXPECT_EQ(get_int(b, PSA_PARAM_BLOCK_N), 32);  // b outlives a
  psa_config_destroy(b);
}

TEST(ConfigApi, DestroyNullIsANoOp) {
  psa_config_destroy(nullptr);
  psa_catalog_destroy(nullptr);
}

void expect_null_pointer(psa_status st, const char* arg) {
  EXPECT_EQ(st, PSA_ERR_NULL_POINTER) << arg;
  EXPECT_EQ(std::string(psa_last_error_message()), std::string(arg) + ": must not be NULL");
}

TEST(ConfigApi, NullArgumentsAreNamed) {
  psa_config* c = nullptr;
  ASSERT_EQ(psa_config_create(&c), PSA_OK);
  psa_catalog* cat = nullptr;
  ASSERT_EQ(psa_catalog_open(nullptr, &cat), PSA_OK);
  psa_config* out = nullptr;
  int64_t iv = 0;
  double dv = 0;
  psa_param p;
  const char* yaml = psa_embedded_config_yaml();

  expect_null_pointer(psa_config_create(nullptr), "out");
  expect_null_pointer(psa_config_clone(nullptr, &out), "src");
  expect_null_pointer(psa_config_clone(c, nullptr), "out");
  expect_null_pointer(psa_config_load_file(nullptr, "M", nullptr, &out), "path");
  expect_null_pointer(psa_config_load_file("x.yaml", nullptr, nullptr, &out), "model");
  expect_null_pointer(psa_config_load_file("x.yaml", "M", nullptr, nullptr), "out");
  expect_null_pointer(psa_config_load_string(nullptr, "M", nullptr, &out), "yaml");
  expect_null_pointer(psa_config_load_string(yaml, nullptr, nullptr, &out), "model");
  expect_null_pointer(psa_config_load_string(yaml, "M", nullptr, nullptr), "out");
  expect_null_pointer(psa_config_load_embedded(nullptr, nullptr, &out), "model");
  expect_null_pointer(psa_config_load_embedded("Wan2.1_14b", nullptr, nullptr), "out");
  expect_null_pointer(psa_config_validate(nullptr), "config");
  expect_null_pointer(psa_config_set_int(nullptr, PSA_PARAM_BLOCK_N, 64), "config");
  expect_null_pointer(psa_config_set_double(nullptr, PSA_PARAM_SCALE, 1.0), "config");
  expect_null_pointer(psa_config_get_int(nullptr, PSA_PARAM_BLOCK_N, &iv), "config");
  expect_null_pointer(psa_config_get_int(c, PSA_PARAM_BLOCK_N, nullptr), "value");
  expect_null_pointer(psa_config_get_double(nullptr, PSA_PARAM_SCALE, &dv), "config");
  expect_null_pointer(psa_config_get_double(c, PSA_PARAM_SCALE, nullptr), "value");
  expect_null_pointer(psa_param_from_name(nullptr, &p), "name");
  expect_null_pointer(psa_param_from_name("seed", nullptr), "param");
  expect_null_pointer(psa_catalog_open(nullptr, nullptr), "out");
  expect_null_pointer(psa_catalog_open_string(nullptr, &cat), "yaml");
  expect_null_pointer(psa_catalog_open_string(yaml, nullptr), "out");
  expect_null_pointer(psa_catalog_get_config(nullptr, "M", nullptr, &out), "catalog");
  expect_null_pointer(psa_catalog_get_config(cat, nullptr, nullptr, &out), "model");
  expect_null_pointer(psa_catalog_get_config(cat, "M", nullptr, nullptr), "out");
  EXPECT_EQ(out, nullptr);

  EXPECT_EQ(psa_catalog_model_count(nullptr), 0);
  EXPECT_EQ(psa_last_error_status(), PSA_ERR_NULL_POINTER);
  EXPECT_EQ(psa_catalog_model_name(nullptr, 0), nullptr);
  EXPECT_EQ(psa_catalog_preset_count(nullptr, "Wan2.1_14b"), -1);
  EXPECT_EQ(psa_catalog_preset_count(cat, nullptr), -1);
  EXPECT_STREQ(psa_last_error_message(), "model: must not be NULL");
  EXPECT_EQ(psa_catalog_preset_name(cat, nullptr, 0), nullptr);
  EXPECT_EQ(psa_catalog_default_preset(nullptr, "Wan2.1_14b"), nullptr);
  EXPECT_STREQ(psa_last_error_message(), "catalog: must not be NULL");

  // param_info accepts NULL for every output.
  EXPECT_EQ(psa_param_info(PSA_PARAM_SEED, nullptr, nullptr, nullptr, nullptr), PSA_OK);
  psa_catalog_destroy(cat);
  psa_config_destroy(c);
}

TEST(ConfigApi, CatalogAccessorsReportBadIndicesAndNames) {
  psa_catalog* cat = nullptr;
  ASSERT_EQ(psa_catalog_open(nullptr, &cat), PSA_OK);
  EXPECT_EQ(psa_catalog_model_name(cat, -1), nullptr);
  EXPECT_EQ(psa_last_error_status(), PSA_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(psa_last_error_message()).find("index = -1"), std::string::npos);
  EXPECT_STREQ(psa_catalog_model_name(cat, 0), "Wan2.1_14b");
  EXPECT_STREQ(psa_last_error_message(), "");
  EXPECT_EQ(psa_catalog_preset_name(cat, "Wan2.1_14b", 4), nullptr);
  EXPECT_EQ(psa_catalog_preset_name(cat, "Nope", 0), nullptr);
  EXPECT_EQ(psa_last_error_status(), PSA_ERR_NOT_FOUND);
  EXPECT_NE(std::string(psa_last_error_message()).find("CogVideo_5b"), std::string::npos);

  psa_config* c = nullptr;
  EXPECT_EQ(psa_catalog_get_config(cat, "Nope", nullptr, &c), PSA_ERR_NOT_FOUND);
  EXPECT_EQ(psa_catalog_get_config(cat, "Wan2.1_14b", "psa_topk", &c), PSA_ERR_NOT_FOUND);
  EXPECT_NE(std::string(psa_last_error_message()).find("Wan2.1_14b.attention_configs.psa_topk"),
            std::string::npos);
  EXPECT_NE(std::string(psa_last_error_message()).find("baseline, psa_balanced"),
            std::string::npos);
  EXPECT_EQ(c, nullptr);
  ASSERT_EQ(psa_catalog_get_config(cat, "Wan2.1_14b", nullptr, &c), PSA_OK);
  EXPECT_EQ(get_int(c, PSA_PARAM_MASK_MODE), PSA_MASK_MODE_THRESHOLDBOUND);
  psa_config_destroy(c);
  psa_catalog_destroy(cat);
}

TEST(ConfigApi, SuccessClearsThePreviousError) {
  psa_config* c = nullptr;
  EXPECT_EQ(psa_config_create(nullptr), PSA_ERR_NULL_POINTER);
  EXPECT_STRNE(psa_last_error_message(), "");
  ASSERT_EQ(psa_config_create(&c), PSA_OK);
  EXPECT_STREQ(psa_last_error_message(), "");
  EXPECT_EQ(psa_last_error_status(), PSA_OK);
  psa_config_destroy(c);
}

TEST(ConfigApi, EmbeddedYamlIsTheReferenceFormat) {
  const char* yaml = psa_embedded_config_yaml();
  ASSERT_NE(yaml, nullptr);
  EXPECT_NE(std::strstr(yaml, "Wan2.1_14b:"), nullptr);
  EXPECT_NE(std::strstr(yaml, "attention_configs:"), nullptr);
  psa_config* c = nullptr;
  ASSERT_EQ(psa_config_load_string(yaml, "CogVideo_5b", "psa_4steps", &c), PSA_OK);
  EXPECT_EQ(get_int(c, PSA_PARAM_MASK_FORMAT), PSA_MASK_FORMAT_LEVELS);
  psa_config_destroy(c);
}

}  // namespace

// tests/config/validate_test.cpp -- configuration stage, cross-parameter rules: psa_config_validate
// through the C API, plus psa::validate_config directly for the `where` prefix and for values the
// set calls cannot produce.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

#include "config/config.h"
#include "psa.h"

namespace {

bool message_has(const std::string& s) {
  return std::string(psa_last_error_message()).find(s) != std::string::npos;
}

class ConfigValidate : public testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(psa_config_create(&c_), PSA_OK); }
  void TearDown() override { psa_config_destroy(c_); }
  void set(psa_param p, int64_t v) {
    ASSERT_EQ(psa_config_set_int(c_, p, v), PSA_OK) << psa_last_error_message();
  }
  void setd(psa_param p, double v) {
    ASSERT_EQ(psa_config_set_double(c_, p, v), PSA_OK) << psa_last_error_message();
  }
  psa_status validate() { return psa_config_validate(c_); }
  psa_config* c_ = nullptr;
};

TEST_F(ConfigValidate, DefaultsAreValid) {
  EXPECT_EQ(validate(), PSA_OK) << psa_last_error_message();
  EXPECT_STREQ(psa_last_error_message(), "");
}

TEST_F(ConfigValidate, RatioEndsMustNotDecreaseInLevelOrder) {
  setd(PSA_PARAM_RATIO_L2, 0.05);  // below level 1's 0.1
  EXPECT_EQ(validate(), PSA_ERR_INVALID_CONFIG);
  EXPECT_TRUE(message_has("mask_ratios.2 = 0.05: must be >= mask_ratios.1 = 0.1"))
      << psa_last_error_message();
  setd(PSA_PARAM_RATIO_L2, 0.1);  // equal ends are allowed (an empty level)
  EXPECT_EQ(validate(), PSA_OK);
  setd(PSA_PARAM_RATIO_L0, 0.3);  // the skip level ends before level 8
  EXPECT_EQ(validate(), PSA_ERR_INVALID_CONFIG);
  EXPECT_TRUE(message_has("mask_ratios.0 = 0.3")) << psa_last_error_message();
}

TEST_F(ConfigValidate, LevelsFormatNeeds128By128) {
  set(PSA_PARAM_MASK_FORMAT, PSA_MASK_FORMAT_LEVELS);
  EXPECT_EQ(validate(), PSA_ERR_INVALID_CONFIG);  // default block_n is 64
  EXPECT_TRUE(message_has("block_size.n = 64: attn_impl old_mask_type allows only 128"));
  set(PSA_PARAM_BLOCK_N, 128);
  EXPECT_EQ(validate(), PSA_OK) << psa_last_error_message();
  set(PSA_PARAM_BLOCK_M, 64);
  EXPECT_EQ(validate(), PSA_ERR_INVALID_CONFIG);
  EXPECT_TRUE(message_has("block_size.m = 64"));
}

TEST_F(ConfigValidate, SimMaskNeedsLevelsFormat) {
  set(PSA_PARAM_USE_SIM_MASK, 1);
  EXPECT_EQ(validate(), PSA_ERR_INVALID_CONFIG);
  EXPECT_TRUE(message_has("use_sim_mask = true")) << psa_last_error_message();
  EXPECT_TRUE(message_has("old_mask_type"));
  set(PSA_PARAM_MASK_FORMAT, PSA_MASK_FORMAT_LEVELS);
  set(PSA_PARAM_BLOCK_N, 128);
  EXPECT_EQ(validate(), PSA_OK) << psa_last_error_message();
}

TEST_F(ConfigValidate, ReferenceSuffixTextRuleNeedsLevelsFormat) {
  set(PSA_PARAM_TEXT_RULE, PSA_TEXT_RULE_REFERENCE_SUFFIX);
  EXPECT_EQ(validate(), PSA_ERR_INVALID_CONFIG);
  EXPECT_TRUE(message_has("text_rule = reference_suffix")) << psa_last_error_message();
  set(PSA_PARAM_MASK_FORMAT, PSA_MASK_FORMAT_LEVELS);
  set(PSA_PARAM_BLOCK_N, 128);
  EXPECT_EQ(validate(), PSA_OK) << psa_last_error_message();
}

TEST_F(ConfigValidate, TileMustFitInKeyBlock) {
  set(PSA_PARAM_BLOCK_N, 32);
  set(PSA_PARAM_TILE_N, 64);
  EXPECT_EQ(validate(), PSA_ERR_INVALID_CONFIG);
  EXPECT_TRUE(message_has("block_size.tile_n = 64: must be <= block_size.n (32)"))
      << psa_last_error_message();
  set(PSA_PARAM_TILE_N, 32);
  EXPECT_EQ(validate(), PSA_OK);
  set(PSA_PARAM_TILE_N, 16);
  EXPECT_EQ(validate(), PSA_OK);
}

TEST_F(ConfigValidate, BlockSparseMethodsNeed128By128) {
  for (int64_t m : {PSA_METHOD_RF_V2, PSA_METHOD_ADA_BSA}) {
    set(PSA_PARAM_METHOD, m);
    set(PSA_PARAM_BLOCK_N, 64);
    EXPECT_EQ(validate(), PSA_ERR_INVALID_CONFIG);
    EXPECT_TRUE(message_has("block_size.n = 64: type")) << psa_last_error_message();
    set(PSA_PARAM_BLOCK_N, 128);
    EXPECT_EQ(validate(), PSA_OK) << psa_last_error_message();
    set(PSA_PARAM_BLOCK_M, 64);
    EXPECT_EQ(validate(), PSA_ERR_INVALID_CONFIG);
    set(PSA_PARAM_BLOCK_M, 128);
  }
  setd(PSA_PARAM_SPARSITY, 0.95);
  setd(PSA_PARAM_CDF_THRESHOLD, 0.5);
  EXPECT_EQ(validate(), PSA_OK);
}

TEST_F(ConfigValidate, DenseMethodAcceptsDefaults) {
  set(PSA_PARAM_METHOD, PSA_METHOD_DENSE);
  EXPECT_EQ(validate(), PSA_OK) << psa_last_error_message();
}

TEST(ConfigValidateDirect, MessagesCarryTheWherePrefix) {
  psa::Config c;
  c.block_n = 48;
  EXPECT_EQ(psa::validate_config(c, "A.attention_configs.b"), PSA_ERR_INVALID_CONFIG);
  EXPECT_STREQ(psa_last_error_message(),
               "A.attention_configs.b.block_size.n = 48: allowed 32, 64, 128");
  c.block_n = 64;
  c.tile_n = 128;
  EXPECT_EQ(psa::validate_config(c, "A.attention_configs.b"), PSA_ERR_INVALID_CONFIG);
  EXPECT_TRUE(message_has("A.attention_configs.b.block_size.tile_n = 128"))
      << psa_last_error_message();
}

TEST(ConfigValidateDirect, ValuesTheSetCallsWouldRejectAreCaughtToo) {
  psa::Config c;
  c.ratio_end[psa::kSlotL4] = std::numeric_limits<double>::quiet_NaN();
  EXPECT_EQ(psa::validate_config(c, ""), PSA_ERR_INVALID_CONFIG);
  EXPECT_TRUE(message_has("mask_ratios.4 = nan")) << psa_last_error_message();

  c = psa::Config{};
  c.block_m = 96;
  EXPECT_EQ(psa::validate_config(c, ""), PSA_ERR_INVALID_CONFIG);
  EXPECT_TRUE(message_has("block_size.m = 96: allowed 64, 128")) << psa_last_error_message();

  c = psa::Config{};
  c.sample_divisor = 3;
  EXPECT_EQ(psa::validate_config(c, ""), PSA_ERR_INVALID_CONFIG);
  EXPECT_TRUE(message_has("sample_divisor = 3: allowed 1, 2, 4, 8, 16"))
      << psa_last_error_message();

  c = psa::Config{};
  c.method = PSA_METHOD_RF_V2;
  c.block_n = 128;
  c.sparsity = 1.0;
  EXPECT_EQ(psa::validate_config(c, ""), PSA_ERR_INVALID_CONFIG);
  EXPECT_TRUE(message_has("sparsity = 1: allowed [0, 1)")) << psa_last_error_message();

  c.sparsity = 0.5;
  c.cdf_threshold = 0.0;
  EXPECT_EQ(psa::validate_config(c, ""), PSA_ERR_INVALID_CONFIG);
  EXPECT_TRUE(message_has("cdf_threshold = 0: allowed (0, 1]")) << psa_last_error_message();

  c = psa::Config{};
  c.warmup_steps = -1;
  EXPECT_EQ(psa::validate_config(c, ""), PSA_ERR_INVALID_CONFIG);
  EXPECT_TRUE(message_has("warmup_steps = -1")) << psa_last_error_message();
}

TEST(ConfigValidateDirect, DefaultConfigIsValid) {
  EXPECT_EQ(psa::validate_config(psa::Config{}, ""), PSA_OK);
}

}  // namespace

// tests/config/params_test.cpp -- configuration stage, parameter table through the C API: every
// psa_param round-trips through set/get, is rejected out of bounds with a message naming it, and
// its name round-trips through psa_param_from_name.
#include <gtest/gtest.h>

#include <cctype>
#include <cmath>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include "psa.h"

namespace {

struct Info {
  const char* name = nullptr;
  psa_param_type type = PSA_PARAM_TYPE_INT;
  double lower = 0, upper = 0;
};

Info info(psa_param p) {
  Info i;
  EXPECT_EQ(psa_param_info(p, &i.name, &i.type, &i.lower, &i.upper), PSA_OK)
      << psa_last_error_message();
  return i;
}

bool message_has(const std::string& s) {
  return std::string(psa_last_error_message()).find(s) != std::string::npos;
}

class ConfigParam : public testing::TestWithParam<int> {
 protected:
  void SetUp() override { ASSERT_EQ(psa_config_create(&cfg_), PSA_OK); }
  void TearDown() override { psa_config_destroy(cfg_); }
  psa_param id() const { return static_cast<psa_param>(GetParam()); }
  psa_config* cfg_ = nullptr;
};

TEST_P(ConfigParam, RoundTripsAtBothBounds) {
  const Info i = info(id());
  ASSERT_NE(i.name, nullptr);
  ASSERT_LE(i.lower, i.upper);
  if (i.type == PSA_PARAM_TYPE_INT) {
    // Bounds above 2^62 (the seed) are not exactly representable; use the int64 maximum.
    const int64_t lo = static_cast<int64_t>(i.lower);
    const int64_t hi =
        i.upper >= 0x1p62 ? std::numeric_limits<int64_t>::max() : static_cast<int64_t>(i.upper);
    for (int64_t v : {lo, hi}) {
      ASSERT_EQ(psa_config_set_int(cfg_, id(), v), PSA_OK)
          << i.name << " = " << v << ": " << psa_last_error_message();
      int64_t got = -7;
      ASSERT_EQ(psa_config_get_int(cfg_, id(), &got), PSA_OK);
      EXPECT_EQ(got, v) << i.name;
    }
  } else {
    for (double v : {i.lower, i.upper, 0.5 * i.lower + 0.5 * i.upper}) {
      ASSERT_EQ(psa_config_set_double(cfg_, id(), v), PSA_OK)
          << i.name << " = " << v << ": " << psa_last_error_message();
      double got = -7;
      ASSERT_EQ(psa_config_get_double(cfg_, id(), &got), PSA_OK);
      EXPECT_EQ(got, v) << i.name;
    }
  }
}

TEST_P(ConfigParam, RejectsOutOfBoundsNamingTheParam) {
  const Info i = info(id());
  if (i.type == PSA_PARAM_TYPE_INT) {
    int64_t before = 0;
    ASSERT_EQ(psa_config_get_int(cfg_, id(), &before), PSA_OK);
    std::vector<int64_t> bad = {static_cast<int64_t>(i.lower) - 1};
    if (i.upper < 0x1p62) bad.push_back(static_cast<int64_t>(i.upper) + 1);
    for (int64_t v : bad) {
      EXPECT_EQ(psa_config_set_int(cfg_, id(), v), PSA_ERR_INVALID_ARGUMENT)
          << i.name << " = " << v;
      EXPECT_TRUE(message_has(std::string(i.name) + " = " + std::to_string(v) + ": allowed "))
          << psa_last_error_message();
      int64_t after = 0;
      ASSERT_EQ(psa_config_get_int(cfg_, id(), &after), PSA_OK);
      EXPECT_EQ(after, before) << "a rejected set must not change the config";
    }
  } else {
    const double inf = std::numeric_limits<double>::infinity();
    for (double v : {std::nextafter(i.lower, -inf), std::nextafter(i.upper, inf),
                     std::numeric_limits<double>::quiet_NaN()}) {
      EXPECT_EQ(psa_config_set_double(cfg_, id(), v), PSA_ERR_INVALID_ARGUMENT)
          << i.name << " = " << v;
      EXPECT_TRUE(message_has(std::string(i.name) + " = ")) << psa_last_error_message();
      EXPECT_TRUE(message_has(": allowed ")) << psa_last_error_message();
    }
  }
}

TEST_P(ConfigParam, WrongTypeCallIsInvalidArgumentNamingTheType) {
  const Info i = info(id());
  const std::string name = i.name;
  if (i.type == PSA_PARAM_TYPE_INT) {
    double v = 42.0;
    EXPECT_EQ(psa_config_set_double(cfg_, id(), 1.0), PSA_ERR_INVALID_ARGUMENT);
    EXPECT_TRUE(message_has(name + " is of type int")) << psa_last_error_message();
    EXPECT_EQ(psa_config_get_double(cfg_, id(), &v), PSA_ERR_INVALID_ARGUMENT);
    EXPECT_TRUE(message_has("psa_config_get_int")) << psa_last_error_message();
    EXPECT_EQ(v, 42.0);
  } else {
    int64_t v = 42;
    EXPECT_EQ(psa_config_set_int(cfg_, id(), 1), PSA_ERR_INVALID_ARGUMENT);
    EXPECT_TRUE(message_has(name + " is of type double")) << psa_last_error_message();
    EXPECT_EQ(psa_config_get_int(cfg_, id(), &v), PSA_ERR_INVALID_ARGUMENT);
    EXPECT_TRUE(message_has("psa_config_get_double")) << psa_last_error_message();
    EXPECT_EQ(v, 42);
  }
}

TEST_P(ConfigParam, NameRoundTrips) {
  const Info i = info(id());
  psa_param back = PSA_PARAM_COUNT_;
  ASSERT_EQ(psa_param_from_name(i.name, &back), PSA_OK) << i.name;
  EXPECT_EQ(back, id());
}

INSTANTIATE_TEST_SUITE_P(AllParams, ConfigParam,
                         testing::Range(0, static_cast<int>(PSA_PARAM_COUNT_)),
                         [](const testing::TestParamInfo<int>& p) {
                           const char* name = nullptr;
                           psa_param_info(static_cast<psa_param>(p.param), &name, nullptr, nullptr,
                                          nullptr);
                           std::string s = name ? name : "unknown";
                           for (char& c : s)
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           return s;
                         });

TEST(ConfigParamTable, NamesAreUniqueAndYamlStyle) {
  std::set<std::string> names;
  for (int p = 0; p < PSA_PARAM_COUNT_; ++p) names.insert(info(static_cast<psa_param>(p)).name);
  EXPECT_EQ(names.size(), static_cast<size_t>(PSA_PARAM_COUNT_));
  const std::pair<psa_param, const char*> expect[] = {
      {PSA_PARAM_METHOD, "type"},
      {PSA_PARAM_BLOCK_N, "block_size.n"},
      {PSA_PARAM_TILE_N, "block_size.tile_n"},
      {PSA_PARAM_MASK_FORMAT, "attn_impl"},
      {PSA_PARAM_RATIO_L1, "mask_ratios.1"},
      {PSA_PARAM_RATIO_L0, "mask_ratios.0"},
      {PSA_PARAM_SIM_THRESHOLD_X2, "sim_thresholds.x2"},
      {PSA_PARAM_STA_TILE_T, "tile_size.t"},
      {PSA_PARAM_WIDTH_DIVISOR, "video_scale.width_divisor"},
      {PSA_PARAM_MIN_FULL_RATIO, "min_full_attn_ratio"},
  };
  for (const auto& e : expect) EXPECT_STREQ(info(e.first).name, e.second);
}

TEST(ConfigParamTable, BoundsOfSetsEnumsAndOpenIntervals) {
  EXPECT_EQ(info(PSA_PARAM_BLOCK_N).lower, 32);
  EXPECT_EQ(info(PSA_PARAM_BLOCK_N).upper, 128);
  EXPECT_EQ(info(PSA_PARAM_METHOD).upper, PSA_METHOD_PSA_CAUSAL);
  EXPECT_EQ(info(PSA_PARAM_USE_SIM_MASK).upper, 1);
  EXPECT_EQ(info(PSA_PARAM_SPARSITY).lower, 0.0);
  EXPECT_LT(info(PSA_PARAM_SPARSITY).upper, 1.0);       // [0, 1): 1 is not allowed
  EXPECT_GT(info(PSA_PARAM_CDF_THRESHOLD).lower, 0.0);  // (0, 1]
  EXPECT_EQ(info(PSA_PARAM_CDF_THRESHOLD).upper, 1.0);
  EXPECT_EQ(info(PSA_PARAM_SIM_THRESHOLD_X8).lower, -1.0);
}

TEST(ConfigParamTable, SetMembershipIsChecked) {
  psa_config* c = nullptr;
  ASSERT_EQ(psa_config_create(&c), PSA_OK);
  EXPECT_EQ(psa_config_set_int(c, PSA_PARAM_BLOCK_N, 48), PSA_ERR_INVALID_ARGUMENT);
  EXPECT_STREQ(psa_last_error_message(), "block_size.n = 48: allowed 32, 64, 128");
  EXPECT_EQ(psa_config_set_int(c, PSA_PARAM_TILE_N, 24), PSA_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(message_has("block_size.tile_n = 24: allowed 16, 32, 64, 128"));
  EXPECT_EQ(psa_config_set_int(c, PSA_PARAM_SAMPLE_DIVISOR, 3), PSA_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(message_has("sample_divisor = 3: allowed 1, 2, 4, 8, 16"));
  EXPECT_EQ(psa_config_set_int(c, PSA_PARAM_MASK_MODE, 3), PSA_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(message_has("mask_mode = 3: allowed 0 (topk), 1 (thresholdbound), 2 (energybound)"));
  EXPECT_EQ(psa_config_set_int(c, PSA_PARAM_CAUSAL, 2), PSA_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(message_has("causal = 2"));
  EXPECT_EQ(psa_config_set_double(c, PSA_PARAM_SPARSITY, 1.0), PSA_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(message_has("sparsity = 1: allowed [0, 1)"));
  EXPECT_EQ(psa_config_set_double(c, PSA_PARAM_CDF_THRESHOLD, 0.0), PSA_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(message_has("cdf_threshold = 0: allowed (0, 1]"));
  EXPECT_EQ(psa_config_set_int(c, PSA_PARAM_BLOCK_N, 32), PSA_OK);
  EXPECT_STREQ(psa_last_error_message(), "");
  psa_config_destroy(c);
}

TEST(ConfigParamTable, UnknownIdsAndNames) {
  psa_config* c = nullptr;
  ASSERT_EQ(psa_config_create(&c), PSA_OK);
  // C callers may pass any int; C++ can only form values inside the enum's range (0..63).
  for (int bad : {static_cast<int>(PSA_PARAM_COUNT_), 63}) {
    const auto p = static_cast<psa_param>(bad);
    int64_t iv = 0;
    double dv = 0;
    EXPECT_EQ(psa_param_info(p, nullptr, nullptr, nullptr, nullptr), PSA_ERR_INVALID_ARGUMENT);
    EXPECT_TRUE(message_has("param = " + std::to_string(bad))) << psa_last_error_message();
    EXPECT_EQ(psa_config_set_int(c, p, 1), PSA_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(psa_config_set_double(c, p, 1), PSA_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(psa_config_get_int(c, p, &iv), PSA_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(psa_config_get_double(c, p, &dv), PSA_ERR_INVALID_ARGUMENT);
  }
  psa_param p = PSA_PARAM_SEED;
  EXPECT_EQ(psa_param_from_name("block_size.k", &p), PSA_ERR_NOT_FOUND);
  EXPECT_TRUE(message_has("name = block_size.k"));
  EXPECT_TRUE(message_has("block_size.n"));
  EXPECT_EQ(p, PSA_PARAM_SEED);
  EXPECT_EQ(psa_param_from_name("", &p), PSA_ERR_NOT_FOUND);
  psa_config_destroy(c);
}

}  // namespace

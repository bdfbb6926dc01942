// tests/api/param_words_test.cpp -- psa_param_value_name / psa_param_value_from_name: every enum
// parameter's words round-trip (any ASCII case), their number is the parameter's range, and
// non-enum parameters, unknown words, bad ids and NULL arguments are refused with a message
// naming them; nothing is written on an error.
#include <gtest/gtest.h>

#include <cctype>
#include <string>

#include "psa.h"

namespace {

TEST(ParamWords, EveryEnumParameterRoundTrips) {
  const psa_param enums[] = {PSA_PARAM_METHOD,           PSA_PARAM_MASK_MODE, PSA_PARAM_MASK_FORMAT,
                             PSA_PARAM_REARRANGE_METHOD, PSA_PARAM_TEXT_RULE, PSA_PARAM_PRECISION};
  for (psa_param p : enums) {
    double lower = -1, upper = -1;
    ASSERT_EQ(PSA_OK, psa_param_info(p, nullptr, nullptr, &lower, &upper));
    int64_t count = 0;
    for (; psa_param_value_name(p, count) != nullptr; ++count) {
      const std::string word = psa_param_value_name(p, count);
      EXPECT_FALSE(word.empty());
      int64_t value = -1;
      ASSERT_EQ(PSA_OK, psa_param_value_from_name(p, word.c_str(), &value)) << psa_last_error_message();
      EXPECT_EQ(count, value) << word;
      std::string upper_word = word;
      for (char& c : upper_word) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
      value = -1;
      ASSERT_EQ(PSA_OK, psa_param_value_from_name(p, upper_word.c_str(), &value)) << upper_word;
      EXPECT_EQ(count, value) << upper_word;
    }
    EXPECT_EQ(0.0, lower) << "param " << p;
    EXPECT_EQ(upper + 1, static_cast<double>(count)) << "param " << p << ": one word per value";
    EXPECT_EQ(nullptr, psa_param_value_name(p, -1));
  }
  EXPECT_STREQ("fp8", psa_param_value_name(PSA_PARAM_PRECISION, PSA_PRECISION_FP8));
  EXPECT_STREQ("Gilbert", psa_param_value_name(PSA_PARAM_REARRANGE_METHOD, PSA_REARRANGE_GILBERT));
  EXPECT_STREQ("rf_v2", psa_param_value_name(PSA_PARAM_METHOD, PSA_METHOD_RF_V2));
}

TEST(ParamWords, RefusalsNameTheArgumentAndWriteNothing) {
  int64_t value = 77;
  // An unknown word: the message names the parameter, the word and every allowed word.
  EXPECT_EQ(PSA_ERR_NOT_FOUND, psa_param_value_from_name(PSA_PARAM_PRECISION, "int4", &value));
  const std::string msg = psa_last_error_message();
  for (const char* part : {"precision", "int4", "default", "fp8"})
    EXPECT_NE(std::string::npos, msg.find(part)) << msg;
  EXPECT_EQ(77, value);
  // Prefixes and longer words are not the word.
  EXPECT_EQ(PSA_ERR_NOT_FOUND, psa_param_value_from_name(PSA_PARAM_MASK_MODE, "top", &value));
  EXPECT_EQ(PSA_ERR_NOT_FOUND, psa_param_value_from_name(PSA_PARAM_MASK_MODE, "topkk", &value));
  EXPECT_EQ(PSA_ERR_NOT_FOUND, psa_param_value_from_name(PSA_PARAM_MASK_MODE, "", &value));
  EXPECT_EQ(77, value);
  // A parameter without words, or no parameter at all.
  EXPECT_EQ(nullptr, psa_param_value_name(PSA_PARAM_BLOCK_N, 0));
  EXPECT_EQ(PSA_ERR_INVALID_ARGUMENT, psa_param_value_from_name(PSA_PARAM_BLOCK_N, "64", &value));
  EXPECT_NE(std::string::npos, std::string(psa_last_error_message()).find("param = 2")) << psa_last_error_message();
  EXPECT_EQ(nullptr, psa_param_value_name(static_cast<psa_param>(-1), 0));
  EXPECT_EQ(nullptr, psa_param_value_name(PSA_PARAM_COUNT_, 0));
  EXPECT_EQ(PSA_ERR_INVALID_ARGUMENT, psa_param_value_from_name(PSA_PARAM_COUNT_, "fp8", &value));
  EXPECT_EQ(PSA_ERR_NULL_POINTER, psa_param_value_from_name(PSA_PARAM_PRECISION, nullptr, &value));
  EXPECT_EQ(PSA_ERR_NULL_POINTER, psa_param_value_from_name(PSA_PARAM_PRECISION, "fp8", nullptr));
  EXPECT_EQ(77, value);
}

}  // namespace

// tests/robustness/fuzz_regressions_test.cpp -- the fuzzers' findings as ordinary tests, so
// every build (no clang needed) keeps them fixed: the checked-in YAML corpus replayed through
// the config API with the fuzzer's promises, and one case per input that once crashed or broke
// an invariant (tests/fuzz/corpus/*/regression-*).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "robustness/robust_env.h"

namespace psa_robust {
namespace {

namespace fs = std::filesystem;

std::string read_file(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

std::vector<fs::path> corpus(const char* kind) {
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(fs::path(PSA_SOURCE_DIR) / "tests/fuzz/corpus" / kind))
    if (e.is_regular_file()) files.push_back(e.path());
  std::sort(files.begin(), files.end());
  return files;
}

// Every file either opens as a catalog whose presets all load by name (with equal values), or
// fails with a documented, non-internal status and a message.
TEST(FuzzCorpus, YamlFilesLoadOrFailCleanly) {
  const std::vector<fs::path> files = corpus("yaml");
  ASSERT_GE(files.size(), 10u);
  int opened = 0;
  for (const fs::path& path : files) {
    SCOPED_TRACE(path.filename().string());
    const std::string text = read_file(path);
    psa_catalog* cat = nullptr;
    const psa_status st = psa_catalog_open_string(text.c_str(), &cat);
    if (st != PSA_OK) {
      EXPECT_TRUE(st == PSA_ERR_YAML_PARSE || st == PSA_ERR_INVALID_CONFIG) << psa_status_name(st);
      EXPECT_STRNE(psa_last_error_message(), "");
      EXPECT_EQ(cat, nullptr);
      continue;
    }
    ++opened;
    for (int32_t m = 0; m < psa_catalog_model_count(cat); ++m) {
      const char* model = psa_catalog_model_name(cat, m);
      for (int32_t p = 0; p < psa_catalog_preset_count(cat, model); ++p) {
        const char* preset = psa_catalog_preset_name(cat, model, p);
        psa_config* a = nullptr;
        psa_config* b = nullptr;
        ASSERT_EQ(psa_catalog_get_config(cat, model, preset, &a), PSA_OK);
        ASSERT_EQ(psa_config_load_string(text.c_str(), model, preset, &b), PSA_OK) << psa_last_error_message();
        EXPECT_TRUE(ConfigSnapshot(a) == ConfigSnapshot(b)) << model << "/" << preset;
        EXPECT_EQ(psa_config_validate(a), PSA_OK);
        psa_config_destroy(a);
        psa_config_destroy(b);
      }
    }
    psa_catalog_destroy(cat);
  }
  EXPECT_GE(opened, 5);
}

// The shipped file is in the corpus as a seed: it must open like the embedded copy.
TEST(FuzzCorpus, ShippedConfigIsASeed) {
  const std::string seed = read_file(fs::path(PSA_SOURCE_DIR) / "tests/fuzz/corpus/yaml/attention_config.yaml");
  psa_catalog* a = nullptr;
  psa_catalog* b = nullptr;
  ASSERT_EQ(psa_catalog_open_string(seed.c_str(), &a), PSA_OK) << psa_last_error_message();
  ASSERT_EQ(psa_catalog_open(nullptr, &b), PSA_OK);
  EXPECT_EQ(psa_catalog_model_count(a), psa_catalog_model_count(b));
  psa_catalog_destroy(a);
  psa_catalog_destroy(b);
}

}  // namespace
}  // namespace psa_robust

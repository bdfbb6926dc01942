// tests/robustness/fuzz_regressions_test.cpp -- the fuzzers' findings as ordinary tests, so
// every build (no clang needed) keeps them fixed: the checked-in YAML corpus replayed through
// the config API with the fuzzer's promises, and one case per input that once crashed or broke
// an invariant (tests/fuzz/corpus/*/regression-*).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
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

// Inputs that once loaded although they should not (issue 18): each must now fail to open
// with PSA_ERR_INVALID_CONFIG and a message naming the problem.
TEST(FuzzCorpus, YamlRegressionsAreRejected) {
  const std::pair<const char*, const char*> cases[] = {
      {"regression-plus-minus-number.yaml", "mask_ratios.1[0] = +-0: expected a finite number"},
      {"regression-nul-in-model-key.yaml", "\"M\\0x\": keys must not contain NUL characters"},
      {"regression-scale-above-flt-max.yaml", "M.attention_configs.p.scale = 1e+39: allowed [0, "},
  };
  for (const auto& [name, reason] : cases) {
    SCOPED_TRACE(name);
    const fs::path path = fs::path(PSA_SOURCE_DIR) / "tests/fuzz/corpus/yaml" / name;
    ASSERT_TRUE(fs::is_regular_file(path));
    psa_catalog* cat = nullptr;
    EXPECT_EQ(psa_catalog_open(path.string().c_str(), &cat), PSA_ERR_INVALID_CONFIG);
    EXPECT_NE(std::strstr(psa_last_error_message(), reason), nullptr) << psa_last_error_message();
    EXPECT_EQ(cat, nullptr);
    psa_catalog_destroy(cat);
    psa_config* cfg = nullptr;
    EXPECT_EQ(psa_config_load_string(read_file(path).c_str(), "M", nullptr, &cfg), PSA_ERR_INVALID_CONFIG);
    EXPECT_EQ(cfg, nullptr);
    psa_config_destroy(cfg);
  }
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

// ---- Findings of fuzz_forward_cpu (inputs: tests/fuzz/corpus/forward/regression-*) ----------

// regression-desc-init-stride-overflow: psa_tensor_desc_init computed the strides (products of
// the dims) before checking that the element count fits int64: signed overflow.
TEST(FuzzRegression, DescInitWithOverflowingDimsIsAStatus) {
  psa_tensor_desc d{};
  std::memset(&d, 0x5a, sizeof d);
  const psa_tensor_desc before = d;
  for (psa_layout layout : {PSA_LAYOUT_BNSD, PSA_LAYOUT_BSND, PSA_LAYOUT_BSH}) {
    EXPECT_EQ(psa_tensor_desc_init(&d, layout, PSA_DTYPE_F16, 1, 7, int64_t{7270187370226705636}, 1),
              PSA_ERR_INVALID_SHAPE);
    EXPECT_NE(std::strstr(psa_last_error_message(), "overflows int64"), nullptr) << psa_last_error_message();
    EXPECT_EQ(psa_tensor_desc_init(&d, layout, PSA_DTYPE_F32, 2, 3, int64_t{1} << 40, int64_t{1} << 40),
              PSA_ERR_INVALID_SHAPE);
    EXPECT_EQ(std::memcmp(&d, &before, sizeof d), 0) << "a failing init must not write the descriptor";
  }
  // 2^61 elements still fit int64 (and 2^62 bytes in bf16): accepted.
  EXPECT_EQ(psa_tensor_desc_init(&d, PSA_LAYOUT_BNSD, PSA_DTYPE_BF16, 1, 1, int64_t{1} << 31, int64_t{1} << 30),
            PSA_OK)
      << psa_last_error_message();
}

// regression-video-pixels-ceil-div-overflow: ceil(frames / depth_divisor) was computed as
// (a + b - 1) / b, which overflows for pixel sizes near INT64_MAX.
TEST(FuzzRegression, VideoPixelsNearInt64MaxIsAStatus) {
  Env e;
  for (int64_t big : {std::numeric_limits<int64_t>::max(), std::numeric_limits<int64_t>::max() - 3}) {
    EXPECT_EQ(psa_context_set_video_pixels(e.ctx.get(), big, 16, 16, 0, PSA_TEXT_NONE), PSA_ERR_INVALID_SHAPE);
    EXPECT_EQ(psa_context_set_video_pixels(e.ctx.get(), 4, big, 16, -1, PSA_TEXT_NONE), PSA_ERR_INVALID_SHAPE);
  }
  // Exact division and a remainder both round up correctly.
  EXPECT_EQ(psa_context_set_video_pixels(e.ctx.get(), 5, 128, 160, 0, PSA_TEXT_NONE), PSA_OK);  // 2 x 8 x 10
  EXPECT_EQ(e.forward(), PSA_OK) << psa_last_error_message();
}

// regression-workspace-block-pairs-overflow: consistent descriptors of ~2^40 tokens planned a
// workspace whose size wrapped (Mq * Nk block pairs overflowed int64 in the CPU backend's
// carve): now a status naming the workspace, and the context keeps working.
TEST(FuzzRegression, WorkspaceOfUnaddressableShapeIsAStatus) {
  Env e;
  psa_tensor_desc q{}, k{};
  ASSERT_EQ(psa_tensor_desc_init(&q, PSA_LAYOUT_BSND, PSA_DTYPE_F16, 1, 1, (int64_t{1} << 39) + 1, 1), PSA_OK);
  ASSERT_EQ(psa_tensor_desc_init(&k, PSA_LAYOUT_BSND, PSA_DTYPE_F16, 1, 1, (int64_t{1} << 40) + 1, 1), PSA_OK);
  uint64_t bytes = 7;
  EXPECT_EQ(psa_workspace_size(e.ctx.get(), &q, &k, &k, &q, &bytes), PSA_ERR_INVALID_SHAPE);
  EXPECT_NE(std::strstr(psa_last_error_message(), "workspace"), nullptr) << psa_last_error_message();
  EXPECT_EQ(bytes, 7u);
  EXPECT_EQ(psa_check_supported(e.ctx.get(), &q, &k, &k, nullptr), PSA_ERR_INVALID_SHAPE);
  EXPECT_EQ(e.forward(), PSA_OK) << psa_last_error_message();
}

// The regression inputs themselves are checked in where fuzz.sh replays them.
TEST(FuzzRegression, ReproducersAreInTheCorpus) {
  for (const char* name : {"regression-desc-init-stride-overflow", "regression-video-pixels-ceil-div-overflow",
                           "regression-workspace-block-pairs-overflow"})
    EXPECT_TRUE(fs::is_regular_file(fs::path(PSA_SOURCE_DIR) / "tests/fuzz/corpus/forward" / name)) << name;
}

}  // namespace
}  // namespace psa_robust

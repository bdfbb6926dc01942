// tests/config/shipped_presets_test.cpp -- configuration stage, shipped data: every model and
// preset of configs/attention_config.yaml (file and embedded copy) loads, validates and carries the
// values of spec 8.1 / 9.3. Public C API only.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "psa.h"

#ifndef PSA_SOURCE_DIR
#error "PSA_SOURCE_DIR must name the source tree (the test CMake defines it)"
#endif

namespace {

const std::string kConfigPath = std::string(PSA_SOURCE_DIR) + "/configs/attention_config.yaml";

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

const std::vector<std::pair<std::string, std::vector<std::string>>> kExpectedCatalog = {
    {"Wan2.1_14b", {"baseline", "psa_balanced", "rf_v2_080", "ada_bsa_cdf"}},
    {"Wan2.1_1.3b", {"baseline", "psa_balanced", "psa_topk", "rf_v2_080", "ada_bsa_cdf"}},
    {"Wan2.2_A14B", {"baseline", "psa_balanced", "rf_v2_080", "ada_bsa_cdf"}},
    {"Wan2.2_5B", {"baseline", "psa_balanced", "rf_v2_080", "ada_bsa_cdf"}},
    {"CogVideo1.5_5b", {"baseline", "psa_balanced", "rf_v2_080", "ada_bsa_cdf"}},
    {"CogVideo_5b", {"baseline", "psa_balanced", "psa_4steps", "rf_v2_080", "ada_bsa_cdf"}},
    {"Qwen2.5-VL-7B", {"baseline", "psa_balanced", "psa_topk"}},
    {"Qwen2-VL-7B", {"baseline", "psa_balanced", "psa_topk"}},
};

int64_t get_int(const psa_config* c, psa_param p) {
  int64_t v = -12345;
  EXPECT_EQ(psa_config_get_int(c, p, &v), PSA_OK) << psa_last_error_message();
  return v;
}

double get_double(const psa_config* c, psa_param p) {
  double v = -12345.0;
  EXPECT_EQ(psa_config_get_double(c, p, &v), PSA_OK) << psa_last_error_message();
  return v;
}

// True when every parameter of a and b is equal.
bool same_params(const psa_config* a, const psa_config* b) {
  for (int i = 0; i < PSA_PARAM_COUNT_; ++i) {
    const auto p = static_cast<psa_param>(i);
    psa_param_type t;
    psa_param_info(p, nullptr, &t, nullptr, nullptr);
    if (t == PSA_PARAM_TYPE_INT ? get_int(a, p) != get_int(b, p)
                                : get_double(a, p) != get_double(b, p))
      return false;
  }
  return true;
}

void check_catalog(psa_catalog* cat) {
  ASSERT_EQ(psa_catalog_model_count(cat), static_cast<int32_t>(kExpectedCatalog.size()));
  for (size_t i = 0; i < kExpectedCatalog.size(); ++i) {
    const auto& [model, presets] = kExpectedCatalog[i];
    ASSERT_STREQ(psa_catalog_model_name(cat, static_cast<int32_t>(i)), model.c_str());
    ASSERT_EQ(psa_catalog_preset_count(cat, model.c_str()), static_cast<int32_t>(presets.size()))
        << model;
    for (size_t j = 0; j < presets.size(); ++j)
      EXPECT_STREQ(psa_catalog_preset_name(cat, model.c_str(), static_cast<int32_t>(j)),
                   presets[j].c_str());
    EXPECT_STREQ(psa_catalog_default_preset(cat, model.c_str()), "psa_balanced");
  }
  EXPECT_EQ(psa_catalog_model_name(cat, static_cast<int32_t>(kExpectedCatalog.size())), nullptr);
  EXPECT_EQ(psa_catalog_preset_count(cat, "Wan3"), -1);
  EXPECT_EQ(psa_catalog_default_preset(cat, "Wan3"), nullptr);
}

TEST(ConfigShipped, FileCatalogListsExactlyTheEightModels) {
  psa_catalog* cat = nullptr;
  ASSERT_EQ(psa_catalog_open(kConfigPath.c_str(), &cat), PSA_OK) << psa_last_error_message();
  check_catalog(cat);
  psa_catalog_destroy(cat);
}

TEST(ConfigShipped, EmbeddedCatalogListsExactlyTheEightModels) {
  psa_catalog* cat = nullptr;
  ASSERT_EQ(psa_catalog_open(nullptr, &cat), PSA_OK) << psa_last_error_message();
  check_catalog(cat);
  psa_catalog_destroy(cat);
}

TEST(ConfigShipped, EmbeddedCopyMatchesTheFile) {
  // A mismatch means the build embedded a stale copy (re-run CMake configure).
  EXPECT_EQ(std::string(psa_embedded_config_yaml()), read_file(kConfigPath));
}

TEST(ConfigShipped, EveryPresetLoadsAndValidatesFromFileStringAndEmbedded) {
  const std::string text = read_file(kConfigPath);
  psa_catalog* cat = nullptr;
  ASSERT_EQ(psa_catalog_open(kConfigPath.c_str(), &cat), PSA_OK) << psa_last_error_message();
  int loaded = 0;
  for (const auto& [model, presets] : kExpectedCatalog) {
    for (const std::string& preset : presets) {
      SCOPED_TRACE(model + "/" + preset);
      psa_config* f = nullptr;
      psa_config* s = nullptr;
      psa_config* e = nullptr;
      psa_config* c = nullptr;
      ASSERT_EQ(psa_config_load_file(kConfigPath.c_str(), model.c_str(), preset.c_str(), &f),
                PSA_OK)
          << psa_last_error_message();
      ASSERT_EQ(psa_config_load_string(text.c_str(), model.c_str(), preset.c_str(), &s), PSA_OK)
          << psa_last_error_message();
      ASSERT_EQ(psa_config_load_embedded(model.c_str(), preset.c_str(), &e), PSA_OK)
          << psa_last_error_message();
      ASSERT_EQ(psa_catalog_get_config(cat, model.c_str(), preset.c_str(), &c), PSA_OK)
          << psa_last_error_message();
      EXPECT_EQ(psa_config_validate(f), PSA_OK) << psa_last_error_message();
      EXPECT_EQ(psa_config_validate(e), PSA_OK) << psa_last_error_message();
      EXPECT_TRUE(same_params(f, s));
      EXPECT_TRUE(same_params(f, e));
      EXPECT_TRUE(same_params(f, c));
      psa_config_destroy(f);
      psa_config_destroy(s);
      psa_config_destroy(e);
      psa_config_destroy(c);
      ++loaded;
    }
  }
  EXPECT_EQ(loaded, 32);
  psa_catalog_destroy(cat);
}

TEST(ConfigShipped, NullPresetSelectsDefaultAttention) {
  for (const auto& entry : kExpectedCatalog) {
    const std::string& model = entry.first;
    psa_config* def = nullptr;
    psa_config* bal = nullptr;
    ASSERT_EQ(psa_config_load_embedded(model.c_str(), nullptr, &def), PSA_OK)
        << psa_last_error_message();
    ASSERT_EQ(psa_config_load_embedded(model.c_str(), "psa_balanced", &bal), PSA_OK);
    EXPECT_TRUE(same_params(def, bal)) << model;
    psa_config_destroy(def);
    psa_config_destroy(bal);
  }
  psa_config* def = nullptr;
  psa_config* topk = nullptr;
  ASSERT_EQ(psa_config_load_file(kConfigPath.c_str(), "Wan2.1_1.3b", nullptr, &def), PSA_OK);
  ASSERT_EQ(psa_config_load_file(kConfigPath.c_str(), "Wan2.1_1.3b", "psa_topk", &topk), PSA_OK);
  EXPECT_FALSE(same_params(def, topk));
  psa_config_destroy(def);
  psa_config_destroy(topk);
}

struct ModelGeometry {
  const char* model;
  int64_t width, height, depth, text_length;
};

TEST(ConfigShipped, ModelGeometryMatchesSpec81) {
  const ModelGeometry rows[] = {{"CogVideo_5b", 16, 16, 4, 226}, {"CogVideo1.5_5b", 16, 16, 8, 226},
                                {"Wan2.1_1.3b", 16, 16, 4, 0},   {"Wan2.1_14b", 16, 16, 4, 0},
                                {"Wan2.2_5B", 32, 32, 4, 0},     {"Wan2.2_A14B", 16, 16, 4, 0}};
  for (const ModelGeometry& r : rows) {
    for (const char* preset : {"baseline", "psa_balanced", "rf_v2_080", "ada_bsa_cdf"}) {
      SCOPED_TRACE(std::string(r.model) + "/" + preset);
      psa_config* c = nullptr;
      ASSERT_EQ(psa_config_load_embedded(r.model, preset, &c), PSA_OK) << psa_last_error_message();
      EXPECT_EQ(get_int(c, PSA_PARAM_WIDTH_DIVISOR), r.width);
      EXPECT_EQ(get_int(c, PSA_PARAM_HEIGHT_DIVISOR), r.height);
      EXPECT_EQ(get_int(c, PSA_PARAM_DEPTH_DIVISOR), r.depth);
      EXPECT_EQ(get_int(c, PSA_PARAM_TEXT_LENGTH), r.text_length);
      psa_config_destroy(c);
    }
  }
}

struct ShippedPsa {
  const char* model;
  const char* preset;
  psa_mask_format format;
  int64_t block_n;
  psa_mask_mode mode;
  double ends[5];  // levels 1, 2, 4, 8, 0
  int64_t sim, rearrange, warmup;
  double x8;
};

TEST(ConfigShipped, PsaPresetsMatchSpec93Table) {
  const ShippedPsa rows[] = {
      {"Wan2.1_14b",
       "psa_balanced",
       PSA_MASK_FORMAT_SEGMENTS,
       128,
       PSA_MASK_MODE_THRESHOLDBOUND,
       {.4, .5, .6, .8, 1},
       0,
       1,
       15,
       0.6},
      {"Wan2.1_1.3b",
       "psa_balanced",
       PSA_MASK_FORMAT_LEVELS,
       128,
       PSA_MASK_MODE_THRESHOLDBOUND,
       {.5, .6, .7, .8, 1},
       1,
       1,
       15,
       0.6},
      {"Wan2.1_1.3b",
       "psa_topk",
       PSA_MASK_FORMAT_SEGMENTS,
       32,
       PSA_MASK_MODE_TOPK,
       {.05, .1, .15, .25, 1},
       0,
       1,
       15,
       0.65},
      {"Wan2.2_A14B",
       "psa_balanced",
       PSA_MASK_FORMAT_SEGMENTS,
       32,
       PSA_MASK_MODE_THRESHOLDBOUND,
       {.5, .6, .6, .8, 1},
       0,
       1,
       12,
       0.6},
      {"Wan2.2_5B",
       "psa_balanced",
       PSA_MASK_FORMAT_SEGMENTS,
       32,
       PSA_MASK_MODE_THRESHOLDBOUND,
       {.6, .7, .7, .8, 1},
       0,
       1,
       15,
       0.6},
      {"CogVideo1.5_5b",
       "psa_balanced",
       PSA_MASK_FORMAT_SEGMENTS,
       32,
       PSA_MASK_MODE_TOPK,
       {.1, .15, .15, .35, 1},
       0,
       1,
       15,
       0.6},
      {"CogVideo_5b",
       "psa_balanced",
       PSA_MASK_FORMAT_SEGMENTS,
       128,
       PSA_MASK_MODE_TOPK,
       {.1, .15, .15, .35, 1},
       0,
       0,
       15,
       0.6},
      {"CogVideo_5b",
       "psa_4steps",
       PSA_MASK_FORMAT_LEVELS,
       128,
       PSA_MASK_MODE_TOPK,
       {.05, .15, .25, .5, 1},
       0,
       0,
       0,
       0.6},
  };
  const psa_param ratio_ids[5] = {PSA_PARAM_RATIO_L1, PSA_PARAM_RATIO_L2, PSA_PARAM_RATIO_L4,
                                  PSA_PARAM_RATIO_L8, PSA_PARAM_RATIO_L0};
  for (const ShippedPsa& r : rows) {
    SCOPED_TRACE(std::string(r.model) + "/" + r.preset);
    psa_config* c = nullptr;
    ASSERT_EQ(psa_config_load_file(kConfigPath.c_str(), r.model, r.preset, &c), PSA_OK)
        << psa_last_error_message();
    EXPECT_EQ(get_int(c, PSA_PARAM_METHOD), PSA_METHOD_PSA);
    EXPECT_EQ(get_int(c, PSA_PARAM_MASK_FORMAT), r.format);
    EXPECT_EQ(get_int(c, PSA_PARAM_BLOCK_M), 128);
    EXPECT_EQ(get_int(c, PSA_PARAM_BLOCK_N), r.block_n);
    EXPECT_EQ(get_int(c, PSA_PARAM_TILE_N), 32);
    EXPECT_EQ(get_int(c, PSA_PARAM_MASK_MODE), r.mode);
    for (int s = 0; s < 5; ++s)
      EXPECT_DOUBLE_EQ(get_double(c, ratio_ids[s]), r.ends[s]) << "slot " << s;
    EXPECT_EQ(get_int(c, PSA_PARAM_USE_SIM_MASK), r.sim);
    EXPECT_EQ(get_int(c, PSA_PARAM_USE_REARRANGE), r.rearrange);
    EXPECT_EQ(get_int(c, PSA_PARAM_REARRANGE_METHOD), PSA_REARRANGE_GILBERT);
    EXPECT_EQ(get_int(c, PSA_PARAM_WARMUP_STEPS), r.warmup);
    EXPECT_EQ(get_int(c, PSA_PARAM_STA_TILE_T), 2);
    EXPECT_EQ(get_int(c, PSA_PARAM_STA_TILE_H), 8);
    EXPECT_EQ(get_int(c, PSA_PARAM_STA_TILE_W), 8);
    EXPECT_DOUBLE_EQ(get_double(c, PSA_PARAM_SIM_THRESHOLD_X2), 0.7);
    EXPECT_DOUBLE_EQ(get_double(c, PSA_PARAM_SIM_THRESHOLD_X4), 0.65);
    EXPECT_DOUBLE_EQ(get_double(c, PSA_PARAM_SIM_THRESHOLD_X8), r.x8);
    psa_config_destroy(c);
  }
}

TEST(ConfigShipped, BaselineAndBlockSparsePresets) {
  for (const auto& entry : kExpectedCatalog) {
    const char* model = entry.first.c_str();
    SCOPED_TRACE(model);
    psa_config* c = nullptr;
    ASSERT_EQ(psa_config_load_embedded(model, "baseline", &c), PSA_OK);
    EXPECT_EQ(get_int(c, PSA_PARAM_METHOD), PSA_METHOD_DENSE);
    psa_config_destroy(c);
    if (entry.first.rfind("Qwen", 0) == 0) continue;  // vision-language: psa_causal presets

    ASSERT_EQ(psa_config_load_embedded(model, "rf_v2_080", &c), PSA_OK);
    EXPECT_EQ(get_int(c, PSA_PARAM_METHOD), PSA_METHOD_RF_V2);
    EXPECT_DOUBLE_EQ(get_double(c, PSA_PARAM_SPARSITY), 0.8);
    EXPECT_EQ(get_int(c, PSA_PARAM_BLOCK_M), 128);
    EXPECT_EQ(get_int(c, PSA_PARAM_BLOCK_N), 128);
    psa_config_destroy(c);

    ASSERT_EQ(psa_config_load_embedded(model, "ada_bsa_cdf", &c), PSA_OK);
    EXPECT_EQ(get_int(c, PSA_PARAM_METHOD), PSA_METHOD_ADA_BSA);
    EXPECT_DOUBLE_EQ(get_double(c, PSA_PARAM_CDF_THRESHOLD), 0.9);
    EXPECT_DOUBLE_EQ(get_double(c, PSA_PARAM_SPARSITY), 0.5);
    EXPECT_EQ(get_int(c, PSA_PARAM_KEEP_SINK), 1);
    EXPECT_EQ(get_int(c, PSA_PARAM_KEEP_RECENT), 1);
    psa_config_destroy(c);
  }
}

TEST(ConfigShipped, UserFileWithOneModelLoads) {
  const std::string path = testing::TempDir() + "psa_one_model.yaml";
  {
    std::ofstream out(path);
    out << "MyModel:\n"
           "  default_attention: fast\n"
           "  video_scale:\n"
           "    width_divisor: 16\n"
           "    height_divisor: 16\n"
           "    depth_divisor: 4\n"
           "  attention_configs:\n"
           "    dense:\n"
           "      type: dense\n"
           "    fast:\n"
           "      type: psa\n"
           "      use_sim_mask: false\n"
           "      block_size: {m: 128, n: 64, tile_n: 32}\n"
           "      mask_ratios:\n"
           "        1: [0.0, 0.1]\n"
           "        2: [0.1, 0.2]\n"
           "        4: [0.2, 0.3]\n"
           "        8: [0.3, 0.4]\n"
           "        0: [0.4, 1.0]\n"
           "      mask_mode: topk\n"
           "      attn_impl: new_mask_type\n";
  }
  psa_config* c = nullptr;
  ASSERT_EQ(psa_config_load_file(path.c_str(), "MyModel", nullptr, &c), PSA_OK)
      << psa_last_error_message();
  EXPECT_EQ(get_int(c, PSA_PARAM_BLOCK_N), 64);
  EXPECT_DOUBLE_EQ(get_double(c, PSA_PARAM_RATIO_L8), 0.4);
  psa_config_destroy(c);
  ASSERT_EQ(psa_config_load_file(path.c_str(), "MyModel", "dense", &c), PSA_OK)
      << psa_last_error_message();
  EXPECT_EQ(get_int(c, PSA_PARAM_METHOD), PSA_METHOD_DENSE);
  psa_config_destroy(c);

  psa_catalog* cat = nullptr;
  ASSERT_EQ(psa_catalog_open(path.c_str(), &cat), PSA_OK) << psa_last_error_message();
  EXPECT_EQ(psa_catalog_model_count(cat), 1);
  EXPECT_STREQ(psa_catalog_default_preset(cat, "MyModel"), "fast");
  psa_catalog_destroy(cat);

  EXPECT_EQ(psa_config_load_file(path.c_str(), "Wan2.1_14b", nullptr, &c), PSA_ERR_NOT_FOUND);
  EXPECT_NE(std::string(psa_last_error_message()).find("available: MyModel"), std::string::npos);
  std::remove(path.c_str());
}

TEST(ConfigShipped, UnreadableFileIsIoError) {
  const std::string missing = testing::TempDir() + "psa_no_such_file.yaml";
  psa_config* c = nullptr;
  EXPECT_EQ(psa_config_load_file(missing.c_str(), "M", nullptr, &c), PSA_ERR_IO);
  EXPECT_NE(std::string(psa_last_error_message()).find(missing), std::string::npos);
  EXPECT_EQ(c, nullptr);
  psa_catalog* cat = nullptr;
  EXPECT_EQ(psa_catalog_open(missing.c_str(), &cat), PSA_ERR_IO);
  // A directory opens but cannot be read.
  EXPECT_EQ(psa_config_load_file(PSA_SOURCE_DIR, "M", nullptr, &c), PSA_ERR_IO);
  EXPECT_NE(std::string(psa_last_error_message()).find(PSA_SOURCE_DIR), std::string::npos);
}

TEST(ConfigShipped, ParseErrorNamesTheFile) {
  const std::string path = testing::TempDir() + "psa_bad_syntax.yaml";
  {
    std::ofstream out(path);
    out << "M:\n  video_scale: [1, 2\n";
  }
  psa_config* c = nullptr;
  EXPECT_EQ(psa_config_load_file(path.c_str(), "M", nullptr, &c), PSA_ERR_YAML_PARSE);
  const std::string msg = psa_last_error_message();
  EXPECT_NE(msg.find(path + ": line "), std::string::npos) << msg;
  EXPECT_NE(msg.find("column"), std::string::npos) << msg;
  std::remove(path.c_str());
}

}  // namespace

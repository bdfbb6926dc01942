// tests/config/yaml_errors_test.cpp -- configuration stage, loader errors through the C API: each
// broken YAML gives its own status and a message with the key path, the bad value and what is
// allowed, from psa_config_load_string and from psa_catalog_open_string alike.
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "psa.h"

namespace {

// One model "M" with a dense preset "d" and a valid PSA preset "p" (the default).
const char* const kBase =
    "M:\n"
    "  default_attention: p\n"
    "  video_scale:\n"
    "    width_divisor: 16\n"
    "    height_divisor: 16\n"
    "    depth_divisor: 4\n"
    "  text_length: 0\n"
    "  attention_configs:\n"
    "    d:\n"
    "      type: dense\n"
    "    p:\n"
    "      type: psa\n"
    "      use_rearrange: true\n"
    "      use_sim_mask: false\n"
    "      block_size:\n"
    "        m: 128\n"
    "        n: 64\n"
    "        tile_n: 32\n"
    "      mask_ratios:\n"
    "        1: [0.0, 0.1]\n"
    "        2: [0.1, 0.15]\n"
    "        4: [0.15, 0.15]\n"
    "        8: [0.15, 0.35]\n"
    "        0: [0.35, 1.0]\n"
    "      mask_mode: topk\n"
    "      attn_impl: new_mask_type\n"
    "      tile_size: [2, 8, 8]\n"
    "      warmup_steps: 3\n"
    "      rearrange_method: Gilbert\n"
    "      sim_thresholds:\n"
    "        x2: 0.7\n"
    "        x4: 0.65\n"
    "        x8: 0.6\n";

using Edits = std::vector<std::pair<std::string, std::string>>;

// Applies find/replace edits to kBase in order; a "*" target replaces the whole document.
std::string edited(const Edits& edits) {
  std::string text = kBase;
  for (const auto& e : edits) {
    if (e.first == "*") {
      text = e.second;
      continue;
    }
    const size_t at = text.find(e.first);
    if (at == std::string::npos)
      ADD_FAILURE() << "edit target not in the base YAML: " << e.first;
    else
      text.replace(at, e.first.size(), e.second);
  }
  return text;
}

struct Case {
  const char* name;
  Edits edits;
  psa_status status;
  std::vector<std::string> expect;  // substrings of the message
  const char* preset = "p";
};

const std::string P = "M.attention_configs.p";

std::vector<Case> cases() {
  return {
      {"UnknownPresetKey",
       {{"      warmup_steps: 3\n", "      warmup_steps: 3\n      warmup: 4\n"}},
       PSA_ERR_INVALID_CONFIG,
       {P + ".warmup: unknown key", "allowed:", "mask_ratios", "keep_recent"}},
      {"UnknownModelKey",
       {{"  text_length: 0\n", "  text_length: 0\n  colour: red\n"}},
       PSA_ERR_INVALID_CONFIG,
       {"M.colour: unknown key", "default_attention", "video_scale"}},
      {"UnknownBlockSizeKey",
       {{"tile_n: 32", "tile: 32"}},
       PSA_ERR_INVALID_CONFIG,
       {P + ".block_size.tile: unknown key", "m, n, tile_n"}},
      {"UnknownSimThresholdKey",
       {{"x4: 0.65", "x3: 0.65"}},
       PSA_ERR_INVALID_CONFIG,
       {P + ".sim_thresholds.x3: unknown key", "x2, x4, x8"}},
      {"IntNotANumber",
       {{"warmup_steps: 3", "warmup_steps: three"}},
       PSA_ERR_INVALID_CONFIG,
       {P + ".warmup_steps = three", "expected an integer"}},
      {"IntGivenAsFloat",
       {{"warmup_steps: 3", "warmup_steps: 3.5"}},
       PSA_ERR_INVALID_CONFIG,
       {P + ".warmup_steps = 3.5", "expected an integer"}},
      {"BlockSizeNotAMap",
       {{"      block_size:\n        m: 128\n        n: 64\n        tile_n: 32\n",
         "      block_size: 128\n"}},
       PSA_ERR_INVALID_CONFIG,
       {P + ".block_size = 128", "map with keys m, n, tile_n"}},
      {"BoolNotABool",
       {{"use_rearrange: true", "use_rearrange: maybe"}},
       PSA_ERR_INVALID_CONFIG,
       {P + ".use_rearrange = maybe", "true or false"}},
      {"RatioNotAPair",
       {{"2: [0.1, 0.15]", "2: 0.15"}},
       PSA_ERR_INVALID_CONFIG,
       {P + ".mask_ratios.2 = 0.15", "[start, end]"}},
      {"RatioEndAboveOne",
       {{"0: [0.35, 1.0]", "0: [0.35, 1.5]"}},
       PSA_ERR_INVALID_CONFIG,
       {P + ".mask_ratios.0[1] = 1.5", "allowed [0, 1]"}},
      {"RatioStartNegative",
       {{"1: [0.0, 0.1]", "1: [-0.2, 0.1]"}},
       PSA_ERR_INVALID_CONFIG,
       {P + ".mask_ratios.1[0] = -0.2", "allowed [0, 1]"}},
      {"RatioEndsDecrease",
       {{"4: [0.15, 0.15]", "4: [0.15, 0.12]"}},
       PSA_ERR_INVALID_CONFIG,
       {P + ".mask_ratios.4 = 0.12", "mask_ratios.2 = 0.15", "non-decreasing", "1, 2, 4, 8, 0"}},
      {"RatioLevelMissing",
       {{"        8: [0.15, 0.35]\n", ""}},
       PSA_ERR_INVALID_CONFIG,
       {P + ".mask_ratios: level 8 missing", "given: 1, 2, 4, 0", "1, 2, 4, 8, 0"}},
      {"RatioLevelsMisordered",
       {{"        2: [0.1, 0.15]\n        4: [0.15, 0.15]\n",
         "        4: [0.15, 0.15]\n        2: [0.1, 0.15]\n"}},
       PSA_ERR_INVALID_CONFIG,
       {P + ".mask_ratios: levels listed as 1, 4, 2, 8, 0", "1, 2, 4, 8, 0"}},
      {"RatioUnknownLevel",
       {{"2: [0.1, 0.15]", "3: [0.1, 0.15]"}},
       PSA_ERR_INVALID_CONFIG,
       {P + ".mask_ratios.3: unknown key", "1, 2, 4, 8, 0"}},
      {"RatioLevelStringKeyDuplicate",
       {{"        0: [0.35, 1.0]\n", "        0: [0.35, 1.0]\n        '0': [0.35, 1.0]\n"}},
       PSA_ERR_INVALID_CONFIG,
       {P + ".mask_ratios.0: duplicate key"}},
      {"MaskRatiosMissing",
       {{"      mask_ratios:\n        1: [0.0, 0.1]\n        2: [0.1, 0.15]\n        4: [0.15, "
         "0.15]\n"
         "        8: [0.15, 0.35]\n        0: [0.35, 1.0]\n",
         ""}},
       PSA_ERR_INVALID_CONFIG,
       {P + ".mask_ratios: missing", "type psa"}},
      {"NewFormatWithSimMask",
       {{"use_sim_mask: false", "use_sim_mask: true"}},
       PSA_ERR_INVALID_CONFIG,
       {P + ".use_sim_mask = true", "old_mask_type", "attn_impl = new_mask_type"}},
      {"OldFormatBlockN64",
       {{"attn_impl: new_mask_type", "attn_impl: old_mask_type"}},
       PSA_ERR_INVALID_CONFIG,
       {P + ".block_size.n = 64", "old_mask_type allows only 128"}},
      {"OldFormatBlockM64",
       {{"attn_impl: new_mask_type", "attn_impl: old_mask_type"},
        {"m: 128\n        n: 64", "m: 64\n        n: 128"}},
       PSA_ERR_INVALID_CONFIG,
       {P + ".block_size.m = 64", "old_mask_type allows only 128"}},
      {"BlockNNotAllowed",
       {{"n: 64", "n: 48"}},
       PSA_ERR_INVALID_CONFIG,
       {P + ".block_size.n = 48: allowed 32, 64, 128"}},
      {"BlockMNotAllowed",
       {{"m: 128", "m: 32"}},
       PSA_ERR_INVALID_CONFIG,
       {P + ".block_size.m = 32: allowed 64, 128"}},
      {"TileLargerThanBlock",
       {{"tile_n: 32", "tile_n: 128"}},
       PSA_ERR_INVALID_CONFIG,
       {P + ".block_size.tile_n = 128", "block_size.n (64)"}},
      {"UnknownMaskMode",
       {{"mask_mode: topk", "mask_mode: topk_newtype"}},
       PSA_ERR_INVALID_CONFIG,
       {P + ".mask_mode = topk_newtype", "allowed topk, thresholdbound, energybound"}},
      {"EnergyboundOutsidePsaCausal",
       {{"mask_mode: topk", "mask_mode: energybound"}},
       PSA_ERR_INVALID_CONFIG,
       {P + ".mask_mode = energybound", "allowed only with type psa_causal"}},
      {"UnknownAttnImpl",
       {{"attn_impl: new_mask_type", "attn_impl: fancy"}},
       PSA_ERR_INVALID_CONFIG,
       {P + ".attn_impl = fancy", "allowed new_mask_type, old_mask_type"}},
      {"UnknownRearrangeMethod",
       {{"rearrange_method: Gilbert", "rearrange_method: Hilbert"}},
       PSA_ERR_INVALID_CONFIG,
       {P + ".rearrange_method = Hilbert", "Gilbert, STA, SemanticAware, Hybrid"}},
      {"UnknownType",
       {{"type: psa", "type: sparse"}},
       PSA_ERR_INVALID_CONFIG,
       {P + ".type = sparse", "allowed psa, dense, rf_v2, ada_bsa"}},
      {"UnknownTextRule",
       {{"warmup_steps: 3", "text_rule: prefix"}},
       PSA_ERR_INVALID_CONFIG,
       {P + ".text_rule = prefix", "span, reference_suffix"}},
      {"ReferenceSuffixNeedsOldFormat",
       {{"warmup_steps: 3", "text_rule: reference_suffix"}},
       PSA_ERR_INVALID_CONFIG,
       {P + ".text_rule = reference_suffix", "old_mask_type"}},
      {"MissingVideoScale",
       {{"  video_scale:\n    width_divisor: 16\n    height_divisor: 16\n    depth_divisor: 4\n",
         ""}},
       PSA_ERR_INVALID_CONFIG,
       {"M.video_scale: missing", "width_divisor"}},
      {"MissingDepthDivisor",
       {{"    depth_divisor: 4\n", ""}},
       PSA_ERR_INVALID_CONFIG,
       {"M.video_scale.depth_divisor: missing"}},
      {"ZeroDivisor",
       {{"depth_divisor: 4", "depth_divisor: 0"}},
       PSA_ERR_INVALID_CONFIG,
       {"M.video_scale.depth_divisor = 0", "allowed [1, "}},
      {"NegativeTextLength",
       {{"text_length: 0", "text_length: -5"}},
       PSA_ERR_INVALID_CONFIG,
       {"M.text_length = -5", "allowed [0, "}},
      {"TileSizeWrongLength",
       {{"tile_size: [2, 8, 8]", "tile_size: [2, 8]"}},
       PSA_ERR_INVALID_CONFIG,
       {P + ".tile_size: expected [t, h, w]", "got a sequence"}},
      {"TileSizeZero",
       {{"tile_size: [2, 8, 8]", "tile_size: [2, 0, 8]"}},
       PSA_ERR_INVALID_CONFIG,
       {P + ".tile_size[1] = 0", "allowed [1, "}},
      {"SimThresholdOutOfRange",
       {{"x2: 0.7", "x2: 1.5"}},
       PSA_ERR_INVALID_CONFIG,
       {P + ".sim_thresholds.x2 = 1.5", "allowed [-1, 1]"}},
      {"DirectSimThresholdOutOfRange",
       {{"warmup_steps: 3", "sim_8x_threshold: -2"}},
       PSA_ERR_INVALID_CONFIG,
       {P + ".sim_8x_threshold = -2", "allowed [-1, 1]"}},
      {"SampleDivisorNotAllowed",
       {{"warmup_steps: 3", "sample_divisor: 3"}},
       PSA_ERR_INVALID_CONFIG,
       {P + ".sample_divisor = 3: allowed 1, 2, 4, 8, 16"}},
      {"DuplicateKey",
       {{"warmup_steps: 3\n", "warmup_steps: 3\n      warmup_steps: 4\n"}},
       PSA_ERR_INVALID_CONFIG,
       {P + ".warmup_steps: duplicate key"}},
      {"RfV2SparsityOne",
       {{"type: psa", "type: rf_v2\n      sparsity: 1.0"}, {"n: 64", "n: 128"}},
       PSA_ERR_INVALID_CONFIG,
       {P + ".sparsity = 1", "allowed [0, 1)"}},
      {"AdaBsaCdfZero",
       {{"type: psa", "type: ada_bsa\n      cdf_threshold: 0"}, {"n: 64", "n: 128"}},
       PSA_ERR_INVALID_CONFIG,
       {P + ".cdf_threshold = 0", "allowed (0, 1]"}},
      {"RfV2BlockN64",
       {{"type: psa", "type: rf_v2"}},
       PSA_ERR_INVALID_CONFIG,
       {P + ".block_size.n = 64", "type rf_v2 allows only 128"}},
      {"DefaultNamesMissingPreset",
       {{"default_attention: p", "default_attention: q"}},
       PSA_ERR_INVALID_CONFIG,
       {"M.default_attention = q", "allowed d, p"}},
      {"NoPresets",
       {{"*",
         "M:\n  video_scale: {width_divisor: 1, height_divisor: 1, depth_divisor: 1}\n"
         "  attention_configs: {}\n"}},
       PSA_ERR_INVALID_CONFIG,
       {"M.attention_configs: empty", "at least one preset"}},
      {"PresetNotAMap",
       {{"    d:\n      type: dense\n", "    d: dense\n"}},
       PSA_ERR_INVALID_CONFIG,
       {"M.attention_configs.d = dense", "expected a map of preset keys"},
       "d"},
      {"YamlSyntaxError",
       {{"mask_mode: topk\n", "mask_mode: topk: x\n"}},
       PSA_ERR_YAML_PARSE,
       {"<string>: line 25, column ", "illegal map value"}},
      {"YamlUnclosedFlow",
       {{"tile_size: [2, 8, 8]", "tile_size: [2, 8, 8"}},
       PSA_ERR_YAML_PARSE,
       {"<string>: line ", ", column "}},
  };
}

class ConfigYamlError : public testing::TestWithParam<Case> {};

TEST_P(ConfigYamlError, LoadStringReportsPathValueAndAllowed) {
  const Case& c = GetParam();
  const std::string yaml = edited(c.edits);
  psa_config* sentinel = reinterpret_cast<psa_config*>(0x1);
  psa_config* cfg = sentinel;
  EXPECT_EQ(psa_config_load_string(yaml.c_str(), "M", c.preset, &cfg), c.status)
      << psa_last_error_message() << "\n--- YAML ---\n"
      << yaml;
  EXPECT_EQ(cfg, sentinel) << "a failing load must leave out unchanged";
  EXPECT_EQ(psa_last_error_status(), c.status);
  const std::string msg = psa_last_error_message();
  for (const std::string& s : c.expect)
    EXPECT_NE(msg.find(s), std::string::npos) << "want '" << s << "' in: " << msg;

  psa_catalog* cat = nullptr;
  EXPECT_EQ(psa_catalog_open_string(yaml.c_str(), &cat), c.status);
  EXPECT_EQ(cat, nullptr);
  EXPECT_EQ(std::string(psa_last_error_message()), msg) << "catalog and load disagree";
}

INSTANTIATE_TEST_SUITE_P(Cases, ConfigYamlError, testing::ValuesIn(cases()),
                         [](const testing::TestParamInfo<Case>& p) {
                           return std::string(p.param.name);
                         });

TEST(ConfigYamlLoad, BaseDocumentLoads) {
  psa_config* cfg = nullptr;
  ASSERT_EQ(psa_config_load_string(kBase, "M", "p", &cfg), PSA_OK) << psa_last_error_message();
  EXPECT_STREQ(psa_last_error_message(), "");
  psa_config_destroy(cfg);
  ASSERT_EQ(psa_config_load_string(kBase, "M", "d", &cfg), PSA_OK) << psa_last_error_message();
  psa_config_destroy(cfg);
}

TEST(ConfigYamlLoad, UnknownModelIsNotFoundAndListsModels) {
  psa_config* cfg = nullptr;
  EXPECT_EQ(psa_config_load_string(kBase, "Wan9", "p", &cfg), PSA_ERR_NOT_FOUND);
  const std::string msg = psa_last_error_message();
  EXPECT_NE(msg.find("model = Wan9"), std::string::npos) << msg;
  EXPECT_NE(msg.find("available: M"), std::string::npos) << msg;
  EXPECT_EQ(cfg, nullptr);
}

TEST(ConfigYamlLoad, UnknownPresetIsNotFoundAndListsPresets) {
  psa_config* cfg = nullptr;
  EXPECT_EQ(psa_config_load_string(kBase, "M", "fast", &cfg), PSA_ERR_NOT_FOUND);
  const std::string msg = psa_last_error_message();
  EXPECT_NE(msg.find("M.attention_configs.fast"), std::string::npos) << msg;
  EXPECT_NE(msg.find("available: d, p"), std::string::npos) << msg;
}

TEST(ConfigYamlLoad, MissingDefaultWithNullPresetIsNotFound) {
  std::string yaml = kBase;
  yaml.erase(yaml.find("  default_attention: p\n"), 23);
  psa_config* cfg = nullptr;
  EXPECT_EQ(psa_config_load_string(yaml.c_str(), "M", nullptr, &cfg), PSA_ERR_NOT_FOUND);
  EXPECT_NE(std::string(psa_last_error_message()).find("M.default_attention"), std::string::npos);
  ASSERT_EQ(psa_config_load_string(yaml.c_str(), "M", "p", &cfg), PSA_OK)
      << psa_last_error_message();
  psa_config_destroy(cfg);
}

TEST(ConfigYamlLoad, BrokenOtherPresetDoesNotStopLoadingThisOne) {
  // load_* reads one preset; the catalog reads them all.
  std::string yaml = kBase;
  yaml.replace(yaml.find("type: dense"), 11, "type: dense\n      bogus: 1");
  psa_config* cfg = nullptr;
  ASSERT_EQ(psa_config_load_string(yaml.c_str(), "M", "p", &cfg), PSA_OK)
      << psa_last_error_message();
  psa_config_destroy(cfg);
  psa_catalog* cat = nullptr;
  EXPECT_EQ(psa_catalog_open_string(yaml.c_str(), &cat), PSA_ERR_INVALID_CONFIG);
  EXPECT_NE(std::string(psa_last_error_message()).find("M.attention_configs.d.bogus"),
            std::string::npos);
}

TEST(ConfigYamlLoad, TopLevelMustBeAMap) {
  psa_config* cfg = nullptr;
  EXPECT_EQ(psa_config_load_string("- a\n- b\n", "M", nullptr, &cfg), PSA_ERR_INVALID_CONFIG);
  EXPECT_NE(std::string(psa_last_error_message()).find("map of model names"), std::string::npos);
  EXPECT_EQ(psa_config_load_string("", "M", nullptr, &cfg), PSA_ERR_INVALID_CONFIG);
  EXPECT_NE(std::string(psa_last_error_message()).find("empty document"), std::string::npos);
}

TEST(ConfigYamlLoad, NestingPastYamlCppsLimitIsNamed) {
  // yaml-cpp refuses documents nested past its depth limit (500 levels in 0.7 and 0.8) with
  // the bare text "bad file"; the message must say what is wrong. 100000 levels: far past the
  // limit, and deep enough to overflow the stack of a parser without one.
  const int depth = 100000;
  std::string map_nest = "M: ";
  for (int i = 0; i < depth; ++i) map_nest += "{a: ";
  map_nest += "1" + std::string(depth, '}');
  const std::string docs[] = {"M: " + std::string(depth, '[') + std::string(depth, ']'),
                              map_nest};
  for (const std::string& yaml : docs) {
    psa_config* cfg = nullptr;
    EXPECT_EQ(psa_config_load_string(yaml.c_str(), "M", nullptr, &cfg), PSA_ERR_YAML_PARSE);
    EXPECT_EQ(cfg, nullptr);
    const std::string msg = psa_last_error_message();
    EXPECT_EQ(msg.rfind("<string>: line 1, column ", 0), 0u) << msg;
    EXPECT_NE(msg.find(": maps and sequences nested deeper than yaml-cpp's limit of "),
              std::string::npos) << msg;
    EXPECT_EQ(msg.find("bad file"), std::string::npos) << msg;
    psa_catalog* cat = nullptr;
    EXPECT_EQ(psa_catalog_open_string(yaml.c_str(), &cat), PSA_ERR_YAML_PARSE);
    EXPECT_EQ(cat, nullptr);
    EXPECT_EQ(std::string(psa_last_error_message()), msg) << "catalog and load disagree";
  }
  // Within the limit the document parses, and the loader judges the value itself.
  const std::string shallow = "M: " + std::string(100, '[') + std::string(100, ']');
  psa_config* cfg = nullptr;
  EXPECT_EQ(psa_config_load_string(shallow.c_str(), "M", nullptr, &cfg), PSA_ERR_INVALID_CONFIG)
      << psa_last_error_message();
}

TEST(ConfigYamlLoad, RatioKeysMayBeStringsAndDirectSimKeysWin) {
  std::string yaml = kBase;
  yaml.replace(yaml.find("        1: "), 11, "        '1': ");
  yaml.replace(yaml.find("        8: "), 11, "        \"8\": ");
  // The direct key is listed before sim_thresholds and still wins.
  yaml.replace(yaml.find("      sim_thresholds:"), 21,
               "      sim_2x_threshold: 0.25\n      sim_thresholds:");
  psa_config* cfg = nullptr;
  ASSERT_EQ(psa_config_load_string(yaml.c_str(), "M", "p", &cfg), PSA_OK)
      << psa_last_error_message();
  double v = 0;
  ASSERT_EQ(psa_config_get_double(cfg, PSA_PARAM_SIM_THRESHOLD_X2, &v), PSA_OK);
  EXPECT_EQ(v, 0.25);
  ASSERT_EQ(psa_config_get_double(cfg, PSA_PARAM_SIM_THRESHOLD_X4, &v), PSA_OK);
  EXPECT_EQ(v, 0.65);
  ASSERT_EQ(psa_config_get_double(cfg, PSA_PARAM_RATIO_L8, &v), PSA_OK);
  EXPECT_EQ(v, 0.35);
  psa_config_destroy(cfg);
}

TEST(ConfigYamlLoad, PresetValuesOverrideModelValues) {
  std::string yaml = kBase;
  yaml.replace(yaml.find("  text_length: 0\n"), 17,
               "  text_length: 226\n  calls_per_step: 60\n  inference_steps: 50\n");
  yaml.replace(yaml.find("      warmup_steps: 3\n"), 22,
               "      warmup_steps: 3\n      text_length: 7\n      calls_per_step: 30\n");
  psa_config* p = nullptr;
  psa_config* d = nullptr;
  ASSERT_EQ(psa_config_load_string(yaml.c_str(), "M", "p", &p), PSA_OK) << psa_last_error_message();
  ASSERT_EQ(psa_config_load_string(yaml.c_str(), "M", "d", &d), PSA_OK) << psa_last_error_message();
  int64_t v = 0;
  psa_config_get_int(p, PSA_PARAM_TEXT_LENGTH, &v);
  EXPECT_EQ(v, 7);
  psa_config_get_int(d, PSA_PARAM_TEXT_LENGTH, &v);
  EXPECT_EQ(v, 226);
  psa_config_get_int(p, PSA_PARAM_CALLS_PER_STEP, &v);
  EXPECT_EQ(v, 30);
  psa_config_get_int(d, PSA_PARAM_CALLS_PER_STEP, &v);
  EXPECT_EQ(v, 60);
  psa_config_get_int(p, PSA_PARAM_INFERENCE_STEPS, &v);
  EXPECT_EQ(v, 50);
  psa_config_destroy(p);
  psa_config_destroy(d);
}

TEST(ConfigYamlLoad, AbsentKeysTakeLoaderDefaults) {
  const char* yaml =
      "Only:\n"
      "  video_scale: {width_divisor: 8, height_divisor: 8, depth_divisor: 2}\n"
      "  attention_configs:\n"
      "    minimal:\n"
      "      mask_ratios: {1: [0, 0.2], 2: [0.2, 0.3], 4: [0.3, 0.4], 8: [0.4, 0.5], 0: [0.5, "
      "1]}\n";
  psa_config* cfg = nullptr;
  ASSERT_EQ(psa_config_load_string(yaml, "Only", "minimal", &cfg), PSA_OK)
      << psa_last_error_message();
  int64_t v = -1;
  const std::pair<psa_param, int64_t> expect[] = {
      {PSA_PARAM_METHOD, PSA_METHOD_PSA},
      {PSA_PARAM_BLOCK_M, 128},
      {PSA_PARAM_BLOCK_N, 128},
      {PSA_PARAM_TILE_N, 32},
      {PSA_PARAM_MASK_MODE, PSA_MASK_MODE_THRESHOLDBOUND},
      {PSA_PARAM_MASK_FORMAT, PSA_MASK_FORMAT_SEGMENTS},
      {PSA_PARAM_USE_SIM_MASK, 0},
      {PSA_PARAM_USE_REARRANGE, 1},
      {PSA_PARAM_REARRANGE_METHOD, PSA_REARRANGE_GILBERT},
      {PSA_PARAM_WARMUP_STEPS, 0},
      {PSA_PARAM_TEXT_LENGTH, 0},
      {PSA_PARAM_WIDTH_DIVISOR, 8},
      {PSA_PARAM_DEPTH_DIVISOR, 2},
      {PSA_PARAM_CALLS_PER_STEP, 1},
      {PSA_PARAM_SAMPLE_DIVISOR, 4}};
  for (const auto& e : expect) {
    ASSERT_EQ(psa_config_get_int(cfg, e.first, &v), PSA_OK);
    EXPECT_EQ(v, e.second) << "param " << e.first;
  }
  psa_config_destroy(cfg);
}

}  // namespace

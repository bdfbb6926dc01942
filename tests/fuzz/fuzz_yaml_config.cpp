// tests/fuzz/fuzz_yaml_config.cpp -- libFuzzer target for the configuration stage: bytes as
// YAML text through psa_catalog_open_string and psa_config_load_string, with fixed and
// fuzzed model/preset names, then every loaded config through validate/get/clone/context.
// Traps (a crash libFuzzer reports) when a documented promise breaks:
//   - every failing call records a known status and a non-empty message;
//   - a catalog that opens loads: each of its presets loads by name with the same values;
//   - a config that loads validates and makes a CPU context.
// Input: YAML text; an optional last line "#names:<model>,<preset>" (a YAML comment) adds
// fuzzed names. Build and run: scripts/fuzz.sh.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "fuzz_common.h"
#include "psa.h"

namespace {

using psa_fuzz::check;
using psa_fuzz::check_failure;

std::vector<int64_t> int_params(const psa_config* c) {
  std::vector<int64_t> out;
  for (int i = 0; i < PSA_PARAM_COUNT_; ++i) {
    psa_param_type type = PSA_PARAM_TYPE_INT;
    check(psa_param_info(static_cast<psa_param>(i), nullptr, &type, nullptr, nullptr) == PSA_OK);
    int64_t iv = 0;
    double dv = 0.0;
    if (type == PSA_PARAM_TYPE_INT) {
      check(psa_config_get_int(c, static_cast<psa_param>(i), &iv) == PSA_OK);
    } else {
      check(psa_config_get_double(c, static_cast<psa_param>(i), &dv) == PSA_OK);
      std::memcpy(&iv, &dv, sizeof iv);  // compare doubles bit for bit
    }
    out.push_back(iv);
  }
  return out;
}

// Everything a user does with a freshly loaded config; returns its parameter values.
std::vector<int64_t> exercise(psa_config* cfg) {
  check(psa_config_validate(cfg) == PSA_OK);
  std::vector<int64_t> values = int_params(cfg);
  psa_config* copy = nullptr;
  check(psa_config_clone(cfg, &copy) == PSA_OK);
  check(int_params(copy) == values);
  psa_config_destroy(copy);
  psa_context* ctx = nullptr;
  const psa_status st = psa_context_create(cfg, PSA_BACKEND_CPU, -1, &ctx);
  check(st == PSA_OK);
  psa_context_destroy(ctx);
  return values;
}

void load_one(const char* yaml, const char* model, const char* preset) {
  psa_config* cfg = nullptr;
  const psa_status st = psa_config_load_string(yaml, model, preset, &cfg);
  if (st != PSA_OK) {
    check_failure(st);
    check(cfg == nullptr);
    return;
  }
  exercise(cfg);
  psa_config_destroy(cfg);
}

void catalog_round_trip(const char* yaml) {
  psa_catalog* cat = nullptr;
  const psa_status st = psa_catalog_open_string(yaml, &cat);
  if (st != PSA_OK) {
    check_failure(st);
    check(cat == nullptr);
    return;
  }
  const int32_t models = psa_catalog_model_count(cat);  // 0 for an empty map ("{}")
  check(models >= 0);
  for (int32_t m = 0; m < models && m < 8; ++m) {
    const char* model = psa_catalog_model_name(cat, m);
    check(model != nullptr);
    const int32_t presets = psa_catalog_preset_count(cat, model);
    // Duplicate model names are rejected, so the name finds this model.
    check(presets >= 1);
    const char* def = psa_catalog_default_preset(cat, model);
    for (int32_t p = 0; p < presets && p < 8; ++p) {
      const char* preset = psa_catalog_preset_name(cat, model, p);
      check(preset != nullptr);
      psa_config* from_catalog = nullptr;
      check(psa_catalog_get_config(cat, model, preset, &from_catalog) == PSA_OK);
      const std::vector<int64_t> want = exercise(from_catalog);
      psa_config_destroy(from_catalog);
      psa_config* loaded = nullptr;
      check(psa_config_load_string(yaml, model, preset, &loaded) == PSA_OK);
      check(int_params(loaded) == want);
      psa_config_destroy(loaded);
    }
    psa_config* by_default = nullptr;
    const psa_status ds = psa_catalog_get_config(cat, model, nullptr, &by_default);
    check((ds == PSA_OK) == (def != nullptr));
    if (ds != PSA_OK) check_failure(ds);
    psa_config_destroy(by_default);
  }
  check(psa_catalog_model_name(cat, models) == nullptr);
  check(psa_last_error_status() == PSA_ERR_INVALID_ARGUMENT);
  psa_catalog_destroy(cat);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  // The API takes NUL-terminated text: an embedded NUL ends the document there.
  text = std::string(text.c_str());
  std::string model, preset;
  const size_t tag = text.rfind("\n#names:");
  if (tag != std::string::npos) {
    const std::string names = text.substr(tag + 8);
    const size_t comma = names.find(',');
    model = names.substr(0, comma);
    if (comma != std::string::npos) preset = names.substr(comma + 1);
  }
  const char* yaml = text.c_str();

  catalog_round_trip(yaml);
  load_one(yaml, "M", nullptr);
  load_one(yaml, "Wan2.1_14b", "psa_balanced");
  if (tag != std::string::npos) {
    load_one(yaml, model.c_str(), nullptr);
    load_one(yaml, model.c_str(), preset.c_str());
  }
  return 0;
}

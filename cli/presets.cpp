// cli/presets.cpp -- `psa presets` and `psa check-config`: read a catalog (a YAML file or
// the embedded copy) through psa_catalog_* and print it. No validation of its own.
#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "cli.h"
#include "json.h"
#include "options.h"
#include "preset_info.h"

namespace psa_cli {
namespace {

struct CatalogDeleter {
  void operator()(psa_catalog* c) const { psa_catalog_destroy(c); }
};
struct ConfigDeleter {
  void operator()(psa_config* c) const { psa_config_destroy(c); }
};
using CatalogPtr = std::unique_ptr<psa_catalog, CatalogDeleter>;
using ConfigPtr = std::unique_ptr<psa_config, ConfigDeleter>;

// Opens `path`, or the embedded YAML when empty. Throws Failure with the library's message.
CatalogPtr open_catalog(const std::string& path) {
  psa_catalog* raw = nullptr;
  check(psa_catalog_open(path.empty() ? nullptr : path.c_str(), &raw));
  return CatalogPtr(raw);
}

int32_t total_presets(const psa_catalog* cat) {
  int32_t total = 0;
  for (int32_t m = 0; m < psa_catalog_model_count(cat); ++m) {
    total += psa_catalog_preset_count(cat, psa_catalog_model_name(cat, m));
  }
  return total;
}

std::string plural(int32_t n, const char* word) {
  return std::to_string(n) + " " + word + (n == 1 ? "" : "s");
}

void print_model(const psa_catalog* cat, const char* model) {
  const char* def = psa_catalog_default_preset(cat, model);
  const int32_t n = psa_catalog_preset_count(cat, model);
  size_t name_width = 0;
  for (int32_t i = 0; i < n; ++i) {
    name_width = std::max(name_width, std::string(psa_catalog_preset_name(cat, model, i)).size());
  }
  bool header_done = false;
  for (int32_t i = 0; i < n; ++i) {
    const char* preset = psa_catalog_preset_name(cat, model, i);
    psa_config* raw = nullptr;
    check(psa_catalog_get_config(cat, model, preset, &raw));
    ConfigPtr cfg(raw);
    const PresetInfo info = read_preset_info(cfg.get());
    if (!header_done) {
      // video_scale and text_length are model-level keys, copied into every preset.
      std::printf("%s  (default %s; a token is %lldx%lld pixels x %lld frames; %lld text "
                  "tokens)\n",
                  model, def ? def : "-", static_cast<long long>(info.divisor[2]),
                  static_cast<long long>(info.divisor[1]), static_cast<long long>(info.divisor[0]),
                  static_cast<long long>(info.text_length));
      header_done = true;
    }
    const bool is_default = def != nullptr && std::string(def) == preset;
    std::printf("  %c %-*s  %s\n", is_default ? '*' : ' ', static_cast<int>(name_width), preset,
                describe_preset(info).c_str());
  }
}

std::string preset_json(const char* name, bool is_default, const PresetInfo& p) {
  Json j;
  j.str("name", name).boolean("default", is_default).str("type", method_name(p.method));
  j.str("mask_mode", mask_mode_name(p.mask_mode)).str("mask_format", mask_format_name(p.mask_format));
  j.boolean("use_sim_mask", p.use_sim_mask);
  j.integer("block_m", p.block_m).integer("block_n", p.block_n).integer("tile_n", p.tile_n);
  Json ends;
  static const char* const kLevel[5] = {"1", "2", "4", "8", "0"};
  for (int i = 0; i < 5; ++i) ends.num(kLevel[i], p.ratio_end[i]);
  j.raw("ratio_end", ends.done());
  j.str("rearrange", rearrange_name(p)).integer("warmup_steps", p.warmup_steps);
  j.num("sparsity", p.sparsity);
  return j.done();
}

std::string model_json(const psa_catalog* cat, const char* model) {
  const char* def = psa_catalog_default_preset(cat, model);
  std::vector<std::string> presets;
  PresetInfo first;
  for (int32_t i = 0; i < psa_catalog_preset_count(cat, model); ++i) {
    const char* preset = psa_catalog_preset_name(cat, model, i);
    psa_config* raw = nullptr;
    check(psa_catalog_get_config(cat, model, preset, &raw));
    ConfigPtr cfg(raw);
    const PresetInfo info = read_preset_info(cfg.get());
    if (i == 0) first = info;
    presets.push_back(preset_json(preset, def != nullptr && std::string(def) == preset, info));
  }
  Json j;
  j.str("name", model);
  if (def != nullptr) {
    j.str("default_preset", def);
  } else {
    j.null("default_preset");
  }
  j.raw("divisors", "{\"frames\": " + std::to_string(first.divisor[0]) + ", \"height\": " +
                        std::to_string(first.divisor[1]) + ", \"width\": " +
                        std::to_string(first.divisor[2]) + "}");
  j.integer("text_length", first.text_length).raw("presets", Json::array(presets));
  return j.done();
}

}  // namespace

int cmd_presets(int argc, const char* const* argv) {
  cxxopts::Options opts("psa presets", "List the models and presets of an attention config.");
  opts.add_options()
      ("config", "YAML file in the configs/attention_config.yaml format (default: the copy built "
                 "into the library)", cxxopts::value<std::string>(), "FILE")
      ("json", "print one JSON object (models, presets and their settings)")
      ("h,help", "print this help");
  cxxopts::ParseResult r;
  if (!parse_options(opts, argc, argv, r)) return 0;
  const std::string path = r.count("config") ? option_value<std::string>(opts, r, "config") : "";

  CatalogPtr cat = open_catalog(path);
  const int32_t models = psa_catalog_model_count(cat.get());
  if (r.count("json")) {
    std::vector<std::string> items;
    for (int32_t m = 0; m < models; ++m)
      items.push_back(model_json(cat.get(), psa_catalog_model_name(cat.get(), m)));
    Json j;
    j.str("source", path.empty() ? "embedded" : path).raw("models", Json::array(items));
    std::printf("%s\n", j.done().c_str());
    return 0;
  }
  std::printf("%s, %s from %s ('*' = the model's default_attention)\n\n",
              plural(models, "model").c_str(), plural(total_presets(cat.get()), "preset").c_str(),
              path.empty() ? "the embedded attention_config.yaml" : path.c_str());
  for (int32_t m = 0; m < models; ++m) {
    if (m > 0) std::printf("\n");
    print_model(cat.get(), psa_catalog_model_name(cat.get(), m));
  }
  std::printf("\n%s\n", kPresetColumnsLegend);
  return 0;
}

int cmd_check_config(int argc, const char* const* argv) {
  cxxopts::Options opts("psa check-config", "Parse and validate every preset of an attention "
                                            "config file.");
  opts.add_options()
      ("file", "the YAML file", cxxopts::value<std::string>())
      ("json", "print one JSON object: ok, file, models, presets (or status and message; exit 1)")
      ("h,help", "print this help");
  opts.parse_positional({"file"});
  opts.positional_help("FILE");
  cxxopts::ParseResult r;
  if (!parse_options(opts, argc, argv, r)) return 0;
  if (!r.count("file")) throw UsageError("check-config needs a FILE", opts.help());
  const std::string path = option_value<std::string>(opts, r, "file");

  if (r.count("json")) {
    psa_catalog* raw = nullptr;
    const psa_status st = psa_catalog_open(path.c_str(), &raw);
    CatalogPtr cat(raw);
    Json j;
    j.boolean("ok", st == PSA_OK).str("file", path);
    if (st == PSA_OK) {
      j.integer("models", psa_catalog_model_count(cat.get()))
          .integer("presets", total_presets(cat.get()));
    } else {
      j.str("status", psa_status_name(st)).str("message", psa_last_error_message());
    }
    std::printf("%s\n", j.done().c_str());
    return st == PSA_OK ? 0 : 1;
  }
  CatalogPtr cat = open_catalog(path);
  std::printf("OK: %s: %s, %s\n", path.c_str(),
              plural(psa_catalog_model_count(cat.get()), "model").c_str(),
              plural(total_presets(cat.get()), "preset").c_str());
  return 0;
}

}  // namespace psa_cli

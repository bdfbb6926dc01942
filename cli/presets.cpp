// cli/presets.cpp -- `psa presets` and `psa check-config`: read a catalog (a YAML file or
// the embedded copy) through psa_catalog_* and print it. No validation of its own.
#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>

#include "cli.h"
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

}  // namespace

int cmd_presets(int argc, const char* const* argv) {
  cxxopts::Options opts("psa presets", "List the models and presets of an attention config.");
  opts.add_options()
      ("config", "YAML file in the configs/attention_config.yaml format (default: the copy built "
                 "into the library)", cxxopts::value<std::string>(), "FILE")
      ("h,help", "print this help");
  cxxopts::ParseResult r;
  if (!parse_options(opts, argc, argv, r)) return 0;
  const std::string path = r.count("config") ? option_value<std::string>(opts, r, "config") : "";

  CatalogPtr cat = open_catalog(path);
  const int32_t models = psa_catalog_model_count(cat.get());
  std::printf("%s, %s from %s ('*' = the model's default_attention)\n\n",
              plural(models, "model").c_str(), plural(total_presets(cat.get()), "preset").c_str(),
              path.empty() ? "the embedded attention_config.yaml" : path.c_str());
  for (int32_t m = 0; m < models; ++m) {
    if (m > 0) std::printf("\n");
    print_model(cat.get(), psa_catalog_model_name(cat.get(), m));
  }
  return 0;
}

int cmd_check_config(int argc, const char* const* argv) {
  cxxopts::Options opts("psa check-config", "Parse and validate every preset of an attention "
                                            "config file.");
  opts.add_options()
      ("file", "the YAML file", cxxopts::value<std::string>())
      ("h,help", "print this help");
  opts.parse_positional({"file"});
  opts.positional_help("FILE");
  cxxopts::ParseResult r;
  if (!parse_options(opts, argc, argv, r)) return 0;
  if (!r.count("file")) throw UsageError("check-config needs a FILE", opts.help());
  const std::string path = option_value<std::string>(opts, r, "file");

  CatalogPtr cat = open_catalog(path);
  std::printf("OK: %s: %s, %s\n", path.c_str(),
              plural(psa_catalog_model_count(cat.get()), "model").c_str(),
              plural(total_presets(cat.get()), "preset").c_str());
  return 0;
}

}  // namespace psa_cli

// config/yaml_loader.h -- configuration stage, loader: reference-format YAML text -> named models
// -> presets -> validated Config. The interface is yaml-cpp free; yaml_loader.cpp is the only
// file of the project that includes yaml-cpp. Does no file lookup beyond read_text_file.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "config/config.h"

namespace psa {

struct PresetEntry {
  std::string name;
  Config config;  // validated
};

struct ModelEntry {
  std::string name;
  std::string default_preset;        // empty when the model has no default_attention
  std::vector<PresetEntry> presets;  // file order
};

// Parses every model and every preset of `text` (file order) and validates each preset.
// `source` names the text in messages ("path/to/file.yaml", "<string>", "<embedded>").
psa_status load_catalog(const std::string& text, const std::string& source,
                        std::vector<ModelEntry>* out);

// Parses the keys of model `model` and the one preset `preset` (nullptr: the model's
// default_attention), then validates it. Other models and presets are not examined.
psa_status load_preset(const std::string& text, const std::string& source, const char* model,
                       const char* preset, Config* out);

// Largest config file read_text_file accepts (the shipped file is a few KiB).
inline constexpr uint64_t kMaxConfigFileBytes = uint64_t{64} << 20;

// Reads a whole regular file of at most kMaxConfigFileBytes into `out`. PSA_ERR_IO naming
// the path and the reason (the system's, not a regular file, or over the cap).
psa_status read_text_file(const char* path, std::string* out);

}  // namespace psa

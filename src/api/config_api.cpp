// api/config_api.cpp -- C ABI of the configuration stage: psa_config_*, psa_param_*, psa_catalog_*.
// Checks pointers, runs every body inside the exception guard and forwards to src/config/;
// holds no configuration rules of its own.
#include <cstring>
#include <string>
#include <vector>

#include "api/guard.h"
#include "config/config.h"
#include "config/params.h"
#include "config/yaml_loader.h"
#include "psa.h"

namespace psa {
extern const char* const kEmbeddedConfigYaml;  // generated from configs/attention_config.yaml
}  // namespace psa

struct psa_catalog_s {
  std::vector<psa::ModelEntry> models;
};

#define PSA_CHECK_NOT_NULL(arg) \
  PSA_RETURN_IF((arg) == nullptr, PSA_ERR_NULL_POINTER, "%s: must not be NULL", #arg)

namespace {

const char* const kEmbeddedSource = "<embedded attention_config.yaml>";

// YAML text in memory has the bound of a config file (kMaxConfigFileBytes, 64 MiB); the
// length is found without reading past it.
psa_status check_yaml_length(const char* yaml) {
  const void* end = std::memchr(yaml, '\0', psa::kMaxConfigFileBytes + 1);
  PSA_RETURN_IF(end == nullptr, PSA_ERR_INVALID_ARGUMENT,
                "yaml: longer than %llu bytes (64 MiB), the limit of config files",
                static_cast<unsigned long long>(psa::kMaxConfigFileBytes));
  return PSA_OK;
}

// The guard for entry points that return a value instead of a status: same rule, no
// exception crosses the ABI, `fallback` is returned instead.
template <typename T, typename Fn>
T guarded(T fallback, Fn fn) noexcept {
  try {
    psa::clear_error();
    return fn();
  } catch (...) {
    psa::set_error(PSA_ERR_INTERNAL, "unexpected exception");
    return fallback;
  }
}

psa_status new_config(const psa::Config& cfg, psa_config** out) {
  *out = new psa_config_s{cfg};
  return PSA_OK;
}

psa_status load_from_text(const std::string& text, const std::string& source, const char* model,
                          const char* preset, psa_config** out) {
  psa::Config cfg;
  PSA_TRY(psa::load_preset(text, source, model, preset, &cfg));
  return new_config(cfg, out);
}

psa_status open_catalog(const std::string& text, const std::string& source, psa_catalog** out) {
  auto* cat = new psa_catalog_s;
  const psa_status st = psa::load_catalog(text, source, &cat->models);
  if (st != PSA_OK) {
    delete cat;
    return st;
  }
  *out = cat;
  return PSA_OK;
}

// Lookups compare C strings: a found name costs no allocation in the value-returning calls.
const psa::ModelEntry* find_model(const psa_catalog* c, const char* model) {
  for (const psa::ModelEntry& m : c->models)
    if (std::strcmp(m.name.c_str(), model) == 0) return &m;
  return nullptr;
}

const psa::PresetEntry* find_preset(const psa::ModelEntry& m, const char* preset) {
  for (const psa::PresetEntry& p : m.presets)
    if (std::strcmp(p.name.c_str(), preset) == 0) return &p;
  return nullptr;
}

// Sets the NOT_FOUND message for an unknown model and returns nullptr.
const psa::ModelEntry* require_model(const psa_catalog* c, const char* model) {
  const psa::ModelEntry* m = find_model(c, model);
  if (m == nullptr) {
    std::string names;
    for (const psa::ModelEntry& e : c->models) names += (names.empty() ? "" : ", ") + e.name;
    psa::set_error(PSA_ERR_NOT_FOUND, "model = %s: not found in the catalog; available: %s", model,
                   names.c_str());
  }
  return m;
}

}  // namespace

extern "C" {

PSA_API psa_status psa_config_create(psa_config** out) {
  PSA_API_BEGIN
  PSA_CHECK_NOT_NULL(out);
  return new_config(psa::Config{}, out);
  PSA_API_END
}

PSA_API psa_status psa_config_clone(const psa_config* src, psa_config** out) {
  PSA_API_BEGIN
  PSA_CHECK_NOT_NULL(src);
  PSA_CHECK_NOT_NULL(out);
  return new_config(src->cfg, out);
  PSA_API_END
}

PSA_API void psa_config_destroy(psa_config* config) { delete config; }

PSA_API psa_status psa_config_load_file(const char* path, const char* model, const char* preset,
                                        psa_config** out) {
  PSA_API_BEGIN
  PSA_CHECK_NOT_NULL(path);
  PSA_CHECK_NOT_NULL(model);
  PSA_CHECK_NOT_NULL(out);
  std::string text;
  PSA_TRY(psa::read_text_file(path, &text));
  return load_from_text(text, path, model, preset, out);
  PSA_API_END
}

PSA_API psa_status psa_config_load_string(const char* yaml, const char* model, const char* preset,
                                          psa_config** out) {
  PSA_API_BEGIN
  PSA_CHECK_NOT_NULL(yaml);
  PSA_CHECK_NOT_NULL(model);
  PSA_CHECK_NOT_NULL(out);
  PSA_TRY(check_yaml_length(yaml));
  return load_from_text(yaml, "<string>", model, preset, out);
  PSA_API_END
}

PSA_API psa_status psa_config_load_embedded(const char* model, const char* preset,
                                            psa_config** out) {
  PSA_API_BEGIN
  PSA_CHECK_NOT_NULL(model);
  PSA_CHECK_NOT_NULL(out);
  return load_from_text(psa::kEmbeddedConfigYaml, kEmbeddedSource, model, preset, out);
  PSA_API_END
}

PSA_API const char* psa_embedded_config_yaml(void) {
  return guarded<const char*>(psa::kEmbeddedConfigYaml, [] { return psa::kEmbeddedConfigYaml; });
}

PSA_API psa_status psa_config_validate(const psa_config* config) {
  PSA_API_BEGIN
  PSA_CHECK_NOT_NULL(config);
  return psa::validate_config(config->cfg, "");
  PSA_API_END
}

PSA_API psa_status psa_config_set_int(psa_config* config, psa_param param, int64_t value) {
  PSA_API_BEGIN
  PSA_CHECK_NOT_NULL(config);
  return psa::param_set_int(config->cfg, param, value);
  PSA_API_END
}

PSA_API psa_status psa_config_set_double(psa_config* config, psa_param param, double value) {
  PSA_API_BEGIN
  PSA_CHECK_NOT_NULL(config);
  return psa::param_set_double(config->cfg, param, value);
  PSA_API_END
}

PSA_API psa_status psa_config_get_int(const psa_config* config, psa_param param, int64_t* value) {
  PSA_API_BEGIN
  PSA_CHECK_NOT_NULL(config);
  PSA_CHECK_NOT_NULL(value);
  return psa::param_get_int(config->cfg, param, value);
  PSA_API_END
}

PSA_API psa_status psa_config_get_double(const psa_config* config, psa_param param, double* value) {
  PSA_API_BEGIN
  PSA_CHECK_NOT_NULL(config);
  PSA_CHECK_NOT_NULL(value);
  return psa::param_get_double(config->cfg, param, value);
  PSA_API_END
}

PSA_API psa_status psa_param_info(psa_param param, const char** name, psa_param_type* type,
                                  double* lower, double* upper) {
  PSA_API_BEGIN
  const psa::ParamInfo* p = psa::param_info(param);
  PSA_RETURN_IF(p == nullptr, PSA_ERR_INVALID_ARGUMENT, "param = %d: allowed 0..%d",
                static_cast<int>(param), PSA_PARAM_COUNT_ - 1);
  double lo = 0.0, hi = 0.0;
  psa::param_bounds(*p, &lo, &hi);
  if (name != nullptr) *name = p->name;
  if (type != nullptr) *type = psa::param_type(*p);
  if (lower != nullptr) *lower = lo;
  if (upper != nullptr) *upper = hi;
  return PSA_OK;
  PSA_API_END
}

PSA_API const char* psa_param_value_name(psa_param param, int64_t value) {
  const psa::ParamInfo* p = psa::param_info(param);
  if (p == nullptr || p->kind != psa::ParamKind::kEnum || value < 0 || value >= p->count) return nullptr;
  return p->names[value];
}

PSA_API psa_status psa_param_value_from_name(psa_param param, const char* name, int64_t* value) {
  PSA_API_BEGIN
  PSA_CHECK_NOT_NULL(name);
  PSA_CHECK_NOT_NULL(value);
  const psa::ParamInfo* p = psa::param_info(param);
  if (p == nullptr || p->kind != psa::ParamKind::kEnum) {
    std::string with_words;
    for (int i = 0; i < PSA_PARAM_COUNT_; ++i) {
      const psa::ParamInfo* q = psa::param_info(static_cast<psa_param>(i));
      if (q->kind == psa::ParamKind::kEnum) with_words += std::string(with_words.empty() ? "" : ", ") + q->name;
    }
    return psa::set_error(PSA_ERR_INVALID_ARGUMENT, "param = %d: not a parameter with words (%s)",
                          static_cast<int>(param), with_words.c_str());
  }
  auto lower = [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; };
  for (int i = 0; i < p->count; ++i) {
    const char* w = p->names[i];
    size_t k = 0;
    while (w[k] != 0 && name[k] != 0 && lower(w[k]) == lower(name[k])) ++k;
    if (w[k] == 0 && name[k] == 0) {
      *value = i;
      return PSA_OK;
    }
  }
  return psa::set_error(PSA_ERR_NOT_FOUND, "%s = '%s': unknown word; allowed: %s", p->name, name,
                        psa::param_enum_list(*p).c_str());
  PSA_API_END
}

PSA_API psa_status psa_param_from_name(const char* name, psa_param* param) {
  PSA_API_BEGIN
  PSA_CHECK_NOT_NULL(name);
  PSA_CHECK_NOT_NULL(param);
  const psa::ParamInfo* p = psa::param_by_name(name);
  if (p == nullptr) {
    std::string names;
    for (int i = 0; i < PSA_PARAM_COUNT_; ++i)
      names += std::string(i ? ", " : "") + psa::param_info(static_cast<psa_param>(i))->name;
    return psa::set_error(PSA_ERR_NOT_FOUND, "name = %s: unknown parameter; allowed: %s", name,
                          names.c_str());
  }
  *param = p->id;
  return PSA_OK;
  PSA_API_END
}

PSA_API psa_status psa_catalog_open(const char* path, psa_catalog** out) {
  PSA_API_BEGIN
  PSA_CHECK_NOT_NULL(out);
  if (path == nullptr) return open_catalog(psa::kEmbeddedConfigYaml, kEmbeddedSource, out);
  std::string text;
  PSA_TRY(psa::read_text_file(path, &text));
  return open_catalog(text, path, out);
  PSA_API_END
}

PSA_API psa_status psa_catalog_open_string(const char* yaml, psa_catalog** out) {
  PSA_API_BEGIN
  PSA_CHECK_NOT_NULL(yaml);
  PSA_CHECK_NOT_NULL(out);
  PSA_TRY(check_yaml_length(yaml));
  return open_catalog(yaml, "<string>", out);
  PSA_API_END
}

PSA_API void psa_catalog_destroy(psa_catalog* catalog) { delete catalog; }

PSA_API int32_t psa_catalog_model_count(const psa_catalog* catalog) {
  return guarded<int32_t>(0, [&]() -> int32_t {
    if (catalog == nullptr) {
      psa::set_error(PSA_ERR_NULL_POINTER, "catalog: must not be NULL");
      return 0;
    }
    return static_cast<int32_t>(catalog->models.size());
  });
}

PSA_API const char* psa_catalog_model_name(const psa_catalog* catalog, int32_t index) {
  return guarded<const char*>(nullptr, [&]() -> const char* {
    if (catalog == nullptr) {
      psa::set_error(PSA_ERR_NULL_POINTER, "catalog: must not be NULL");
      return nullptr;
    }
    if (index < 0 || static_cast<size_t>(index) >= catalog->models.size()) {
      psa::set_error(PSA_ERR_INVALID_ARGUMENT, "index = %d: allowed 0..%d", index,
                     static_cast<int>(catalog->models.size()) - 1);
      return nullptr;
    }
    return catalog->models[index].name.c_str();
  });
}

PSA_API int32_t psa_catalog_preset_count(const psa_catalog* catalog, const char* model) {
  return guarded<int32_t>(-1, [&]() -> int32_t {
    if (catalog == nullptr || model == nullptr) {
      psa::set_error(PSA_ERR_NULL_POINTER, "%s: must not be NULL", catalog ? "model" : "catalog");
      return -1;
    }
    const psa::ModelEntry* m = require_model(catalog, model);
    return m ? static_cast<int32_t>(m->presets.size()) : -1;
  });
}

PSA_API const char* psa_catalog_preset_name(const psa_catalog* catalog, const char* model,
                                            int32_t index) {
  return guarded<const char*>(nullptr, [&]() -> const char* {
    if (catalog == nullptr || model == nullptr) {
      psa::set_error(PSA_ERR_NULL_POINTER, "%s: must not be NULL", catalog ? "model" : "catalog");
      return nullptr;
    }
    const psa::ModelEntry* m = require_model(catalog, model);
    if (m == nullptr) return nullptr;
    if (index < 0 || static_cast<size_t>(index) >= m->presets.size()) {
      psa::set_error(PSA_ERR_INVALID_ARGUMENT, "index = %d: allowed 0..%d (presets of %s)", index,
                     static_cast<int>(m->presets.size()) - 1, model);
      return nullptr;
    }
    return m->presets[index].name.c_str();
  });
}

PSA_API const char* psa_catalog_default_preset(const psa_catalog* catalog, const char* model) {
  return guarded<const char*>(nullptr, [&]() -> const char* {
    if (catalog == nullptr || model == nullptr) {
      psa::set_error(PSA_ERR_NULL_POINTER, "%s: must not be NULL", catalog ? "model" : "catalog");
      return nullptr;
    }
    const psa::ModelEntry* m = require_model(catalog, model);
    if (m == nullptr) return nullptr;
    if (m->default_preset.empty()) {
      // A status, not a bare NULL: the caller can tell "no default" from a bad call.
      std::string names;
      for (const psa::PresetEntry& p : m->presets) names += (names.empty() ? "" : ", ") + p.name;
      psa::set_error(PSA_ERR_NOT_FOUND,
                     "%s.default_attention: not set, so the model has no default preset; "
                     "name one of: %s",
                     model, names.c_str());
      return nullptr;
    }
    return m->default_preset.c_str();
  });
}

PSA_API psa_status psa_catalog_get_config(const psa_catalog* catalog, const char* model,
                                          const char* preset, psa_config** out) {
  PSA_API_BEGIN
  PSA_CHECK_NOT_NULL(catalog);
  PSA_CHECK_NOT_NULL(model);
  PSA_CHECK_NOT_NULL(out);
  const psa::ModelEntry* m = require_model(catalog, model);
  if (m == nullptr) return PSA_ERR_NOT_FOUND;
  std::string names;
  for (const psa::PresetEntry& p : m->presets) names += (names.empty() ? "" : ", ") + p.name;
  PSA_RETURN_IF(preset == nullptr && m->default_preset.empty(), PSA_ERR_NOT_FOUND,
                "%s.default_attention: missing, so preset must be named; available: %s", model,
                names.c_str());
  const char* chosen = preset != nullptr ? preset : m->default_preset.c_str();
  const psa::PresetEntry* p = find_preset(*m, chosen);
  PSA_RETURN_IF(p == nullptr, PSA_ERR_NOT_FOUND,
                "%s.attention_configs.%s: preset not found; available: %s", model, chosen,
                names.c_str());
  return new_config(p->config, out);
  PSA_API_END
}

}  // extern "C"

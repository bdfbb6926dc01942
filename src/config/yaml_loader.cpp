// config/yaml_loader.cpp -- configuration stage, loader: the only file of libpsa that includes
// yaml-cpp. Reference-format YAML -> models -> presets -> Config; every message names the key
// path, the value and what is allowed. No yaml-cpp exception leaves this file.
#include "config/yaml_loader.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>
// yaml-cpp 0.7 and later stop at a fixed nesting depth with YAML::DeepRecursion, which the
// umbrella header does not declare; older releases have neither the limit nor the header.
#if __has_include(<yaml-cpp/depthguard.h>)
#include <yaml-cpp/depthguard.h>
#define PSA_YAML_HAS_DEPTH_GUARD 1
#endif

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <set>

#include "config/params.h"
#include "core/error.h"
#include "core/utf8.h"

namespace psa {
namespace {

using YAML::Node;
using Keys = std::vector<std::string>;

struct Entry {
  std::string key;
  Node value;
};

const Keys kModelKeys = {"default_attention", "video_scale",    "text_length",
                         "attention_configs", "calls_per_step", "inference_steps"};
const Keys kVideoScaleKeys = {"width_divisor", "height_divisor", "depth_divisor"};
// Keys not listed in the special cases of parse_preset are psa_param names (params.h).
const Keys kPresetKeys = {
    // The reference's keys.
    "type", "description", "use_rearrange", "use_sim_mask", "block_size", "mask_ratios",
    "mask_mode", "attn_impl", "tile_size", "warmup_steps", "rearrange_method", "verbose",
    "enable_logging", "log_dir", "sim_thresholds", "sim_2x_threshold", "sim_4x_threshold",
    "sim_8x_threshold", "text_length",
    // libpsa extensions.
    "min_full_attn_ratio", "sample_divisor", "seed", "causal", "scale", "calls_per_step",
    "inference_steps", "text_rule", "text_rows_dense", "sparsity", "cdf_threshold", "keep_sink",
    "keep_recent", "xattn_stride", "xattn_chunk_size", "precision"};
const Keys kBlockSizeKeys = {"m", "n", "tile_n"};
const Keys kSimKeys = {"x2", "x4", "x8"};
const Keys kRatioKeys = {"1", "2", "4", "8", "0"};  // index == LevelSlot
const char* const kDirectSimKeys[3] = {"sim_2x_threshold", "sim_4x_threshold", "sim_8x_threshold"};
const psa_param kSimParams[3] = {PSA_PARAM_SIM_THRESHOLD_X2, PSA_PARAM_SIM_THRESHOLD_X4,
                                 PSA_PARAM_SIM_THRESHOLD_X8};

std::string join(const std::string& path, const std::string& key) {
  return path.empty() ? key : path + "." + key;
}

std::string list_text(const Keys& names) {
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) out += (i ? ", " : "") + names[i];
  return out;
}

std::string scalar_text(const Node& n) { return n.Scalar().empty() ? "\"\"" : n.Scalar(); }

std::string node_kind(const Node& n) {
  switch (n.Type()) {
    case YAML::NodeType::Null:
      return "null";
    case YAML::NodeType::Scalar:
      return "the scalar " + scalar_text(n);
    case YAML::NodeType::Sequence:
      return "a sequence";
    case YAML::NodeType::Map:
      return "a map";
    case YAML::NodeType::Undefined:
      break;
  }
  return "nothing";
}

// "<path> = <value>: expected <what>" for a scalar, "<path>: expected <what>, got <kind>" else.
psa_status type_error(const std::string& path, const Node& n, const std::string& what) {
  if (n.IsScalar())
    return set_error(PSA_ERR_INVALID_CONFIG, "%s = %s: expected %s", path.c_str(),
                     scalar_text(n).c_str(), what.c_str());
  return set_error(PSA_ERR_INVALID_CONFIG, "%s: expected %s, got %s", path.c_str(), what.c_str(),
                   node_kind(n).c_str());
}

// Numbers are parsed from the scalar text with std::from_chars: locale-independent and free of
// iostreams. (yaml-cpp's convert<> goes through std::stringstream and its locale facets, which
// crashed inside a process that had imported PyTorch on the GPU machine.) Only YAML 1.2 core
// schema numbers are accepted: [-+]?[0-9]+ or 0x[0-9a-fA-F]+ for integers, and
// [-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)? for reals (one sign at most, so "+-0.5"
// is text, not a number; .inf and .nan are not finite and rejected as well).
bool is_digit(char c) { return c >= '0' && c <= '9'; }

// [-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)? when `real`, [-+]?[0-9]+ otherwise.
bool is_yaml12_decimal(const std::string& t, bool real) {
  size_t i = 0;
  const size_t n = t.size();
  if (i < n && (t[i] == '+' || t[i] == '-')) ++i;
  size_t int_digits = 0, frac_digits = 0;
  while (i < n && is_digit(t[i])) ++i, ++int_digits;
  if (!real) return int_digits > 0 && i == n;
  if (i < n && t[i] == '.') {
    ++i;
    while (i < n && is_digit(t[i])) ++i, ++frac_digits;
  }
  if (int_digits == 0 && frac_digits == 0) return false;
  if (i < n && (t[i] == 'e' || t[i] == 'E')) {
    ++i;
    if (i < n && (t[i] == '+' || t[i] == '-')) ++i;
    size_t exp_digits = 0;
    while (i < n && is_digit(t[i])) ++i, ++exp_digits;
    if (exp_digits == 0) return false;
  }
  return i == n;
}

bool parse_int(const std::string& text, int64_t* v) {
  const char* b = text.data();
  const char* e = b + text.size();
  int base = 10;
  bool neg = false;
  if (text.size() > 2 && b[0] == '0' && b[1] == 'x') {
    for (size_t i = 2; i < text.size(); ++i)
      if (!std::isxdigit(static_cast<unsigned char>(text[i]))) return false;
    base = 16;
    b += 2;
  } else {
    if (!is_yaml12_decimal(text, /*real=*/false)) return false;
    if (*b == '+' || *b == '-') neg = *b++ == '-';
  }
  uint64_t u = 0;
  auto r = std::from_chars(b, e, u, base);
  if (r.ec != std::errc() || r.ptr != e) return false;
  if (!neg && u > static_cast<uint64_t>(INT64_MAX)) return false;
  if (neg && u > static_cast<uint64_t>(INT64_MAX) + 1) return false;
  *v = neg ? static_cast<int64_t>(0 - u) : static_cast<int64_t>(u);
  return true;
}

bool parse_double(const std::string& text, double* v) {
  if (!is_yaml12_decimal(text, /*real=*/true)) return false;
  const char* b = text.data();
  const char* e = b + text.size();
  if (*b == '+') ++b;  // from_chars takes '-' but not '+'
  auto r = std::from_chars(b, e, *v, std::chars_format::general);
  return r.ec == std::errc() && r.ptr == e && std::isfinite(*v);
}

psa_status read_int(const Node& n, const std::string& path, int64_t* out) {
  int64_t v = 0;
  if (!n.IsScalar() || !parse_int(n.Scalar(), &v)) return type_error(path, n, "an integer");
  *out = v;
  return PSA_OK;
}

psa_status read_double(const Node& n, const std::string& path, double* out) {
  double v = 0.0;
  if (!n.IsScalar() || !parse_double(n.Scalar(), &v)) return type_error(path, n, "a finite number");
  *out = v;
  return PSA_OK;
}

// YAML 1.1 booleans (true/false, yes/no, on/off in any of yaml-cpp's casings) and 0/1, which a
// Python loader would also have taken as truthy.
psa_status read_bool(const Node& n, const std::string& path, bool* out) {
  bool v = false;
  if (n.IsScalar() && (n.Scalar() == "0" || n.Scalar() == "1")) {
    *out = n.Scalar() == "1";
    return PSA_OK;
  }
  if (!n.IsScalar() || !YAML::convert<bool>::decode(n, v))
    return type_error(path, n, "a boolean (true or false)");
  *out = v;
  return PSA_OK;
}

// Null is accepted as the empty string (description:, log_dir:).
psa_status read_text(const Node& n, const std::string& path, std::string* out) {
  if (n.IsNull()) {
    out->clear();
    return PSA_OK;
  }
  if (!n.IsScalar()) return type_error(path, n, "a string");
  *out = n.Scalar();
  return PSA_OK;
}

// `key` with NUL and other control characters written as \0, \xNN, for a message.
std::string escaped_key(const std::string& key) {
  std::string out;
  for (const char c : key) {
    const unsigned char u = static_cast<unsigned char>(c);
    if (u == 0) {
      out += "\\0";
    } else if (u < 0x20 || u == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", u);
      out += buf;
    } else {
      out += c;
    }
  }
  return out;
}

// Entries of the map `n` in file order. Rejects a non-map, non-scalar and duplicate keys, and
// (when `allowed` is not empty) keys outside `allowed`.
psa_status map_entries(const Node& n, const std::string& path, const Keys& allowed,
                       const std::string& what, std::vector<Entry>* out) {
  if (!n.IsMap()) return type_error(path, n, what);
  std::set<std::string> seen;
  out->clear();
  for (auto it = n.begin(); it != n.end(); ++it) {
    PSA_RETURN_IF(!it->first.IsScalar(), PSA_ERR_INVALID_CONFIG, "%s: keys must be scalars, got %s",
                  path.c_str(), node_kind(it->first).c_str());
    const std::string key = it->first.Scalar();
    // A NUL inside a key ("M\0x") would make C callers see a different, shorter name: two
    // keys could then name one model, and lookups by the name the catalog lists would fail.
    if (key.find('\0') != std::string::npos) {
      const std::string shown = join(path, "\"" + escaped_key(key) + "\"");
      return set_error(PSA_ERR_INVALID_CONFIG,
                       "%s: keys must not contain NUL characters (\\0); names reach C callers as "
                       "NUL-terminated strings",
                       shown.c_str());
    }
    const std::string kp = join(path, key);
    if (!allowed.empty()) {
      bool known = false;
      for (const std::string& a : allowed) known = known || a == key;
      PSA_RETURN_IF(!known, PSA_ERR_INVALID_CONFIG, "%s: unknown key; allowed: %s", kp.c_str(),
                    list_text(allowed).c_str());
    }
    PSA_RETURN_IF(!seen.insert(key).second, PSA_ERR_INVALID_CONFIG, "%s: duplicate key",
                  kp.c_str());
    out->push_back(Entry{key, it->second});
  }
  return PSA_OK;
}

const Entry* find_entry(const std::vector<Entry>& entries, const std::string& key) {
  for (const Entry& e : entries)
    if (e.key == key) return &e;
  return nullptr;
}

Keys entry_keys(const std::vector<Entry>& entries) {
  Keys out;
  for (const Entry& e : entries) out.push_back(e.key);
  return out;
}

// Reads `n` into the member of parameter `p`, with the table's type and bounds.
psa_status assign_param(Config& c, const ParamInfo& p, const Node& n, const std::string& path) {
  switch (p.kind) {
    case ParamKind::kEnum: {
      if (!n.IsScalar()) return type_error(path, n, "one of " + param_enum_list(p));
      const int v = param_enum_lookup(p, n.Scalar());
      PSA_RETURN_IF(v < 0, PSA_ERR_INVALID_CONFIG, "%s = %s: allowed %s", path.c_str(),
                    scalar_text(n).c_str(), param_enum_list(p).c_str());
      param_store_int(c, p.id, v);
      return PSA_OK;
    }
    case ParamKind::kBool: {
      bool v = false;
      PSA_TRY(read_bool(n, path, &v));
      param_store_int(c, p.id, v ? 1 : 0);
      return PSA_OK;
    }
    case ParamKind::kIntRange:
    case ParamKind::kIntSet: {
      int64_t v = 0;
      PSA_TRY(read_int(n, path, &v));
      PSA_TRY(param_check_int(p, v, path, PSA_ERR_INVALID_CONFIG));
      param_store_int(c, p.id, v);
      return PSA_OK;
    }
    case ParamKind::kReal:
    case ParamKind::kRealOpenHi:
    case ParamKind::kRealOpenLo: {
      double v = 0.0;
      PSA_TRY(read_double(n, path, &v));
      PSA_TRY(param_check_double(p, v, path, PSA_ERR_INVALID_CONFIG));
      param_store_double(c, p.id, v);
      return PSA_OK;
    }
  }
  return set_error(PSA_ERR_INTERNAL, "%s: parameter kind not handled", path.c_str());
}

psa_status assign_param(Config& c, psa_param id, const Node& n, const std::string& path) {
  return assign_param(c, *param_info(id), n, path);
}

// Spec 9.3 loader defaults, except use_sim_mask (false here; see configs/README.md).
Config loader_defaults() {
  Config c;
  c.block_m = 128;
  c.block_n = 128;
  c.tile_n = 32;
  c.mask_mode = PSA_MASK_MODE_THRESHOLDBOUND;
  c.mask_format = PSA_MASK_FORMAT_SEGMENTS;
  c.use_sim_mask = false;
  c.use_rearrange = true;
  c.rearrange_method = PSA_REARRANGE_GILBERT;
  c.warmup_steps = 0;
  c.verbose = false;
  c.enable_logging = true;
  return c;
}

psa_status parse_block_size(Config& c, const Node& n, const std::string& path) {
  static const psa_param ids[3] = {PSA_PARAM_BLOCK_M, PSA_PARAM_BLOCK_N, PSA_PARAM_TILE_N};
  std::vector<Entry> entries;
  PSA_TRY(map_entries(n, path, kBlockSizeKeys, "a map with keys m, n, tile_n", &entries));
  for (const Entry& e : entries)
    for (int i = 0; i < 3; ++i)
      if (e.key == kBlockSizeKeys[i]) PSA_TRY(assign_param(c, ids[i], e.value, join(path, e.key)));
  return PSA_OK;
}

psa_status parse_sim_thresholds(Config& c, const Node& n, const std::string& path) {
  std::vector<Entry> entries;
  PSA_TRY(map_entries(n, path, kSimKeys, "a map with keys x2, x4, x8", &entries));
  for (const Entry& e : entries)
    for (int i = 0; i < 3; ++i)
      if (e.key == kSimKeys[i]) PSA_TRY(assign_param(c, kSimParams[i], e.value, join(path, e.key)));
  return PSA_OK;
}

psa_status parse_tile_size(Config& c, const Node& n, const std::string& path) {
  static const psa_param ids[3] = {PSA_PARAM_STA_TILE_T, PSA_PARAM_STA_TILE_H,
                                   PSA_PARAM_STA_TILE_W};
  if (!n.IsSequence() || n.size() != 3)
    return type_error(path, n, "[t, h, w] (three integers >= 1)");
  for (int i = 0; i < 3; ++i)
    PSA_TRY(assign_param(c, ids[i], n[i], path + "[" + std::to_string(i) + "]"));
  return PSA_OK;
}

// All five levels are required and must be listed in slot order: the SEGMENTS kernel reads
// segments positionally (spec 4.6) and the reference's topk follows the listing order (4.1).
psa_status parse_mask_ratios(Config& c, const Node& n, const std::string& path) {
  static const psa_param ids[kNumSlots] = {PSA_PARAM_RATIO_L1, PSA_PARAM_RATIO_L2,
                                           PSA_PARAM_RATIO_L4, PSA_PARAM_RATIO_L8,
                                           PSA_PARAM_RATIO_L0};
  std::vector<Entry> entries;
  PSA_TRY(
      map_entries(n, path, kRatioKeys, "a map of levels 1, 2, 4, 8, 0 to [start, end]", &entries));
  for (const Entry& e : entries) {
    int slot = 0;
    while (kRatioKeys[slot] != e.key) ++slot;
    const std::string kp = join(path, e.key);
    if (!e.value.IsSequence() || e.value.size() != 2)
      return type_error(kp, e.value, "[start, end] (two numbers in [0, 1])");
    double v[2] = {0.0, 0.0};
    for (int i = 0; i < 2; ++i) {
      const std::string ep = kp + "[" + std::to_string(i) + "]";
      PSA_TRY(read_double(e.value[i], ep, &v[i]));
      PSA_TRY(param_check_double(*param_info(ids[slot]), v[i], ep, PSA_ERR_INVALID_CONFIG));
    }
    c.ratio_start[slot] = v[0];
    c.ratio_end[slot] = v[1];
  }
  const Keys given = entry_keys(entries);
  for (int s = 0; s < kNumSlots; ++s)
    PSA_RETURN_IF(find_entry(entries, kRatioKeys[s]) == nullptr, PSA_ERR_INVALID_CONFIG,
                  "%s: level %s missing (given: %s); all of 1, 2, 4, 8, 0 are required",
                  path.c_str(), kRatioKeys[s].c_str(), list_text(given).c_str());
  PSA_RETURN_IF(given != kRatioKeys, PSA_ERR_INVALID_CONFIG,
                "%s: levels listed as %s; allowed order: 1, 2, 4, 8, 0", path.c_str(),
                list_text(given).c_str());
  return PSA_OK;
}

psa_status parse_preset(const Node& n, const std::string& path, const Config& base, Config* out) {
  std::vector<Entry> entries;
  PSA_TRY(map_entries(n, path, kPresetKeys, "a map of preset keys", &entries));
  Config c = base;
  bool have_ratios = false;
  const Node* direct_sim[3] = {nullptr, nullptr, nullptr};
  for (const Entry& e : entries) {
    const std::string kp = join(path, e.key);
    const Node& v = e.value;
    if (e.key == "description") {
      PSA_TRY(read_text(v, kp, &c.description));
    } else if (e.key == "log_dir") {
      std::string ignored;
      PSA_TRY(read_text(v, kp, &ignored));
    } else if (e.key == "verbose") {
      PSA_TRY(read_bool(v, kp, &c.verbose));
    } else if (e.key == "enable_logging") {
      PSA_TRY(read_bool(v, kp, &c.enable_logging));
    } else if (e.key == "block_size") {
      PSA_TRY(parse_block_size(c, v, kp));
    } else if (e.key == "mask_ratios") {
      PSA_TRY(parse_mask_ratios(c, v, kp));
      have_ratios = true;
    } else if (e.key == "tile_size") {
      PSA_TRY(parse_tile_size(c, v, kp));
    } else if (e.key == "sim_thresholds") {
      PSA_TRY(parse_sim_thresholds(c, v, kp));
    } else if (e.key == kDirectSimKeys[0] || e.key == kDirectSimKeys[1] ||
               e.key == kDirectSimKeys[2]) {
      for (int i = 0; i < 3; ++i)
        if (e.key == kDirectSimKeys[i]) direct_sim[i] = &e.value;
    } else {
      const ParamInfo* p = param_by_name(e.key.c_str());
      PSA_RETURN_IF(p == nullptr, PSA_ERR_INTERNAL, "%s: preset key without a handler", kp.c_str());
      PSA_TRY(assign_param(c, *p, v, kp));
    }
  }
  // The reference reads sim_Nx_threshold over sim_thresholds.xN whatever the key order.
  for (int i = 0; i < 3; ++i)
    if (direct_sim[i] != nullptr)
      PSA_TRY(assign_param(c, kSimParams[i], *direct_sim[i], join(path, kDirectSimKeys[i])));
  PSA_RETURN_IF((c.method == PSA_METHOD_PSA || c.method == PSA_METHOD_PSA_CAUSAL) && !have_ratios, PSA_ERR_INVALID_CONFIG,
                "%s.mask_ratios: missing; type %s requires levels 1, 2, 4, 8, 0 as [start, end]",
                path.c_str(), kMethodNames[c.method]);
  PSA_TRY(validate_config(c, path));
  *out = c;
  return PSA_OK;
}

struct ModelHeader {
  std::string default_preset;
  Config base;  // loader defaults plus the model-level keys
  std::vector<Entry> presets;
};

psa_status parse_video_scale(Config& c, const Node& n, const std::string& path) {
  static const psa_param ids[3] = {PSA_PARAM_WIDTH_DIVISOR, PSA_PARAM_HEIGHT_DIVISOR,
                                   PSA_PARAM_DEPTH_DIVISOR};
  std::vector<Entry> entries;
  PSA_TRY(map_entries(n, path, kVideoScaleKeys,
                      "a map with keys width_divisor, height_divisor, depth_divisor", &entries));
  for (int i = 0; i < 3; ++i) {
    const Entry* e = find_entry(entries, kVideoScaleKeys[i]);
    const std::string kp = join(path, kVideoScaleKeys[i]);
    PSA_RETURN_IF(e == nullptr, PSA_ERR_INVALID_CONFIG, "%s: missing (required, integer >= 1)",
                  kp.c_str());
    PSA_TRY(assign_param(c, ids[i], e->value, kp));
  }
  return PSA_OK;
}

psa_status parse_model(const Node& n, const std::string& name, ModelHeader* out) {
  std::vector<Entry> entries;
  PSA_TRY(map_entries(n, name, kModelKeys, "a map with keys " + list_text(kModelKeys), &entries));
  ModelHeader h;
  h.base = loader_defaults();
  bool have_scale = false, have_configs = false;
  for (const Entry& e : entries) {
    const std::string kp = join(name, e.key);
    if (e.key == "default_attention") {
      if (!e.value.IsScalar()) return type_error(kp, e.value, "a preset name");
      h.default_preset = e.value.Scalar();
    } else if (e.key == "video_scale") {
      PSA_TRY(parse_video_scale(h.base, e.value, kp));
      have_scale = true;
    } else if (e.key == "attention_configs") {
      PSA_TRY(map_entries(e.value, kp, {}, "a map of preset names to presets", &h.presets));
      PSA_RETURN_IF(h.presets.empty(), PSA_ERR_INVALID_CONFIG,
                    "%s: empty; a model needs at least one preset", kp.c_str());
      have_configs = true;
    } else {
      PSA_TRY(assign_param(h.base, *param_by_name(e.key.c_str()), e.value, kp));
    }
  }
  PSA_RETURN_IF(!have_scale, PSA_ERR_INVALID_CONFIG,
                "%s.video_scale: missing (required: width_divisor, height_divisor, depth_divisor)",
                name.c_str());
  PSA_RETURN_IF(!have_configs, PSA_ERR_INVALID_CONFIG,
                "%s.attention_configs: missing; a model needs at least one preset", name.c_str());
  PSA_RETURN_IF(!h.default_preset.empty() && find_entry(h.presets, h.default_preset) == nullptr,
                PSA_ERR_INVALID_CONFIG,
                "%s.default_attention = %s: allowed %s (the model's presets)", name.c_str(),
                h.default_preset.c_str(), list_text(entry_keys(h.presets)).c_str());
  *out = std::move(h);
  return PSA_OK;
}

std::string preset_path(const std::string& model, const std::string& preset) {
  return model + ".attention_configs." + preset;
}

// YAML text is Unicode (YAML 1.2, 5.2); the names it gives (models, presets) come back to
// callers, whose bindings decode them as UTF-8. UTF-16/32 text (a byte order mark first) is
// decoded by yaml-cpp itself; anything else must be well-formed UTF-8.
psa_status check_utf8(const std::string& text, const std::string& source) {
  const auto starts = [&](const char* bom, size_t n) { return text.compare(0, n, bom, n) == 0; };
  if (starts("\xFE\xFF", 2) || starts("\xFF\xFE", 2) || starts("\0\0\xFE\xFF", 4)) return PSA_OK;
  const size_t bad = first_non_utf8(text);
  if (bad == text.size()) return PSA_OK;
  int line = 1, column = 1;
  for (size_t i = 0; i < bad; ++i) {
    if (text[i] == '\n') {
      ++line;
      column = 1;
    } else if ((static_cast<unsigned char>(text[i]) & 0xC0) != 0x80) {
      ++column;  // one per character, not per byte
    }
  }
  return set_error(PSA_ERR_YAML_PARSE,
                   "%s: line %d, column %d: byte 0x%02X is not UTF-8; YAML text must be UTF-8",
                   source.c_str(), line, column, static_cast<unsigned>(static_cast<unsigned char>(text[bad])));
}

psa_status parse_root(const std::string& text, const std::string& source,
                      std::vector<Entry>* models) {
  PSA_TRY(check_utf8(text, source));
  Node root;
  try {
    root = YAML::Load(text);
#if defined(PSA_YAML_HAS_DEPTH_GUARD)
  } catch (const YAML::DeepRecursion& e) {
    // Its text is ErrorMsg::BAD_FILE ("bad file"), which says nothing of the cause. The mark
    // is where yaml-cpp's scanner had got to, which may lie past the level that hit the limit.
    const char* const what = "maps and sequences nested deeper than yaml-cpp's limit of";
    if (e.mark.is_null())
      return set_error(PSA_ERR_YAML_PARSE, "%s: %s %d levels", source.c_str(), what, e.depth());
    return set_error(PSA_ERR_YAML_PARSE, "%s: line %d, column %d: %s %d levels", source.c_str(),
                     e.mark.line + 1, e.mark.column + 1, what, e.depth());
#endif
  } catch (const YAML::ParserException& e) {
    if (e.mark.is_null())
      return set_error(PSA_ERR_YAML_PARSE, "%s: %s", source.c_str(), e.msg.c_str());
    return set_error(PSA_ERR_YAML_PARSE, "%s: line %d, column %d: %s", source.c_str(),
                     e.mark.line + 1, e.mark.column + 1, e.msg.c_str());
  } catch (const YAML::Exception& e) {
    return set_error(PSA_ERR_YAML_PARSE, "%s: %s", source.c_str(), e.what());
  }
  PSA_RETURN_IF(!root.IsMap(), PSA_ERR_INVALID_CONFIG,
                "%s: expected a map of model names at the top level, got %s", source.c_str(),
                root.IsNull() ? "an empty document" : node_kind(root).c_str());
  return map_entries(root, "", {}, "a map of model names", models);
}

psa_status load_catalog_impl(const std::string& text, const std::string& source,
                             std::vector<ModelEntry>* out) {
  std::vector<Entry> models;
  PSA_TRY(parse_root(text, source, &models));
  std::vector<ModelEntry> result;
  for (const Entry& m : models) {
    ModelHeader h;
    PSA_TRY(parse_model(m.value, m.key, &h));
    ModelEntry me;
    me.name = m.key;
    me.default_preset = h.default_preset;
    for (const Entry& p : h.presets) {
      PresetEntry pe;
      pe.name = p.key;
      PSA_TRY(parse_preset(p.value, preset_path(m.key, p.key), h.base, &pe.config));
      me.presets.push_back(std::move(pe));
    }
    result.push_back(std::move(me));
  }
  out->swap(result);
  return PSA_OK;
}

psa_status load_preset_impl(const std::string& text, const std::string& source, const char* model,
                            const char* preset, Config* out) {
  std::vector<Entry> models;
  PSA_TRY(parse_root(text, source, &models));
  const Entry* m = find_entry(models, model);
  PSA_RETURN_IF(m == nullptr, PSA_ERR_NOT_FOUND, "model = %s: not found in %s; available: %s",
                model, source.c_str(), list_text(entry_keys(models)).c_str());
  ModelHeader h;
  PSA_TRY(parse_model(m->value, m->key, &h));
  const Keys names = entry_keys(h.presets);
  PSA_RETURN_IF(preset == nullptr && h.default_preset.empty(), PSA_ERR_NOT_FOUND,
                "%s.default_attention: missing, so preset must be named; available: %s",
                m->key.c_str(), list_text(names).c_str());
  const std::string chosen = preset != nullptr ? preset : h.default_preset;
  const Entry* p = find_entry(h.presets, chosen);
  PSA_RETURN_IF(p == nullptr, PSA_ERR_NOT_FOUND, "%s: preset not found; available: %s",
                preset_path(m->key, chosen).c_str(), list_text(names).c_str());
  return parse_preset(p->value, preset_path(m->key, p->key), h.base, out);
}

}  // namespace

psa_status load_catalog(const std::string& text, const std::string& source,
                        std::vector<ModelEntry>* out) {
  try {
    return load_catalog_impl(text, source, out);
  } catch (const YAML::Exception& e) {
    return set_error(PSA_ERR_INVALID_CONFIG, "%s: %s", source.c_str(), e.what());
  }
}

psa_status load_preset(const std::string& text, const std::string& source, const char* model,
                       const char* preset, Config* out) {
  try {
    return load_preset_impl(text, source, model, preset, out);
  } catch (const YAML::Exception& e) {
    return set_error(PSA_ERR_INVALID_CONFIG, "%s: %s", source.c_str(), e.what());
  }
}

psa_status read_text_file(const char* path, std::string* out) {
  // O_NONBLOCK: opening a FIFO with no writer returns at once instead of blocking forever;
  // fstat then rejects everything that is not a regular file (FIFOs, /dev/zero, sockets,
  // directories), so a read never waits on, or grows without bound from, a device.
  errno = 0;
  const int fd = ::open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  PSA_RETURN_IF(fd < 0, PSA_ERR_IO, "path = %s: cannot open: %s", path,
                std::strerror(errno ? errno : ENOENT));
  struct FdCloser {
    int fd;
    ~FdCloser() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  PSA_RETURN_IF(::fstat(fd, &st) != 0, PSA_ERR_IO, "path = %s: cannot stat: %s", path,
                std::strerror(errno));
  if (!S_ISREG(st.st_mode)) {
    const char* kind = S_ISDIR(st.st_mode)    ? "a directory"
                       : S_ISFIFO(st.st_mode) ? "a FIFO"
                       : S_ISCHR(st.st_mode)  ? "a character device"
                       : S_ISBLK(st.st_mode)  ? "a block device"
                       : S_ISSOCK(st.st_mode) ? "a socket"
                                              : "not a regular file";
    return set_error(PSA_ERR_IO, "path = %s: is %s; config files must be regular files", path,
                     kind);
  }
  PSA_RETURN_IF(static_cast<uint64_t>(st.st_size) > kMaxConfigFileBytes, PSA_ERR_IO,
                "path = %s: %llu bytes; config files are limited to %llu bytes (64 MiB)", path,
                static_cast<unsigned long long>(st.st_size),
                static_cast<unsigned long long>(kMaxConfigFileBytes));
  std::string data;
  char buf[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    PSA_RETURN_IF(n < 0, PSA_ERR_IO, "path = %s: cannot read: %s", path, std::strerror(errno));
    if (n == 0) break;
    data.append(buf, static_cast<size_t>(n));
    // The file may grow while it is read.
    PSA_RETURN_IF(data.size() > kMaxConfigFileBytes, PSA_ERR_IO,
                  "path = %s: more than %llu bytes; config files are limited to %llu bytes "
                  "(64 MiB)",
                  path, static_cast<unsigned long long>(kMaxConfigFileBytes),
                  static_cast<unsigned long long>(kMaxConfigFileBytes));
  }
  out->swap(data);
  return PSA_OK;
}

}  // namespace psa

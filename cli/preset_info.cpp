// cli/preset_info.cpp -- reads a config's key settings through the public getters and words
// them. Formatting only: validation is the library's.
#include "preset_info.h"

#include <cmath>
#include <cstdio>

#include "cli.h"

namespace psa_cli {
namespace {

int64_t get_int(const psa_config* c, psa_param p) {
  int64_t v = 0;
  check(psa_config_get_int(c, p, &v));
  return v;
}

double get_double(const psa_config* c, psa_param p) {
  double v = 0.0;
  check(psa_config_get_double(c, p, &v));
  return v;
}

// `s` left-aligned in a column of `width`, always followed by at least two spaces.
std::string col(std::string s, size_t width) {
  if (s.size() < width) s.append(width - s.size(), ' ');
  return s + "  ";
}

}  // namespace

PresetInfo read_preset_info(const psa_config* c) {
  PresetInfo p;
  p.method = static_cast<psa_method>(get_int(c, PSA_PARAM_METHOD));
  p.mask_mode = static_cast<psa_mask_mode>(get_int(c, PSA_PARAM_MASK_MODE));
  p.mask_format = static_cast<psa_mask_format>(get_int(c, PSA_PARAM_MASK_FORMAT));
  p.block_m = get_int(c, PSA_PARAM_BLOCK_M);
  p.block_n = get_int(c, PSA_PARAM_BLOCK_N);
  p.tile_n = get_int(c, PSA_PARAM_TILE_N);
  const psa_param ends[5] = {PSA_PARAM_RATIO_L1, PSA_PARAM_RATIO_L2, PSA_PARAM_RATIO_L4,
                             PSA_PARAM_RATIO_L8, PSA_PARAM_RATIO_L0};
  for (int i = 0; i < 5; ++i) p.ratio_end[i] = get_double(c, ends[i]);
  p.use_sim_mask = get_int(c, PSA_PARAM_USE_SIM_MASK) != 0;
  p.use_rearrange = get_int(c, PSA_PARAM_USE_REARRANGE) != 0;
  p.rearrange = static_cast<psa_rearrange>(get_int(c, PSA_PARAM_REARRANGE_METHOD));
  p.warmup_steps = get_int(c, PSA_PARAM_WARMUP_STEPS);
  p.text_length = get_int(c, PSA_PARAM_TEXT_LENGTH);
  p.divisor[0] = get_int(c, PSA_PARAM_DEPTH_DIVISOR);
  p.divisor[1] = get_int(c, PSA_PARAM_HEIGHT_DIVISOR);
  p.divisor[2] = get_int(c, PSA_PARAM_WIDTH_DIVISOR);
  p.sparsity = get_double(c, PSA_PARAM_SPARSITY);
  p.xattn_stride = get_int(c, PSA_PARAM_XATTN_STRIDE);
  return p;
}

const char* method_name(psa_method m) {
  switch (m) {
    case PSA_METHOD_PSA: return "psa";
    case PSA_METHOD_DENSE: return "dense";
    case PSA_METHOD_RF_V2: return "rf_v2";
    case PSA_METHOD_ADA_BSA: return "ada_bsa";
    case PSA_METHOD_PSA_CAUSAL: return "psa_causal";
  }
  return "unknown";
}

const char* mask_mode_name(psa_mask_mode m) {
  switch (m) {
    case PSA_MASK_MODE_TOPK: return "topk";
    case PSA_MASK_MODE_THRESHOLDBOUND: return "thresholdbound";
    case PSA_MASK_MODE_ENERGYBOUND: return "energybound";
  }
  return "unknown";
}

const char* mask_format_name(psa_mask_format f) {
  switch (f) {
    case PSA_MASK_FORMAT_SEGMENTS: return "segments";
    case PSA_MASK_FORMAT_LEVELS: return "levels";
  }
  return "unknown";
}

const char* rearrange_name(const PresetInfo& p) {
  if (!p.use_rearrange) return "none";
  switch (p.rearrange) {
    case PSA_REARRANGE_GILBERT: return "gilbert";
    case PSA_REARRANGE_STA: return "sta";
    case PSA_REARRANGE_SEMANTIC_AWARE: return "semantic_aware";
    case PSA_REARRANGE_HYBRID: return "hybrid";
  }
  return "unknown";
}

std::string fmt_num(double x) {
  if (std::isnan(x)) return "null";
  if (std::isinf(x)) return x > 0 ? "1e999" : "-1e999";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", x);
  return buf;
}

// psa and psa_causal choose a level per block pair (mask mode, format, level ends); rf_v2 and
// ada_bsa keep or skip blocks at a sparsity.
static bool has_levels(psa_method m) { return m == PSA_METHOD_PSA || m == PSA_METHOD_PSA_CAUSAL; }

std::string describe_preset(const PresetInfo& p) {
  std::string s = col(method_name(p.method), 7);
  if (p.method == PSA_METHOD_DENSE) return s + "plain attention";
  if (has_levels(p.method)) {
    s += col(mask_mode_name(p.mask_mode), 14);
    s += col(std::string(mask_format_name(p.mask_format)) + (p.use_sim_mask ? "+sim" : ""), 10);
  } else {
    s += col("sparsity " + fmt_num(p.sparsity), 26);
  }
  s += col("block " + std::to_string(p.block_m) + "x" + std::to_string(p.block_n) + " tile " +
               std::to_string(p.tile_n),
           20);
  if (has_levels(p.method)) {
    static const char* const kLevel[5] = {"1", "2", "4", "8", "0"};
    std::string ends = "ends";
    for (int i = 0; i < 5; ++i) ends += std::string(" ") + kLevel[i] + ":" + fmt_num(p.ratio_end[i]);
    s += col(ends, 34);
  }
  s += col(rearrange_name(p), 7);
  return s + "warmup " + std::to_string(p.warmup_steps);
}

const char* const kPresetColumnsLegend =
    "columns: type, mask mode, mask format (+sim: similarity merge), block size (query x key) "
    "and tile, level ends (the cumulative fraction of key blocks per query block at level 1, 2, "
    "4, 8 and 0), rearrangement, warm-up steps\n"
    "levels: 1 = full attention, 2/4/8 = keys pooled by 2/4/8, 0 = skip (block pair not computed)";

std::string describe_preset_labelled(const PresetInfo& p) {
  std::string s = std::string("type ") + method_name(p.method);
  if (p.method == PSA_METHOD_DENSE) return s + " (plain attention)";
  if (has_levels(p.method)) {
    s += std::string(", mask mode ") + mask_mode_name(p.mask_mode) + ", mask format " +
         mask_format_name(p.mask_format) + (p.use_sim_mask ? "+sim" : "");
  } else {
    s += ", sparsity " + fmt_num(p.sparsity);
  }
  s += ", blocks " + std::to_string(p.block_m) + "x" + std::to_string(p.block_n) + " (tile " +
       std::to_string(p.tile_n) + ")";
  if (p.method == PSA_METHOD_PSA_CAUSAL)
    s += ", antidiagonal importance stride " + std::to_string(p.xattn_stride);
  if (has_levels(p.method)) {
    static const char* const kLevel[5] = {"1", "2", "4", "8", "skip"};
    s += ", level ends";
    for (int i = 0; i < 5; ++i) s += std::string(" ") + kLevel[i] + ":" + fmt_num(p.ratio_end[i]);
  }
  s += std::string(", rearrange ") + rearrange_name(p) + ", warm-up " +
       std::to_string(p.warmup_steps) + " steps";
  return s;
}

}  // namespace psa_cli

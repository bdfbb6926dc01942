// cli/preset_info.h -- the key settings of one config, read through psa_config_get_*, and
// their one-line wording shared by `psa presets` and `psa run`. Formatting only.
#pragma once
#include <cstdint>
#include <string>

#include "psa.h"

namespace psa_cli {

struct PresetInfo {
  psa_method method = PSA_METHOD_PSA;
  psa_mask_mode mask_mode = PSA_MASK_MODE_TOPK;
  psa_mask_format mask_format = PSA_MASK_FORMAT_SEGMENTS;
  int64_t block_m = 0, block_n = 0, tile_n = 0;
  double ratio_end[5] = {0, 0, 0, 0, 0};  // levels 1, 2, 4, 8, 0 (skip)
  bool use_sim_mask = false;
  bool use_rearrange = false;
  psa_rearrange rearrange = PSA_REARRANGE_GILBERT;
  int64_t warmup_steps = 0;
  int64_t text_length = 0;
  int64_t divisor[3] = {1, 1, 1};  // depth (frames), height, width
  double sparsity = 0.0;           // rf_v2 / ada_bsa
  int64_t xattn_stride = 0;        // psa_causal: the antidiagonal importance's stride
};

// Reads every field above; throws Failure on a library error.
PresetInfo read_preset_info(const psa_config* config);

const char* method_name(psa_method m);        // "psa", "dense", "rf_v2", "ada_bsa"
const char* mask_mode_name(psa_mask_mode m);  // "topk", "thresholdbound"
const char* mask_format_name(psa_mask_format f);  // "segments", "levels"
const char* rearrange_name(const PresetInfo& p);  // "gilbert", "sta", ..., "none"

// "psa  thresholdbound  levels+sim  block 128x128 tile 32  ends 1:.5 2:.6 4:.7 8:.8 0:1
// gilbert  warmup 15" (columns padded so that a list of presets lines up).
std::string describe_preset(const PresetInfo& p);

// The same settings with labels, for one preset on its own ("type psa, mask mode
// thresholdbound, mask format levels+sim, blocks 128x128 (tile 32), level ends 1:0.5 ...").
std::string describe_preset_labelled(const PresetInfo& p);

// The legend of describe_preset's columns, printed once under a list of presets.
extern const char* const kPresetColumnsLegend;

// Shortest round-trip-safe decimal for a ratio or a JSON number ("0.5", "1", "0.35").
std::string fmt_num(double x);

}  // namespace psa_cli

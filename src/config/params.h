// config/params.h -- configuration stage, parameter table: every psa_param in one X-macro row
// (YAML-style name, type, bounds, Config member). Bounds of single values only; cross-parameter
// rules live in validate.cpp. No YAML here.
#pragma once
#include <cstdint>
#include <limits>
#include <string>

#include "config/config.h"

namespace psa {

enum class ParamKind {
  kIntRange,    // integer in [ilo, ihi]
  kIntSet,      // integer, one of `values` (sorted ascending)
  kEnum,        // integer 0..count-1, named by `names` (the YAML spelling)
  kBool,        // 0 or 1
  kReal,        // double in [lo, hi]
  kRealOpenHi,  // double in [lo, hi)
  kRealOpenLo   // double in (lo, hi]
};

struct ParamInfo {
  psa_param id;
  const char* name;  // YAML-style key path relative to a preset (or model for video_scale.*)
  ParamKind kind;
  double lo, hi;         // real kinds
  int64_t ilo, ihi;      // integer kinds
  const int64_t* values;  // kIntSet
  const char* const* names;  // kEnum
  int count;              // entries in values / names
};

inline constexpr int64_t kBlockMValues[] = {64, 128};
inline constexpr int64_t kBlockNValues[] = {32, 64, 128};
inline constexpr int64_t kTileNValues[] = {16, 32, 64, 128};
inline constexpr int64_t kSampleDivisorValues[] = {1, 2, 4, 8, 16};
// Enum names in psa.h value order: index == enum value.
inline constexpr const char* kMethodNames[] = {"psa", "dense", "rf_v2", "ada_bsa", "psa_causal"};
inline constexpr const char* kMaskModeNames[] = {"topk", "thresholdbound", "energybound"};
inline constexpr const char* kMaskFormatNames[] = {"new_mask_type", "old_mask_type"};
inline constexpr const char* kRearrangeNames[] = {"Gilbert", "STA", "SemanticAware", "Hybrid"};
inline constexpr const char* kTextRuleNames[] = {"span", "reference_suffix"};
inline constexpr const char* kPrecisionNames[] = {"default", "fp8"};

// int32 caps keep counts and products of grid sizes far from int64 overflow downstream.
inline constexpr int64_t kI32Max = std::numeric_limits<int32_t>::max();
inline constexpr double kRealMax = std::numeric_limits<double>::max();
// The kernels compute the softmax scale in float: a finite double above FLT_MAX would become
// +inf when the forward is planned (every output NaN).
inline constexpr double kFloatMax = static_cast<double>(std::numeric_limits<float>::max());

template <typename T, int N>
constexpr int count_of(const T (&)[N]) { return N; }

// Bounds column of the table; each expands to the ParamInfo fields kind..count.
#define PSA_INT_RANGE(lo, hi)                                                                      \
  ::psa::ParamKind::kIntRange, 0.0, 0.0, int64_t{lo}, int64_t{hi}, nullptr, nullptr, 0
#define PSA_INT_SET(arr)                                                                           \
  ::psa::ParamKind::kIntSet, 0.0, 0.0, arr[0], arr[::psa::count_of(arr) - 1], arr, nullptr,        \
      ::psa::count_of(arr)
#define PSA_ENUM(names)                                                                            \
  ::psa::ParamKind::kEnum, 0.0, 0.0, int64_t{0}, int64_t{::psa::count_of(names) - 1}, nullptr,     \
      names, ::psa::count_of(names)
#define PSA_BOOL                                                                                   \
  ::psa::ParamKind::kBool, 0.0, 0.0, int64_t{0}, int64_t{1}, nullptr, nullptr, 0
#define PSA_REAL(lo, hi)                                                                           \
  ::psa::ParamKind::kReal, lo, hi, int64_t{0}, int64_t{0}, nullptr, nullptr, 0
#define PSA_REAL_OPEN_HI(lo, hi)                                                                   \
  ::psa::ParamKind::kRealOpenHi, lo, hi, int64_t{0}, int64_t{0}, nullptr, nullptr, 0
#define PSA_REAL_OPEN_LO(lo, hi)                                                                   \
  ::psa::ParamKind::kRealOpenLo, lo, hi, int64_t{0}, int64_t{0}, nullptr, nullptr, 0

// X(id, name, bounds, Config member). Rows follow psa_param value order (params.cpp checks it).
// Names are the YAML keys; tile_size.t/h/w stand for tile_size[0..2].
#define PSA_PARAM_TABLE(X)                                                                         \
  X(PSA_PARAM_METHOD, "type", PSA_ENUM(kMethodNames), method)                                      \
  X(PSA_PARAM_BLOCK_M, "block_size.m", PSA_INT_SET(kBlockMValues), block_m)                        \
  X(PSA_PARAM_BLOCK_N, "block_size.n", PSA_INT_SET(kBlockNValues), block_n)                        \
  X(PSA_PARAM_TILE_N, "block_size.tile_n", PSA_INT_SET(kTileNValues), tile_n)                      \
  X(PSA_PARAM_MASK_MODE, "mask_mode", PSA_ENUM(kMaskModeNames), mask_mode)                         \
  X(PSA_PARAM_MASK_FORMAT, "attn_impl", PSA_ENUM(kMaskFormatNames), mask_format)                   \
  X(PSA_PARAM_RATIO_L1, "mask_ratios.1", PSA_REAL(0.0, 1.0), ratio_end[kSlotL1])                   \
  X(PSA_PARAM_RATIO_L2, "mask_ratios.2", PSA_REAL(0.0, 1.0), ratio_end[kSlotL2])                   \
  X(PSA_PARAM_RATIO_L4, "mask_ratios.4", PSA_REAL(0.0, 1.0), ratio_end[kSlotL4])                   \
  X(PSA_PARAM_RATIO_L8, "mask_ratios.8", PSA_REAL(0.0, 1.0), ratio_end[kSlotL8])                   \
  X(PSA_PARAM_RATIO_L0, "mask_ratios.0", PSA_REAL(0.0, 1.0), ratio_end[kSlotL0])                   \
  X(PSA_PARAM_MIN_FULL_RATIO, "min_full_attn_ratio", PSA_REAL(0.0, 1.0), min_full_ratio)           \
  X(PSA_PARAM_USE_SIM_MASK, "use_sim_mask", PSA_BOOL, use_sim_mask)                                \
  X(PSA_PARAM_SIM_THRESHOLD_X2, "sim_thresholds.x2", PSA_REAL(-1.0, 1.0), sim_threshold[0])        \
  X(PSA_PARAM_SIM_THRESHOLD_X4, "sim_thresholds.x4", PSA_REAL(-1.0, 1.0), sim_threshold[1])        \
  X(PSA_PARAM_SIM_THRESHOLD_X8, "sim_thresholds.x8", PSA_REAL(-1.0, 1.0), sim_threshold[2])        \
  X(PSA_PARAM_USE_REARRANGE, "use_rearrange", PSA_BOOL, use_rearrange)                             \
  X(PSA_PARAM_REARRANGE_METHOD, "rearrange_method", PSA_ENUM(kRearrangeNames), rearrange_method)   \
  X(PSA_PARAM_STA_TILE_T, "tile_size.t", PSA_INT_RANGE(1, kI32Max), sta_tile[0])                   \
  X(PSA_PARAM_STA_TILE_H, "tile_size.h", PSA_INT_RANGE(1, kI32Max), sta_tile[1])                   \
  X(PSA_PARAM_STA_TILE_W, "tile_size.w", PSA_INT_RANGE(1, kI32Max), sta_tile[2])                   \
  X(PSA_PARAM_WARMUP_STEPS, "warmup_steps", PSA_INT_RANGE(0, kI32Max), warmup_steps)               \
  X(PSA_PARAM_CALLS_PER_STEP, "calls_per_step", PSA_INT_RANGE(1, kI32Max), calls_per_step)         \
  X(PSA_PARAM_INFERENCE_STEPS, "inference_steps", PSA_INT_RANGE(0, kI32Max), inference_steps)      \
  X(PSA_PARAM_TEXT_LENGTH, "text_length", PSA_INT_RANGE(0, kI32Max), text_length)                  \
  X(PSA_PARAM_WIDTH_DIVISOR, "video_scale.width_divisor",                                          \
    PSA_INT_RANGE(1, kI32Max), width_divisor)                                                      \
  X(PSA_PARAM_HEIGHT_DIVISOR, "video_scale.height_divisor",                                        \
    PSA_INT_RANGE(1, kI32Max), height_divisor)                                                     \
  X(PSA_PARAM_DEPTH_DIVISOR, "video_scale.depth_divisor",                                          \
    PSA_INT_RANGE(1, kI32Max), depth_divisor)                                                      \
  X(PSA_PARAM_SAMPLE_DIVISOR, "sample_divisor", PSA_INT_SET(kSampleDivisorValues), sample_divisor) \
  X(PSA_PARAM_SEED, "seed", PSA_INT_RANGE(0, INT64_MAX), seed)                                     \
  X(PSA_PARAM_CAUSAL, "causal", PSA_BOOL, causal)                                                  \
  X(PSA_PARAM_SCALE, "scale", PSA_REAL(0.0, kFloatMax), scale)                                     \
  X(PSA_PARAM_TEXT_RULE, "text_rule", PSA_ENUM(kTextRuleNames), text_rule)                         \
  X(PSA_PARAM_TEXT_ROWS_DENSE, "text_rows_dense", PSA_BOOL, text_rows_dense)                       \
  X(PSA_PARAM_SPARSITY, "sparsity", PSA_REAL_OPEN_HI(0.0, 1.0), sparsity)                          \
  X(PSA_PARAM_CDF_THRESHOLD, "cdf_threshold", PSA_REAL_OPEN_LO(0.0, 1.0), cdf_threshold)           \
  X(PSA_PARAM_KEEP_SINK, "keep_sink", PSA_BOOL, keep_sink)                                         \
  X(PSA_PARAM_KEEP_RECENT, "keep_recent", PSA_BOOL, keep_recent)                                  \
  X(PSA_PARAM_HEAD_OFFSET, "head_offset", PSA_INT_RANGE(0, kI32Max), head_offset)                  \
  X(PSA_PARAM_BATCH_OFFSET, "batch_offset", PSA_INT_RANGE(0, kI32Max), batch_offset)            \
  X(PSA_PARAM_XATTN_STRIDE, "xattn_stride", PSA_INT_RANGE(1, 128), xattn_stride)                  \
  X(PSA_PARAM_XATTN_CHUNK_SIZE, "xattn_chunk_size", PSA_INT_RANGE(64, kI32Max), xattn_chunk_size) \
  X(PSA_PARAM_PRECISION, "precision", PSA_ENUM(kPrecisionNames), precision)

// Row of `id`, or nullptr when `id` is not a parameter.
const ParamInfo* param_info(psa_param id);
// Row whose name is `name`, or nullptr.
const ParamInfo* param_by_name(const char* name);

inline psa_param_type param_type(const ParamInfo& p) {
  return p.kind == ParamKind::kReal || p.kind == ParamKind::kRealOpenHi ||
                 p.kind == ParamKind::kRealOpenLo
             ? PSA_PARAM_TYPE_DOUBLE
             : PSA_PARAM_TYPE_INT;
}
// Inclusive bounds as psa_param_info reports them (open ends moved one ulp inward).
void param_bounds(const ParamInfo& p, double* lower, double* upper);
// "32, 64, 128", "[0, 1)", "0 (topk), 1 (thresholdbound)", "false, true" ...
std::string param_allowed_text(const ParamInfo& p);
// Enum value of a YAML spelling (exact match), or -1.
int param_enum_lookup(const ParamInfo& p, const std::string& text);
// "topk, thresholdbound".
std::string param_enum_list(const ParamInfo& p);
// Shortest text that reads back as `v` ("0.1", not "0.10000000000000001").
std::string format_double(double v);

// Bound checks. On failure record "<display> = <value>: allowed <allowed>" with `code`.
psa_status param_check_int(const ParamInfo& p, int64_t value, const std::string& display,
                           psa_status code);
psa_status param_check_double(const ParamInfo& p, double value, const std::string& display,
                              psa_status code);

// Raw member access, no checks (the caller checked type and bounds).
int64_t param_load_int(const Config& c, psa_param id);
double param_load_double(const Config& c, psa_param id);
void param_store_int(Config& c, psa_param id, int64_t value);
void param_store_double(Config& c, psa_param id, double value);

// The psa_config_set/get semantics: unknown id or wrong type -> PSA_ERR_INVALID_ARGUMENT,
// out of bounds -> PSA_ERR_INVALID_ARGUMENT naming the parameter.
psa_status param_set_int(Config& c, psa_param id, int64_t value);
psa_status param_set_double(Config& c, psa_param id, double value);
psa_status param_get_int(const Config& c, psa_param id, int64_t* value);
psa_status param_get_double(const Config& c, psa_param id, double* value);

}  // namespace psa

// config/config.h -- the validated configuration every other stage reads. Plain data; the
// YAML loader (config/yaml_loader.cpp) is the only file that includes yaml-cpp.
#pragma once
#include <cstdint>
#include <string>

#include "psa.h"

namespace psa {

// Level slots in pipeline order. Ratio ends are stored per slot; validation guarantees they
// are non-decreasing in this order, so "dict insertion order" and "sorted by end" coincide.
enum LevelSlot : int { kSlotL1 = 0, kSlotL2 = 1, kSlotL4 = 2, kSlotL8 = 3, kSlotL0 = 4, kNumSlots = 5 };
constexpr int kSlotLevel[kNumSlots] = {1, 2, 4, 8, 0};

// The route of a forward: which stage sequence a sparse step runs. The method -> route decision
// is written here once; everything downstream asks the route (a plan's RoutePlan), never
// compares methods. A new method = a new value here + its stage calls in both backends.
enum class Route : uint8_t {
  kDense,        // plain attention (method dense; warm-up steps of any method run dense too)
  kBlockMethod,  // rf_v2 / ada_bsa: full-resolution blocks from the method's own mask
  kPsa,          // rearrange -> pool -> importance -> mask -> pyramid attention -> inverse
  kCausalPsa,    // psa_causal (spec App. A): rearrange -> pool -> similarity cap ->
                 // antidiagonal importance -> its own level rule -> pyramid attention
};
constexpr Route route_of(psa_method m) {
  return m == PSA_METHOD_DENSE                                ? Route::kDense
         : m == PSA_METHOD_RF_V2 || m == PSA_METHOD_ADA_BSA ? Route::kBlockMethod
         : m == PSA_METHOD_PSA_CAUSAL                         ? Route::kCausalPsa
                                                              : Route::kPsa;
}

struct Config {
  psa_method method = PSA_METHOD_PSA;
  std::string description;

  // Blocks and tiles.
  int64_t block_m = 128;
  int64_t block_n = 64;
  int64_t tile_n = 32;

  // Mask.
  psa_mask_mode mask_mode = PSA_MASK_MODE_TOPK;
  psa_mask_format mask_format = PSA_MASK_FORMAT_SEGMENTS;
  double ratio_start[kNumSlots] = {0.0, 0.10, 0.15, 0.15, 0.35};  // informational only
  double ratio_end[kNumSlots] = {0.10, 0.15, 0.15, 0.35, 1.0};
  double min_full_ratio = 0.06;
  bool use_sim_mask = false;
  double sim_threshold[3] = {0.0, 0.0, -1.0};  // x2, x4, x8
  psa_text_rule text_rule = PSA_TEXT_RULE_SPAN;
  bool text_rows_dense = false;

  // Rearrangement.
  bool use_rearrange = false;
  psa_rearrange rearrange_method = PSA_REARRANGE_GILBERT;
  int64_t sta_tile[3] = {2, 8, 8};  // t, h, w

  // Schedule.
  int64_t warmup_steps = 0;
  int64_t calls_per_step = 1;
  int64_t inference_steps = 0;

  // Model geometry.
  int64_t text_length = 0;
  int64_t width_divisor = 16;
  int64_t height_divisor = 16;
  int64_t depth_divisor = 4;

  // Importance sampling.
  int64_t sample_divisor = 4;
  int64_t seed = 0;
  // Shards: global index of q's first head and first batch item (sampler seeding only).
  int64_t head_offset = 0;
  int64_t batch_offset = 0;

  // Attention.
  bool causal = false;
  double scale = 0.0;  // 0 = 1/sqrt(D)

  // rf_v2 / ada_bsa.
  double sparsity = 0.0;
  double cdf_threshold = 1.0;
  bool keep_sink = true;
  bool keep_recent = true;

  // psa_causal (spec App. A): antidiagonal stride and query chunk of the importance stage.
  int64_t xattn_stride = 8;
  int64_t xattn_chunk_size = 4096;

  // Arithmetic of the sparse attention stage (psa_precision).
  psa_precision precision = PSA_PRECISION_DEFAULT;

  // Accepted from YAML for compatibility, no effect on the math.
  bool verbose = false;
  bool enable_logging = false;
};

// Checks every cross-parameter rule; on failure records a message naming the parameter
// (by its YAML-style name), the value and the allowed values, prefixed by `where` when
// non-empty (e.g. "Wan2.1_14b.attention_configs.psa_balanced").
psa_status validate_config(const Config& config, const std::string& where);

// Number of segments (levels 1, 2, 4, 8, 0) in the SEGMENTS mask format: always 5 here.
constexpr int kNumSegments = kNumSlots;

}  // namespace psa

struct psa_config_s {
  psa::Config cfg;
};

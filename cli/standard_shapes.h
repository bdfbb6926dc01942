// cli/standard_shapes.h -- the standard video-DiT shapes of BENCHMARKS.md and the pyramid
// configuration its tables lead with, shared by `psa bench` (cli/bench.cpp) and
// benchmarks/psa_bench.cu so the two programs time the same problems. Header-only, psa.h only.
#pragma once
#include <cstdint>

#include "psa.h"

namespace psa_cli {

struct StandardShape {
  const char* key;
  const char* label;
  const char* model;  // embedded catalog model
  int64_t heads, head_dim, t, h, w, text;
  psa_text_position position;
};

// BENCHMARKS.md, "Shapes": bf16, batch 1, latent grid t x h x w plus text tokens.
inline constexpr StandardShape kStandardShapes[] = {
    {"cogvideox", "CogVideoX-5B", "CogVideo_5b", 48, 64, 13, 30, 45, 226, PSA_TEXT_FIRST},
    {"wan13", "Wan2.1-1.3B 480p", "Wan2.1_1.3b", 12, 128, 21, 30, 52, 0, PSA_TEXT_NONE},
    {"wan14", "Wan2.1-14B 720p", "Wan2.1_14b", 40, 128, 21, 45, 80, 0, PSA_TEXT_NONE},
};

// The reference implementation's default pyramid on the model's psa_balanced preset (its
// rearrangement and text rule): topk, block_m 128, block_n 64, tile_n 32, ratio ends
// 1: 0.10, 2: 0.15, 4: 0.15, 8: 0.35, 0: 1 (10% of the key blocks at full resolution, 5% pooled
// by 2, 20% pooled by 8: density about 0.15), no similarity cap, sample divisor 4, no warm-up.
// level1_density > 0 gives every kept block level 1 at that density instead (all four ends
// equal): the same attention work without pooled tiles. On failure *out is null and the first
// failing call's status is returned (psa_last_error_message() says why).
inline psa_status make_pyramid_config(const char* model, double level1_density, psa_config** out) {
  *out = nullptr;
  psa_config* cfg = nullptr;
  psa_status st = psa_config_load_embedded(model, "psa_balanced", &cfg);
  const bool level1 = level1_density > 0.0;
  const double ends[4] = {level1 ? level1_density : 0.10, level1 ? level1_density : 0.15,
                          level1 ? level1_density : 0.15, level1 ? level1_density : 0.35};
  const psa_param ratio[4] = {PSA_PARAM_RATIO_L1, PSA_PARAM_RATIO_L2, PSA_PARAM_RATIO_L4, PSA_PARAM_RATIO_L8};
  const struct {
    psa_param p;
    int64_t v;
  } ints[] = {{PSA_PARAM_MASK_MODE, PSA_MASK_MODE_TOPK}, {PSA_PARAM_BLOCK_M, 128},
              {PSA_PARAM_BLOCK_N, 64}, {PSA_PARAM_TILE_N, 32},
              {PSA_PARAM_MASK_FORMAT, PSA_MASK_FORMAT_SEGMENTS}, {PSA_PARAM_USE_SIM_MASK, 0},
              {PSA_PARAM_SAMPLE_DIVISOR, 4}, {PSA_PARAM_WARMUP_STEPS, 0}};
  for (const auto& x : ints)
    if (st == PSA_OK) st = psa_config_set_int(cfg, x.p, x.v);
  for (int i = 0; i < 4 && st == PSA_OK; ++i) st = psa_config_set_double(cfg, ratio[i], ends[i]);
  if (st == PSA_OK) st = psa_config_set_double(cfg, PSA_PARAM_RATIO_L0, 1.0);
  if (st == PSA_OK) st = psa_config_validate(cfg);
  if (st != PSA_OK) {
    psa_config_destroy(cfg);
    return st;
  }
  *out = cfg;
  return PSA_OK;
}

}  // namespace psa_cli

// context/plan.h -- the shape-dependent plan of a forward (block counts, sequence
// permutations, text span, workspace size). Built on the host once per shape and cached
// by the context; backends attach their own data (e.g. device copies of permutations).
#pragma once
#include <cstdint>
#include <memory>

#include "config/config.h"
#include "core/problem.h"
#include "importance/importance.h"
#include "mask/mask.h"
#include "mask/mask_spec.h"
#include "rearrange/rearrange.h"

namespace psa {

// Level counts of one forward: pairs (b, h, i, j) per level slot (L1, L2, L4, L8, skip),
// the density sum (sum of 1/level over pairs) and the time per stage (PSA_STAGE_* order).
struct LevelCounts {
  int64_t count[kNumSlots] = {0, 0, 0, 0, 0};
  double density_sum = 0.0;
  double stage_ms[7] = {0, 0, 0, 0, 0, 0, 0};
};
// Adds the n entries of a level map (values 0/1/2/4/8) to c's counts and density sum.
void count_levels(const int8_t* levels, int64_t n, LevelCounts* c);

// Every Config-derived choice a forward makes, resolved once when the shape is planned
// (resolve_route). Backends read this, never Config: a forward holds no method comparisons.
struct RoutePlan {
  Route route = Route::kPsa;
  psa_method method = PSA_METHOD_PSA;
  bool causal = false;
  // Importance sampler (PSA route): seed and the shard's global batch / head offsets.
  uint64_t seed = 0;
  int64_t batch_offset = 0, head_offset = 0;
  // Mask (PSA route).
  MaskRowParams mask_row;
  bool tie_mass = true;  // equal scores rank by tie mass (importance_spec.h), else key index
  bool use_sim_mask = false;
  double sim_threshold[3] = {0.0, 0.0, -1.0};
  psa_text_rule text_rule = PSA_TEXT_RULE_SPAN;
  bool text_rows_dense = false;
  // Block methods (rf_v2, ada_bsa).
  double sparsity = 0.0, cdf_threshold = 1.0;
  bool keep_sink = true, keep_recent = true;
  // psa_causal (route kCausalPsa): antidiagonal stride, query chunk, leading text tokens.
  int64_t xattn_stride = 8, xattn_chunk_size = 4096, text_length = 0;
  // Sparse attention arithmetic (dense routes ignore it).
  psa_precision precision = PSA_PRECISION_DEFAULT;

  bool sparse() const { return route != Route::kDense; }
  bool block_method() const { return route == Route::kBlockMethod; }
  bool psa() const { return route == Route::kPsa; }
  bool causal_psa() const { return route == Route::kCausalPsa; }
  // Whether the mask is built by a host-side method builder (methods/methods.h) on the CPU.
  bool method_mask() const { return route == Route::kBlockMethod || route == Route::kCausalPsa; }
  // Whether attention reads pooled K/V (levels 2/4/8): PSA and causal PSA.
  bool pyramid() const { return route == Route::kPsa || route == Route::kCausalPsa; }
  // Whether the forward's PSA mask caps levels by key-block similarity (PSA route only).
  bool sim_cap() const { return route == Route::kPsa && use_sim_mask; }
};
RoutePlan resolve_route(const Config& config);

// Backend-owned part of a plan (device tables, ...). Destroyed with the plan.
struct BackendPlanData {
  virtual ~BackendPlanData() = default;
};

struct Plan {
  Problem problem;
  RoutePlan route;
  uint64_t geometry_version = 0;  // context's geometry counter when planned
  // Blocks.
  int64_t block_m = 128, block_n = 64, tile_n = 32;
  int64_t q_blocks = 0;  // Mq = ceil(Lq / block_m)
  int64_t k_blocks = 0;  // Nk = ceil(Lk / block_n)
  int64_t q_samples = 0, k_samples = 0;  // per block: block / sample_divisor
  float scale = 0.0f;
  // Rearrangement (applied to q when len_q matches the grid, to k/v when len_k does).
  SequencePlan q_seq, k_seq;
  int64_t text_begin = 0, text_end = 0;  // text span in the rearranged key sequence
  // Pooled levels (bit p: level p in {2, 4, 8}, mask_spec.h kPooledLevelsAll) that some block of
  // this plan's level map can hold (mask_spec.h pooled_levels_possible for the PSA route, every
  // level for the others): the pool stage writes the pooled K / V of these levels only.
  unsigned pooled_levels = kPooledLevelsAll;
  uint64_t workspace_bytes = 0;
  std::unique_ptr<BackendPlanData> backend_data;
};

// The mask stage's post-processing parameters of `plan` (causal band, text rule and span,
// similarity cap `cap` [Nk] when the route caps levels, else ignored). Both host forwards
// (the CPU backend and the ring's level map) take them from here.
MaskPostParams mask_post_params(const Plan& plan, const int8_t* cap);

// The importance sampling of (batch b, query head h) of `plan`: the injected offsets when
// q_offsets is non-NULL ([B*Hq, q_samples] / [B*Hq, k_samples]), else the seeded sampler at
// the shard's global (batch, head).
ImportanceSampling importance_sampling(const Plan& plan, int64_t b, int64_t h,
                                       const int32_t* q_offsets, const int32_t* k_offsets);

}  // namespace psa

// mask/mask.h -- mask building stage on the host (the CPU reference): block scores ->
// a level per (query block, key block). The count rules live in mask/mask_spec.h and are
// shared with the CUDA mask builder. No CUDA, no I/O.
#pragma once
#include <cstdint>
#include <vector>

#include "config/config.h"

namespace psa {

// Everything one mask row needs besides its scores.
struct MaskRowParams {
  psa_mask_mode mode = PSA_MASK_MODE_TOPK;
  int64_t block_n = 128;
  int64_t tile_n = 32;
  double ratio_end[kNumSlots] = {0.1, 0.15, 0.15, 0.35, 1.0};  // slots L1, L2, L4, L8, L0
  double min_full_ratio = 0.06;                                // thresholdbound only
};
MaskRowParams mask_row_params(const Config& config);

// One row (spec 4.2-4.4, intended fp32 semantics): `scores` has n >= 1 entries; writes
// levels[j] in {0,1,2,4,8} for j < n, and, when `order` is non-NULL, the rank order of
// mask_spec.h ranks_before (score descending; equal scores: higher tie mass first, then lower
// key index) into order[0..n), and the rank interval ends per slot (ranks
// [seg_end[s-1], seg_end[s]) have slot s's level) into seg_end[0..5) when non-NULL.
// `ties` holds the row's tie masses (importance_cpu) or is NULL (equal scores: key index).
void build_mask_row(const float* scores, int64_t n, const MaskRowParams& params, int8_t* levels,
                    int32_t* order, int64_t* seg_end, const float* ties = nullptr);

// SEGMENTS ("new_mask_type") row of width n + 5 from a rank order and interval ends
// (spec 4.6): [L1 blocks] -1 [L2 blocks] -1 [L4] -1 [L8] -1 [L0] -1, then zeros.
void segments_row(const int32_t* order, const int64_t* seg_end, int64_t n, int32_t* row);

// Similarity cap per key block (spec 5) on one head's replicate-padded keys
// (`keys` is [n_blocks * block_n, d] fp32): cap[j] in {1, 2, 4, 8}. Requires block_n % 8 == 0.
void sim_cap_row(const float* keys, int64_t n_blocks, int64_t block_n, int64_t d,
                 const double threshold[3], int8_t* cap);

// Post-processing of a full [mq, nk] level map of one (batch, head), in this order:
//   1. causal: blocks wholly in the future -> 0; blocks crossing the diagonal band -> 1;
//   2. text (SPAN rule): key blocks intersecting [text_begin, text_end) -> 1, and with
//      text_rows_dense the query blocks intersecting it -> all 1;
//      text (REFERENCE_SUFFIX): the last ceil(T / block_n) key blocks -> 1;
//      under causal, text never revives a block that step 1 set to 0 (no visible key);
//   3. sim cap: level = min(level, cap[j]) for level > 0.
struct MaskPostParams {
  int64_t block_m = 128, block_n = 128;
  int64_t lq = 0, lk = 0;
  bool causal = false;
  psa_text_rule text_rule = PSA_TEXT_RULE_SPAN;
  bool text_rows_dense = false;
  int64_t text_begin = 0, text_end = 0;  // in the (rearranged) sequence; for Lq == Lk
  const int8_t* sim_cap = nullptr;       // [nk] or NULL
};
void postprocess_levels(int8_t* levels, int64_t mq, int64_t nk, const MaskPostParams& params);

// Mask stage of one (batch, head) on the host: every row of `scores` [mq, nk] through
// build_mask_row (under post.causal only its causally visible prefix; the rest 0), then
// postprocess_levels. `ties`: the tie masses [mq, nk] of importance_cpu, or NULL (equal
// scores rank by key index). `order` holds nk ints.
void mask_head_cpu(const float* scores, int64_t mq, int64_t nk, const MaskRowParams& row,
                   const MaskPostParams& post, const float* ties, int8_t* levels,
                   int32_t* order);

// Similarity-cap stage of one key head: replicate-pads k [lk, d] to n_blocks * block_n rows
// in kpad, then sim_cap_row into cap [n_blocks].
void sim_cap_head_cpu(const float* k, int64_t lk, int64_t d, int64_t n_blocks, int64_t block_n,
                      const double threshold[3], float* kpad, int8_t* cap);

// Causal visibility of key blocks for query block i (bottom-right aligned: query row x sees
// keys t <= x + (lk - lq)). Returns the number of key blocks that hold at least one key
// visible to some row of block i (0 when none).
int64_t causal_visible_blocks(int64_t i, int64_t block_m, int64_t block_n, int64_t lq, int64_t lk);

}  // namespace psa

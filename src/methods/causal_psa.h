// methods/causal_psa.h -- the causal PSA variant (`psa_causal`, spec App. A) on the host: the
// CPU oracle of its importance and mask stages. Meaning in methods/causal_psa_spec.h. One
// (batch, query head) at a time; no allocation (scratch from the caller).
#pragma once
#include <cstdint>

#include "context/plan.h"

namespace psa {

// Step 1: block scores [nb, nb] (row-major; entries J > I are 0) of q, k [len, d] fp32.
// `logits` holds ceil(len / stride) floats. scale: the attention's softmax scale (the
// logits use scale / stride).
void causal_psa_importance_cpu(const float* q, const float* k, int64_t len, int64_t d,
                               int64_t bs, int64_t stride, int64_t chunk, float scale,
                               float* logits, float* scores);

// Step 2 for the whole [nb, nb] map: scores -> levels in {0, 1, 2, 4, 8}. cap: [nb] in
// {1, 2, 4, 8}. `row` holds nb floats, `order` nb int32.
void causal_psa_levels_cpu(const float* scores, int64_t nb, psa_mask_mode mode,
                           const double ratio_end[kNumSlots], int64_t text_block,
                           const int8_t* cap, float* row, int32_t* order, int8_t* levels);

// Slot rule of one row (before the forced and capped levels): `sorted` holds the valid
// scores in rank order, `order` their key blocks; writes levels[order[r]].
void causal_psa_slot_levels(const float* sorted, const int32_t* order, int64_t valid,
                            psa_mask_mode mode, const double ratio_end[kNumSlots],
                            int8_t* levels);

// Whole method for build_method_levels: q, k [L, d] fp32.
int64_t causal_psa_scratch_floats(const Plan& plan);
psa_status build_causal_psa_levels(const Plan& plan, const float* q,
                                   const float* k, float* scratch, int8_t* levels);

}  // namespace psa

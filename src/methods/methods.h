// methods/methods.h -- the methods with a mask of their own (RainFusion2.0 `rf_v2`, adaptive
// block-sparse `ada_bsa`, the causal variant `psa_causal`): host-side mask builders producing
// the level map that the shared attention stage consumes.
#pragma once
#include <cstdint>

#include "context/plan.h"

namespace psa {

// Builds the level map [q_blocks, k_blocks] of one (batch, query head) for the methods with
// their own mask (plan.route.method_mask(): rf_v2 and ada_bsa, levels 0/1 only; psa_causal,
// levels 0/1/2/4/8). q: [lq, d], k: [lk, d] fp32, already in the method's token order
// (plan.q_seq / plan.k_seq). `scratch` holds method_scratch_floats(plan) floats.
psa_status build_method_levels(const Plan& plan, const float* q, const float* k, float* scratch,
                               int8_t* levels);
int64_t method_scratch_floats(const Plan& plan);

}  // namespace psa

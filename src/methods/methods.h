// methods/methods.h -- the block-sparse methods other than PSA (RainFusion2.0 `rf_v2`,
// adaptive block-sparse `ada_bsa`): host-side mask builders producing the same level map
// (1 = keep at full resolution, 0 = skip) that the shared attention stage consumes.
#pragma once
#include <cstdint>

#include "config/config.h"
#include "context/plan.h"

namespace psa {

// Builds the level map [q_blocks, k_blocks] of one (batch, query head) for config.method
// in {PSA_METHOD_RF_V2, PSA_METHOD_ADA_BSA}. q: [lq, d], k: [lk, d] fp32, already in the
// method's token order (plan.q_seq / plan.k_seq). `scratch` holds
// method_scratch_floats(plan) floats.
psa_status build_method_levels(const Config& config, const Plan& plan, const float* q,
                               const float* k, float* scratch, int8_t* levels);
int64_t method_scratch_floats(const Config& config, const Plan& plan);

// Methods whose host builder above makes the level map (rf_v2, ada_bsa: levels 0/1 only;
// psa_causal: pyramid levels 0/1/2/4/8).
inline bool method_builds_levels(psa_method m) {
  return m == PSA_METHOD_RF_V2 || m == PSA_METHOD_ADA_BSA || m == PSA_METHOD_PSA_CAUSAL;
}

}  // namespace psa

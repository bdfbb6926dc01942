// methods/builders.h -- the per-method mask builders behind build_method_levels (methods.cpp
// dispatches). Host only, private to src/methods/; no allocation: all scratch comes from the
// caller (method_scratch_floats).
#pragma once
#include <cstdint>

#include "context/plan.h"

namespace psa {

// rf_v2 (rf_v2.cpp): q, k [L, d] fp32 in rf_v2 token order (the plan's permutation).
int64_t rf_v2_scratch_floats(const Plan& plan);
psa_status build_rf_v2_levels(const Plan& plan, const float* q,
                              const float* k, float* scratch, int8_t* levels);

// ada_bsa (ada_bsa.cpp): q, k [L, d] fp32 in the caller's token order.
int64_t ada_bsa_scratch_floats(const Plan& plan);
psa_status build_ada_bsa_levels(const Plan& plan, const float* q,
                                const float* k, float* scratch, int8_t* levels);

// Rank order for picking the K-th largest logit (rf_v2, ada_bsa) and ranking causal PSA scores: larger first, NaN after
// every number (a NaN logit is never kept by score; forced blocks still are). A strict weak
// order on values alone, for std::sort; the PSA mask's index-aware order is ranks_before
// (mask/mask_spec.h).
inline bool larger_first(float a, float b) {
  const bool an = a != a, bn = b != b;
  if (an != bn) return bn;
  return !an && a > b;
}

// Shape rules shared by both builders (methods.cpp): block_m = block_n = 128 (else
// PSA_ERR_UNSUPPORTED) and len_q == len_k (else PSA_ERR_INVALID_SHAPE), messages naming
// the method and the values.
psa_status check_block_sparse_problem(const Plan& plan);

}  // namespace psa

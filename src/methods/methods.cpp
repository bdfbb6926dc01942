// methods/methods.cpp -- dispatch of the host mask builders of the methods with their own mask
// (rf_v2, ada_bsa, psa_causal) and the block methods' shared shape rules. Host only; the
// builders live in rf_v2.cpp, ada_bsa.cpp and causal_psa.cpp.
#include "methods/methods.h"

#include "core/error.h"
#include "methods/builders.h"
#include "methods/causal_psa.h"

namespace psa {

psa_status check_block_sparse_problem(const Plan& plan) {
  const char* name = plan.route.method == PSA_METHOD_RF_V2 ? "rf_v2" : "ada_bsa";
  PSA_RETURN_IF(plan.block_m != 128 || plan.block_n != 128, PSA_ERR_UNSUPPORTED,
                "block_size (m, n) = (%lld, %lld): type %s supports only 128 x 128 blocks",
                static_cast<long long>(plan.block_m), static_cast<long long>(plan.block_n), name);
  PSA_RETURN_IF(plan.problem.len_q != plan.problem.len_k, PSA_ERR_INVALID_SHAPE,
                "q: seq_len = %lld, k: seq_len = %lld; type %s needs self-attention "
                "(equal query and key lengths)",
                static_cast<long long>(plan.problem.len_q),
                static_cast<long long>(plan.problem.len_k), name);
  return PSA_OK;
}

int64_t method_scratch_floats(const Plan& plan) {
  switch (plan.route.method) {
    case PSA_METHOD_RF_V2: return rf_v2_scratch_floats(plan);
    case PSA_METHOD_ADA_BSA: return ada_bsa_scratch_floats(plan);
    case PSA_METHOD_PSA_CAUSAL: return causal_psa_scratch_floats(plan);
    default: return 0;
  }
}

psa_status build_method_levels(const Plan& plan, const float* q, const float* k, float* scratch,
                               int8_t* levels) {
  switch (plan.route.method) {
    case PSA_METHOD_RF_V2: return build_rf_v2_levels(plan, q, k, scratch, levels);
    case PSA_METHOD_ADA_BSA: return build_ada_bsa_levels(plan, q, k, scratch, levels);
    case PSA_METHOD_PSA_CAUSAL: return build_causal_psa_levels(plan, q, k, scratch, levels);
    default:
      return set_error(PSA_ERR_INTERNAL,
                       "build_method_levels: type = %d is not a method with its own mask "
                       "(rf_v2 = %d, ada_bsa = %d, psa_causal = %d)",
                       static_cast<int>(plan.route.method), PSA_METHOD_RF_V2, PSA_METHOD_ADA_BSA,
                       PSA_METHOD_PSA_CAUSAL);
  }
}

}  // namespace psa

// pipeline/forward.h -- one forward, backend-agnostic: argument validation, warm-up
// decision, planning, dispatch to the context's backend, statistics.
#pragma once
#include "context/context.h"
#include "psa.h"

namespace psa {

struct ForwardTensors {
  const psa_tensor_desc* q_desc;
  const void* q;
  const psa_tensor_desc* k_desc;
  const void* k;
  const psa_tensor_desc* v_desc;
  const void* v;
  const psa_tensor_desc* out_desc;
  void* out;
  float* lse;
};

// Checks everything a forward would check and plans the shape; returns the plan.
psa_status plan_forward(psa_context* ctx, const psa_tensor_desc* q, const psa_tensor_desc* k,
                        const psa_tensor_desc* v, const psa_tensor_desc* out, Problem* problem,
                        const Plan** plan);

psa_status run_forward(psa_context* ctx, const ForwardTensors& t, void* workspace,
                       uint64_t workspace_bytes, void* stream);

}  // namespace psa

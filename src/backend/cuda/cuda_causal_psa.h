// backend/cuda/cuda_causal_psa.h -- CUDA backend, psa_causal (spec App. A): the prepare-time
// limits and the forward-time enqueue of its own stages (antidiagonal importance, level rule).
// The K/V pyramids and the similarity cap come from the shared stages of cuda_backend.cpp.
// Host-only glue: no kernels, no CUDA includes; forward enqueues only (no alloc, no sync).
#pragma once
#include <cstdint>

#include "backend/cuda/cuda_workspace.h"
#include "context/plan.h"

namespace psa {

// PSA_ERR_UNSUPPORTED (naming the values) when the plan does not fit the kernels on the
// current device; PSA_OK for every other route.
psa_status check_causal_psa_limits(const Plan& plan);

// Importance: block scores (w.scores) of the gathered q (w.q) against k (w.k).
// `stream` is a cudaStream_t.
psa_status enqueue_causal_psa_scores(const Plan& plan, char* workspace, const CudaWorkspaceLayout& w,
                                     void* stream);

// Mask: levels (w.levels) from the scores and the similarity cap (w.cap).
psa_status enqueue_causal_psa_levels(const Plan& plan, char* workspace, const CudaWorkspaceLayout& w,
                                     void* stream);

}  // namespace psa

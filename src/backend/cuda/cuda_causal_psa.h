// backend/cuda/cuda_causal_psa.h -- CUDA backend, psa_causal (spec App. A): the prepare-time
// limits and the forward-time enqueue of its stages up to the level map (K/V pyramids,
// similarity cap, antidiagonal importance, levels). Host-only glue: no kernels, no CUDA
// includes; forward enqueues only (no alloc, no sync).
#pragma once
#include <cstdint>

#include "backend/backend.h"
#include "backend/cuda/cuda_workspace.h"
#include "config/config.h"
#include "context/plan.h"

namespace psa {

// PSA_ERR_UNSUPPORTED (naming the values) when the plan does not fit the kernels on the
// current device; PSA_OK for every other method.
psa_status check_causal_psa_limits(const Config& cfg, const Plan& plan);

// K, V of the caller -> workspace w.k / w.v and their pyramids (w.k_pooled / w.v_pooled);
// cap (w.cap), scores (w.scores) and levels (w.levels) from the gathered q at w.q and k.
// `k_src`: the plan's device row table of K (NULL: none). `stream` is a cudaStream_t.
psa_status enqueue_causal_psa_levels(const Config& cfg, const Plan& plan, const ForwardArgs& a,
                                     const int64_t* k_src, char* workspace,
                                     const CudaWorkspaceLayout& w, void* stream);

}  // namespace psa

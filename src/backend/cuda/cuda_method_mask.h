// backend/cuda/cuda_method_mask.h -- CUDA backend, mask stage of the block-sparse methods
// (rf_v2, ada_bsa): the prepare-time limits and the forward-time enqueue of their level map.
// Host-only glue: no kernels, no CUDA includes; forward enqueues only (no alloc, no sync).
#pragma once
#include <cstdint>

#include "backend/cuda/cuda_workspace.h"
#include "context/plan.h"

namespace psa {

// PSA_ERR_UNSUPPORTED (naming the values) when the plan's key blocks exceed what the method's
// CUDA builder holds in shared memory on the current device.
psa_status check_method_mask_limits(const Plan& plan);

// Enqueues the level map [B*Hq, Nk, Nk] of plan.route.method into workspace + w.levels, from the
// gathered q/k at workspace + w.q / w.k (already in the method's token order). `stream` is a
// cudaStream_t.
psa_status enqueue_method_levels(const Plan& plan, char* workspace,
                                 const CudaWorkspaceLayout& w, void* stream);

}  // namespace psa

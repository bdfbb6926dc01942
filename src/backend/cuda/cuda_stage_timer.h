// backend/cuda/cuda_stage_timer.h -- CUDA backend, per-context stage timing: the stage
// boundaries at which a sparse forward records its events when the context's stage timing is
// on (psa_context_set_stage_timing); read_counts turns them into psa_stats.stage_ms.
#pragma once

namespace psa {

enum {
  kStageEvStart = 0,     // before rearrange
  kStageEvRearranged,    // after the Q gather (block methods: the Q, K and V gathers)
  kStageEvPooled,        // after the K/V gathers fused with their pyramids (PSA)
  kStageEvImportance,    // after sample offsets + block scores
  kStageEvMask,          // after sim cap + levels + work list
  kStageEvAttention,     // after attention (inverse rearrange fused into its epilogue)
  kStageEvCount
};

}  // namespace psa

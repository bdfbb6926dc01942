// backend/cuda/cuda_stage_timer.h -- CUDA backend, benchmark hook (internal, not in psa.h):
// when g_cuda_stage_timer is set, a sparse forward records its events on the caller's stream
// at the stage boundaries and reports where the level matrix lives in the workspace. Used by
// benchmarks/psa_bench only; NULL (the default) costs one pointer test per forward.
#pragma once
#include <cstdint>

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

struct CudaStageTimer {
  void* events[kStageEvCount];  // cudaEvent_t, created by the caller
  uint64_t levels_offset = 0;   // int8 [B*Hq, Mq, Nk] level matrix, byte offset in the workspace
  uint64_t levels_bytes = 0;
};

extern CudaStageTimer* g_cuda_stage_timer;

}  // namespace psa

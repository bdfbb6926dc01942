// backend/cuda/cuda_ring.h -- CUDA backend, the two halves of a PSA forward that a
// sequence-parallel ring runs separately (psa_compute_level_map, psa_shard_attention; checks
// and planning in api/ring_api.cpp, host version in ring/ring_cpu.h): the level map of a
// query shard against every key block (rearrange of K, importance, similarity cap, level
// map: the CUDA forward's PSA stages), and the attention of that query shard against one
// K/V shard at columns [begin, begin + nk) of the map (pyramids of the shard's K/V, work
// list, sparse attention). Host-only glue over the cuda/ stage entries: enqueues on the
// caller's stream into the caller's workspace; no allocation, no synchronisation, no host
// round trip, capturable in a CUDA graph. Compiled to nothing without PSA_WITH_CUDA.
#pragma once
#include <cstdint>

#include "context/plan.h"
#include "ring/ring_cpu.h"

namespace psa {

// What the level map writes besides `levels`: the backend's level counts (device
// [kNumSlots], zeroed and filled) and the plan's kept copy of the map (device, or NULL).
struct CudaRingTarget {
  int device = 0;
  unsigned long long* counts = nullptr;
  int8_t* levels_kept = nullptr;
  uint64_t levels_kept_bytes = 0;
};

// Workspace bytes of cuda_level_map for `plan` (a PSA plan prepared by the CUDA backend);
// queries the device for the importance scratch slots.
psa_status cuda_level_map_workspace(const Plan& plan, uint64_t* bytes);
// Workspace bytes of cuda_shard_attention for `plan` (make_plan of q against the shard);
// PSA_ERR_UNSUPPORTED, naming the value, for shapes the CUDA kernels do not run.
psa_status cuda_shard_attention_workspace(const Plan& plan, uint64_t* bytes);

// Level map [B, Hq, Mq, Nk] of plan's (q, k) into device `levels`; `dense` writes every
// entry 1 (a warm-up step). Checks first that every pointer is device memory of
// target.device with the alignment the kernels need (PSA_ERR_WRONG_MEMORY_SPACE /
// PSA_ERR_MISALIGNED_POINTER naming it); then only enqueues. The counts of a sparse map land
// in target.counts (read with the backend's read_counts).
psa_status cuda_level_map(const Plan& plan, const RingTensors& t, bool dense, int8_t* levels,
                          void* workspace, void* stream, const CudaRingTarget& target);

// Attention of plan's q against the K/V shard of plan.problem.len_k tokens, whose key blocks
// are columns [begin, begin + plan.k_blocks) of the device map `levels` (row stride map_nk);
// writes t.out and t.lse. Pointer checks as cuda_level_map.
psa_status cuda_shard_attention(const Plan& plan, const RingTensors& t, const int8_t* levels,
                                int64_t map_nk, int64_t begin, void* workspace, void* stream,
                                int device);

}  // namespace psa

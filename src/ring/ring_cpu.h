// ring/ring_cpu.h -- the two halves of a PSA forward that a sequence-parallel ring runs
// separately, on the host: the level map of a query shard against every key block (the
// stages up to the mask), and the attention of that query shard against one K/V shard at
// given levels (pooling of the shard's own K/V, then the attention stage). The entry points
// and their checks are in api/ring_api.cpp.
#pragma once
#include <cstdint>

#include "context/plan.h"

namespace psa {

struct LevelCounts;

// Strided tensors as the forward sees them ([B, H, L, D] element strides).
struct RingTensors {
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  void* out = nullptr;
  float* lse = nullptr;
  int64_t q_stride[4] = {0, 0, 0, 0};
  int64_t k_stride[4] = {0, 0, 0, 0};
  int64_t v_stride[4] = {0, 0, 0, 0};
  int64_t o_stride[4] = {0, 0, 0, 0};
  const int32_t* q_offsets = nullptr;  // injected samples (CPU), as ForwardArgs
  const int32_t* k_offsets = nullptr;
};

// Workspace bytes of level_map_cpu / shard_attention_cpu for `plan`.
uint64_t level_map_workspace_cpu(const Plan& plan);
uint64_t shard_attention_workspace_cpu(const Plan& plan);

// Levels [B, Hq, Mq, Nk] of plan's (q, k) into `levels` (contiguous); dense = every level 1.
// `kept` (optional) receives a copy (the plan's kept map). Fills *counts.
void level_map_cpu(const Plan& plan, const RingTensors& t, bool dense, int8_t* levels,
                   int8_t* kept, void* workspace, LevelCounts* counts);

// Attention of plan's q against the K/V shard of plan's len_k tokens, whose key blocks are
// columns [begin, begin + plan.k_blocks) of `levels` (row stride map_nk).
void shard_attention_cpu(const Plan& plan, const RingTensors& t, const int8_t* levels,
                         int64_t map_nk, int64_t begin, void* workspace);

}  // namespace psa

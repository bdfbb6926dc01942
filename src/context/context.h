// context/context.h -- the context object behind psa_context: a validated config, one
// backend, the video geometry, the warm-up counter, cached plans and the last statistics.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "config/config.h"
#include "context/plan.h"
#include "rearrange/rearrange.h"

namespace psa {

class Backend;  // backend/backend.h: the layer above; a context only holds one

// Plans kept per context: forwards alternating between a few shapes (self- and cross-
// attention, CFG batches) never re-plan.
constexpr size_t kMaxCachedPlans = 8;

// Builds the host part of a plan (blocks, scale, permutations, text span); the backend
// completes it with prepare().
psa_status make_plan(const Config& config, const VideoGeometry& geometry, const Problem& problem,
                     Plan* plan);

}  // namespace psa

struct psa_context_s {
  psa::Config cfg;
  std::unique_ptr<psa::Backend> backend;
  psa::VideoGeometry geometry;
  uint64_t geometry_version = 0;
  int64_t pinned_step = -1;  // >= 0: fixed step; -1: count calls
  // Injected sampling offsets (experimental API); empty = seeded sampler.
  int64_t injected_batch = 0, injected_heads = 0;
  std::vector<int32_t> injected_q_offsets, injected_k_offsets;
  int64_t calls = 0;
  std::vector<std::unique_ptr<psa::Plan>> plans;  // most recently used last
  // Last forward.
  bool has_stats = false;
  bool counts_pending = false;  // CUDA: counts still in device memory
  bool last_dense = false;
  psa_precision last_precision = PSA_PRECISION_DEFAULT;  // the arithmetic the last forward ran
  int64_t last_step = 0, last_call = 0;
  int64_t last_q_blocks = 0, last_k_blocks = 0;
  int64_t last_pairs = 0;
  psa::LevelCounts last_counts;
  // Plan of the last forward (its level map and token order; diagnostics API). When the plan
  // cache evicts it, it moves to `retired_plan` and stays readable; a retired plan is freed
  // the next time a shape is planned (never inside a forward).
  const psa::Plan* last_plan = nullptr;
  std::unique_ptr<psa::Plan> retired_plan;

  // Finds or builds (and caches) the plan for `problem` under the current geometry.
  psa_status get_plan(const psa::Problem& problem, const psa::Plan** plan);
  // Step the next forward uses, and whether it runs dense.
  int64_t next_step() const;
  bool step_is_dense(int64_t step) const;
};

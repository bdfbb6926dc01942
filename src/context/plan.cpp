// context/plan.cpp -- host planning of one shape: block counts, scale, sequence
// permutations and the text span. Runs at psa_workspace_size time, never per forward
// for a shape already planned.
#include <algorithm>
#include <cmath>

#include "context/context.h"
#include "core/error.h"
#include "importance/importance.h"
#include "mask/mask_spec.h"

namespace psa {

RoutePlan resolve_route(const Config& config) {
  RoutePlan r;
  r.route = route_of(config.method);
  r.method = config.method;
  r.causal = config.causal;
  r.seed = static_cast<uint64_t>(config.seed);
  r.batch_offset = config.batch_offset;
  r.head_offset = config.head_offset;
  r.mask_row = mask_row_params(config);
  r.tie_mass = tie_mass_ranking_enabled();
  r.use_sim_mask = config.use_sim_mask;
  std::copy(config.sim_threshold, config.sim_threshold + 3, r.sim_threshold);
  r.text_rule = config.text_rule;
  r.text_rows_dense = config.text_rows_dense;
  r.sparsity = config.sparsity;
  r.cdf_threshold = config.cdf_threshold;
  r.keep_sink = config.keep_sink;
  r.keep_recent = config.keep_recent;
  r.xattn_stride = config.xattn_stride;
  r.xattn_chunk_size = config.xattn_chunk_size;
  r.precision = config.precision;
  r.text_length = config.text_length;
  return r;
}

void count_levels(const int8_t* levels, int64_t n, LevelCounts* c) {
  for (int64_t e = 0; e < n; ++e) {
    const int lvl = levels[e];
    const int slot = slot_of_level(lvl) < 0 ? kSlotL0 : slot_of_level(lvl);
    ++c->count[slot];
    if (lvl > 0) c->density_sum += 1.0 / lvl;
  }
}

MaskPostParams mask_post_params(const Plan& plan, const int8_t* cap) {
  MaskPostParams post;
  post.block_m = plan.block_m;
  post.block_n = plan.block_n;
  post.lq = plan.problem.len_q;
  post.lk = plan.problem.len_k;
  post.causal = plan.route.causal;
  post.text_rule = plan.route.text_rule;
  post.text_rows_dense = plan.route.text_rows_dense;
  post.text_begin = plan.text_begin;
  post.text_end = plan.text_end;
  post.sim_cap = plan.route.sim_cap() ? cap : nullptr;
  return post;
}

ImportanceSampling importance_sampling(const Plan& plan, int64_t b, int64_t h,
                                       const int32_t* q_offsets, const int32_t* k_offsets) {
  ImportanceSampling sm;
  sm.seed = plan.route.seed;
  sm.batch = b + plan.route.batch_offset;
  sm.head = h + plan.route.head_offset;
  sm.q_count = static_cast<int32_t>(plan.q_samples);
  sm.k_count = static_cast<int32_t>(plan.k_samples);
  if (q_offsets != nullptr) {
    const int64_t bh = b * plan.problem.heads_q + h;
    sm.q_injected = q_offsets + bh * plan.q_samples;
    sm.k_injected = k_offsets + bh * plan.k_samples;
  }
  return sm;
}

psa_status make_plan(const Config& config, const VideoGeometry& geometry, const Problem& problem,
                     Plan* plan) {
  // psa_causal scores and masks a prefill (spec App. A): decode steps go to dense attention.
  PSA_RETURN_IF(config.method == PSA_METHOD_PSA_CAUSAL && problem.len_q != problem.len_k,
                PSA_ERR_INVALID_SHAPE,
                "q: seq_len = %lld, k: seq_len = %lld; type psa_causal runs prefill only (equal "
                "query and key lengths); run decode steps (len_q < len_k) with type dense",
                static_cast<long long>(problem.len_q), static_cast<long long>(problem.len_k));
  plan->problem = problem;
  plan->route = resolve_route(config);
  plan->block_m = config.block_m;
  plan->block_n = config.block_n;
  plan->tile_n = config.tile_n;
  plan->q_blocks = (problem.len_q + config.block_m - 1) / config.block_m;
  plan->k_blocks = (problem.len_k + config.block_n - 1) / config.block_n;
  // Workspaces are sums of products of these counts (Mq * Nk mask entries, padded Lk * D
  // pooled keys, per head or per batch and head): refuse shapes where they could wrap.
  const double heads = static_cast<double>(problem.batch) * static_cast<double>(problem.heads_q);
  const double pairs = static_cast<double>(plan->q_blocks) * static_cast<double>(plan->k_blocks) * heads;
  const double tokens = (static_cast<double>(problem.len_q) + static_cast<double>(plan->k_blocks) * config.block_n) *
                        static_cast<double>(problem.head_dim) * heads;
  PSA_RETURN_IF(pairs > 0x1p50 || tokens > 0x1p56, PSA_ERR_INVALID_SHAPE,
                "q, k: seq_len = %lld, %lld with head_dim %lld: the workspace (%.3g block pairs, "
                "%.3g token values) could not be addressed",
                static_cast<long long>(problem.len_q), static_cast<long long>(problem.len_k),
                static_cast<long long>(problem.head_dim), pairs, tokens);
  plan->q_samples = std::max<int64_t>(1, config.block_m / config.sample_divisor);
  plan->k_samples = std::max<int64_t>(1, config.block_n / config.sample_divisor);
  plan->scale = config.scale > 0.0 ? static_cast<float>(config.scale)
                                   : static_cast<float>(1.0 / std::sqrt(static_cast<double>(problem.head_dim)));
  // The pooled levels the mask can give (the PSA route's rule; psa_causal has its own level
  // rule, block methods pool nothing): the pool stage skips the others.
  const MaskRowParams& row = plan->route.mask_row;
  plan->pooled_levels =
      plan->route.psa() ? pooled_levels_possible(row.mode == PSA_MASK_MODE_TOPK, row.ratio_end, plan->block_m,
                                                 plan->block_n, plan->tile_n, problem.len_q, problem.len_k,
                                                 plan->route.causal, plan->route.sim_cap())
                        : kPooledLevelsAll;
  plan->q_seq = SequencePlan{};
  plan->k_seq = SequencePlan{};
  plan->q_seq.length = problem.len_q;
  plan->k_seq.length = problem.len_k;
  plan->text_begin = plan->text_end = 0;

  const bool sparse_method = plan->route.sparse();
  if (!geometry.set) {
    PSA_RETURN_IF(sparse_method && config.use_rearrange, PSA_ERR_INVALID_STATE,
                  "use_rearrange = 1 but no video grid is set; call psa_context_set_video_grid "
                  "or psa_context_set_video_pixels, or set use_rearrange = 0");
    return PSA_OK;
  }
  const int64_t total = geometry.total_tokens();
  PSA_RETURN_IF(problem.len_k != total, PSA_ERR_INVALID_SHAPE,
                "k: seq_len = %lld; expected t*h*w + text_length = %lld*%lld*%lld + %lld = %lld "
                "for the video grid set on the context",
                static_cast<long long>(problem.len_k), static_cast<long long>(geometry.t),
                static_cast<long long>(geometry.h), static_cast<long long>(geometry.w),
                static_cast<long long>(geometry.text_length), static_cast<long long>(total));
  PSA_RETURN_IF(config.use_rearrange && problem.len_q != total, PSA_ERR_INVALID_SHAPE,
                "q: seq_len = %lld; rearrangement needs q to follow the video grid too "
                "(expected %lld); set use_rearrange = 0 for cross-attention",
                static_cast<long long>(problem.len_q), static_cast<long long>(total));
  PSA_RETURN_IF(config.use_rearrange && config.causal && sparse_method, PSA_ERR_INVALID_CONFIG,
                "causal = 1 with use_rearrange = 1: causal masking is meaningless after token "
                "rearrangement; disable one of them");
  Config effective = config;
  if (!sparse_method) effective.use_rearrange = false;
  PSA_TRY(build_sequence_plan(effective, geometry, problem.len_k, &plan->k_seq));
  if (problem.len_q == problem.len_k) plan->q_seq = plan->k_seq;
  plan->text_begin = plan->k_seq.text_begin;
  plan->text_end = plan->k_seq.text_end;
  return PSA_OK;
}

}  // namespace psa

int64_t psa_context_s::next_step() const {
  if (pinned_step >= 0) return pinned_step;
  int64_t step = calls / (cfg.calls_per_step > 0 ? cfg.calls_per_step : 1);
  if (cfg.inference_steps > 0) step %= cfg.inference_steps;
  return step;
}

bool psa_context_s::step_is_dense(int64_t step) const {
  return psa::route_of(cfg.method) == psa::Route::kDense || step < cfg.warmup_steps;
}

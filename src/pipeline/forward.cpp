// pipeline/forward.cpp -- one forward, the same for both backends: validate -> plan (cached
// per shape; its route picks the stage sequence) -> dense or sparse step -> the backend's
// stage sequence -> stats. No tensor math here.
#include "pipeline/forward.h"

#include <cstdint>

#include "backend/backend.h"
#include "core/error.h"
#include "core/tensor.h"

namespace psa {
namespace {

// rf_v2 / ada_bsa: both backends run them (CPU: methods/; CUDA: cuda/methods/, whose size
// limits its prepare() checks). Both are self-attention on 128 x 128 blocks. rf_v2 also needs
// the latent video grid, and refuses causal = 1 where upstream silently ignores it (its token
// reorder breaks causality).
psa_status check_method_supported(const psa_context* ctx, const Problem& problem) {
  const Config& cfg = ctx->cfg;
  if (route_of(cfg.method) != Route::kBlockMethod) return PSA_OK;
  const char* name = cfg.method == PSA_METHOD_RF_V2 ? "rf_v2" : "ada_bsa";
  PSA_RETURN_IF(cfg.block_m != 128 || cfg.block_n != 128, PSA_ERR_UNSUPPORTED,
                "block_size (m, n) = (%lld, %lld): type %s supports only 128 x 128 blocks",
                static_cast<long long>(cfg.block_m), static_cast<long long>(cfg.block_n), name);
  PSA_RETURN_IF(problem.len_q != problem.len_k, PSA_ERR_INVALID_SHAPE,
                "q: seq_len = %lld, k: seq_len = %lld; type %s needs self-attention (equal "
                "query and key lengths)",
                static_cast<long long>(problem.len_q), static_cast<long long>(problem.len_k), name);
  if (cfg.method == PSA_METHOD_RF_V2) {
    PSA_RETURN_IF(!ctx->geometry.set, PSA_ERR_INVALID_STATE,
                  "type = rf_v2 needs the latent video grid (t, h, w): call "
                  "psa_context_set_video_grid or psa_context_set_video_pixels first");
    PSA_RETURN_IF(cfg.causal, PSA_ERR_UNSUPPORTED,
                  "causal = 1: type rf_v2 reorders tokens into 8x8 spatial tiles, so causal "
                  "masking is meaningless; use causal = 0 (or type ada_bsa)");
  }
  return PSA_OK;
}

}  // namespace

psa_status plan_forward(psa_context* ctx, const psa_tensor_desc* q, const psa_tensor_desc* k,
                        const psa_tensor_desc* v, const psa_tensor_desc* out, Problem* problem,
                        const Plan** plan) {
  PSA_RETURN_IF(ctx == nullptr, PSA_ERR_NULL_POINTER, "context: must not be NULL");
  PSA_TRY(validate_descriptors(q, k, v, out, problem));
  PSA_TRY(check_method_supported(ctx, *problem));
  return ctx->get_plan(*problem, plan);
}

psa_status run_forward(psa_context* ctx, const ForwardTensors& t, void* workspace,
                       uint64_t workspace_bytes, void* stream) {
  PSA_RETURN_IF(ctx == nullptr, PSA_ERR_NULL_POINTER, "context: must not be NULL");
  PSA_RETURN_IF(t.q_desc == nullptr, PSA_ERR_NULL_POINTER, "q_desc: must not be NULL");
  PSA_RETURN_IF(t.k_desc == nullptr, PSA_ERR_NULL_POINTER, "k_desc: must not be NULL");
  PSA_RETURN_IF(t.v_desc == nullptr, PSA_ERR_NULL_POINTER, "v_desc: must not be NULL");
  PSA_RETURN_IF(t.out_desc == nullptr, PSA_ERR_NULL_POINTER, "out_desc: must not be NULL");
  PSA_RETURN_IF(t.q == nullptr, PSA_ERR_NULL_POINTER, "q: must not be NULL");
  PSA_RETURN_IF(t.k == nullptr, PSA_ERR_NULL_POINTER, "k: must not be NULL");
  PSA_RETURN_IF(t.v == nullptr, PSA_ERR_NULL_POINTER, "v: must not be NULL");
  PSA_RETURN_IF(t.out == nullptr, PSA_ERR_NULL_POINTER, "out: must not be NULL");

  Problem problem;
  const Plan* plan = nullptr;
  PSA_TRY(plan_forward(ctx, t.q_desc, t.k_desc, t.v_desc, t.out_desc, &problem, &plan));

  PSA_RETURN_IF(workspace_bytes < plan->workspace_bytes, PSA_ERR_WORKSPACE_TOO_SMALL,
                "workspace_bytes = %llu; this shape needs %llu (query psa_workspace_size)",
                static_cast<unsigned long long>(workspace_bytes),
                static_cast<unsigned long long>(plan->workspace_bytes));
  PSA_RETURN_IF(plan->workspace_bytes > 0 && workspace == nullptr, PSA_ERR_NULL_POINTER,
                "workspace: must not be NULL (this shape needs %llu bytes)",
                static_cast<unsigned long long>(plan->workspace_bytes));

  const char* names[3] = {"q", "k", "v"};
  const ByteRange in_r[3] = {byte_range(*t.q_desc, t.q), byte_range(*t.k_desc, t.k),
                             byte_range(*t.v_desc, t.v)};
  const ByteRange out_r = byte_range(*t.out_desc, t.out);
  const ByteRange lse_r = byte_range(
      t.lse, static_cast<uint64_t>(problem.batch * problem.heads_q * problem.len_q) * 4u);
  for (int i = 0; i < 3; ++i)
    PSA_RETURN_IF(overlaps(out_r, in_r[i]), PSA_ERR_INVALID_ARGUMENT,
                  "out: its memory overlaps %s; the output must not alias an input", names[i]);
  if (t.lse != nullptr) {
    PSA_RETURN_IF(overlaps(lse_r, out_r), PSA_ERR_INVALID_ARGUMENT, "lse: overlaps out");
    for (int i = 0; i < 3; ++i)
      PSA_RETURN_IF(overlaps(lse_r, in_r[i]), PSA_ERR_INVALID_ARGUMENT, "lse: overlaps %s",
                    names[i]);
  }

  // The workspace is scratch the backend writes during the forward: any overlap with an
  // input or output silently corrupts the result. Only the part the plan uses is checked.
  if (plan->workspace_bytes > 0) {
    const ByteRange ws_r = byte_range(workspace, plan->workspace_bytes);
    for (int i = 0; i < 3; ++i)
      PSA_RETURN_IF(overlaps(ws_r, in_r[i]), PSA_ERR_INVALID_ARGUMENT,
                    "workspace: overlaps %s (the %llu workspace bytes must not alias q, k, v, out "
                    "or lse)",
                    names[i], static_cast<unsigned long long>(plan->workspace_bytes));
    PSA_RETURN_IF(overlaps(ws_r, out_r), PSA_ERR_INVALID_ARGUMENT,
                  "workspace: overlaps out (the %llu workspace bytes must not alias q, k, v, out "
                  "or lse)",
                  static_cast<unsigned long long>(plan->workspace_bytes));
    PSA_RETURN_IF(t.lse != nullptr && overlaps(ws_r, lse_r), PSA_ERR_INVALID_ARGUMENT,
                  "workspace: overlaps lse (the %llu workspace bytes must not alias q, k, v, "
                  "out or lse)",
                  static_cast<unsigned long long>(plan->workspace_bytes));
  }

  ForwardArgs args;
  args.q = t.q;
  args.k = t.k;
  args.v = t.v;
  args.out = t.out;
  args.lse = t.lse;
  for (int i = 0; i < 4; ++i) {
    args.q_stride[i] = t.q_desc->strides[i];
    args.k_stride[i] = t.k_desc->strides[i];
    args.v_stride[i] = t.v_desc->strides[i];
    args.o_stride[i] = t.out_desc->strides[i];
  }
  args.workspace = workspace;
  args.workspace_bytes = workspace_bytes;
  args.stream = stream;
  if (!ctx->injected_q_offsets.empty()) {
    PSA_RETURN_IF(ctx->injected_batch != problem.batch || ctx->injected_heads != problem.heads_q ||
                      static_cast<int64_t>(ctx->injected_q_offsets.size()) !=
                          problem.batch * problem.heads_q * plan->q_samples ||
                      static_cast<int64_t>(ctx->injected_k_offsets.size()) !=
                          problem.batch * problem.heads_q * plan->k_samples,
                  PSA_ERR_INVALID_STATE,
                  "injected sampling offsets are for batch %lld, heads %lld; this forward has "
                  "batch %lld, heads %lld, %lld query and %lld key samples per block",
                  static_cast<long long>(ctx->injected_batch), static_cast<long long>(ctx->injected_heads),
                  static_cast<long long>(problem.batch), static_cast<long long>(problem.heads_q),
                  static_cast<long long>(plan->q_samples), static_cast<long long>(plan->k_samples));
    PSA_RETURN_IF(ctx->backend->kind() != PSA_BACKEND_CPU, PSA_ERR_UNSUPPORTED,
                  "injected sampling offsets: supported by the CPU backend only");
    args.q_offsets = ctx->injected_q_offsets.data();
    args.k_offsets = ctx->injected_k_offsets.data();
  }
  const int64_t step = ctx->next_step();
  args.dense = ctx->step_is_dense(step);
  PSA_TRY(ctx->backend->check_pointers(*plan, args));

  LevelCounts counts;
  PSA_TRY(ctx->backend->forward(*plan, args, &counts));

  ctx->has_stats = true;
  ctx->last_dense = args.dense;
  ctx->last_precision = args.dense ? PSA_PRECISION_DEFAULT : plan->route.precision;
  ctx->counts_pending = !args.dense && ctx->backend->kind() == PSA_BACKEND_CUDA;
  ctx->last_counts = counts;
  ctx->last_step = step;
  ctx->last_call = ctx->calls;
  ctx->last_q_blocks = plan->q_blocks;
  ctx->last_k_blocks = plan->k_blocks;
  ctx->last_pairs = problem.batch * problem.heads_q * plan->q_blocks * plan->k_blocks;
  ctx->last_plan = plan;
  ++ctx->calls;
  return PSA_OK;
}

}  // namespace psa

// The plan cache of a context: finds the plan of `problem` under the current geometry, or
// builds it (make_plan) and lets the backend complete it (prepare). Here, above both the
// context and the backend, so that neither includes the other.
psa_status psa_context_s::get_plan(const psa::Problem& problem, const psa::Plan** out) {
  for (size_t i = 0; i < plans.size(); ++i) {
    if (plans[i]->problem.same(problem) && plans[i]->geometry_version == geometry_version) {
      if (i + 1 != plans.size()) {  // move to most-recently-used position
        std::unique_ptr<psa::Plan> p = std::move(plans[i]);
        plans.erase(plans.begin() + static_cast<long>(i));
        plans.push_back(std::move(p));
      }
      *out = plans.back().get();
      return PSA_OK;
    }
  }
  auto plan = std::make_unique<psa::Plan>();
  PSA_TRY(psa::make_plan(cfg, geometry, problem, plan.get()));
  plan->geometry_version = geometry_version;
  PSA_TRY(backend->prepare(plan.get()));
  if (retired_plan && retired_plan.get() != last_plan) retired_plan.reset();
  if (plans.size() >= psa::kMaxCachedPlans) {
    if (plans.front().get() == last_plan) {
      retired_plan = std::move(plans.front());  // keeps the last forward's level map readable
    }
    plans.erase(plans.begin());
  }
  plans.push_back(std::move(plan));
  *out = plans.back().get();
  return PSA_OK;
}

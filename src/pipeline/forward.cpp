// pipeline/forward.cpp -- the stage order of one forward, written once for both backends:
// validate -> (dense | plan -> backend forward) -> stats. No tensor math here.
#include "pipeline/forward.h"

#include <cstdint>

#include "core/error.h"
#include "core/tensor.h"

namespace psa {
namespace {

// Byte range [begin, end) a tensor addresses.
struct Range {
  uintptr_t begin, end;
};
Range range_of(const psa_tensor_desc& d, const void* p) {
  const uintptr_t b = reinterpret_cast<uintptr_t>(p);
  return {b, b + static_cast<uintptr_t>(tensor_extent(d)) * static_cast<uintptr_t>(dtype_size(d.dtype))};
}
bool overlaps(Range a, Range b) { return a.begin < b.end && b.begin < a.end; }

psa_status check_method_supported(const Config& cfg) {
  PSA_RETURN_IF(cfg.method == PSA_METHOD_RF_V2 || cfg.method == PSA_METHOD_ADA_BSA,
                PSA_ERR_UNSUPPORTED, "type = %s: not implemented in this build yet",
                cfg.method == PSA_METHOD_RF_V2 ? "rf_v2" : "ada_bsa");
  return PSA_OK;
}

}  // namespace

psa_status plan_forward(psa_context* ctx, const psa_tensor_desc* q, const psa_tensor_desc* k,
                        const psa_tensor_desc* v, const psa_tensor_desc* out, Problem* problem,
                        const Plan** plan) {
  PSA_RETURN_IF(ctx == nullptr, PSA_ERR_NULL_POINTER, "context: must not be NULL");
  PSA_TRY(validate_descriptors(q, k, v, out, problem));
  PSA_TRY(check_method_supported(ctx->cfg));
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

  const Range out_r = range_of(*t.out_desc, t.out);
  const char* names[3] = {"q", "k", "v"};
  const psa_tensor_desc* descs[3] = {t.q_desc, t.k_desc, t.v_desc};
  const void* ptrs[3] = {t.q, t.k, t.v};
  for (int i = 0; i < 3; ++i)
    PSA_RETURN_IF(overlaps(out_r, range_of(*descs[i], ptrs[i])), PSA_ERR_INVALID_ARGUMENT,
                  "out: its memory overlaps %s; the output must not alias an input", names[i]);
  if (t.lse != nullptr) {
    const uintptr_t lb = reinterpret_cast<uintptr_t>(t.lse);
    const Range lse_r{lb, lb + static_cast<uintptr_t>(problem.batch * problem.heads_q * problem.len_q) * 4u};
    PSA_RETURN_IF(overlaps(lse_r, out_r), PSA_ERR_INVALID_ARGUMENT, "lse: overlaps out");
    for (int i = 0; i < 3; ++i)
      PSA_RETURN_IF(overlaps(lse_r, range_of(*descs[i], ptrs[i])), PSA_ERR_INVALID_ARGUMENT,
                    "lse: overlaps %s", names[i]);
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
  const int64_t step = ctx->next_step();
  args.dense = ctx->step_is_dense(step);
  PSA_TRY(ctx->backend->check_pointers(*plan, args));

  LevelCounts counts;
  PSA_TRY(ctx->backend->forward(ctx->cfg, *plan, args, &counts));

  ctx->has_stats = true;
  ctx->last_dense = args.dense;
  ctx->counts_pending = !args.dense && ctx->backend->kind() == PSA_BACKEND_CUDA;
  ctx->last_counts = counts;
  ctx->last_step = step;
  ctx->last_call = ctx->calls;
  ctx->last_q_blocks = plan->q_blocks;
  ctx->last_k_blocks = plan->k_blocks;
  ctx->last_pairs = problem.batch * problem.heads_q * plan->q_blocks * plan->k_blocks;
  ++ctx->calls;
  return PSA_OK;
}

}  // namespace psa

// api/ring_api.cpp -- extern "C" entries of the PSA ring (psa.h, "Sequence parallelism"):
// psa_compute_level_map (the stages up to the mask of a query shard against every key
// block) and psa_shard_attention (the attention stage of that query shard against one K/V
// shard at the map's levels), with their workspace queries. Checks and planning here; the
// stage work in ring/ring_cpu.cpp (CPU backend) or the backend's ring_* entries (CUDA:
// CudaBackend in backend/cuda/cuda_backend.cpp runs CudaForward's stage methods).
#include <cstdint>

#include "api/guard.h"
#include "backend/backend.h"
#include "context/context.h"
#include "core/tensor.h"
#include "ring/ring_cpu.h"

namespace {

using psa::Plan;
using psa::Problem;

// What both halves need from the context: a PSA config without causal masking.
psa_status check_ring_context(const psa_context* ctx) {
  PSA_RETURN_IF(ctx == nullptr, PSA_ERR_NULL_POINTER, "context: must not be NULL");
  PSA_RETURN_IF(ctx->cfg.method != PSA_METHOD_PSA, PSA_ERR_UNSUPPORTED,
                "type = %d: the level map and shard attention are for type psa (0); run "
                "the dense method's ring with psa_attention_forward(..., lse) per shard",
                static_cast<int>(ctx->cfg.method));
  PSA_RETURN_IF(ctx->cfg.causal, PSA_ERR_UNSUPPORTED,
                "causal = 1: the PSA ring supports non-causal attention only");
  PSA_RETURN_IF(ctx->cfg.precision != PSA_PRECISION_DEFAULT, PSA_ERR_UNSUPPORTED,
                "precision = fp8: the PSA ring runs the default precision only");
  return PSA_OK;
}

bool on_cpu(const psa_context* ctx) { return ctx->backend->kind() == PSA_BACKEND_CPU; }

// Workspace bytes of half 1 (level_map) or half 2 on the context's backend.
psa_status ring_workspace_bytes(psa_context* ctx, const Plan& plan, bool level_map,
                                uint64_t* bytes) {
  if (on_cpu(ctx)) {
    *bytes = level_map ? psa::level_map_workspace_cpu(plan) : psa::shard_attention_workspace_cpu(plan);
    return PSA_OK;
  }
  return ctx->backend->ring_workspace(plan, level_map, bytes);
}

// Plans (q, k) on the context (its grid, text span and sim cap apply). The plan must not
// rearrange: the ring's inputs are already in the computing order.
psa_status plan_level_map(psa_context* ctx, const psa_tensor_desc* q, const psa_tensor_desc* k,
                          const Plan** plan) {
  PSA_TRY(check_ring_context(ctx));
  PSA_RETURN_IF(q == nullptr, PSA_ERR_NULL_POINTER, "q_desc: must not be NULL");
  PSA_RETURN_IF(k == nullptr, PSA_ERR_NULL_POINTER, "k_desc: must not be NULL");
  Problem problem;
  PSA_TRY(psa::validate_descriptors(q, k, k, q, &problem));
  PSA_TRY(ctx->get_plan(problem, plan));
  PSA_RETURN_IF(!(*plan)->q_seq.src.empty() || !(*plan)->k_seq.src.empty(), PSA_ERR_INVALID_STATE,
                "use_rearrange = 1: the level map needs q and k already in the computing order; "
                "permute them with psa_context_sequence_order and set use_rearrange = 0");
  PSA_RETURN_IF(ctx->cfg.text_rows_dense && (*plan)->text_end > (*plan)->text_begin &&
                    problem.len_q != problem.len_k,
                PSA_ERR_UNSUPPORTED,
                "text_rows_dense = 1 with a query shard (q: seq_len = %lld, k: seq_len = %lld): "
                "the dense text rows are positions of the whole sequence",
                static_cast<long long>(problem.len_q), static_cast<long long>(problem.len_k));
  return PSA_OK;
}

// Plans (q, k shard) without the context's grid: the attention stage needs only blocks,
// scale and shapes (text rules and the sim cap are in the level map already).
psa_status plan_shard(const psa_context* ctx, const psa_tensor_desc* q, const psa_tensor_desc* k,
                      const psa_tensor_desc* v, const psa_tensor_desc* out, Plan* plan) {
  PSA_TRY(check_ring_context(ctx));
  PSA_RETURN_IF(q == nullptr, PSA_ERR_NULL_POINTER, "q_desc: must not be NULL");
  PSA_RETURN_IF(k == nullptr, PSA_ERR_NULL_POINTER, "k_desc: must not be NULL");
  PSA_RETURN_IF(v == nullptr, PSA_ERR_NULL_POINTER, "v_desc: must not be NULL");
  PSA_RETURN_IF(out == nullptr, PSA_ERR_NULL_POINTER, "out_desc: must not be NULL");
  Problem problem;
  PSA_TRY(psa::validate_descriptors(q, k, v, out, &problem));
  psa::Config cfg = ctx->cfg;
  cfg.use_rearrange = false;
  return psa::make_plan(cfg, psa::VideoGeometry{}, problem, plan);
}

bool on_device(const void* p) { return p != nullptr && psa::memory_space_of(p) == psa::MemorySpace::kDevice; }

// The CPU backend reads and writes elements as float / uint16_t: each tensor must be aligned
// to its element size, lse to 4 (the CUDA backend checks its own, wider alignment).
psa_status check_host_alignment(const Plan& plan, int n, const void* const* ptrs,
                                const char* const* names, const bool* is_lse) {
  const unsigned esize = static_cast<unsigned>(psa::dtype_size(plan.problem.dtype));
  for (int i = 0; i < n; ++i)
    PSA_TRY(psa::check_element_alignment(ptrs[i], is_lse[i] ? 4u : esize, names[i]));
  return PSA_OK;
}

// Every entry of the map that the shard reads (rows of columns [begin, begin + nk)) must be
// a level: 0 (skipped), 1, 2, 4 or 8. Host maps only: the CPU backend indexes its pyramid
// by the level; the CUDA work list counts only 1, 2, 4, 8 and skips any other value.
psa_status check_level_values(const int8_t* levels, int64_t rows, int64_t map_nk, int64_t begin,
                              int64_t nk) {
  for (int64_t r = 0; r < rows; ++r) {
    const int8_t* row = levels + r * map_nk + begin;
    for (int64_t j = 0; j < nk; ++j) {
      const int v = row[j];
      PSA_RETURN_IF(v != 0 && v != 1 && v != 2 && v != 4 && v != 8, PSA_ERR_INVALID_ARGUMENT,
                    "levels[%lld] = %d (row %lld, key block %lld); allowed: 0 (skipped), 1, 2, "
                    "4, 8", static_cast<long long>(r * map_nk + begin + j), v,
                    static_cast<long long>(r), static_cast<long long>(begin + j));
    }
  }
  return PSA_OK;
}

void copy_strides(const psa_tensor_desc* d, int64_t* s) {
  for (int i = 0; i < 4; ++i) s[i] = d->strides[i];
}

}  // namespace

extern "C" {

PSA_API psa_status psa_level_map_workspace_size(psa_context* context, const psa_tensor_desc* q,
                                                const psa_tensor_desc* k, uint64_t* bytes) {
  PSA_API_BEGIN
  PSA_RETURN_IF(bytes == nullptr, PSA_ERR_NULL_POINTER, "bytes: must not be NULL");
  const Plan* plan = nullptr;
  PSA_TRY(plan_level_map(context, q, k, &plan));
  uint64_t need = 0;
  PSA_TRY(ring_workspace_bytes(context, *plan, true, &need));
  *bytes = need;
  return PSA_OK;
  PSA_API_END
}

PSA_API psa_status psa_compute_level_map(psa_context* context, const psa_tensor_desc* q_desc,
                                         const void* q, const psa_tensor_desc* k_desc,
                                         const void* k, int8_t* levels, void* workspace,
                                         uint64_t workspace_bytes, void* stream) {
  PSA_API_BEGIN
  const Plan* plan = nullptr;
  PSA_TRY(plan_level_map(context, q_desc, k_desc, &plan));
  PSA_RETURN_IF(q == nullptr, PSA_ERR_NULL_POINTER, "q: must not be NULL");
  PSA_RETURN_IF(k == nullptr, PSA_ERR_NULL_POINTER, "k: must not be NULL");
  PSA_RETURN_IF(levels == nullptr, PSA_ERR_NULL_POINTER, "levels: must not be NULL");
  const Problem& pb = plan->problem;
  uint64_t need = 0;
  PSA_TRY(ring_workspace_bytes(context, *plan, true, &need));
  PSA_RETURN_IF(workspace_bytes < need, PSA_ERR_WORKSPACE_TOO_SMALL,
                "workspace_bytes = %llu; this shape needs %llu (query "
                "psa_level_map_workspace_size)",
                static_cast<unsigned long long>(workspace_bytes),
                static_cast<unsigned long long>(need));
  PSA_RETURN_IF(workspace == nullptr, PSA_ERR_NULL_POINTER,
                "workspace: must not be NULL (this shape needs %llu bytes)",
                static_cast<unsigned long long>(need));
  const void* ptrs[4] = {q, k, levels, workspace};
  const char* names[4] = {"q", "k", "levels", "workspace"};
  for (int i = 0; i < 4 && on_cpu(context); ++i)
    PSA_RETURN_IF(on_device(ptrs[i]), PSA_ERR_WRONG_MEMORY_SPACE,
                  "%s: is a CUDA device pointer; the CPU backend needs host memory", names[i]);
  const bool not_lse[2] = {false, false};
  if (on_cpu(context)) PSA_TRY(check_host_alignment(*plan, 2, ptrs, names, not_lse));
  const uint64_t map_bytes =
      static_cast<uint64_t>(pb.batch * pb.heads_q * plan->q_blocks * plan->k_blocks);
  const psa::ByteRange map_r = psa::byte_range(levels, map_bytes);
  const psa::ByteRange ws_r = psa::byte_range(workspace, need);
  PSA_RETURN_IF(psa::overlaps(map_r, psa::byte_range(*q_desc, q)), PSA_ERR_INVALID_ARGUMENT,
                "levels: overlaps q");
  PSA_RETURN_IF(psa::overlaps(map_r, psa::byte_range(*k_desc, k)), PSA_ERR_INVALID_ARGUMENT,
                "levels: overlaps k");
  PSA_RETURN_IF(psa::overlaps(map_r, ws_r), PSA_ERR_INVALID_ARGUMENT, "levels: overlaps workspace");
  PSA_RETURN_IF(psa::overlaps(ws_r, psa::byte_range(*q_desc, q)) ||
                    psa::overlaps(ws_r, psa::byte_range(*k_desc, k)),
                PSA_ERR_INVALID_ARGUMENT, "workspace: overlaps q or k");
  psa::RingTensors t;
  t.q = q;
  t.k = k;
  copy_strides(q_desc, t.q_stride);
  copy_strides(k_desc, t.k_stride);
  if (!context->injected_q_offsets.empty()) {
    PSA_RETURN_IF(context->injected_batch != pb.batch || context->injected_heads != pb.heads_q,
                  PSA_ERR_INVALID_STATE,
                  "injected sampling offsets are for batch %lld, heads %lld; this map has batch "
                  "%lld, heads %lld",
                  static_cast<long long>(context->injected_batch),
                  static_cast<long long>(context->injected_heads),
                  static_cast<long long>(pb.batch), static_cast<long long>(pb.heads_q));
    t.q_offsets = context->injected_q_offsets.data();
    t.k_offsets = context->injected_k_offsets.data();
  }
  // The map is one forward of the context: it takes the step, warm-up and statistics of
  // psa_attention_forward (a warm-up step gives every level 1: dense attention).
  const int64_t step = context->next_step();
  const bool dense = context->step_is_dense(step);
  psa::LevelCounts counts;
  if (on_cpu(context)) {
    psa::level_map_cpu(*plan, t, dense, levels, psa::cpu_kept_levels(*plan), workspace, &counts);
  } else {
    // Enqueued on `stream`; the counts of a sparse map stay on the device until read.
    PSA_TRY(context->backend->ring_level_map(*plan, t, dense, levels, workspace, stream));
  }
  context->has_stats = true;
  context->last_dense = dense;
  context->last_precision = PSA_PRECISION_DEFAULT;
  context->counts_pending = !dense && !on_cpu(context);
  context->last_counts = counts;
  context->last_step = step;
  context->last_call = context->calls;
  context->last_q_blocks = plan->q_blocks;
  context->last_k_blocks = plan->k_blocks;
  context->last_pairs = pb.batch * pb.heads_q * plan->q_blocks * plan->k_blocks;
  context->last_plan = plan;
  ++context->calls;
  return PSA_OK;
  PSA_API_END
}

PSA_API psa_status psa_shard_attention_workspace_size(psa_context* context,
                                                      const psa_tensor_desc* q,
                                                      const psa_tensor_desc* k,
                                                      const psa_tensor_desc* v,
                                                      const psa_tensor_desc* out,
                                                      uint64_t* bytes) {
  PSA_API_BEGIN
  PSA_RETURN_IF(bytes == nullptr, PSA_ERR_NULL_POINTER, "bytes: must not be NULL");
  Plan plan;
  PSA_TRY(plan_shard(context, q, k, v, out, &plan));
  uint64_t need = 0;
  PSA_TRY(ring_workspace_bytes(context, plan, false, &need));
  *bytes = need;
  return PSA_OK;
  PSA_API_END
}

PSA_API psa_status psa_shard_attention(psa_context* context, const psa_tensor_desc* q_desc,
                                       const void* q, const psa_tensor_desc* k_desc,
                                       const void* k, const psa_tensor_desc* v_desc,
                                       const void* v, const int8_t* levels,
                                       int64_t map_key_blocks, int64_t key_block_begin,
                                       const psa_tensor_desc* out_desc, void* out, float* lse,
                                       void* workspace, uint64_t workspace_bytes, void* stream) {
  PSA_API_BEGIN
  Plan plan;
  PSA_TRY(plan_shard(context, q_desc, k_desc, v_desc, out_desc, &plan));
  const void* ptrs[7] = {q, k, v, levels, out, lse, workspace};
  const char* names[7] = {"q", "k", "v", "levels", "out", "lse", "workspace"};
  for (int i = 0; i < 7; ++i) {
    PSA_RETURN_IF(ptrs[i] == nullptr, PSA_ERR_NULL_POINTER, "%s: must not be NULL", names[i]);
    PSA_RETURN_IF(on_cpu(context) && on_device(ptrs[i]), PSA_ERR_WRONG_MEMORY_SPACE,
                  "%s: is a CUDA device pointer; the CPU backend needs host memory", names[i]);
  }
  const Problem& pb = plan.problem;
  const int64_t nk = plan.k_blocks;
  const int64_t map_rows = pb.batch * pb.heads_q * plan.q_blocks;
  PSA_RETURN_IF(map_key_blocks < 1, PSA_ERR_INVALID_ARGUMENT,
                "map_key_blocks = %lld; must be >= 1 (the Nk of the level map)",
                static_cast<long long>(map_key_blocks));
  PSA_RETURN_IF(map_key_blocks > INT64_MAX / map_rows, PSA_ERR_INVALID_ARGUMENT,
                "map_key_blocks = %lld: a map of %lld rows (batch * heads * query blocks) of "
                "that many key blocks overflows int64 bytes",
                static_cast<long long>(map_key_blocks), static_cast<long long>(map_rows));
  PSA_RETURN_IF(key_block_begin < 0 || key_block_begin > map_key_blocks - nk,
                PSA_ERR_INVALID_ARGUMENT,
                "key_block_begin = %lld: the shard's %lld key blocks (k: seq_len = %lld, "
                "block_size.n = %lld) must lie inside the map's %lld key blocks",
                static_cast<long long>(key_block_begin), static_cast<long long>(nk),
                static_cast<long long>(pb.len_k), static_cast<long long>(plan.block_n),
                static_cast<long long>(map_key_blocks));
  PSA_RETURN_IF(pb.len_k % plan.block_n != 0 && key_block_begin + nk != map_key_blocks,
                PSA_ERR_INVALID_SHAPE,
                "k: seq_len = %lld is not a multiple of block_size.n = %lld; only the last "
                "shard (key_block_begin + %lld == map_key_blocks = %lld) may end in a partial "
                "block",
                static_cast<long long>(pb.len_k), static_cast<long long>(plan.block_n),
                static_cast<long long>(nk), static_cast<long long>(map_key_blocks));
  uint64_t need = 0;
  PSA_TRY(ring_workspace_bytes(context, plan, false, &need));
  PSA_RETURN_IF(workspace_bytes < need, PSA_ERR_WORKSPACE_TOO_SMALL,
                "workspace_bytes = %llu; this shape needs %llu (query "
                "psa_shard_attention_workspace_size)",
                static_cast<unsigned long long>(workspace_bytes),
                static_cast<unsigned long long>(need));
  const psa::ByteRange in_r[4] = {psa::byte_range(*q_desc, q), psa::byte_range(*k_desc, k),
                                  psa::byte_range(*v_desc, v),
                                  psa::byte_range(levels, static_cast<uint64_t>(
                                      map_rows * map_key_blocks))};
  const psa::ByteRange out_r[3] = {
      psa::byte_range(*out_desc, out),
      psa::byte_range(lse, static_cast<uint64_t>(pb.batch * pb.heads_q * pb.len_q) * 4u),
      psa::byte_range(workspace, need)};
  const char* in_names[4] = {"q", "k", "v", "levels"};
  const char* out_names[3] = {"out", "lse", "workspace"};
  for (int o = 0; o < 3; ++o) {
    for (int i = 0; i < 4; ++i)
      PSA_RETURN_IF(psa::overlaps(out_r[o], in_r[i]), PSA_ERR_INVALID_ARGUMENT,
                    "%s: overlaps %s", out_names[o], in_names[i]);
    for (int j = o + 1; j < 3; ++j)
      PSA_RETURN_IF(psa::overlaps(out_r[o], out_r[j]), PSA_ERR_INVALID_ARGUMENT,
                    "%s: overlaps %s", out_names[o], out_names[j]);
  }
  psa::RingTensors t;
  t.q = q;
  t.k = k;
  t.v = v;
  t.out = out;
  t.lse = lse;
  copy_strides(q_desc, t.q_stride);
  copy_strides(k_desc, t.k_stride);
  copy_strides(v_desc, t.v_stride);
  copy_strides(out_desc, t.o_stride);
  if (on_cpu(context)) {
    const void* tensors[5] = {q, k, v, out, lse};
    const char* tensor_names[5] = {"q", "k", "v", "out", "lse"};
    const bool lse_at[5] = {false, false, false, false, true};
    PSA_TRY(check_host_alignment(plan, 5, tensors, tensor_names, lse_at));
    PSA_TRY(check_level_values(levels, map_rows, map_key_blocks, key_block_begin, nk));
    psa::shard_attention_cpu(plan, t, levels, map_key_blocks, key_block_begin, workspace);
    return PSA_OK;
  }
  return context->backend->ring_shard_attention(plan, t, levels, map_key_blocks,
                                                key_block_begin, workspace, stream);
  PSA_API_END
}

}  // extern "C"

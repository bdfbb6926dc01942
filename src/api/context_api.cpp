// api/context_api.cpp -- extern "C" entry points for contexts, queries, forward and stats.
// Argument checks and the exception guard only; the work is in context/ and pipeline/.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <memory>

#define PSA_EXPERIMENTAL_API
#include "api/guard.h"
#include "backend/backend.h"
#include "context/context.h"
#include "pipeline/forward.h"

namespace {

psa_status check_context(const psa_context* ctx) {
  PSA_RETURN_IF(ctx == nullptr, PSA_ERR_NULL_POINTER, "context: must not be NULL");
  return PSA_OK;
}

psa_status set_geometry(psa_context* ctx, int64_t t, int64_t h, int64_t w, int64_t text,
                        psa_text_position pos) {
  PSA_TRY(check_context(ctx));
  PSA_RETURN_IF(t < 1 || h < 1 || w < 1, PSA_ERR_INVALID_SHAPE,
                "video grid t,h,w = %lld,%lld,%lld; each must be >= 1", static_cast<long long>(t),
                static_cast<long long>(h), static_cast<long long>(w));
  PSA_RETURN_IF(t > (int64_t{1} << 40) / h / w, PSA_ERR_INVALID_SHAPE,
                "video grid t*h*w = %lld*%lld*%lld is too large", static_cast<long long>(t),
                static_cast<long long>(h), static_cast<long long>(w));
  PSA_RETURN_IF(text < 0 || text > (int64_t{1} << 40), PSA_ERR_INVALID_ARGUMENT,
                "text_length = %lld; must be in [0, 2^40]", static_cast<long long>(text));
  PSA_RETURN_IF(pos != PSA_TEXT_NONE && pos != PSA_TEXT_FIRST && pos != PSA_TEXT_LAST,
                PSA_ERR_INVALID_ARGUMENT,
                "text_position = %d; allowed: PSA_TEXT_NONE (0), PSA_TEXT_FIRST (1), PSA_TEXT_LAST (2)",
                static_cast<int>(pos));
  PSA_RETURN_IF(text > 0 && pos == PSA_TEXT_NONE, PSA_ERR_INVALID_ARGUMENT,
                "text_position = PSA_TEXT_NONE with text_length = %lld; say where the text is",
                static_cast<long long>(text));
  psa::VideoGeometry g;
  g.set = true;
  g.t = t;
  g.h = h;
  g.w = w;
  g.text_length = text;
  g.text_position = text > 0 ? pos : PSA_TEXT_NONE;
  ctx->geometry = g;
  ++ctx->geometry_version;
  return PSA_OK;
}

// a, b >= 1; no a + b - 1, which overflows for pixel sizes near INT64_MAX.
int64_t ceil_div(int64_t a, int64_t b) { return a / b + (a % b != 0 ? 1 : 0); }

}  // namespace

extern "C" {

PSA_API psa_status psa_context_create(const psa_config* config, psa_backend backend,
                                      int32_t device, psa_context** out) {
  PSA_API_BEGIN
  PSA_RETURN_IF(out == nullptr, PSA_ERR_NULL_POINTER, "out: must not be NULL");
  PSA_RETURN_IF(config == nullptr, PSA_ERR_NULL_POINTER, "config: must not be NULL");
  PSA_TRY(psa::validate_config(config->cfg, "config"));
  PSA_RETURN_IF((backend == PSA_BACKEND_CUDA || backend == PSA_BACKEND_AUTO) && device < -1,
                PSA_ERR_INVALID_ARGUMENT,
                "device = %d; allowed: -1 (the current CUDA device) or an ordinal >= 0",
                static_cast<int>(device));
  auto ctx = std::make_unique<psa_context>();
  ctx->cfg = config->cfg;
  switch (backend) {
    case PSA_BACKEND_CPU:
      ctx->backend = psa::make_cpu_backend();
      break;
    case PSA_BACKEND_CUDA:
      PSA_TRY(psa::make_cuda_backend(device, &ctx->backend));
      break;
    case PSA_BACKEND_AUTO:
      if (psa::cuda_backend_available()) {
        PSA_TRY(psa::make_cuda_backend(device, &ctx->backend));
      } else {
        ctx->backend = psa::make_cpu_backend();
      }
      break;
    default:
      return psa::set_error(PSA_ERR_INVALID_ARGUMENT,
                            "backend = %d; allowed: PSA_BACKEND_AUTO (0), PSA_BACKEND_CPU (1), "
                            "PSA_BACKEND_CUDA (2)",
                            static_cast<int>(backend));
  }
  *out = ctx.release();
  return PSA_OK;
  PSA_API_END
}

PSA_API void psa_context_destroy(psa_context* context) {
  try {
    delete context;
  } catch (...) {
  }
}

PSA_API psa_backend psa_context_backend(const psa_context* context) {
  if (context == nullptr) {
    psa::set_error(PSA_ERR_NULL_POINTER, "context: must not be NULL");
    return PSA_BACKEND_AUTO;
  }
  return context->backend->kind();
}

PSA_API psa_status psa_context_get_config(const psa_context* context, psa_config** out) {
  PSA_API_BEGIN
  PSA_TRY(check_context(context));
  PSA_RETURN_IF(out == nullptr, PSA_ERR_NULL_POINTER, "out: must not be NULL");
  auto c = std::make_unique<psa_config>();
  c->cfg = context->cfg;
  *out = c.release();
  return PSA_OK;
  PSA_API_END
}

PSA_API psa_status psa_context_set_video_grid(psa_context* context, int64_t t, int64_t h,
                                              int64_t w, int64_t text_length,
                                              psa_text_position text_position) {
  PSA_API_BEGIN
  return set_geometry(context, t, h, w, text_length, text_position);
  PSA_API_END
}

PSA_API psa_status psa_context_set_video_pixels(psa_context* context, int64_t frames,
                                                int64_t height, int64_t width,
                                                int64_t text_length,
                                                psa_text_position text_position) {
  PSA_API_BEGIN
  PSA_TRY(check_context(context));
  PSA_RETURN_IF(frames < 1 || height < 1 || width < 1, PSA_ERR_INVALID_SHAPE,
                "frames, height, width = %lld, %lld, %lld; each must be >= 1",
                static_cast<long long>(frames), static_cast<long long>(height),
                static_cast<long long>(width));
  const psa::Config& c = context->cfg;
  const int64_t text = text_length < 0 ? c.text_length : text_length;
  psa_text_position pos = text_position;
  if (text > 0 && pos == PSA_TEXT_NONE && text_length < 0) pos = PSA_TEXT_FIRST;
  return set_geometry(context, ceil_div(frames, c.depth_divisor), ceil_div(height, c.height_divisor),
                      ceil_div(width, c.width_divisor), text, pos);
  PSA_API_END
}

PSA_API psa_status psa_context_clear_video_grid(psa_context* context) {
  PSA_API_BEGIN
  PSA_TRY(check_context(context));
  context->geometry = psa::VideoGeometry{};
  ++context->geometry_version;
  return PSA_OK;
  PSA_API_END
}

PSA_API psa_status psa_context_set_step(psa_context* context, int64_t step) {
  PSA_API_BEGIN
  PSA_TRY(check_context(context));
  PSA_RETURN_IF(step < -1, PSA_ERR_INVALID_ARGUMENT,
                "step = %lld; must be >= 0, or -1 to count calls", static_cast<long long>(step));
  context->pinned_step = step;
  return PSA_OK;
  PSA_API_END
}

PSA_API psa_status psa_context_reset_calls(psa_context* context) {
  PSA_API_BEGIN
  PSA_TRY(check_context(context));
  context->calls = 0;
  return PSA_OK;
  PSA_API_END
}

PSA_API psa_status psa_context_next_step(const psa_context* context, int64_t* step,
                                         int32_t* dense) {
  PSA_API_BEGIN
  PSA_TRY(check_context(context));
  const int64_t s = context->next_step();
  if (step) *step = s;
  if (dense) *dense = context->step_is_dense(s) ? 1 : 0;
  return PSA_OK;
  PSA_API_END
}

PSA_API psa_status psa_check_supported(psa_context* context, const psa_tensor_desc* q,
                                       const psa_tensor_desc* k, const psa_tensor_desc* v,
                                       const psa_tensor_desc* out) {
  PSA_API_BEGIN
  psa::Problem problem;
  const psa::Plan* plan = nullptr;
  return psa::plan_forward(context, q, k, v, out, &problem, &plan);
  PSA_API_END
}

PSA_API psa_status psa_workspace_size(psa_context* context, const psa_tensor_desc* q,
                                      const psa_tensor_desc* k, const psa_tensor_desc* v,
                                      const psa_tensor_desc* out, uint64_t* bytes) {
  PSA_API_BEGIN
  PSA_RETURN_IF(bytes == nullptr, PSA_ERR_NULL_POINTER, "bytes: must not be NULL");
  psa::Problem problem;
  const psa::Plan* plan = nullptr;
  PSA_TRY(psa::plan_forward(context, q, k, v, out, &problem, &plan));
  *bytes = plan->workspace_bytes;
  return PSA_OK;
  PSA_API_END
}

PSA_API psa_status psa_attention_forward(psa_context* context, const psa_tensor_desc* q_desc,
                                         const void* q, const psa_tensor_desc* k_desc,
                                         const void* k, const psa_tensor_desc* v_desc,
                                         const void* v, const psa_tensor_desc* out_desc,
                                         void* out, float* lse, void* workspace,
                                         uint64_t workspace_bytes, void* stream) {
  PSA_API_BEGIN
  psa::ForwardTensors t{q_desc, q, k_desc, k, v_desc, v, out_desc, out, lse};
  return psa::run_forward(context, t, workspace, workspace_bytes, stream);
  PSA_API_END
}

PSA_API psa_status psa_context_get_stats(psa_context* context, psa_stats* stats) {
  PSA_API_BEGIN
  PSA_TRY(check_context(context));
  PSA_RETURN_IF(stats == nullptr, PSA_ERR_NULL_POINTER, "stats: must not be NULL");
  // The struct of libpsa 0.x before `precision` was appended is still accepted (its prefix is filled).
  const uint32_t size = stats->struct_size;
  PSA_RETURN_IF(size != sizeof(psa_stats) && size != offsetof(psa_stats, precision), PSA_ERR_INVALID_ARGUMENT,
                "stats: struct_size = %u; expected sizeof(psa_stats) = %u", size,
                static_cast<unsigned>(sizeof(psa_stats)));
  PSA_RETURN_IF(!context->has_stats, PSA_ERR_INVALID_STATE,
                "context: no forward has run yet, so there are no statistics");
  if (context->counts_pending) {
    PSA_TRY(context->backend->read_counts(&context->last_counts));
    context->counts_pending = false;
  }
  psa_stats s{};
  s.struct_size = size;
  s.ran_dense = context->last_dense ? 1 : 0;
  s.precision = context->last_precision;
  s.step = context->last_step;
  s.call_index = context->last_call;
  s.query_blocks = context->last_q_blocks;
  s.key_blocks = context->last_k_blocks;
  const psa::LevelCounts& c = context->last_counts;
  if (context->last_dense) {
    s.density = 1.0;
    s.level_fraction[PSA_STAT_LEVEL_1] = 1.0;
  } else {
    const double pairs = static_cast<double>(context->last_pairs);
    s.density = pairs > 0 ? c.density_sum / pairs : 0.0;
    for (int i = 0; i < 5; ++i) s.level_fraction[i] = pairs > 0 ? c.count[i] / pairs : 0.0;
  }
  for (int i = 0; i < 7; ++i) s.stage_ms[i] = c.stage_ms[i];
  std::memcpy(stats, &s, size);
  return PSA_OK;
  PSA_API_END
}

}  // extern "C"

extern "C" PSA_API psa_status psa_context_set_sampling_offsets(psa_context* context, int64_t batch,
                                                               int64_t heads, int32_t q_count,
                                                               const int32_t* q_offsets,
                                                               int32_t k_count,
                                                               const int32_t* k_offsets) {
  PSA_API_BEGIN
  PSA_TRY(check_context(context));
  if (q_offsets == nullptr && k_offsets == nullptr) {
    context->injected_q_offsets.clear();
    context->injected_k_offsets.clear();
    return PSA_OK;
  }
  PSA_RETURN_IF(q_offsets == nullptr, PSA_ERR_NULL_POINTER, "q_offsets: NULL while k_offsets is not");
  PSA_RETURN_IF(k_offsets == nullptr, PSA_ERR_NULL_POINTER, "k_offsets: NULL while q_offsets is not");
  const psa::Config& c = context->cfg;
  const int64_t want_q = std::max<int64_t>(1, c.block_m / c.sample_divisor);
  const int64_t want_k = std::max<int64_t>(1, c.block_n / c.sample_divisor);
  PSA_RETURN_IF(batch < 1 || heads < 1 || batch > (int64_t{1} << 20) || heads > (int64_t{1} << 20),
                PSA_ERR_INVALID_ARGUMENT, "batch, heads = %lld, %lld; each must be in [1, 2^20]",
                static_cast<long long>(batch), static_cast<long long>(heads));
  PSA_RETURN_IF(q_count != want_q, PSA_ERR_INVALID_ARGUMENT,
                "q_count = %d; the config samples block_m / sample_divisor = %lld per block",
                q_count, static_cast<long long>(want_q));
  PSA_RETURN_IF(k_count != want_k, PSA_ERR_INVALID_ARGUMENT,
                "k_count = %d; the config samples block_n / sample_divisor = %lld per block",
                k_count, static_cast<long long>(want_k));
  const int64_t nq = batch * heads * q_count, nk = batch * heads * k_count;
  for (int64_t i = 0; i < nq; ++i)
    PSA_RETURN_IF(q_offsets[i] < 0 || q_offsets[i] >= c.block_m, PSA_ERR_INVALID_ARGUMENT,
                  "q_offsets[%lld] = %d; must be in [0, block_m = %lld)", static_cast<long long>(i),
                  q_offsets[i], static_cast<long long>(c.block_m));
  for (int64_t i = 0; i < nk; ++i)
    PSA_RETURN_IF(k_offsets[i] < 0 || k_offsets[i] >= c.block_n, PSA_ERR_INVALID_ARGUMENT,
                  "k_offsets[%lld] = %d; must be in [0, block_n = %lld)", static_cast<long long>(i),
                  k_offsets[i], static_cast<long long>(c.block_n));
  context->injected_q_offsets.assign(q_offsets, q_offsets + nq);
  context->injected_k_offsets.assign(k_offsets, k_offsets + nk);
  context->injected_batch = batch;
  context->injected_heads = heads;
  return PSA_OK;
  PSA_API_END
}

extern "C" PSA_API psa_status psa_context_set_stage_timing(psa_context* context, int32_t enable) {
  PSA_API_BEGIN
  PSA_TRY(check_context(context));
  PSA_RETURN_IF(enable != 0 && enable != 1, PSA_ERR_INVALID_ARGUMENT,
                "enable = %d; expected 0 (off) or 1 (on)", static_cast<int>(enable));
  return context->backend->set_stage_timing(enable == 1);
  PSA_API_END
}

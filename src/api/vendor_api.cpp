// api/vendor_api.cpp -- extern "C" psa_sparse_attention: the vendor-shaped one-shot call,
// written only in terms of the public context API (config -> context -> workspace ->
// forward -> destroy). Argument checks and cleanup here; no tensor math.
#include <cstdint>
#include <cstdlib>
#include <memory>

#include "api/guard.h"
#include "psa.h"

namespace {

struct ConfigFree {
  void operator()(psa_config* c) const { psa_config_destroy(c); }
};
struct ContextFree {
  void operator()(psa_context* c) const { psa_context_destroy(c); }
};
struct HostFree {
  void operator()(void* p) const { std::free(p); }
};

const char* method_name(psa_method m) {
  switch (m) {
    case PSA_METHOD_PSA: return "PSA_METHOD_PSA";
    case PSA_METHOD_DENSE: return "PSA_METHOD_DENSE";
    case PSA_METHOD_RF_V2: return "PSA_METHOD_RF_V2";
    case PSA_METHOD_ADA_BSA: return "PSA_METHOD_ADA_BSA";
  }
  return "unknown";
}

// The vendor defaults expressed as a config: 128 x 128 blocks, no warm-up, no rearrange
// flag (rf_v2 fixes its own token order). Each set call names the parameter on failure.
psa_status make_config(psa_method method, double sparsity, int32_t keep_sink,
                       int32_t keep_recent, double cdf_threshold, double scale, int32_t causal,
                       psa_config** out) {
  psa_config* raw = nullptr;
  PSA_TRY(psa_config_create(&raw));
  std::unique_ptr<psa_config, ConfigFree> cfg(raw);
  PSA_TRY(psa_config_set_int(raw, PSA_PARAM_METHOD, method));
  PSA_TRY(psa_config_set_int(raw, PSA_PARAM_BLOCK_M, 128));
  PSA_TRY(psa_config_set_int(raw, PSA_PARAM_BLOCK_N, 128));
  PSA_TRY(psa_config_set_double(raw, PSA_PARAM_SPARSITY, sparsity));
  PSA_TRY(psa_config_set_double(raw, PSA_PARAM_CDF_THRESHOLD, cdf_threshold));
  PSA_TRY(psa_config_set_int(raw, PSA_PARAM_KEEP_SINK, keep_sink));
  PSA_TRY(psa_config_set_int(raw, PSA_PARAM_KEEP_RECENT, keep_recent));
  PSA_TRY(psa_config_set_double(raw, PSA_PARAM_SCALE, scale));
  PSA_TRY(psa_config_set_int(raw, PSA_PARAM_CAUSAL, causal));
  *out = cfg.release();
  return PSA_OK;
}

}  // namespace

extern "C" PSA_API psa_status psa_sparse_attention(
    const void* q, const void* k, const void* v, void* out, psa_dtype dtype, int64_t batch,
    int64_t heads, int64_t seq_len, int64_t head_dim, psa_layout layout, psa_method method,
    double sparsity, int64_t txt_len, const int64_t* latent_shape_q, int32_t keep_sink,
    int32_t keep_recent, double cdf_threshold, double scale, int32_t causal,
    psa_backend backend, void* stream) {
  PSA_API_BEGIN
  PSA_RETURN_IF(q == nullptr, PSA_ERR_NULL_POINTER, "q: must not be NULL");
  PSA_RETURN_IF(k == nullptr, PSA_ERR_NULL_POINTER, "k: must not be NULL");
  PSA_RETURN_IF(v == nullptr, PSA_ERR_NULL_POINTER, "v: must not be NULL");
  PSA_RETURN_IF(out == nullptr, PSA_ERR_NULL_POINTER, "out: must not be NULL");
  PSA_RETURN_IF(method != PSA_METHOD_RF_V2 && method != PSA_METHOD_ADA_BSA &&
                    method != PSA_METHOD_DENSE,
                method == PSA_METHOD_PSA ? PSA_ERR_UNSUPPORTED : PSA_ERR_INVALID_ARGUMENT,
                "method = %d (%s): psa_sparse_attention runs PSA_METHOD_RF_V2 (%d), "
                "PSA_METHOD_ADA_BSA (%d) or PSA_METHOD_DENSE (%d); for PSA load a preset and "
                "use the context API",
                static_cast<int>(method), method_name(method), PSA_METHOD_RF_V2,
                PSA_METHOD_ADA_BSA, PSA_METHOD_DENSE);
  PSA_RETURN_IF(backend == PSA_BACKEND_CUDA, PSA_ERR_UNSUPPORTED,
                "backend = PSA_BACKEND_CUDA: psa_sparse_attention allocates its workspace with "
                "malloc and the CUDA backend has no workspace-free path; use the context API "
                "(psa_workspace_size + psa_attention_forward) with a device workspace");
  PSA_RETURN_IF(backend != PSA_BACKEND_CPU && backend != PSA_BACKEND_AUTO,
                PSA_ERR_INVALID_ARGUMENT,
                "backend = %d; allowed: PSA_BACKEND_AUTO (0), PSA_BACKEND_CPU (1)",
                static_cast<int>(backend));

  psa_tensor_desc desc{};
  desc.struct_size = sizeof desc;
  PSA_TRY(psa_tensor_desc_init(&desc, layout, dtype, batch, heads, seq_len, head_dim));
  PSA_RETURN_IF(txt_len < 0 || txt_len > seq_len, PSA_ERR_INVALID_ARGUMENT,
                "txt_len = %lld: must be in [0, seq_len = %lld]", static_cast<long long>(txt_len),
                static_cast<long long>(seq_len));
  PSA_RETURN_IF(method == PSA_METHOD_RF_V2 && latent_shape_q == nullptr, PSA_ERR_NULL_POINTER,
                "latent_shape_q: must not be NULL for PSA_METHOD_RF_V2; pass {t, h, w} with "
                "t*h*w = seq_len - txt_len = %lld (t = 1 for an image)",
                static_cast<long long>(seq_len - txt_len));
  if (latent_shape_q != nullptr) {
    const int64_t t = latent_shape_q[0], h = latent_shape_q[1], w = latent_shape_q[2];
    PSA_RETURN_IF(t < 1 || h < 1 || w < 1, PSA_ERR_INVALID_SHAPE,
                  "latent_shape_q = {%lld, %lld, %lld}: each of t, h, w must be >= 1",
                  static_cast<long long>(t), static_cast<long long>(h), static_cast<long long>(w));
    PSA_RETURN_IF(t > (seq_len - txt_len) / h / w || t * h * w != seq_len - txt_len,
                  PSA_ERR_INVALID_SHAPE,
                  "latent_shape_q = {%lld, %lld, %lld} with txt_len = %lld: t*h*w + txt_len "
                  "must equal seq_len = %lld",
                  static_cast<long long>(t), static_cast<long long>(h), static_cast<long long>(w),
                  static_cast<long long>(txt_len), static_cast<long long>(seq_len));
  }

  psa_config* cfg_raw = nullptr;
  PSA_TRY(make_config(method, sparsity, keep_sink, keep_recent, cdf_threshold, scale, causal,
                      &cfg_raw));
  std::unique_ptr<psa_config, ConfigFree> cfg(cfg_raw);
  psa_context* ctx_raw = nullptr;
  PSA_TRY(psa_context_create(cfg.get(), PSA_BACKEND_CPU, -1, &ctx_raw));
  std::unique_ptr<psa_context, ContextFree> ctx(ctx_raw);
  if (latent_shape_q != nullptr && method == PSA_METHOD_RF_V2)
    PSA_TRY(psa_context_set_video_grid(ctx.get(), latent_shape_q[0], latent_shape_q[1],
                                       latent_shape_q[2], txt_len,
                                       txt_len > 0 ? PSA_TEXT_FIRST : PSA_TEXT_NONE));

  uint64_t bytes = 0;
  PSA_TRY(psa_workspace_size(ctx.get(), &desc, &desc, &desc, &desc, &bytes));
  std::unique_ptr<void, HostFree> ws;
  if (bytes > 0) {
    PSA_RETURN_IF(bytes > static_cast<uint64_t>(SIZE_MAX), PSA_ERR_OUT_OF_MEMORY,
                  "workspace: %llu bytes do not fit in size_t",
                  static_cast<unsigned long long>(bytes));
    ws.reset(std::malloc(static_cast<size_t>(bytes)));
    PSA_RETURN_IF(!ws, PSA_ERR_OUT_OF_MEMORY, "workspace: malloc of %llu bytes failed",
                  static_cast<unsigned long long>(bytes));
  }
  return psa_attention_forward(ctx.get(), &desc, q, &desc, k, &desc, v, &desc, out, nullptr,
                               ws.get(), bytes, stream);
  PSA_API_END
}

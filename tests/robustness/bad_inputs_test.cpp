// tests/robustness/bad_inputs_test.cpp -- the public API under bad inputs, one table row per
// case (extends tests/api/api_errors_test.cpp's forward table; no row repeats one there).
// Every row: the documented status, a message naming the argument, no out parameter or
// output buffer written, the environment's config unchanged, and the context still runs.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include "robustness/robust_env.h"

namespace psa_robust {
namespace {

struct BadCase {
  const char* name;
  psa_status want;
  const char* must_mention;
  std::function<psa_status(Env&)> call;
};

using DescEdit = std::function<void(psa_tensor_desc&)>;

constexpr int64_t kI64Max = std::numeric_limits<int64_t>::max();
constexpr int64_t kI64Min = std::numeric_limits<int64_t>::min();
const double kNan = std::numeric_limits<double>::quiet_NaN();
const double kInf = std::numeric_limits<double>::infinity();

// Value-returning catalog accessors report through the last error; these adapters check the
// documented fallback value and hand the recorded status to the table.
psa_status status_if(bool fallback_returned) {
  EXPECT_TRUE(fallback_returned) << "the call should return its documented fallback value";
  return psa_last_error_status();
}

psa_status set_int_on_clone(Env& e, psa_param p, int64_t v, psa_status (*then)(psa_config*)) {
  ConfigPtr c = e.clone();
  EXPECT_EQ(psa_config_set_int(c.get(), p, v), PSA_OK) << psa_last_error_message();
  return then(c.get());
}

psa_status validate(psa_config* c) { return psa_config_validate(c); }

// check_supported on a fresh context built from the environment's config with some
// parameters changed (the environment's own config and context stay as they are).
psa_status supported_with(Env& e, const std::vector<std::pair<psa_param, int64_t>>& ints,
                          const std::function<psa_status(psa_context*)>& before = nullptr) {
  ConfigPtr c = e.clone();
  for (const auto& [p, v] : ints)
    EXPECT_EQ(psa_config_set_int(c.get(), p, v), PSA_OK) << psa_last_error_message();
  psa_context* raw = nullptr;
  EXPECT_EQ(psa_context_create(c.get(), PSA_BACKEND_CPU, -1, &raw), PSA_OK) << psa_last_error_message();
  ContextPtr x(raw);
  if (before) EXPECT_EQ(before(raw), PSA_OK) << psa_last_error_message();
  return psa_check_supported(raw, &e.q.desc, &e.k.desc, &e.v.desc, &e.out.desc);
}

void add_null_pointer_cases(std::vector<BadCase>& v) {
  const psa_status N = PSA_ERR_NULL_POINTER;
  // Configuration.
  v.push_back({"config_create_null_out", N, "out", [](Env&) { return psa_config_create(nullptr); }});
  v.push_back({"config_clone_null_src", N, "src", [](Env& e) { return psa_config_clone(nullptr, &e.cfg_out); }});
  v.push_back({"config_clone_null_out", N, "out", [](Env& e) { return psa_config_clone(e.cfg.get(), nullptr); }});
  v.push_back({"load_file_null_path", N, "path", [](Env& e) {
                 return psa_config_load_file(nullptr, "M", nullptr, &e.cfg_out);
               }});
  v.push_back({"load_file_null_model", N, "model", [](Env& e) {
                 return psa_config_load_file(PSA_SOURCE_DIR "/configs/attention_config.yaml", nullptr, nullptr, &e.cfg_out);
               }});
  v.push_back({"load_file_null_out", N, "out", [](Env&) {
                 return psa_config_load_file(PSA_SOURCE_DIR "/configs/attention_config.yaml", "Wan2.1_14b", nullptr, nullptr);
               }});
  v.push_back({"load_string_null_yaml", N, "yaml", [](Env& e) { return psa_config_load_string(nullptr, "M", "p", &e.cfg_out); }});
  v.push_back({"load_string_null_model", N, "model", [](Env& e) {
                 return psa_config_load_string(mini_yaml(), nullptr, "p", &e.cfg_out);
               }});
  v.push_back({"load_string_null_out", N, "out", [](Env&) { return psa_config_load_string(mini_yaml(), "M", "p", nullptr); }});
  v.push_back({"load_embedded_null_model", N, "model", [](Env& e) { return psa_config_load_embedded(nullptr, nullptr, &e.cfg_out); }});
  v.push_back({"load_embedded_null_out", N, "out", [](Env&) { return psa_config_load_embedded("Wan2.1_14b", nullptr, nullptr); }});
  v.push_back({"validate_null_config", N, "config", [](Env&) { return psa_config_validate(nullptr); }});
  v.push_back({"set_int_null_config", N, "config", [](Env&) { return psa_config_set_int(nullptr, PSA_PARAM_BLOCK_M, 128); }});
  v.push_back({"set_double_null_config", N, "config", [](Env&) { return psa_config_set_double(nullptr, PSA_PARAM_SCALE, 1.0); }});
  v.push_back({"get_int_null_config", N, "config", [](Env& e) { return psa_config_get_int(nullptr, PSA_PARAM_BLOCK_M, &e.i64); }});
  v.push_back({"get_int_null_value", N, "value", [](Env& e) { return psa_config_get_int(e.cfg.get(), PSA_PARAM_BLOCK_M, nullptr); }});
  v.push_back({"get_double_null_config", N, "config", [](Env& e) { return psa_config_get_double(nullptr, PSA_PARAM_SCALE, &e.f64); }});
  v.push_back({"get_double_null_value", N, "value", [](Env& e) { return psa_config_get_double(e.cfg.get(), PSA_PARAM_SCALE, nullptr); }});
  v.push_back({"param_from_name_null_name", N, "name", [](Env& e) { return psa_param_from_name(nullptr, e.param_out); }});
  v.push_back({"param_from_name_null_param", N, "param", [](Env&) { return psa_param_from_name("block_size.m", nullptr); }});
  // Catalog.
  v.push_back({"catalog_open_null_out", N, "out", [](Env&) { return psa_catalog_open(nullptr, nullptr); }});
  v.push_back({"catalog_open_string_null_yaml", N, "yaml", [](Env& e) { return psa_catalog_open_string(nullptr, &e.cat_out); }});
  v.push_back({"catalog_open_string_null_out", N, "out", [](Env&) { return psa_catalog_open_string(mini_yaml(), nullptr); }});
  v.push_back({"catalog_model_count_null", N, "catalog", [](Env&) { return status_if(psa_catalog_model_count(nullptr) == 0); }});
  v.push_back({"catalog_model_name_null", N, "catalog", [](Env&) { return status_if(psa_catalog_model_name(nullptr, 0) == nullptr); }});
  v.push_back({"catalog_preset_count_null_catalog", N, "catalog", [](Env&) {
                 return status_if(psa_catalog_preset_count(nullptr, "M") == -1);
               }});
  v.push_back({"catalog_preset_count_null_model", N, "model", [](Env& e) {
                 return status_if(psa_catalog_preset_count(e.cat, nullptr) == -1);
               }});
  v.push_back({"catalog_preset_name_null_model", N, "model", [](Env& e) {
                 return status_if(psa_catalog_preset_name(e.cat, nullptr, 0) == nullptr);
               }});
  v.push_back({"catalog_default_preset_null_catalog", N, "catalog", [](Env&) {
                 return status_if(psa_catalog_default_preset(nullptr, "M") == nullptr);
               }});
  v.push_back({"catalog_get_config_null_catalog", N, "catalog", [](Env& e) {
                 return psa_catalog_get_config(nullptr, "M", "p", &e.cfg_out);
               }});
  v.push_back({"catalog_get_config_null_model", N, "model", [](Env& e) {
                 return psa_catalog_get_config(e.cat, nullptr, "p", &e.cfg_out);
               }});
  v.push_back({"catalog_get_config_null_out", N, "out", [](Env& e) { return psa_catalog_get_config(e.cat, "M", "p", nullptr); }});
  // Context.
  v.push_back({"context_get_config_null_context", N, "context", [](Env& e) { return psa_context_get_config(nullptr, &e.cfg_out); }});
  v.push_back({"context_get_config_null_out", N, "out", [](Env& e) { return psa_context_get_config(e.ctx.get(), nullptr); }});
  v.push_back({"set_video_grid_null_context", N, "context", [](Env&) {
                 return psa_context_set_video_grid(nullptr, 2, 8, 10, 0, PSA_TEXT_NONE);
               }});
  v.push_back({"set_video_pixels_null_context", N, "context", [](Env&) {
                 return psa_context_set_video_pixels(nullptr, 5, 128, 160, 0, PSA_TEXT_NONE);
               }});
  v.push_back({"clear_video_grid_null_context", N, "context", [](Env&) { return psa_context_clear_video_grid(nullptr); }});
  v.push_back({"set_step_null_context", N, "context", [](Env&) { return psa_context_set_step(nullptr, 0); }});
  v.push_back({"reset_calls_null_context", N, "context", [](Env&) { return psa_context_reset_calls(nullptr); }});
  v.push_back({"next_step_null_context", N, "context", [](Env& e) { return psa_context_next_step(nullptr, &e.i64, &e.i32); }});
  v.push_back({"get_stats_null_context", N, "context", [](Env& e) { return psa_context_get_stats(nullptr, &e.stats); }});
  v.push_back({"get_stats_null_stats", N, "stats", [](Env& e) {
                 EXPECT_EQ(e.forward(), PSA_OK);  // stats exist, so only the NULL can fail
                 std::memset(e.out.bytes.data(), 0x5a, e.out.bytes.size());
                 std::fill(e.lse.begin(), e.lse.end(), kSentinelLse);
                 return psa_context_get_stats(e.ctx.get(), nullptr);
               }});
  // Queries and forward (the forward's q/k/v/out/q_desc/context/workspace rows are in
  // tests/api/api_errors_test.cpp).
  v.push_back({"check_supported_null_context", N, "context", [](Env& e) {
                 return psa_check_supported(nullptr, &e.q.desc, &e.k.desc, &e.v.desc, &e.out.desc);
               }});
  v.push_back({"check_supported_null_q_desc", N, "q_desc", [](Env& e) {
                 return psa_check_supported(e.ctx.get(), nullptr, &e.k.desc, &e.v.desc, &e.out.desc);
               }});
  v.push_back({"check_supported_null_k_desc", N, "k_desc", [](Env& e) {
                 return psa_check_supported(e.ctx.get(), &e.q.desc, nullptr, &e.v.desc, &e.out.desc);
               }});
  v.push_back({"check_supported_null_v_desc", N, "v_desc", [](Env& e) {
                 return psa_check_supported(e.ctx.get(), &e.q.desc, &e.k.desc, nullptr, &e.out.desc);
               }});
  v.push_back({"workspace_size_null_context", N, "context", [](Env& e) {
                 return psa_workspace_size(nullptr, &e.q.desc, &e.k.desc, &e.v.desc, &e.out.desc, &e.u64);
               }});
  v.push_back({"workspace_size_null_k_desc", N, "k_desc", [](Env& e) {
                 return psa_workspace_size(e.ctx.get(), &e.q.desc, nullptr, &e.v.desc, &e.out.desc, &e.u64);
               }});
  v.push_back({"forward_null_k_desc", N, "k_desc", [](Env& e) {
                 return psa_attention_forward(e.ctx.get(), &e.q.desc, e.q.bytes.data(), nullptr, e.k.bytes.data(),
                                              &e.v.desc, e.v.bytes.data(), &e.out.desc, e.out.bytes.data(),
                                              e.lse.data(), e.ws.data(), e.ws.size(), nullptr);
               }});
  v.push_back({"forward_null_v_desc", N, "v_desc", [](Env& e) {
                 return psa_attention_forward(e.ctx.get(), &e.q.desc, e.q.bytes.data(), &e.k.desc, e.k.bytes.data(),
                                              nullptr, e.v.bytes.data(), &e.out.desc, e.out.bytes.data(),
                                              e.lse.data(), e.ws.data(), e.ws.size(), nullptr);
               }});
  v.push_back({"forward_null_out_desc", N, "out_desc", [](Env& e) {
                 return psa_attention_forward(e.ctx.get(), &e.q.desc, e.q.bytes.data(), &e.k.desc, e.k.bytes.data(),
                                              &e.v.desc, e.v.bytes.data(), nullptr, e.out.bytes.data(),
                                              e.lse.data(), e.ws.data(), e.ws.size(), nullptr);
               }});
  v.push_back({"tensor_desc_init_null_desc", N, "desc", [](Env&) {
                 return psa_tensor_desc_init(nullptr, PSA_LAYOUT_BNSD, PSA_DTYPE_F32, 1, 1, 1, 1);
               }});
  // The vendor-shaped one-shot call.
  v.push_back({"sparse_attention_null_q", N, "q", [](Env& e) {
                 const int64_t latent[3] = {2, 8, 10};
                 return psa_sparse_attention(nullptr, e.k.bytes.data(), e.v.bytes.data(), e.out.bytes.data(),
                                             PSA_DTYPE_F32, 1, 2, 160, 16, PSA_LAYOUT_BNSD, PSA_METHOD_RF_V2, 0.5, 0,
                                             latent, 1, 1, 1.0, 0.0, 0, PSA_BACKEND_CPU, nullptr);
               }});
  v.push_back({"sparse_attention_rf_v2_null_latent", N, "latent_shape_q", [](Env& e) {
                 return psa_sparse_attention(e.q.bytes.data(), e.k.bytes.data(), e.v.bytes.data(), e.out.bytes.data(),
                                             PSA_DTYPE_F32, 1, 2, 160, 16, PSA_LAYOUT_BNSD, PSA_METHOD_RF_V2, 0.5, 0,
                                             nullptr, 1, 1, 1.0, 0.0, 0, PSA_BACKEND_CPU, nullptr);
               }});
}

void add_descriptor_cases(std::vector<BadCase>& v) {
  auto fwd = [](int which, DescEdit f) {
    return [which, f](Env& e) {
      psa_tensor_desc d[4] = {e.q.desc, e.k.desc, e.v.desc, e.out.desc};
      f(d[which]);
      return e.forward(d[0], d[1], d[2], d[3]);
    };
  };
  enum { Q = 0, K = 1, V = 2, O = 3 };
  const psa_status S = PSA_ERR_INVALID_SHAPE, T = PSA_ERR_INVALID_STRIDE, D = PSA_ERR_INVALID_DTYPE;
  // Zero, negative and overflowing dimensions.
  v.push_back({"k_zero_heads", S, "k: shape[1] (heads) = 0", fwd(K, [](psa_tensor_desc& d) { d.shape[1] = 0; })});
  v.push_back({"v_negative_head_dim", S, "v: shape[3] (head_dim) = -1", fwd(V, [](psa_tensor_desc& d) { d.shape[3] = -1; })});
  v.push_back({"out_zero_seq_len", S, "out: shape[2] (seq_len) = 0", fwd(O, [](psa_tensor_desc& d) { d.shape[2] = 0; })});
  v.push_back({"q_int64_min_batch", S, "q: shape[0] (batch)", fwd(Q, [](psa_tensor_desc& d) { d.shape[0] = kI64Min; })});
  v.push_back({"q_elements_exactly_2_63", S, "element count overflows int64", fwd(Q, [](psa_tensor_desc& d) {
                 d.shape[0] = int64_t{1} << 31;  // 2^31 * 2^31 * 2 * 1 = 2^63 > INT64_MAX
                 d.shape[1] = int64_t{1} << 31;
                 d.shape[2] = 2;
                 d.shape[3] = 1;
               })});
  v.push_back({"k_bytes_past_2_63", S, "size in bytes overflows", fwd(K, [](psa_tensor_desc& d) {
                 d.shape[0] = int64_t{1} << 30;  // 2^62 f32 elements = 2^64 bytes
                 d.shape[1] = int64_t{1} << 30;
                 d.shape[2] = 4;
                 d.shape[3] = 1;
               })});
  v.push_back({"q_stride_extent_overflow", T, "q: extent overflows", fwd(Q, [](psa_tensor_desc& d) {
                 d.shape[0] = 4;
                 d.strides[0] = kI64Max / 2;
               })});
  // Lq / Lk / D / H / B mismatches among q, k, v and out.
  v.push_back({"v_head_dim_mismatch", S, "v: shape[3] (head_dim) = 8", fwd(V, [](psa_tensor_desc& d) { d.shape[3] = 8; })});
  v.push_back({"v_heads_mismatch", S, "v: shape[1] (heads) = 1", fwd(V, [](psa_tensor_desc& d) { d.shape[1] = 1; })});
  v.push_back({"v_batch_mismatch", S, "v: shape[0] (batch) = 2", fwd(V, [](psa_tensor_desc& d) { d.shape[0] = 2; })});
  v.push_back({"out_head_dim_mismatch", S, "out: shape[3] (head_dim) = 8", fwd(O, [](psa_tensor_desc& d) { d.shape[3] = 8; })});
  v.push_back({"out_heads_mismatch", S, "out: shape[1] (heads) = 1", fwd(O, [](psa_tensor_desc& d) { d.shape[1] = 1; })});
  v.push_back({"out_batch_mismatch", S, "out: shape[0] (batch) = 2", fwd(O, [](psa_tensor_desc& d) { d.shape[0] = 2; })});
  v.push_back({"kv_heads_exceed_q_heads", S, "k: shape[1] (heads) = 4", [](Env& e) {
                 auto four = [](psa_tensor_desc& d) {
                   d.shape[1] = 4;
                   d.strides[0] = 4 * 160 * 16;
                 };
                 return e.forward(e.q.desc, with(e.k.desc, four), with(e.v.desc, four), e.out.desc);
               }});
  v.push_back({"q_len_vs_out_len", S, "out: shape[2] (seq_len) = 159", fwd(O, [](psa_tensor_desc& d) { d.shape[2] = 159; })});
  // Data types.
  v.push_back({"k_dtype_unknown", D, "k_desc: dtype = 3", fwd(K, [](psa_tensor_desc& d) { d.dtype = psa_dtype(3); })});
  v.push_back({"out_dtype_negative", D, "out_desc: dtype = -1", fwd(O, [](psa_tensor_desc& d) { d.dtype = psa_dtype(-1); })});
  v.push_back({"v_dtype_mismatch", D, "v: dtype = f16", fwd(V, [](psa_tensor_desc& d) { d.dtype = PSA_DTYPE_F16; })});
  v.push_back({"desc_init_bad_dtype", D, "dtype = 5", [](Env& e) {
                 return psa_tensor_desc_init(&e.desc_out, PSA_LAYOUT_BSND, psa_dtype(5), 1, 1, 1, 1);
               }});
  v.push_back({"desc_init_elements_past_2_63", S, "desc: element count overflows int64", [](Env& e) {
                 return psa_tensor_desc_init(&e.desc_out, PSA_LAYOUT_BNSD, PSA_DTYPE_F32, 4, 4, int64_t{1} << 31,
                                             int64_t{1} << 30);
               }});
  v.push_back({"desc_init_negative_seq_len", S, "seq_len = -3", [](Env& e) {
                 return psa_tensor_desc_init(&e.desc_out, PSA_LAYOUT_BSH, PSA_DTYPE_BF16, 1, 1, -3, 64);
               }});
  // Strides.
  v.push_back({"k_inner_stride_zero", T, "k: strides[3] (head_dim) = 0", fwd(K, [](psa_tensor_desc& d) { d.strides[3] = 0; })});
  v.push_back({"out_inner_stride_two", T, "out: strides[3] (head_dim) = 2", fwd(O, [](psa_tensor_desc& d) { d.strides[3] = 2; })});
  v.push_back({"out_inner_stride_negative", T, "out: strides[3] (head_dim) = -1", fwd(O, [](psa_tensor_desc& d) { d.strides[3] = -1; })});
  v.push_back({"v_negative_head_stride", T, "v: strides[1] (heads) = -2560", fwd(V, [](psa_tensor_desc& d) { d.strides[1] = -2560; })});
  v.push_back({"out_rows_alias", T, "out: strides[2] (seq_len) = 0", fwd(O, [](psa_tensor_desc& d) { d.strides[2] = 0; })});
  v.push_back({"q_heads_alias", T, "q: strides[1] (heads) = 0", fwd(Q, [](psa_tensor_desc& d) { d.strides[1] = 0; })});
  v.push_back({"k_heads_broadcast", T, "stride 0 is a broadcast view: pass a copy (K/V with fewer heads than q need none",
               fwd(K, [](psa_tensor_desc& d) { d.strides[1] = 0; })});
  v.push_back({"v_rows_overlap_heads", T, "alias", fwd(V, [](psa_tensor_desc& d) { d.strides[1] = 16 * 100; })});
}

void add_buffer_cases(std::vector<BadCase>& v) {
  const psa_status A = PSA_ERR_INVALID_ARGUMENT;
  v.push_back({"out_aliases_k", A, "out: its memory overlaps k", [](Env& e) {
                 return psa_attention_forward(e.ctx.get(), &e.q.desc, e.q.bytes.data(), &e.k.desc, e.k.bytes.data(),
                                              &e.v.desc, e.v.bytes.data(), &e.out.desc, e.k.bytes.data(),
                                              e.lse.data(), e.ws.data(), e.ws.size(), nullptr);
               }});
  v.push_back({"out_overlaps_v_tail", A, "out: its memory overlaps v", [](Env& e) {
                 // out starts in the middle of v: the ranges overlap without being equal. v sits
                 // at the start of a buffer that also holds all of out, so out overlaps nothing
                 // else whatever the heap layout.
                 std::vector<uint8_t> vbuf(e.v.bytes.size() * 2);
                 std::memcpy(vbuf.data(), e.v.bytes.data(), e.v.bytes.size());
                 return psa_attention_forward(e.ctx.get(), &e.q.desc, e.q.bytes.data(), &e.k.desc, e.k.bytes.data(),
                                              &e.v.desc, vbuf.data(), &e.out.desc, vbuf.data() + e.v.bytes.size() / 2,
                                              e.lse.data(), e.ws.data(), e.ws.size(), nullptr);
               }});
  v.push_back({"lse_aliases_q", A, "lse: overlaps q", [](Env& e) {
                 return psa_attention_forward(e.ctx.get(), &e.q.desc, e.q.bytes.data(), &e.k.desc, e.k.bytes.data(),
                                              &e.v.desc, e.v.bytes.data(), &e.out.desc, e.out.bytes.data(),
                                              reinterpret_cast<float*>(e.q.bytes.data()), e.ws.data(), e.ws.size(),
                                              nullptr);
               }});
  v.push_back({"lse_overlaps_v", A, "lse: overlaps v", [](Env& e) {
                 return psa_attention_forward(e.ctx.get(), &e.q.desc, e.q.bytes.data(), &e.k.desc, e.k.bytes.data(),
                                              &e.v.desc, e.v.bytes.data(), &e.out.desc, e.out.bytes.data(),
                                              reinterpret_cast<float*>(e.v.bytes.data()) + 7, e.ws.data(), e.ws.size(),
                                              nullptr);
               }});
  // The workspace is written during the forward: overlapping any tensor corrupts the result
  // (issue 18). Each case keeps every pointer inside one allocation large enough for both.
  v.push_back({"workspace_overlaps_q", A, "workspace: overlaps q", [](Env& e) {
                 std::vector<uint8_t> big(e.ws.size() + e.q.bytes.size() + 64);
                 uint8_t* q = big.data() + e.ws.size() - 64;  // the last 64 workspace bytes are q's first
                 std::memcpy(q, e.q.bytes.data(), e.q.bytes.size());
                 return psa_attention_forward(e.ctx.get(), &e.q.desc, q, &e.k.desc, e.k.bytes.data(), &e.v.desc,
                                              e.v.bytes.data(), &e.out.desc, e.out.bytes.data(), e.lse.data(),
                                              big.data(), e.ws.size(), nullptr);
               }});
  v.push_back({"workspace_aliases_v", A, "workspace: overlaps v", [](Env& e) {
                 std::vector<uint8_t> big(std::max(e.ws.size(), e.v.bytes.size()));
                 std::memcpy(big.data(), e.v.bytes.data(), e.v.bytes.size());
                 return psa_attention_forward(e.ctx.get(), &e.q.desc, e.q.bytes.data(), &e.k.desc, e.k.bytes.data(),
                                              &e.v.desc, big.data(), &e.out.desc, e.out.bytes.data(), e.lse.data(),
                                              big.data(), e.ws.size(), nullptr);
               }});
  v.push_back({"workspace_overlaps_out", A, "workspace: overlaps out", [](Env& e) {
                 std::vector<uint8_t> big(e.ws.size() + e.out.bytes.size());
                 return psa_attention_forward(e.ctx.get(), &e.q.desc, e.q.bytes.data(), &e.k.desc, e.k.bytes.data(),
                                              &e.v.desc, e.v.bytes.data(), &e.out.desc, big.data() + 64, e.lse.data(),
                                              big.data(), e.ws.size(), nullptr);
               }});
  v.push_back({"workspace_overlaps_lse", A, "workspace: overlaps lse", [](Env& e) {
                 std::vector<uint8_t> big(e.ws.size() + e.lse.size() * sizeof(float));
                 return psa_attention_forward(e.ctx.get(), &e.q.desc, e.q.bytes.data(), &e.k.desc, e.k.bytes.data(),
                                              &e.v.desc, e.v.bytes.data(), &e.out.desc, e.out.bytes.data(),
                                              reinterpret_cast<float*>(big.data() + e.ws.size() - 16), big.data(),
                                              e.ws.size(), nullptr);
               }});
  v.push_back({"workspace_zero_bytes", PSA_ERR_WORKSPACE_TOO_SMALL, "workspace_bytes = 0", [](Env& e) {
                 return psa_attention_forward(e.ctx.get(), &e.q.desc, e.q.bytes.data(), &e.k.desc, e.k.bytes.data(),
                                              &e.v.desc, e.v.bytes.data(), &e.out.desc, e.out.bytes.data(),
                                              e.lse.data(), e.ws.data(), 0, nullptr);
               }});
  v.push_back({"workspace_too_small_after_replan", PSA_ERR_WORKSPACE_TOO_SMALL, "workspace_bytes", [](Env& e) {
                 // A grid makes a new plan; the old size is still enough here, so shrink it.
                 EXPECT_EQ(psa_context_set_video_grid(e.ctx.get(), 2, 8, 10, 0, PSA_TEXT_NONE), PSA_OK);
                 return psa_attention_forward(e.ctx.get(), &e.q.desc, e.q.bytes.data(), &e.k.desc, e.k.bytes.data(),
                                              &e.v.desc, e.v.bytes.data(), &e.out.desc, e.out.bytes.data(),
                                              e.lse.data(), e.ws.data(), e.ws.size() / 2, nullptr);
               }});
}

void add_context_cases(std::vector<BadCase>& v) {
  const psa_status S = PSA_ERR_INVALID_SHAPE, A = PSA_ERR_INVALID_ARGUMENT;
  v.push_back({"grid_with_text_mismatch", S, "t*h*w + text_length", [](Env& e) {
                 EXPECT_EQ(psa_context_set_video_grid(e.ctx.get(), 2, 8, 10, 1, PSA_TEXT_LAST), PSA_OK);
                 return e.forward();
               }});
  v.push_back({"grid_negative_h", S, "video grid t,h,w = 1,-1,5", [](Env& e) {
                 return psa_context_set_video_grid(e.ctx.get(), 1, -1, 5, 0, PSA_TEXT_NONE);
               }});
  v.push_back({"grid_too_large", S, "too large", [](Env& e) {
                 return psa_context_set_video_grid(e.ctx.get(), int64_t{1} << 20, int64_t{1} << 20, int64_t{1} << 20, 0,
                                                   PSA_TEXT_NONE);
               }});
  v.push_back({"grid_int64_max", S, "too large", [](Env& e) {
                 return psa_context_set_video_grid(e.ctx.get(), kI64Max, kI64Max, kI64Max, 0, PSA_TEXT_NONE);
               }});
  v.push_back({"grid_bad_text_position", A, "text_position = 7", [](Env& e) {
                 return psa_context_set_video_grid(e.ctx.get(), 1, 2, 80, 0, psa_text_position(7));
               }});
  v.push_back({"grid_text_int64_max", A, "text_length", [](Env& e) {
                 return psa_context_set_video_grid(e.ctx.get(), 1, 2, 80, kI64Max, PSA_TEXT_FIRST);
               }});
  v.push_back({"pixels_zero_frames", S, "frames, height, width = 0", [](Env& e) {
                 return psa_context_set_video_pixels(e.ctx.get(), 0, 128, 160, 0, PSA_TEXT_NONE);
               }});
  v.push_back({"pixels_int64_max", S, "too large", [](Env& e) {
                 return psa_context_set_video_pixels(e.ctx.get(), kI64Max, kI64Max, kI64Max, 0, PSA_TEXT_NONE);
               }});
  v.push_back({"step_int64_min", A, "step = ", [](Env& e) { return psa_context_set_step(e.ctx.get(), kI64Min); }});
  v.push_back({"create_negative_backend", A, "backend = -1", [](Env& e) {
                 return psa_context_create(e.cfg.get(), psa_backend(-1), -1, &e.ctx_out);
               }});
  v.push_back({"rearrange_without_grid", PSA_ERR_INVALID_STATE, "use_rearrange = 1", [](Env& e) {
                 return supported_with(e, {{PSA_PARAM_USE_REARRANGE, 1}});
               }});
  v.push_back({"sta_tile_does_not_divide_grid", PSA_ERR_INVALID_CONFIG, "does not divide", [](Env& e) {
                 return supported_with(e, {{PSA_PARAM_USE_REARRANGE, 1}, {PSA_PARAM_REARRANGE_METHOD, PSA_REARRANGE_STA}},
                                       [](psa_context* c) { return psa_context_set_video_grid(c, 1, 16, 10, 0, PSA_TEXT_NONE); });
               }});
  v.push_back({"semantic_aware_unsupported", PSA_ERR_UNSUPPORTED, "SemanticAware", [](Env& e) {
                 return supported_with(e, {{PSA_PARAM_USE_REARRANGE, 1},
                                           {PSA_PARAM_REARRANGE_METHOD, PSA_REARRANGE_SEMANTIC_AWARE}},
                                       [](psa_context* c) { return psa_context_set_video_grid(c, 2, 8, 10, 0, PSA_TEXT_NONE); });
               }});
  v.push_back({"causal_with_rearrange", PSA_ERR_INVALID_CONFIG, "causal = 1", [](Env& e) {
                 return supported_with(e, {{PSA_PARAM_USE_REARRANGE, 1}, {PSA_PARAM_CAUSAL, 1}},
                                       [](psa_context* c) { return psa_context_set_video_grid(c, 2, 8, 10, 0, PSA_TEXT_NONE); });
               }});
  v.push_back({"rf_v2_cross_attention", S, "self-attention", [](Env& e) {
                 // rf_v2 needs 128 x 128 blocks and Lq == Lk; out keeps q's shape.
                 ConfigPtr c = e.clone();
                 EXPECT_EQ(psa_config_set_int(c.get(), PSA_PARAM_BLOCK_N, 128), PSA_OK);
                 EXPECT_EQ(psa_config_set_int(c.get(), PSA_PARAM_METHOD, PSA_METHOD_RF_V2), PSA_OK);
                 psa_context* raw = nullptr;
                 EXPECT_EQ(psa_context_create(c.get(), PSA_BACKEND_CPU, -1, &raw), PSA_OK) << psa_last_error_message();
                 ContextPtr x(raw);
                 const psa_tensor_desc q = with(e.q.desc, [](psa_tensor_desc& d) { d.shape[2] = 100; });
                 return psa_check_supported(raw, &q, &e.k.desc, &e.v.desc, nullptr);
               }});
  v.push_back({"rf_v2_without_grid", PSA_ERR_INVALID_STATE, "rf_v2", [](Env& e) {
                 return supported_with(e, {{PSA_PARAM_BLOCK_N, 128}, {PSA_PARAM_METHOD, PSA_METHOD_RF_V2}});
               }});
}

void add_config_cases(std::vector<BadCase>& v) {
  const psa_status A = PSA_ERR_INVALID_ARGUMENT, C = PSA_ERR_INVALID_CONFIG;
  auto set_d = [](psa_param p, double x) {
    return [p, x](Env& e) { return psa_config_set_double(e.cfg.get(), p, x); };
  };
  auto set_i = [](psa_param p, int64_t x) {
    return [p, x](Env& e) { return psa_config_set_int(e.cfg.get(), p, x); };
  };
  // Single-value bounds through psa_config_set_*.
  v.push_back({"set_ratio_l1_above_one", A, "mask_ratios.1 = 1.5", set_d(PSA_PARAM_RATIO_L1, 1.5)});
  v.push_back({"set_ratio_l0_negative", A, "mask_ratios.0 = -0.1", set_d(PSA_PARAM_RATIO_L0, -0.1)});
  v.push_back({"set_ratio_l2_nan", A, "mask_ratios.2 = nan", set_d(PSA_PARAM_RATIO_L2, kNan)});
  v.push_back({"set_ratio_l8_inf", A, "mask_ratios.8 = inf", set_d(PSA_PARAM_RATIO_L8, kInf)});
  v.push_back({"set_min_full_ratio_above_one", A, "min_full_attn_ratio = 2", set_d(PSA_PARAM_MIN_FULL_RATIO, 2.0)});
  v.push_back({"set_sim_threshold_x4_above", A, "sim_thresholds.x4 = 1.01", set_d(PSA_PARAM_SIM_THRESHOLD_X4, 1.01)});
  v.push_back({"set_sim_threshold_x8_below", A, "sim_thresholds.x8 = -1.5", set_d(PSA_PARAM_SIM_THRESHOLD_X8, -1.5)});
  v.push_back({"set_sim_threshold_x2_nan", A, "sim_thresholds.x2 = nan", set_d(PSA_PARAM_SIM_THRESHOLD_X2, kNan)});
  v.push_back({"set_sparsity_one", A, "sparsity = 1", set_d(PSA_PARAM_SPARSITY, 1.0)});
  v.push_back({"set_sparsity_negative", A, "sparsity = -0.25", set_d(PSA_PARAM_SPARSITY, -0.25)});
  v.push_back({"set_cdf_threshold_zero", A, "cdf_threshold = 0", set_d(PSA_PARAM_CDF_THRESHOLD, 0.0)});
  v.push_back({"set_cdf_threshold_above_one", A, "cdf_threshold = 1.5", set_d(PSA_PARAM_CDF_THRESHOLD, 1.5)});
  v.push_back({"set_scale_negative", A, "scale = -1", set_d(PSA_PARAM_SCALE, -1.0)});
  v.push_back({"set_scale_inf", A, "scale = inf", set_d(PSA_PARAM_SCALE, kInf)});
  // Finite as a double, +inf as the float the kernels use (issue 18): the bound is named.
  v.push_back({"set_scale_above_flt_max", A, "scale = 1e+39: allowed [0, 3.4028234663852886e+38] (FLT_MAX",
               set_d(PSA_PARAM_SCALE, 1e39)});
  v.push_back({"set_scale_double_max", A, "FLT_MAX", set_d(PSA_PARAM_SCALE, std::numeric_limits<double>::max())});
  v.push_back({"set_block_m_96", A, "block_size.m = 96", set_i(PSA_PARAM_BLOCK_M, 96)});
  v.push_back({"set_block_n_16", A, "block_size.n = 16", set_i(PSA_PARAM_BLOCK_N, 16)});
  v.push_back({"set_tile_n_8", A, "block_size.tile_n = 8", set_i(PSA_PARAM_TILE_N, 8)});
  v.push_back({"set_method_7", A, "type = 7", set_i(PSA_PARAM_METHOD, 7)});
  v.push_back({"set_mask_mode_negative", A, "mask_mode = -1", set_i(PSA_PARAM_MASK_MODE, -1)});
  v.push_back({"set_bool_two", A, "use_sim_mask = 2", set_i(PSA_PARAM_USE_SIM_MASK, 2)});
  v.push_back({"set_sample_divisor_3", A, "sample_divisor = 3", set_i(PSA_PARAM_SAMPLE_DIVISOR, 3)});
  v.push_back({"set_warmup_negative", A, "warmup_steps = -1", set_i(PSA_PARAM_WARMUP_STEPS, -1)});
  v.push_back({"set_calls_per_step_zero", A, "calls_per_step = 0", set_i(PSA_PARAM_CALLS_PER_STEP, 0)});
  v.push_back({"set_seed_negative", A, "seed = -1", set_i(PSA_PARAM_SEED, -1)});
  v.push_back({"set_text_length_2_40", A, "text_length = 1099511627776", set_i(PSA_PARAM_TEXT_LENGTH, int64_t{1} << 40)});
  v.push_back({"set_sta_tile_zero", A, "tile_size.h = 0", set_i(PSA_PARAM_STA_TILE_H, 0)});
  v.push_back({"set_int_on_double_param", A, "use psa_config_set_double", set_i(PSA_PARAM_SPARSITY, 0)});
  v.push_back({"set_double_on_int_param", A, "use psa_config_set_int", set_d(PSA_PARAM_BLOCK_M, 128.0)});
  v.push_back({"set_unknown_param", A, "param = 43", set_i(psa_param(43), 0)});
  v.push_back({"get_negative_param", A, "param = -1", [](Env& e) { return psa_config_get_int(e.cfg.get(), psa_param(-1), &e.i64); }});
  v.push_back({"get_double_of_int_param", A, "use psa_config_get_int", [](Env& e) {
                 return psa_config_get_double(e.cfg.get(), PSA_PARAM_BLOCK_N, &e.f64);
               }});
  v.push_back({"param_info_unknown", A, "param = 1000", [](Env& e) {
                 return psa_param_info(psa_param(1000), &e.name_out, e.type_out, &e.f64, &e.f64b);
               }});
  v.push_back({"param_from_name_unknown", PSA_ERR_NOT_FOUND, "mask_ratio.1", [](Env& e) {
                 return psa_param_from_name("mask_ratio.1", e.param_out);
               }});
  // Cross-parameter rules: psa_config_validate and psa_context_create (on a clone).
  v.push_back({"validate_ratio_ends_decrease", C, "mask_ratios.2 = 0.05", [](Env& e) {
                 ConfigPtr c = e.clone();
                 EXPECT_EQ(psa_config_set_double(c.get(), PSA_PARAM_RATIO_L2, 0.05), PSA_OK);
                 return psa_config_validate(c.get());
               }});
  v.push_back({"create_with_decreasing_ratios", C, "mask_ratios.0 = 0.2", [](Env& e) {
                 ConfigPtr c = e.clone();
                 EXPECT_EQ(psa_config_set_double(c.get(), PSA_PARAM_RATIO_L0, 0.2), PSA_OK);
                 return psa_context_create(c.get(), PSA_BACKEND_CPU, -1, &e.ctx_out);
               }});
  v.push_back({"validate_tile_larger_than_block", C, "block_size.tile_n", [](Env& e) {
                 ConfigPtr c = e.clone();
                 EXPECT_EQ(psa_config_set_int(c.get(), PSA_PARAM_BLOCK_N, 32), PSA_OK);
                 EXPECT_EQ(psa_config_set_int(c.get(), PSA_PARAM_TILE_N, 64), PSA_OK);
                 return psa_config_validate(c.get());
               }});
  v.push_back({"validate_sim_mask_needs_levels", C, "use_sim_mask", [](Env& e) {
                 return set_int_on_clone(e, PSA_PARAM_USE_SIM_MASK, 1, validate);
               }});
  v.push_back({"validate_rf_v2_block_n_64", C, "type rf_v2 allows only 128", [](Env& e) {
                 return set_int_on_clone(e, PSA_PARAM_METHOD, PSA_METHOD_RF_V2, validate);
               }});
  v.push_back({"create_ada_bsa_block_n_64", C, "type ada_bsa allows only 128", [](Env& e) {
                 ConfigPtr c = e.clone();
                 EXPECT_EQ(psa_config_set_int(c.get(), PSA_PARAM_METHOD, PSA_METHOD_ADA_BSA), PSA_OK);
                 return psa_context_create(c.get(), PSA_BACKEND_CPU, -1, &e.ctx_out);
               }});
  v.push_back({"sparse_attention_sparsity_one", A, "sparsity = 1", [](Env& e) {
                 const int64_t latent[3] = {2, 8, 10};
                 return psa_sparse_attention(e.q.bytes.data(), e.k.bytes.data(), e.v.bytes.data(), e.out.bytes.data(),
                                             PSA_DTYPE_F32, 1, 2, 160, 16, PSA_LAYOUT_BNSD, PSA_METHOD_RF_V2, 1.0, 0,
                                             latent, 1, 1, 1.0, 0.0, 0, PSA_BACKEND_CPU, nullptr);
               }});
  v.push_back({"sparse_attention_cdf_zero", A, "cdf_threshold = 0", [](Env& e) {
                 return psa_sparse_attention(e.q.bytes.data(), e.k.bytes.data(), e.v.bytes.data(), e.out.bytes.data(),
                                             PSA_DTYPE_F32, 1, 2, 160, 16, PSA_LAYOUT_BNSD, PSA_METHOD_ADA_BSA, 0.5, 0,
                                             nullptr, 1, 1, 0.0, 0.0, 0, PSA_BACKEND_CPU, nullptr);
               }});
}

void add_yaml_cases(std::vector<BadCase>& v) {
  const psa_status C = PSA_ERR_INVALID_CONFIG, NF = PSA_ERR_NOT_FOUND;
  // Loads preset `preset` of model M from a mini_yaml() variant.
  auto load = [](std::string from, std::string to, const char* preset) {
    return [from, to, preset](Env& e) {
      return psa_config_load_string(yaml_with(from, to).c_str(), "M", preset, &e.cfg_out);
    };
  };
  v.push_back({"yaml_unclosed_flow", PSA_ERR_YAML_PARSE, "line", [](Env& e) {
                 return psa_config_load_string("M: [unclosed\n  x: {", "M", nullptr, &e.cfg_out);
               }});
  v.push_back({"yaml_tab_indentation", PSA_ERR_YAML_PARSE, "<string>", load("  text_length: 0\n", "\ttext_length: 0\n", "p")});
  v.push_back({"yaml_ratio_nan", C, "mask_ratios.1[1]", load("1: [0.0, 0.1]", "1: [0.0, .nan]", "p")});
  v.push_back({"yaml_ratio_inf_start", C, "mask_ratios.4[0]", load("4: [0.15, 0.15]", "4: [.inf, 0.15]", "p")});
  v.push_back({"yaml_sim_threshold_inf", C, "sim_thresholds.x4", load("x4: 0.65", "x4: .inf", "p")});
  v.push_back({"yaml_sim_threshold_text", C, "sim_thresholds.x8 = high", load("x8: 0.6", "x8: high", "p")});
  v.push_back({"yaml_sparsity_one", C, "sparsity = 1", load("sparsity: 0.5\n    a:", "sparsity: 1.0\n    a:", "b")});
  v.push_back({"yaml_sparsity_text", C, "b.sparsity = lots", load("sparsity: 0.5\n    a:", "sparsity: lots\n    a:", "b")});
  v.push_back({"yaml_sparsity_negative", C, "M.attention_configs.b.sparsity = -0.5", load("sparsity: 0.5\n", "sparsity: -0.5\n", "b")});
  v.push_back({"yaml_cdf_zero", C, "cdf_threshold = 0", load("cdf_threshold: 0.9", "cdf_threshold: 0", "a")});
  v.push_back({"yaml_cdf_above_one", C, "cdf_threshold = 1.01", load("cdf_threshold: 0.9", "cdf_threshold: 1.01", "a")});
  v.push_back({"yaml_cdf_sequence", C, "a.cdf_threshold: expected a", load("cdf_threshold: 0.9", "cdf_threshold: [0.9]", "a")});
  v.push_back({"yaml_min_full_ratio_above_one", C, "min_full_attn_ratio = 7", load("mask_mode: topk", "mask_mode: topk\n      min_full_attn_ratio: 7", "p")});
  // Issue 18: a scale that overflows float, numbers that are not YAML 1.2 numbers, NUL in keys.
  v.push_back({"yaml_scale_above_flt_max", C, "M.attention_configs.p.scale = 1e+39: allowed [0, 3.4028234663852886e+38]",
               load("mask_mode: topk", "mask_mode: topk\n      scale: 1e39", "p")});
  v.push_back({"yaml_ratio_plus_minus", C, "M.attention_configs.p.mask_ratios.1[1] = +-0.5: expected a finite number",
               load("1: [0.0, 0.1]", "1: [0.0, +-0.5]", "p")});
  v.push_back({"yaml_ratio_plus_minus_zero", C, "mask_ratios.1[0] = +-0", load("1: [0.0, 0.1]", "1: [+-0, 0.1]", "p")});
  v.push_back({"yaml_int_plus_minus", C, "M.text_length = +-0: expected an integer", load("text_length: 0", "text_length: +-0", "p")});
  v.push_back({"yaml_int_minus_plus", C, "block_size.m = -+128", load("m: 128", "m: -+128", "p")});
  v.push_back({"yaml_int_signed_hex", C, "block_size.m = -0x80", load("m: 128", "m: -0x80", "p")});
  v.push_back({"yaml_sparsity_double_sign", C, "sparsity = --0.5", load("sparsity: 0.5\n    a:", "sparsity: --0.5\n    a:", "b")});
  v.push_back({"yaml_model_key_with_nul", C, "keys must not contain NUL", [](Env& e) {
                 // "M\0x" in YAML double quotes: a key whose C string would read "M".
                 const std::string y = "\"M\\0x\":" + yaml_with("M:", "");
                 return psa_config_load_string(y.c_str(), "M", nullptr, &e.cfg_out);
               }});
  v.push_back({"catalog_two_models_named_m", C, "\"M\\0x\": keys must not contain NUL", [](Env& e) {
                 const std::string y = std::string(mini_yaml()) + "\"M\\0x\":" + yaml_with("M:", "");
                 return psa_catalog_open_string(y.c_str(), &e.cat_out);
               }});
  v.push_back({"yaml_preset_key_with_nul", C, "M.attention_configs.\"p\\0q\": keys must not contain NUL",
               load("    p:\n", "    \"p\\0q\":\n", "p")});
  v.push_back({"catalog_default_preset_not_set", NF, "M.default_attention: not set", [](Env& e) {
                 psa_catalog* c = nullptr;
                 EXPECT_EQ(psa_catalog_open_string(yaml_with("  default_attention: p\n", "").c_str(), &c), PSA_OK)
                     << psa_last_error_message();
                 const char* def = psa_catalog_default_preset(c, "M");
                 const psa_status st = status_if(def == nullptr);
                 psa_catalog_destroy(c);  // records nothing: the status and message stay
                 return st;
               }});
  v.push_back({"yaml_unknown_model", NF, "model = Nope", [](Env& e) {
                 return psa_config_load_string(mini_yaml(), "Nope", nullptr, &e.cfg_out);
               }});
  v.push_back({"yaml_unknown_preset", NF, "M.attention_configs.nope", [](Env& e) {
                 return psa_config_load_string(mini_yaml(), "M", "nope", &e.cfg_out);
               }});
  v.push_back({"yaml_top_level_sequence", C, "top level", [](Env& e) {
                 return psa_config_load_string("- a\n- b\n", "M", nullptr, &e.cfg_out);
               }});
  v.push_back({"yaml_empty_document", C, "empty document", [](Env& e) {
                 return psa_config_load_string("", "M", nullptr, &e.cfg_out);
               }});
  v.push_back({"embedded_unknown_model", NF, "Wan2.1_14b", [](Env& e) {
                 return psa_config_load_embedded("Wan9.9", nullptr, &e.cfg_out);
               }});
  v.push_back({"embedded_unknown_preset", NF, "psa_balanced", [](Env& e) {
                 return psa_config_load_embedded("Wan2.1_14b", "psa_fastest", &e.cfg_out);
               }});
  v.push_back({"load_file_missing", PSA_ERR_IO, "cannot open", [](Env& e) {
                 return psa_config_load_file("/nonexistent/psa/attention_config.yaml", "M", nullptr, &e.cfg_out);
               }});
  v.push_back({"load_file_directory", PSA_ERR_IO, "path = /", [](Env& e) {
                 return psa_config_load_file("/", "M", nullptr, &e.cfg_out);
               }});
  // Catalog.
  v.push_back({"catalog_open_missing_file", PSA_ERR_IO, "cannot open", [](Env& e) {
                 return psa_catalog_open("/nonexistent/psa/attention_config.yaml", &e.cat_out);
               }});
  v.push_back({"catalog_open_string_invalid_preset", C, "M.attention_configs.a.cdf_threshold = 0", [](Env& e) {
                 return psa_catalog_open_string(yaml_with("cdf_threshold: 0.9", "cdf_threshold: 0").c_str(), &e.cat_out);
               }});
  v.push_back({"catalog_open_string_parse_error", PSA_ERR_YAML_PARSE, "line", [](Env& e) {
                 return psa_catalog_open_string("M:\n  - [\n", &e.cat_out);
               }});
  v.push_back({"catalog_get_config_unknown_model", NF, "model = Q", [](Env& e) {
                 return psa_catalog_get_config(e.cat, "Q", nullptr, &e.cfg_out);
               }});
  v.push_back({"catalog_get_config_unknown_preset", NF, "M.attention_configs.zz", [](Env& e) {
                 return psa_catalog_get_config(e.cat, "M", "zz", &e.cfg_out);
               }});
  v.push_back({"catalog_preset_count_unknown_model", NF, "model = Q", [](Env& e) {
                 return status_if(psa_catalog_preset_count(e.cat, "Q") == -1);
               }});
  v.push_back({"catalog_preset_name_index_past_end", PSA_ERR_INVALID_ARGUMENT, "index = 3", [](Env& e) {
                 return status_if(psa_catalog_preset_name(e.cat, "M", 3) == nullptr);
               }});
  v.push_back({"catalog_model_name_negative_index", PSA_ERR_INVALID_ARGUMENT, "index = -1", [](Env& e) {
                 return status_if(psa_catalog_model_name(e.cat, -1) == nullptr);
               }});
  v.push_back({"catalog_default_preset_unknown_model", NF, "model = Q", [](Env& e) {
                 return status_if(psa_catalog_default_preset(e.cat, "Q") == nullptr);
               }});
}

std::vector<BadCase> robustness_cases() {
  std::vector<BadCase> v;
  add_null_pointer_cases(v);
  add_descriptor_cases(v);
  add_buffer_cases(v);
  add_context_cases(v);
  add_config_cases(v);
  add_yaml_cases(v);
  return v;
}

class RobustBadInput : public ::testing::TestWithParam<BadCase> {};

TEST_P(RobustBadInput, StatusMessageNothingWrittenContextUsable) {
  const BadCase& c = GetParam();
  Env e;
  const std::vector<uint8_t> out_before = e.out.bytes;
  const std::vector<uint8_t> desc_before(reinterpret_cast<uint8_t*>(&e.desc_out),
                                         reinterpret_cast<uint8_t*>(&e.desc_out) + sizeof e.desc_out);
  const std::vector<uint8_t> stats_before(reinterpret_cast<uint8_t*>(&e.stats),
                                          reinterpret_cast<uint8_t*>(&e.stats) + sizeof e.stats);
  const ConfigSnapshot cfg_before(e.cfg.get());

  const psa_status st = c.call(e);
  EXPECT_EQ(st, c.want) << psa_status_name(st) << ": " << psa_last_error_message();
  EXPECT_EQ(psa_last_error_status(), c.want);
  EXPECT_NE(std::strstr(psa_last_error_message(), c.must_mention), nullptr)
      << "message '" << psa_last_error_message() << "' should mention '" << c.must_mention << "'";

  // Nothing written.
  EXPECT_EQ(e.out.bytes, out_before) << "a failing call must not write the output";
  for (float x : e.lse) EXPECT_EQ(x, kSentinelLse) << "a failing call must not write lse";
  EXPECT_EQ(e.cfg_out, sentinel_config());
  EXPECT_EQ(e.cat_out, sentinel_catalog());
  EXPECT_EQ(e.ctx_out, sentinel_context());
  EXPECT_EQ(e.i64, kSentinelI64);
  EXPECT_EQ(e.i32, kSentinelI32);
  EXPECT_EQ(e.f64, kSentinelF64);
  EXPECT_EQ(e.f64b, kSentinelF64);
  EXPECT_EQ(e.u64, kSentinelU64);
  EXPECT_EQ(e.param_raw, kSentinelI32);
  EXPECT_EQ(e.type_raw, kSentinelI32);
  EXPECT_EQ(e.name_out, reinterpret_cast<const char*>(uintptr_t{0x5a5a80}));
  EXPECT_EQ(0, std::memcmp(&e.desc_out, desc_before.data(), sizeof e.desc_out));
  EXPECT_EQ(0, std::memcmp(&e.stats, stats_before.data(), sizeof e.stats));
  EXPECT_TRUE(ConfigSnapshot(e.cfg.get()) == cfg_before) << "a failing call must not change the config";

  // The context, the config and the catalog still work.
  EXPECT_EQ(psa_context_clear_video_grid(e.ctx.get()), PSA_OK);
  EXPECT_EQ(e.forward(), PSA_OK) << psa_last_error_message();
  EXPECT_STREQ(psa_last_error_message(), "");
  EXPECT_EQ(psa_last_error_status(), PSA_OK);
  EXPECT_EQ(psa_config_validate(e.cfg.get()), PSA_OK) << psa_last_error_message();
  EXPECT_EQ(psa_catalog_preset_count(e.cat, "M"), 3);
}

INSTANTIATE_TEST_SUITE_P(Table, RobustBadInput, ::testing::ValuesIn(robustness_cases()),
                         [](const ::testing::TestParamInfo<BadCase>& i) { return std::string(i.param.name); });

// The table must stay large: with tests/api/api_errors_test.cpp's rows, well past 60.
TEST(RobustBadInputTable, HasAtLeastSixtyRowsAndUniqueNames) {
  const std::vector<BadCase> v = robustness_cases();
  EXPECT_GE(v.size(), 60u);
  std::set<std::string> names;
  for (const BadCase& c : v) EXPECT_TRUE(names.insert(c.name).second) << c.name;
}

}  // namespace
}  // namespace psa_robust

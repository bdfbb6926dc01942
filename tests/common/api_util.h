// tests/common/api_util.h -- RAII holders and a one-call forward over the public C API,
// so pipeline tests read as "config -> context -> forward -> compare".
#pragma once
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "core/half.h"
#include "psa.h"

namespace psa_test {

struct ConfigDeleter {
  void operator()(psa_config* c) const { psa_config_destroy(c); }
};
struct ContextDeleter {
  void operator()(psa_context* c) const { psa_context_destroy(c); }
};
using ConfigPtr = std::unique_ptr<psa_config, ConfigDeleter>;
using ContextPtr = std::unique_ptr<psa_context, ContextDeleter>;

#define PSA_ASSERT_OK(expr)                                                          \
  do {                                                                               \
    psa_status s_ = (expr);                                                          \
    ASSERT_EQ(s_, PSA_OK) << #expr << ": " << psa_status_name(s_) << ": "            \
                          << psa_last_error_message();                              \
  } while (0)

// Tensor in host memory holding logical [B, H, L, D] values in a given layout and dtype.
struct HostTensor {
  psa_tensor_desc desc{};
  std::vector<uint8_t> bytes;
  HostTensor(psa_layout layout, psa_dtype dt, int64_t b, int64_t h, int64_t l, int64_t d) {
    psa_tensor_desc_init(&desc, layout, dt, b, h, l, d);
    bytes.assign(static_cast<size_t>(b * h * l * d * psa_dtype_size(dt)), 0);
  }
  int64_t offset(int64_t b, int64_t h, int64_t l, int64_t c) const {
    return b * desc.strides[0] + h * desc.strides[1] + l * desc.strides[2] + c * desc.strides[3];
  }
  void set(int64_t b, int64_t h, int64_t l, int64_t c, float v) {
    psa::store_from_float(bytes.data(), offset(b, h, l, c), desc.dtype, v);
  }
  float get(int64_t b, int64_t h, int64_t l, int64_t c) const {
    return psa::load_as_float(bytes.data(), offset(b, h, l, c), desc.dtype);
  }
  // Values of head (b, h) as a dense [L, D] fp32 array (after dtype rounding).
  std::vector<float> head(int64_t b, int64_t h) const {
    std::vector<float> r(static_cast<size_t>(desc.shape[2] * desc.shape[3]));
    for (int64_t l = 0; l < desc.shape[2]; ++l)
      for (int64_t c = 0; c < desc.shape[3]; ++c) r[l * desc.shape[3] + c] = get(b, h, l, c);
    return r;
  }
  void set_head(int64_t b, int64_t h, const std::vector<float>& v) {
    for (int64_t l = 0; l < desc.shape[2]; ++l)
      for (int64_t c = 0; c < desc.shape[3]; ++c) set(b, h, l, c, v[l * desc.shape[3] + c]);
  }
};

// Runs one forward on the CPU backend; returns the status (message in last error).
inline psa_status forward_cpu(psa_context* ctx, const HostTensor& q, const HostTensor& k,
                              const HostTensor& v, HostTensor* out, std::vector<float>* lse) {
  uint64_t bytes = 0;
  psa_status st = psa_workspace_size(ctx, &q.desc, &k.desc, &v.desc, &out->desc, &bytes);
  if (st != PSA_OK) return st;
  std::vector<uint8_t> ws(bytes);
  if (lse) lse->assign(static_cast<size_t>(q.desc.shape[0] * q.desc.shape[1] * q.desc.shape[2]), 0.0f);
  return psa_attention_forward(ctx, &q.desc, q.bytes.data(), &k.desc, k.bytes.data(), &v.desc,
                               v.bytes.data(), &out->desc, out->bytes.data(),
                               lse ? lse->data() : nullptr, ws.data(), bytes, nullptr);
}

}  // namespace psa_test

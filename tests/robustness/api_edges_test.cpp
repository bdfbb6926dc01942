// tests/robustness/api_edges_test.cpp -- documented edges of the public API that are not a
// "bad input -> status" row: NULL destroys, optional out parameters, descriptors far past
// 2^31 elements that must plan without overflow, head dims the CPU backend accepts, and
// what the CPU backend does with misaligned pointers.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "robustness/robust_env.h"

namespace psa_robust {
namespace {

psa_tensor_desc desc(psa_dtype dt, int64_t b, int64_t h, int64_t l, int64_t d,
                     psa_layout layout = PSA_LAYOUT_BNSD) {
  psa_tensor_desc x{};
  EXPECT_EQ(psa_tensor_desc_init(&x, layout, dt, b, h, l, d), PSA_OK) << psa_last_error_message();
  return x;
}

ContextPtr cpu_context(const psa_config* cfg = nullptr) {
  ConfigPtr own;
  if (cfg == nullptr) {
    psa_config* c = nullptr;
    EXPECT_EQ(psa_config_create(&c), PSA_OK);
    own.reset(c);
    cfg = c;
  }
  psa_context* x = nullptr;
  EXPECT_EQ(psa_context_create(cfg, PSA_BACKEND_CPU, -1, &x), PSA_OK) << psa_last_error_message();
  return ContextPtr(x);
}

TEST(ApiEdges, DestroyingNullIsANoOpForEveryObject) {
  EXPECT_EQ(psa_context_set_step(nullptr, 0), PSA_ERR_NULL_POINTER);
  psa_config_destroy(nullptr);
  psa_catalog_destroy(nullptr);
  psa_context_destroy(nullptr);
  // A destroy is not an API call that records success: the last error is left alone.
  EXPECT_EQ(psa_last_error_status(), PSA_ERR_NULL_POINTER);
}

TEST(ApiEdges, OptionalOutParametersMayBeNull) {
  EXPECT_EQ(psa_param_info(PSA_PARAM_SPARSITY, nullptr, nullptr, nullptr, nullptr), PSA_OK);
  ContextPtr ctx = cpu_context();
  EXPECT_EQ(psa_context_next_step(ctx.get(), nullptr, nullptr), PSA_OK);
  const psa_tensor_desc q = desc(PSA_DTYPE_BF16, 1, 2, 100, 64);
  EXPECT_EQ(psa_check_supported(ctx.get(), &q, &q, &q, nullptr), PSA_OK) << psa_last_error_message();
}

// Element counts past 2^31 are ordinary for video models (21*30*52 tokens x 40 heads x 128):
// validation and planning must use 64-bit arithmetic. Nothing is allocated here.
TEST(ApiEdges, ElementCountsPast2To31PlanWithoutOverflow) {
  ContextPtr ctx = cpu_context();
  // 2 x 40 x 32760 x 128 = 335,462,400 elements (640 MiB in bf16) per tensor.
  const psa_tensor_desc big = desc(PSA_DTYPE_BF16, 2, 40, 32760, 128, PSA_LAYOUT_BSND);
  uint64_t bytes = 0;
  ASSERT_EQ(psa_workspace_size(ctx.get(), &big, &big, &big, &big, &bytes), PSA_OK) << psa_last_error_message();
  EXPECT_GT(bytes, uint64_t{32760} * 128 * 4 * 2);  // at least the fp32 q and out of one head

  const psa_tensor_desc huge = desc(PSA_DTYPE_F32, 1, 1, int64_t{1} << 27, 64);  // 2^33 elements
  ASSERT_EQ(psa_check_supported(ctx.get(), &huge, &huge, &huge, &huge), PSA_OK) << psa_last_error_message();
  ASSERT_EQ(psa_workspace_size(ctx.get(), &huge, &huge, &huge, &huge, &bytes), PSA_OK) << psa_last_error_message();
  EXPECT_GT(bytes, (uint64_t{1} << 33) * 4 * 4);  // q, k, v, out copies in fp32
  // GQA with Lq = 1 (decode-like) against a long key sequence.
  const psa_tensor_desc q1 = desc(PSA_DTYPE_F16, 1, 8, 1, 128);
  const psa_tensor_desc kv = desc(PSA_DTYPE_F16, 1, 2, int64_t{1} << 26, 128);
  EXPECT_EQ(psa_workspace_size(ctx.get(), &q1, &kv, &kv, &q1, &bytes), PSA_OK) << psa_last_error_message();
}

// Descriptors whose element counts fit int64 but whose workspace could not be addressed:
// the answer is a status, never a wrapped size (a wrapped size would let a forward write
// past a workspace the caller sized from it).
TEST(ApiEdges, UnaddressableWorkspaceIsAStatusNotAWrappedSize) {
  ContextPtr ctx = cpu_context();
  const psa_tensor_desc q = desc(PSA_DTYPE_F32, 1, 1, int64_t{1} << 40, 1);
  const psa_tensor_desc k = desc(PSA_DTYPE_F32, 1, 1, int64_t{1} << 40, 1);
  uint64_t bytes = 12345;
  const psa_status st = psa_workspace_size(ctx.get(), &q, &k, &k, &q, &bytes);
  EXPECT_EQ(st, PSA_ERR_INVALID_SHAPE) << psa_last_error_message();
  EXPECT_NE(std::strstr(psa_last_error_message(), "workspace"), nullptr) << psa_last_error_message();
  EXPECT_EQ(bytes, 12345u);
  const psa_tensor_desc wide = desc(PSA_DTYPE_F32, 1, 1, int64_t{1} << 20, int64_t{1} << 40);
  EXPECT_EQ(psa_check_supported(ctx.get(), &wide, &wide, &wide, &wide), PSA_ERR_INVALID_SHAPE)
      << psa_last_error_message();
  // The context is still usable for ordinary shapes.
  const psa_tensor_desc ok = desc(PSA_DTYPE_F32, 1, 1, 64, 8);
  EXPECT_EQ(psa_workspace_size(ctx.get(), &ok, &ok, &ok, &ok, &bytes), PSA_OK) << psa_last_error_message();
}

// The CPU backend computes in fp32 for any head dim >= 1 (the CUDA backend restricts it
// and reports PSA_ERR_UNSUPPORTED there). A forward at odd head dims matches dense attention.
TEST(ApiEdges, CpuBackendAcceptsAnyHeadDim) {
  psa_config* c = nullptr;
  ASSERT_EQ(psa_config_create(&c), PSA_OK);
  ConfigPtr cfg(c);
  ASSERT_EQ(psa_config_set_int(c, PSA_PARAM_METHOD, PSA_METHOD_DENSE), PSA_OK);
  ContextPtr ctx = cpu_context(c);
  std::mt19937_64 rng(psa_test::fresh_seed());
  for (int64_t d : {1, 3, 96, 200}) {
    SCOPED_TRACE(d);
    HostTensor q(PSA_LAYOUT_BSND, PSA_DTYPE_F32, 1, 1, 40, d), k = q, v = q, out = q;
    q.set_head(0, 0, psa_test::random_vec(rng, 40 * d));
    k.set_head(0, 0, psa_test::random_vec(rng, 40 * d));
    v.set_head(0, 0, psa_test::random_vec(rng, 40 * d));
    ASSERT_EQ(psa_test::forward_cpu(ctx.get(), q, k, v, &out, nullptr), PSA_OK) << psa_last_error_message();
    const auto want = psa_test::ref_attention(q.head(0, 0), 40, k.head(0, 0), v.head(0, 0), 40, d,
                                              1.0 / std::sqrt(double(d)), [](int64_t, int64_t) { return true; });
    EXPECT_LT(psa_test::rel_l2(out.head(0, 0), want), 1e-5);
  }
}

// Misaligned pointers on the CPU backend: every tensor pointer must be aligned to its element
// size (4 for f32 and lse, 2 for f16/bf16); otherwise the forward fails with
// PSA_ERR_MISALIGNED_POINTER naming the tensor and writes nothing. The workspace may have any
// alignment (the backend aligns inside it). Without CUDA every pointer is host memory, so
// PSA_ERR_WRONG_MEMORY_SPACE cannot occur on a CPU-only build.
TEST(ApiEdges, CpuBackendRejectsMisalignedTensorPointers) {
  Env e;
  constexpr size_t n = Env::kHeads * Env::kLen * Env::kDim * sizeof(float);
  ASSERT_EQ(e.q.bytes.size(), n);
  std::vector<uint8_t> shifted(n + 8);
  std::copy(e.q.bytes.begin(), e.q.bytes.end(), shifted.begin() + 1);
  std::vector<uint8_t> out_shifted(n + 8, 0x5a);
  const std::vector<uint8_t> out_before = out_shifted;
  struct Case {
    const char* name;
    const void* q;
    void* out;
    float* lse;
  };
  std::vector<float> lse(e.lse.size() + 1, kSentinelLse);
  const Case cases[] = {
      {"q", shifted.data() + 1, e.out.bytes.data(), nullptr},
      {"q", shifted.data() + 2, e.out.bytes.data(), nullptr},
      {"out", e.q.bytes.data(), out_shifted.data() + 3, nullptr},
      {"lse", e.q.bytes.data(), e.out.bytes.data(), reinterpret_cast<float*>(reinterpret_cast<uint8_t*>(lse.data()) + 2)},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const std::vector<uint8_t> out_prev = e.out.bytes;
    const psa_status st = psa_attention_forward(e.ctx.get(), &e.q.desc, c.q, &e.k.desc, e.k.bytes.data(), &e.v.desc,
                                                e.v.bytes.data(), &e.out.desc, c.out, c.lse, e.ws.data(),
                                                e.ws.size(), nullptr);
    EXPECT_EQ(st, PSA_ERR_MISALIGNED_POINTER) << psa_last_error_message();
    EXPECT_EQ(std::strncmp(psa_last_error_message(), c.name, std::strlen(c.name)), 0) << psa_last_error_message();
    EXPECT_EQ(e.out.bytes, out_prev);
    EXPECT_EQ(out_shifted, out_before);
  }
  for (size_t i = 0; i < lse.size(); ++i) ASSERT_EQ(lse[i], kSentinelLse);
  // bf16 tensors need 2-byte alignment only; an odd address is rejected.
  HostTensor q16(PSA_LAYOUT_BNSD, PSA_DTYPE_BF16, 1, 1, 64, 8), o16 = q16;
  std::vector<uint8_t> q16b(q16.bytes.size() + 4, 0);
  EXPECT_EQ(psa_attention_forward(e.ctx.get(), &q16.desc, q16b.data() + 1, &q16.desc, q16.bytes.data(), &q16.desc,
                                  q16.bytes.data(), &o16.desc, o16.bytes.data(), nullptr, e.ws.data(), e.ws.size(),
                                  nullptr),
            PSA_ERR_MISALIGNED_POINTER);
  uint64_t bytes = 0;
  ASSERT_EQ(psa_workspace_size(e.ctx.get(), &q16.desc, &q16.desc, &q16.desc, &o16.desc, &bytes), PSA_OK);
  std::vector<uint8_t> ws(bytes + 1);
  EXPECT_EQ(psa_attention_forward(e.ctx.get(), &q16.desc, q16b.data() + 2, &q16.desc, q16.bytes.data(), &q16.desc,
                                  q16.bytes.data(), &o16.desc, o16.bytes.data(), nullptr, ws.data() + 1, bytes,
                                  nullptr),
            PSA_OK)
      << psa_last_error_message();
  // The context still runs aligned forwards.
  EXPECT_EQ(e.forward(), PSA_OK) << psa_last_error_message();
}

// A descriptor whose element extent fits int64 but whose byte size does not (a stride of
// 2^62 floats: row 1 would land on row 0's address once the byte range wraps) is refused by
// every entry that validates descriptors, naming the strides.
TEST(ApiEdges, StridesWhoseByteRangeWrapsAreRefused) {
  ContextPtr ctx = cpu_context();
  for (int64_t stride : {int64_t{1} << 62, int64_t{1} << 61}) {
    psa_tensor_desc d = desc(PSA_DTYPE_F32, 1, 1, 2, 32);
    d.strides[0] = 0;
    d.strides[1] = 0;
    d.strides[2] = stride;
    uint64_t bytes = 0;
    EXPECT_EQ(psa_workspace_size(ctx.get(), &d, &d, &d, &d, &bytes), PSA_ERR_INVALID_STRIDE);
    const std::string msg = psa_last_error_message();
    EXPECT_NE(msg.find("q: strides = [0, 0, " + std::to_string(stride) + ", 1]"), std::string::npos)
        << msg;
    EXPECT_NE(msg.find("overflows int64"), std::string::npos) << msg;
  }
  // The largest stride whose byte range still fits is accepted by the descriptor check.
  psa_tensor_desc ok = desc(PSA_DTYPE_F32, 1, 1, 2, 32);
  ok.strides[2] = (std::numeric_limits<int64_t>::max() / 4) - 32;
  uint64_t bytes = 0;
  EXPECT_EQ(psa_workspace_size(ctx.get(), &ok, &ok, &ok, &ok, &bytes), PSA_OK)
      << psa_last_error_message();
}

// The shape overflow message gives the whole shape (not the harmless dimension where the
// running product overflowed).
TEST(ApiEdges, ElementCountOverflowNamesTheShape) {
  ContextPtr ctx = cpu_context();
  psa_tensor_desc d = desc(PSA_DTYPE_F32, 1, 2, 4, 32);
  d.shape[0] = std::numeric_limits<int64_t>::max();
  uint64_t bytes = 0;
  EXPECT_EQ(psa_workspace_size(ctx.get(), &d, &d, &d, &d, &bytes), PSA_ERR_INVALID_SHAPE);
  const std::string msg = psa_last_error_message();
  EXPECT_NE(msg.find("q: shape = [9223372036854775807, 2, 4, 32]"), std::string::npos) << msg;
}

// device below -1 is not "the current device"; a NULL context's backend query records why.
TEST(ApiEdges, DeviceOrdinalAndNullContextQueries) {
  psa_config* c = nullptr;
  ASSERT_EQ(psa_config_create(&c), PSA_OK);
  ConfigPtr cfg(c);
  for (psa_backend b : {PSA_BACKEND_CUDA, PSA_BACKEND_AUTO}) {
    psa_context* sentinel = reinterpret_cast<psa_context*>(uintptr_t{0x1234});
    psa_context* out = sentinel;
    EXPECT_EQ(psa_context_create(cfg.get(), b, -5, &out), PSA_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(psa_last_error_message()).find("device = -5"), std::string::npos)
        << psa_last_error_message();
    EXPECT_EQ(out, sentinel);
  }
  // The CPU backend ignores the ordinal, as documented.
  psa_context* cpu = nullptr;
  EXPECT_EQ(psa_context_create(cfg.get(), PSA_BACKEND_CPU, -5, &cpu), PSA_OK);
  psa_context_destroy(cpu);
  EXPECT_EQ(psa_context_backend(nullptr), PSA_BACKEND_AUTO);
  EXPECT_EQ(psa_last_error_status(), PSA_ERR_NULL_POINTER);
  EXPECT_NE(std::string(psa_last_error_message()).find("context"), std::string::npos);
}

// YAML text in memory is bounded as config files are (64 MiB), without reading past it.
TEST(ApiEdges, YamlTextPast64MiBIsRefused) {
  const size_t cap = size_t{64} << 20;
  std::string text(cap + 1, '#');  // one comment line, one byte too long
  psa_config* c = nullptr;
  EXPECT_EQ(psa_config_load_string(text.c_str(), "Wan2.1_1.3b", nullptr, &c), PSA_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(psa_last_error_message()).find("yaml: longer than 67108864 bytes"),
            std::string::npos) << psa_last_error_message();
  EXPECT_EQ(c, nullptr);
  psa_catalog* cat = nullptr;
  EXPECT_EQ(psa_catalog_open_string(text.c_str(), &cat), PSA_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(cat, nullptr);
  text.resize(cap);  // at the bound: parsed (a comment only: no model in it, another error)
  EXPECT_NE(psa_config_load_string(text.c_str(), "Wan2.1_1.3b", nullptr, &c), PSA_OK);
  EXPECT_EQ(std::string(psa_last_error_message()).find("longer than"), std::string::npos)
      << psa_last_error_message();
  EXPECT_EQ(c, nullptr);
}

}  // namespace
}  // namespace psa_robust

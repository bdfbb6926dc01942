// tests/methods/methods_api_test.cpp -- the vendor-style entry psa_sparse_attention (equal to
// the context path bit for bit) and the statuses and messages of invalid rf_v2 / ada_bsa
// calls through both entries (each message must name the parameter), plus its backend
// choice on host pointers (PSA_BACKEND_CUDA without a CUDA build, without a device, on host
// memory; AUTO on host memory runs the CPU backend). Device pointers: tests/cuda/vendor_cuda_test.cpp.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "api/vendor_cache.h"
#include "common/api_util.h"
#include "common/test_util.h"

#if defined(PSA_WITH_CUDA)
#include <cuda_runtime_api.h>
#endif

namespace {

using psa_test::ConfigPtr;
using psa_test::ContextPtr;
using psa_test::HostTensor;

struct VendorCall {
  psa_method method = PSA_METHOD_RF_V2;
  psa_layout layout = PSA_LAYOUT_BNSD;
  psa_dtype dtype = PSA_DTYPE_F32;
  int64_t batch = 1, heads = 2, d = 16;
  int64_t txt_len = 0;
  int64_t latent[3] = {2, 16, 24};
  bool pass_latent = true;
  double sparsity = 0.6, cdf = 1.0, scale = 0.0;
  int32_t keep_sink = 1, keep_recent = 1, causal = 0;
  psa_backend backend = PSA_BACKEND_CPU;
  int64_t seq_len_override = -1;

  int64_t seq_len() const {
    return seq_len_override >= 0 ? seq_len_override : latent[0] * latent[1] * latent[2] + txt_len;
  }
  psa_status run(const HostTensor& q, const HostTensor& k, const HostTensor& v, HostTensor* out) const {
    return psa_sparse_attention(q.bytes.data(), k.bytes.data(), v.bytes.data(), out->bytes.data(), dtype,
                                batch, heads, seq_len(), d, layout, method, sparsity, txt_len,
                                pass_latent ? latent : nullptr, keep_sink, keep_recent, cdf, scale,
                                causal, backend, nullptr);
  }
  // The same computation through config -> context -> workspace -> forward.
  psa_status run_context(const HostTensor& q, const HostTensor& k, const HostTensor& v,
                         HostTensor* out) const {
    psa_config* c = nullptr;
    psa_status st = psa_config_create(&c);
    if (st != PSA_OK) return st;
    ConfigPtr cfg(c);
    psa_config_set_int(c, PSA_PARAM_METHOD, method);
    psa_config_set_int(c, PSA_PARAM_BLOCK_M, 128);
    psa_config_set_int(c, PSA_PARAM_BLOCK_N, 128);
    psa_config_set_double(c, PSA_PARAM_SPARSITY, sparsity);
    psa_config_set_double(c, PSA_PARAM_CDF_THRESHOLD, cdf);
    psa_config_set_int(c, PSA_PARAM_KEEP_SINK, keep_sink);
    psa_config_set_int(c, PSA_PARAM_KEEP_RECENT, keep_recent);
    psa_config_set_double(c, PSA_PARAM_SCALE, scale);
    psa_config_set_int(c, PSA_PARAM_CAUSAL, causal);
    psa_context* raw = nullptr;
    if ((st = psa_context_create(c, PSA_BACKEND_CPU, -1, &raw)) != PSA_OK) return st;
    ContextPtr ctx(raw);
    if (method == PSA_METHOD_RF_V2 &&
        (st = psa_context_set_video_grid(ctx.get(), latent[0], latent[1], latent[2], txt_len,
                                         txt_len > 0 ? PSA_TEXT_FIRST : PSA_TEXT_NONE)) != PSA_OK)
      return st;
    return psa_test::forward_cpu(ctx.get(), q, k, v, out, nullptr);
  }
  HostTensor tensor() const { return HostTensor(layout, dtype, batch, heads, seq_len(), d); }
};

void fill(std::mt19937_64& rng, const VendorCall& c, HostTensor* x) {
  for (int64_t b = 0; b < c.batch; ++b)
    for (int64_t h = 0; h < c.heads; ++h) x->set_head(b, h, psa_test::random_vec(rng, size_t(c.seq_len() * c.d)));
}

TEST(MethodsApi, VendorEntryEqualsContextPathBitForBit) {
  const uint64_t seed = psa_test::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  std::vector<VendorCall> calls(4);
  calls[0].txt_len = 40;  // rf_v2, text first, fp32 BNSD
  calls[1].layout = PSA_LAYOUT_BSND;  // rf_v2, bf16, unaligned, own scale, batch 2
  calls[1].dtype = PSA_DTYPE_BF16;
  calls[1].batch = 2;
  calls[1].latent[1] = 13;
  calls[1].scale = 0.2;
  calls[1].sparsity = 0.8;
  calls[2].method = PSA_METHOD_ADA_BSA;  // ada_bsa, no latent, f16, causal, CDF + cap
  calls[2].pass_latent = false;
  calls[2].seq_len_override = 700;
  calls[2].dtype = PSA_DTYPE_F16;
  calls[2].causal = 1;
  calls[2].cdf = 0.8;
  calls[2].sparsity = 0.5;
  calls[2].keep_recent = 0;
  calls[3].method = PSA_METHOD_ADA_BSA;  // ada_bsa, latent and text given (ignored), BSH
  calls[3].layout = PSA_LAYOUT_BSH;
  calls[3].txt_len = 9;
  calls[3].cdf = 0.9;
  calls[3].keep_sink = 0;
  for (size_t i = 0; i < calls.size(); ++i) {
    const VendorCall& c = calls[i];
    HostTensor q = c.tensor(), k = q, v = q, a = q, b = q;
    fill(rng, c, &q);
    fill(rng, c, &k);
    fill(rng, c, &v);
    PSA_ASSERT_OK(c.run(q, k, v, &a));
    PSA_ASSERT_OK(c.run_context(q, k, v, &b));
    EXPECT_EQ(a.bytes, b.bytes) << "call " << i;
    bool nonzero = false;
    for (uint8_t x : a.bytes) nonzero |= x != 0;
    EXPECT_TRUE(nonzero) << "call " << i;
  }
}

void expect_error(const VendorCall& c, psa_status want, const char* names) {
  HostTensor q = c.tensor(), k = q, v = q, out = q;
  const psa_status st = c.run(q, k, v, &out);
  const std::string msg = psa_last_error_message();
  EXPECT_EQ(st, want) << psa_status_name(st) << ": " << msg;
  EXPECT_NE(msg.find(names), std::string::npos) << "message: " << msg;
}

TEST(MethodsApi, VendorEntryRejectsBadArgumentsNamingThem) {
  VendorCall c;
  c.sparsity = 1.0;
  expect_error(c, PSA_ERR_INVALID_ARGUMENT, "sparsity");
  c.sparsity = -0.1;
  expect_error(c, PSA_ERR_INVALID_ARGUMENT, "sparsity");
  c = VendorCall{};
  c.method = PSA_METHOD_ADA_BSA;
  c.cdf = 0.0;
  expect_error(c, PSA_ERR_INVALID_ARGUMENT, "cdf_threshold");
  c.cdf = 1.5;
  expect_error(c, PSA_ERR_INVALID_ARGUMENT, "cdf_threshold");
  c = VendorCall{};
  c.pass_latent = false;
  expect_error(c, PSA_ERR_NULL_POINTER, "latent_shape_q");
  c = VendorCall{};
  c.txt_len = 10;
  c.seq_len_override = 2 * 16 * 24 + 11;  // one token more than t*h*w + txt_len
  expect_error(c, PSA_ERR_INVALID_SHAPE, "txt_len");
  c.txt_len = c.seq_len() + 1;
  expect_error(c, PSA_ERR_INVALID_ARGUMENT, "txt_len");
  c = VendorCall{};
  c.latent[1] = 0;
  c.seq_len_override = 768;
  expect_error(c, PSA_ERR_INVALID_SHAPE, "latent_shape_q");
  c = VendorCall{};
  c.keep_sink = 2;
  expect_error(c, PSA_ERR_INVALID_ARGUMENT, "keep_sink");
  c = VendorCall{};
  c.causal = 1;
  expect_error(c, PSA_ERR_UNSUPPORTED, "causal");
  c = VendorCall{};
  c.backend = static_cast<psa_backend>(7);
  expect_error(c, PSA_ERR_INVALID_ARGUMENT, "backend");
  c = VendorCall{};
  c.method = PSA_METHOD_PSA;
  expect_error(c, PSA_ERR_UNSUPPORTED, "method");
  c = VendorCall{};
  c.scale = -1.0;
  expect_error(c, PSA_ERR_INVALID_ARGUMENT, "scale");
  // Null data.
  HostTensor t = c.tensor();
  EXPECT_EQ(psa_sparse_attention(nullptr, t.bytes.data(), t.bytes.data(), t.bytes.data(), c.dtype, 1, 2,
                                 c.seq_len(), 16, c.layout, c.method, 0.5, 0, c.latent, 1, 1, 1.0, 0.0, 0,
                                 PSA_BACKEND_CPU, nullptr),
            PSA_ERR_NULL_POINTER);
  EXPECT_NE(std::string(psa_last_error_message()).find("q"), std::string::npos);
}

TEST(MethodsApi, VendorEntryRunsAtSparsityEdgesAndOnASingleUnalignedImage) {
  std::mt19937_64 rng(psa_test::fresh_seed());
  for (double s : {0.0, 0.5, std::nextafter(1.0, 0.0)}) {
    for (psa_method m : {PSA_METHOD_RF_V2, PSA_METHOD_ADA_BSA}) {
      VendorCall c;
      c.method = m;
      c.sparsity = s;
      c.latent[0] = 1;  // a 30 x 52 image: upstream rf_v2 fails on it
      c.latent[1] = 30;
      c.latent[2] = 52;
      c.txt_len = 20;
      HostTensor q = c.tensor(), k = q, v = q, out = q;
      fill(rng, c, &q);
      fill(rng, c, &k);
      fill(rng, c, &v);
      PSA_ASSERT_OK(c.run(q, k, v, &out));
    }
  }
}

// Whether this process can use a CUDA device (CUDA builds only).
bool have_cuda_device() {
#if defined(PSA_WITH_CUDA)
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
    (void)cudaGetLastError();
    return false;
  }
  return true;
#else
  return false;
#endif
}

TEST(MethodsApi, VendorEntryCudaBackendWithoutCudaBuild) {
#if defined(PSA_WITH_CUDA)
  GTEST_SKIP() << "this build has the CUDA backend";
#else
  VendorCall c;
  c.backend = PSA_BACKEND_CUDA;
  expect_error(c, PSA_ERR_BACKEND_UNAVAILABLE, "backend = PSA_BACKEND_CUDA");
  EXPECT_NE(std::string(psa_last_error_message()).find("no CUDA backend"), std::string::npos);
  EXPECT_EQ(psa_sparse_attention_clear_cache(), PSA_OK);
#endif
}

TEST(MethodsApi, VendorEntryCudaBackendWithoutDevice) {
#if !defined(PSA_WITH_CUDA)
  GTEST_SKIP() << "this build has no CUDA backend";
#else
  if (have_cuda_device()) GTEST_SKIP() << "a CUDA device is present (tests/cuda covers it)";
  VendorCall c;
  c.backend = PSA_BACKEND_CUDA;
  expect_error(c, PSA_ERR_NO_DEVICE, "backend = PSA_BACKEND_CUDA");
  EXPECT_EQ(psa_sparse_attention_clear_cache(), PSA_OK);
#endif
}

// Host pointers with PSA_BACKEND_CUDA: the error names q (the first argument checked).
TEST(MethodsApi, VendorEntryCudaBackendOnHostPointers) {
  if (!have_cuda_device()) GTEST_SKIP() << "needs a CUDA device";
  VendorCall c;
  c.backend = PSA_BACKEND_CUDA;
  HostTensor q = c.tensor(), k = q, v = q, out = q;
  EXPECT_EQ(c.run(q, k, v, &out), PSA_ERR_WRONG_MEMORY_SPACE);
  const std::string msg = psa_last_error_message();
  EXPECT_EQ(msg.rfind("q: ", 0), 0u) << msg;
  EXPECT_NE(msg.find("host memory"), std::string::npos) << msg;
}

// PSA_BACKEND_AUTO on host pointers runs the CPU backend: the same bits as PSA_BACKEND_CPU,
// and the CUDA context cache is not touched.
TEST(MethodsApi, VendorEntryAutoOnHostPointersRunsOnCpu) {
  std::mt19937_64 rng(psa_test::fresh_seed());
  for (psa_method m : {PSA_METHOD_RF_V2, PSA_METHOD_ADA_BSA, PSA_METHOD_DENSE}) {
    VendorCall c;
    c.method = m;
    c.txt_len = 24;
    HostTensor q = c.tensor(), k = q, v = q, a = q, b = q;
    fill(rng, c, &q);
    fill(rng, c, &k);
    fill(rng, c, &v);
    const psa::VendorCacheCounters before = psa::vendor_cache_counters();
    PSA_ASSERT_OK(c.run(q, k, v, &a));
    c.backend = PSA_BACKEND_AUTO;
    PSA_ASSERT_OK(c.run(q, k, v, &b));
    EXPECT_EQ(a.bytes, b.bytes) << "method " << m;
    const psa::VendorCacheCounters after = psa::vendor_cache_counters();
    EXPECT_EQ(before.hits, after.hits);
    EXPECT_EQ(before.misses, after.misses);
  }
}

TEST(MethodsApi, ContextPathErrors) {
  psa_config* raw = nullptr;
  PSA_ASSERT_OK(psa_config_create(&raw));
  ConfigPtr cfg(raw);
  PSA_ASSERT_OK(psa_config_set_int(raw, PSA_PARAM_METHOD, PSA_METHOD_RF_V2));
  PSA_ASSERT_OK(psa_config_set_int(raw, PSA_PARAM_BLOCK_M, 128));
  PSA_ASSERT_OK(psa_config_set_int(raw, PSA_PARAM_BLOCK_N, 128));
  psa_context* cr = nullptr;
  PSA_ASSERT_OK(psa_context_create(raw, PSA_BACKEND_CPU, -1, &cr));
  ContextPtr ctx(cr);
  HostTensor q(PSA_LAYOUT_BNSD, PSA_DTYPE_F32, 1, 1, 256, 16), k = q, v = q, out = q;
  // rf_v2 without a grid.
  EXPECT_EQ(psa_test::forward_cpu(ctx.get(), q, k, v, &out, nullptr), PSA_ERR_INVALID_STATE);
  EXPECT_NE(std::string(psa_last_error_message()).find("psa_context_set_video_grid"), std::string::npos);
  // Cross-attention lengths.
  PSA_ASSERT_OK(psa_context_set_video_grid(ctx.get(), 1, 16, 16, 0, PSA_TEXT_NONE));
  HostTensor q2(PSA_LAYOUT_BNSD, PSA_DTYPE_F32, 1, 1, 128, 16), o2 = q2;
  EXPECT_EQ(psa_test::forward_cpu(ctx.get(), q2, k, v, &o2, nullptr), PSA_ERR_INVALID_SHAPE);
  EXPECT_NE(std::string(psa_last_error_message()).find("seq_len"), std::string::npos);
  // Grid and sequence disagree.
  PSA_ASSERT_OK(psa_context_set_video_grid(ctx.get(), 1, 16, 15, 0, PSA_TEXT_NONE));
  EXPECT_EQ(psa_test::forward_cpu(ctx.get(), q, k, v, &out, nullptr), PSA_ERR_INVALID_SHAPE);
  // Blocks other than 128 x 128 are refused when the context is created.
  PSA_ASSERT_OK(psa_config_set_int(raw, PSA_PARAM_BLOCK_N, 64));
  psa_context* bad = nullptr;
  EXPECT_EQ(psa_context_create(raw, PSA_BACKEND_CPU, -1, &bad), PSA_ERR_INVALID_CONFIG);
  EXPECT_NE(std::string(psa_last_error_message()).find("block_size.n"), std::string::npos);
  EXPECT_EQ(bad, nullptr);
}

}  // namespace

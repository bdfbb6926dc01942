// tests/cuda/methods_forward_cuda_test.cpp -- rf_v2 and ada_bsa end to end through the C API on
// the CUDA backend: equal to the CPU backend (run on the fp32 copies of the same 16-bit inputs:
// ref32, same masks) within rel-L2(gpu, ref32) <= 4 * rel-L2(round16(ref32), ref32) + 1e-4, with
// the same level statistics; bf16 and f16, text, batch > 1, GQA, unaligned grids, causal ada_bsa;
// and at sparsity 0 equal to the dense kernel.
#include <cstdio>
#include <string>
#include <vector>

#include "cuda_test_util.h"
#include "psa.h"

namespace psa {
namespace {

using test::DevBuf;

struct ApiCase {
  const char* name;
  psa_method method;
  psa_dtype dt;
  psa_layout layout;
  int64_t B, Hq, Hkv, d;
  int64_t t, h, w, text;  // video grid (t = 0: none; the length is `len`)
  psa_text_position pos;
  int64_t len;
  double sparsity, cdf;
  bool causal, keep_sink, keep_recent;
  int64_t L() const { return t > 0 ? t * h * w + text : len; }
};

struct Outcome {
  psa_status status = PSA_OK;
  std::string message;
  std::vector<float> out, lse;  // out in logical [B, H, L, D] order
  psa_stats stats{};
};

psa_config* make_config(const ApiCase& c, psa_method method) {
  psa_config* cfg = nullptr;
  if (psa_config_create(&cfg) != PSA_OK) return nullptr;
  psa_config_set_int(cfg, PSA_PARAM_METHOD, method);
  psa_config_set_int(cfg, PSA_PARAM_BLOCK_M, 128);
  psa_config_set_int(cfg, PSA_PARAM_BLOCK_N, 128);
  psa_config_set_double(cfg, PSA_PARAM_SPARSITY, c.sparsity);
  psa_config_set_double(cfg, PSA_PARAM_CDF_THRESHOLD, c.cdf);
  psa_config_set_int(cfg, PSA_PARAM_KEEP_SINK, c.keep_sink);
  psa_config_set_int(cfg, PSA_PARAM_KEEP_RECENT, c.keep_recent);
  psa_config_set_int(cfg, PSA_PARAM_CAUSAL, c.causal);
  return cfg;
}

// Logical [B, H, L, D] values -> a buffer of `dt` (or fp32) laid out by `desc`, and back.
std::vector<uint16_t> pack16(const std::vector<float>& v, const psa_tensor_desc& desc, psa_dtype dt) {
  return test::pack<uint16_t>(v, desc, [dt](float x) { return test::to16(x, dt); });
}
std::vector<float> pack32(const std::vector<float>& v, const psa_tensor_desc& desc) {
  return test::pack<float>(v, desc, [](float x) { return x; });
}
using test::unpack;

// Inputs as exact 16-bit values (logical order): video-like q/k, random v.
struct Inputs {
  std::vector<float> q, k, v;
};
Inputs make_inputs(const ApiCase& c, uint32_t seed) {
  Inputs in;
  in.q = test::make_video_like(c.B * c.Hq, c.L(), c.d, c.dt, seed).f;
  in.k = test::make_video_like(c.B * c.Hkv, c.L(), c.d, c.dt, seed + 1).f;
  in.v = test::make_random(static_cast<size_t>(c.B * c.Hkv * c.L() * c.d), c.dt, seed + 2).f;
  return in;
}

psa_context* make_context(const psa_config* cfg, psa_backend be, const ApiCase& c) {
  psa_context* ctx = nullptr;
  if (psa_context_create(cfg, be, -1, &ctx) != PSA_OK) return nullptr;
  if (c.t > 0 && psa_context_set_video_grid(ctx, c.t, c.h, c.w, c.text, c.text > 0 ? c.pos : PSA_TEXT_NONE) != PSA_OK) {
    psa_context_destroy(ctx);
    return nullptr;
  }
  return ctx;
}

void read_stats(psa_context* ctx, Outcome* o) {
  o->stats.struct_size = sizeof(psa_stats);
  if (psa_context_get_stats(ctx, &o->stats) != PSA_OK) o->message = psa_last_error_message();
}

// The CPU backend on fp32 copies of the inputs: ref32 (its masks are those of the 16-bit run,
// whose q/k convert to the same floats).
Outcome run_cpu32(const ApiCase& c, psa_method method, const Inputs& in) {
  Outcome o;
  psa_config* cfg = make_config(c, method);
  psa_context* ctx = cfg ? make_context(cfg, PSA_BACKEND_CPU, c) : nullptr;
  if (!ctx) {
    o.status = psa_last_error_status();
    o.message = psa_last_error_message();
    psa_config_destroy(cfg);
    return o;
  }
  psa_tensor_desc qd, kd, od;
  psa_tensor_desc_init(&qd, c.layout, PSA_DTYPE_F32, c.B, c.Hq, c.L(), c.d);
  psa_tensor_desc_init(&kd, c.layout, PSA_DTYPE_F32, c.B, c.Hkv, c.L(), c.d);
  od = qd;
  const std::vector<float> q = pack32(in.q, qd), k = pack32(in.k, kd), v = pack32(in.v, kd);
  std::vector<float> out(q.size(), 0.0f);
  o.lse.assign(static_cast<size_t>(c.B * c.Hq * c.L()), 0.0f);
  uint64_t bytes = 0;
  o.status = psa_workspace_size(ctx, &qd, &kd, &kd, &od, &bytes);
  if (o.status == PSA_OK) {
    std::vector<unsigned char> ws(bytes);
    o.status = psa_attention_forward(ctx, &qd, q.data(), &kd, k.data(), &kd, v.data(), &od, out.data(),
                                     o.lse.data(), ws.data(), bytes, nullptr);
  }
  o.message = psa_last_error_message();
  if (o.status == PSA_OK) {
    o.out = unpack(out, od, [](float x) { return x; });
    read_stats(ctx, &o);
  }
  psa_context_destroy(ctx);
  psa_config_destroy(cfg);
  return o;
}

Outcome run_cuda(const ApiCase& c, psa_method method, const Inputs& in) {
  Outcome o;
  psa_config* cfg = make_config(c, method);
  psa_context* ctx = cfg ? make_context(cfg, PSA_BACKEND_CUDA, c) : nullptr;
  if (!ctx) {
    o.status = psa_last_error_status();
    o.message = psa_last_error_message();
    psa_config_destroy(cfg);
    return o;
  }
  psa_tensor_desc qd, kd, od;
  psa_tensor_desc_init(&qd, c.layout, c.dt, c.B, c.Hq, c.L(), c.d);
  psa_tensor_desc_init(&kd, c.layout, c.dt, c.B, c.Hkv, c.L(), c.d);
  od = qd;
  DevBuf<uint16_t> q(pack16(in.q, qd, c.dt)), k(pack16(in.k, kd, c.dt)), v(pack16(in.v, kd, c.dt));
  DevBuf<uint16_t> out(q.size());
  out.fill_bytes(0xff);
  DevBuf<float> lse(static_cast<size_t>(c.B * c.Hq * c.L()));
  uint64_t bytes = 0;
  o.status = psa_workspace_size(ctx, &qd, &kd, &kd, &od, &bytes);
  if (o.status == PSA_OK) {
    DevBuf<unsigned char> ws(bytes);
    o.status = psa_attention_forward(ctx, &qd, q.get(), &kd, k.get(), &kd, v.get(), &od, out.get(), lse.get(),
                                     ws.get(), bytes, nullptr);
    o.message = psa_last_error_message();
    if (o.status == PSA_OK) {
      const psa_dtype dt = c.dt;
      o.out = unpack(out.download(), od, [dt](uint16_t x) { return test::from16(x, dt); });
      o.lse = lse.download();
      read_stats(ctx, &o);
    }
  } else {
    o.message = psa_last_error_message();
  }
  psa_context_destroy(ctx);
  psa_config_destroy(cfg);
  return o;
}

// rel-L2 of the storage rounding of ref32: the same-precision baseline.
double storage_baseline(const std::vector<float>& ref32, psa_dtype dt) {
  std::vector<float> r(ref32.size());
  for (size_t i = 0; i < r.size(); ++i) r[i] = test::round16(ref32[i], dt);
  return test::rel_l2(r, ref32);
}

double max_lse_diff(const std::vector<float>& a, const std::vector<float>& b, int64_t* inf_mismatch) {
  double m = 0.0;
  *inf_mismatch = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::isinf(a[i]) || std::isinf(b[i])) {
      *inf_mismatch += a[i] != b[i];
      continue;
    }
    const double d = std::fabs(static_cast<double>(a[i]) - b[i]);
    if (!(d <= m)) m = d;
  }
  return m;
}

// GPU vs ref32 within the budget, same LSE and level statistics. Returns rel-L2(gpu, ref32).
double check_against_cpu(const ApiCase& c, const Outcome& gpu, const Outcome& ref, double frac_tol) {
  EXPECT_EQ(PSA_OK, ref.status) << c.name << " (cpu): " << ref.message;
  EXPECT_EQ(PSA_OK, gpu.status) << c.name << " (cuda): " << gpu.message;
  if (gpu.status != PSA_OK || ref.status != PSA_OK) return 1.0;
  EXPECT_TRUE(test::all_finite(gpu.out)) << c.name;
  const double base = storage_baseline(ref.out, c.dt);
  const double err = test::rel_l2(gpu.out, ref.out);
  const double budget = 4.0 * base + 1e-4;
  int64_t inf_mismatch = 0;
  const double lse = max_lse_diff(gpu.lse, ref.lse, &inf_mismatch);
  double frac = 0.0;
  for (int i = 0; i < 5; ++i)
    frac = std::max(frac, std::fabs(gpu.stats.level_fraction[i] - ref.stats.level_fraction[i]));
  std::printf("[methods] %-44s rel-L2 %.3e (baseline %.3e, budget %.3e)  max|lse diff| %.2e  "
              "density cpu %.4f cuda %.4f\n",
              c.name, err, base, budget, lse, ref.stats.density, gpu.stats.density);
  EXPECT_LE(err, budget) << c.name;
  EXPECT_LE(lse, c.dt == PSA_DTYPE_BF16 ? 2e-2 : 4e-3) << c.name;
  EXPECT_EQ(0, inf_mismatch) << c.name;
  EXPECT_LE(frac, frac_tol) << c.name;
  EXPECT_EQ(0, gpu.stats.ran_dense) << c.name;
  return err;
}

const psa_dtype kBf = PSA_DTYPE_BF16, kHf = PSA_DTYPE_F16;

TEST(CudaMethodForward, RfV2MatchesCpuBackend) {
  PSA_REQUIRE_GPU();
  const ApiCase cases[] = {
      {"rf_v2 bf16 BSND B2 GQA 6x10x13 + text first", PSA_METHOD_RF_V2, kBf, PSA_LAYOUT_BSND, 2, 4, 2, 64, 6, 10, 13, 77, PSA_TEXT_FIRST, 0, 0.7, 1.0, false, true, true},
      {"rf_v2 f16 BNSD d128 3x16x24 + text last", PSA_METHOD_RF_V2, kHf, PSA_LAYOUT_BNSD, 1, 2, 2, 128, 3, 16, 24, 40, PSA_TEXT_LAST, 0, 0.5, 1.0, false, true, true},
      {"rf_v2 f16 BSH B2 MQA 5x9x21, no text", PSA_METHOD_RF_V2, kHf, PSA_LAYOUT_BSH, 2, 2, 1, 64, 5, 9, 21, 0, PSA_TEXT_NONE, 0, 0.8, 1.0, false, true, true},
      {"rf_v2 bf16 BNSD d128 image 1x32x32 + text", PSA_METHOD_RF_V2, kBf, PSA_LAYOUT_BNSD, 1, 2, 2, 128, 1, 32, 32, 100, PSA_TEXT_FIRST, 0, 0.6, 1.0, false, true, true},
  };
  uint32_t seed = 40;
  for (const ApiCase& c : cases) {
    const Inputs in = make_inputs(c, seed += 5);
    const Outcome ref = run_cpu32(c, c.method, in), gpu = run_cuda(c, c.method, in);
    check_against_cpu(c, gpu, ref, 0.0);  // rf_v2 masks are bit-identical: same statistics
  }
}

TEST(CudaMethodForward, AdaBsaMatchesCpuBackend) {
  PSA_REQUIRE_GPU();
  const ApiCase cases[] = {
      {"ada_bsa bf16 BSND B2 MQA d128 L1001 cdf 0.9", PSA_METHOD_ADA_BSA, kBf, PSA_LAYOUT_BSND, 2, 2, 1, 128, 0, 0, 0, 0, PSA_TEXT_NONE, 1001, 0.5, 0.9, false, true, true},
      {"ada_bsa f16 BNSD L1800 cap 0.6, no sink", PSA_METHOD_ADA_BSA, kHf, PSA_LAYOUT_BNSD, 1, 2, 2, 64, 0, 0, 0, 0, PSA_TEXT_NONE, 1800, 0.6, 1.0, false, false, true},
      {"ada_bsa bf16 causal L1500 cdf 0.8, no recent", PSA_METHOD_ADA_BSA, kBf, PSA_LAYOUT_BSND, 1, 2, 2, 64, 0, 0, 0, 0, PSA_TEXT_NONE, 1500, 0.5, 0.8, true, true, false},
      {"ada_bsa f16 B2 grid 2x16x20 + text (ignored)", PSA_METHOD_ADA_BSA, kHf, PSA_LAYOUT_BSND, 2, 2, 2, 64, 2, 16, 20, 33, PSA_TEXT_FIRST, 0, 0.5, 0.9, false, true, true},
  };
  uint32_t seed = 70;
  for (const ApiCase& c : cases) {
    const Inputs in = make_inputs(c, seed += 5);
    const Outcome ref = run_cpu32(c, c.method, in), gpu = run_cuda(c, c.method, in);
    check_against_cpu(c, gpu, ref, 0.01);
  }
}

TEST(CudaMethodForward, SparsityZeroEqualsDenseKernel) {
  PSA_REQUIRE_GPU();
  const ApiCase cases[] = {
      {"rf_v2 sparsity 0, bf16 B2 GQA + text", PSA_METHOD_RF_V2, kBf, PSA_LAYOUT_BSND, 2, 4, 2, 64, 4, 10, 13, 77, PSA_TEXT_FIRST, 0, 0.0, 1.0, false, true, true},
      {"ada_bsa sparsity 0 cdf 1, f16 d128 L1001", PSA_METHOD_ADA_BSA, kHf, PSA_LAYOUT_BNSD, 1, 2, 1, 128, 0, 0, 0, 0, PSA_TEXT_NONE, 1001, 0.0, 1.0, false, true, true},
      {"ada_bsa sparsity 0 cdf 1, bf16 causal L900", PSA_METHOD_ADA_BSA, kBf, PSA_LAYOUT_BSND, 1, 2, 2, 64, 0, 0, 0, 0, PSA_TEXT_NONE, 900, 0.0, 1.0, true, true, true},
  };
  uint32_t seed = 90;
  for (const ApiCase& c : cases) {
    const Inputs in = make_inputs(c, seed += 5);
    const Outcome ref = run_cpu32(c, c.method, in);
    const Outcome sparse = run_cuda(c, c.method, in), dense = run_cuda(c, PSA_METHOD_DENSE, in);
    check_against_cpu(c, sparse, ref, 0.0);
    ASSERT_EQ(PSA_OK, dense.status) << c.name << " (dense): " << dense.message;
    if (!c.causal) EXPECT_EQ(1.0, sparse.stats.density) << c.name;  // causal: the visible part
    EXPECT_EQ(1, dense.stats.ran_dense) << c.name;
    const double base = storage_baseline(ref.out, c.dt);
    const double to_dense = test::rel_l2(sparse.out, dense.out);
    const double dense_err = test::rel_l2(dense.out, ref.out);
    int64_t inf_mismatch = 0;
    const double lse = max_lse_diff(sparse.lse, dense.lse, &inf_mismatch);
    std::printf("[methods] %-44s vs dense kernel: rel-L2 %.3e (dense vs ref32 %.3e, baseline %.3e)  "
                "max|lse diff| %.2e%s\n",
                c.name, to_dense, dense_err, base, lse, sparse.out == dense.out ? "  (bit-identical)" : "");
    EXPECT_LE(to_dense, 4.0 * base + 1e-4) << c.name;
    EXPECT_LE(lse, c.dt == PSA_DTYPE_BF16 ? 2e-2 : 4e-3) << c.name;
    EXPECT_EQ(0, inf_mismatch) << c.name;
  }
}

// One forward enqueued while a stream is captured into a CUDA graph: capture succeeds only if
// the method's mask stage neither allocates nor synchronises; replays equal the direct run.
TEST(CudaMethodForward, GraphReplayIsBitIdentical) {
  PSA_REQUIRE_GPU();
  const ApiCase cases[] = {
      {"rf_v2 graph", PSA_METHOD_RF_V2, kBf, PSA_LAYOUT_BSND, 1, 2, 2, 64, 4, 10, 13, 30, PSA_TEXT_FIRST, 0, 0.7, 1.0, false, true, true},
      {"ada_bsa graph", PSA_METHOD_ADA_BSA, kHf, PSA_LAYOUT_BSND, 1, 2, 1, 64, 0, 0, 0, 0, PSA_TEXT_NONE, 1300, 0.5, 0.9, false, true, true},
  };
  uint32_t seed = 120;
  for (const ApiCase& c : cases) {
    const Inputs in = make_inputs(c, seed += 5);
    psa_config* cfg = make_config(c, c.method);
    ASSERT_NE(nullptr, cfg);
    psa_context* ctx = make_context(cfg, PSA_BACKEND_CUDA, c);
    ASSERT_NE(nullptr, ctx) << psa_last_error_message();
    psa_tensor_desc qd, kd;
    psa_tensor_desc_init(&qd, c.layout, c.dt, c.B, c.Hq, c.L(), c.d);
    psa_tensor_desc_init(&kd, c.layout, c.dt, c.B, c.Hkv, c.L(), c.d);
    DevBuf<uint16_t> q(pack16(in.q, qd, c.dt)), k(pack16(in.k, kd, c.dt)), v(pack16(in.v, kd, c.dt));
    DevBuf<uint16_t> out(q.size());
    uint64_t bytes = 0;
    ASSERT_EQ(PSA_OK, psa_workspace_size(ctx, &qd, &kd, &kd, &qd, &bytes)) << psa_last_error_message();
    DevBuf<unsigned char> ws(bytes);
    cudaStream_t stream;
    PSA_CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    auto forward = [&] {
      return psa_attention_forward(ctx, &qd, q.get(), &kd, k.get(), &kd, v.get(), &qd, out.get(), nullptr,
                                   ws.get(), bytes, stream);
    };
    ASSERT_EQ(PSA_OK, forward()) << psa_last_error_message();
    PSA_CUDA_OK(cudaStreamSynchronize(stream));
    const std::vector<uint16_t> ref = out.download();
    cudaGraph_t graph;
    PSA_CUDA_OK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
    const psa_status captured = forward();
    const std::string msg = psa_last_error_message();
    PSA_CUDA_OK(cudaStreamEndCapture(stream, &graph));
    ASSERT_EQ(PSA_OK, captured) << c.name << ": " << msg;
    cudaGraphExec_t exec;
    PSA_CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
    for (int rep = 0; rep < 2; ++rep) {
      out.fill_bytes(0xff);
      PSA_CUDA_OK(cudaGraphLaunch(exec, stream));
      PSA_CUDA_OK(cudaStreamSynchronize(stream));
      EXPECT_EQ(ref, out.download()) << c.name << ", replay " << rep;
    }
    std::printf("[methods] %-44s captured in a graph, replays bit-identical\n", c.name);
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
    cudaStreamDestroy(stream);
    psa_context_destroy(ctx);
    psa_config_destroy(cfg);
  }
}

}  // namespace
}  // namespace psa

// tests/cuda/forward_fp8_cuda_test.cpp -- precision = fp8 through the C API on the CUDA backend:
// on Hopper the forward runs the 8-bit pool pass, importance and attention (psa_stats.precision =
// FP8), its level map is the CPU backend's at precision fp8 bit for bit (the importance on the
// 8-bit rule's operands) and close to the default precision's, and its output is the host 8-bit oracle's
// (fp8_quantize_head_cpu + sparse_attention_fp8_cpu on the forward's own level map and token
// order) within what the rule allows a kernel (the running row maximum), against the exact fp32
// mixed-level attention; non-finite inputs give NaN exactly where the oracle's are; a CUDA graph
// of the forward replays bit-identically. Where the 8-bit kernels do not run (head_dim 64,
// causal, a GPU before sm_90), the forward is the default precision's, bit for bit, and
// psa_stats.precision says so. Skips without a GPU.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "attention/attention.h"
#include "attention/attention_fp8.h"
#include "cuda/attention/attention_fp8_cuda.h"
#include "cuda_test_util.h"
#include "pool/pool.h"
#include "psa.h"

namespace psa {
namespace {

using test::DevBuf;

// Whether this GPU and build run the 8-bit kernels (the entry's own answer, as the backend's).
bool fp8_kernels_run() {
  gpu::AttentionFp8Args a;
  a.dims.head_dim = 128;
  a.dims.block_m = 128;
  a.dims.block_n = 64;
  return gpu::attention_fp8_supported(a, false) == PSA_OK;
}

struct Case {
  int64_t B = 1, Hq = 2, Hkv = 2, D = 128;
  int64_t t = 4, h = 8, w = 12, text = 0;
  psa_text_position pos = PSA_TEXT_NONE;
  psa_dtype dtype = PSA_DTYPE_BF16;
  int64_t block_n = 64;
  bool rearrange = true;
  int64_t pad = 0;        // extra elements per caller row (unaligned rows when not a multiple of 8)
  // NaN in a few Q / V values, +inf in a few K values (a K value at the first token of a key
  // block makes K's mean, and so every row of the head, NaN: the oracle's rule too)
  bool nan_q = false, inf_k = false, nan_v = false;
  // 1e20 in one channel of every Q row and of three K tokens, every block at level 1: finite
  // inputs whose logits overflow to +inf where the two meet (inf - inf in the softmax: those
  // heads' rows are NaN in the oracle). Only the NaN pattern is compared: the other rows' logits
  // are near 1e18, beyond a numeric tolerance.
  // overflow_key >= 0: the one K token (of batch 0, head 0) poisoned, instead of three at random.
  bool overflow = false;
  int64_t overflow_key = -1;
  // Every block at level 1 (ratio ends 1): the +inf-in-K cases, whose poisoned key blocks the
  // 8-bit importance scores 0 (importance_spec.h), so that the keys still reach the attention.
  bool all_level1 = false;
  bool non_finite() const { return nan_q || inf_k || nan_v || overflow; }
  bool causal = false;
  uint32_t seed = 1;
  int64_t L() const { return t * h * w + text; }
};

// Caller tensors [B, H, L, D] (BHLD, row stride D + pad) and their float values.
struct Tensor {
  psa_tensor_desc desc{};
  std::vector<uint16_t> bits;  // strided
  std::vector<float> f;        // contiguous [B*H, L, D]
};

Tensor make_tensor(const Case& c, int64_t heads, bool video_like, uint32_t seed) {
  const int64_t L = c.L(), D = c.D, row = D + c.pad;
  const test::Tensor16 x = video_like ? test::make_video_like(c.B * heads, L, D, c.dtype, seed)
                                      : test::make_random(static_cast<size_t>(c.B * heads * L * D), c.dtype, seed);
  Tensor t;
  t.f = x.f;
  psa_tensor_desc_init(&t.desc, PSA_LAYOUT_BNSD, c.dtype, c.B, heads, L, D);
  t.desc.strides[2] = row;
  t.desc.strides[1] = L * row;
  t.desc.strides[0] = heads * L * row;
  t.bits.assign(static_cast<size_t>(c.B * heads * L * row), 0);
  for (int64_t r = 0; r < c.B * heads * L; ++r)
    std::memcpy(&t.bits[static_cast<size_t>(r * row)], &x.bits[static_cast<size_t>(r * D)], D * 2);
  return t;
}

// Element (r, col) of t (r in [B * heads * L] order) set to value, in the caller's bits and in the
// float copy (the value the 16-bit type holds).
void set_value(const Case& c, Tensor* t, int64_t r, int64_t col, float value) {
  t->bits[static_cast<size_t>(r * (c.D + c.pad) + col)] = test::to16(value, c.dtype);
  t->f[static_cast<size_t>(r * c.D + col)] = test::round16(value, c.dtype);
}

void poison(const Case& c, Tensor* t, int64_t heads, float value, uint32_t seed) {
  std::mt19937 gen(seed);
  for (int e = 0; e < 3; ++e) {
    const int64_t r = static_cast<int64_t>(gen() % static_cast<uint32_t>(c.B * heads * c.L()));
    const int64_t col = static_cast<int64_t>(gen() % static_cast<uint32_t>(c.D));
    set_value(c, t, r, col, value);
  }
}

// value at channel `channel` of the given rows ([B * heads * L] order)
void poison_channel(const Case& c, Tensor* t, float value, int64_t channel, const std::vector<int64_t>& rows) {
  for (int64_t r : rows) set_value(c, t, r, channel, value);
}

psa_config* make_config(const Case& c, psa_precision precision) {
  psa_config* cfg = nullptr;
  EXPECT_EQ(PSA_OK, psa_config_load_embedded("CogVideo1.5_5b", "psa_balanced", &cfg)) << psa_last_error_message();
  if (cfg == nullptr) return nullptr;
  EXPECT_EQ(PSA_OK, psa_config_set_int(cfg, PSA_PARAM_BLOCK_N, c.block_n));
  EXPECT_EQ(PSA_OK, psa_config_set_int(cfg, PSA_PARAM_TILE_N, std::min<int64_t>(32, c.block_n)));
  EXPECT_EQ(PSA_OK, psa_config_set_int(cfg, PSA_PARAM_USE_REARRANGE, c.rearrange ? 1 : 0));
  EXPECT_EQ(PSA_OK, psa_config_set_int(cfg, PSA_PARAM_TEXT_LENGTH, c.text));
  EXPECT_EQ(PSA_OK, psa_config_set_int(cfg, PSA_PARAM_CAUSAL, c.causal ? 1 : 0));
  EXPECT_EQ(PSA_OK, psa_config_set_int(cfg, PSA_PARAM_SEED, c.seed));
  EXPECT_EQ(PSA_OK, psa_config_set_int(cfg, PSA_PARAM_PRECISION, precision));
  if (c.overflow || c.all_level1)  // every block at level 1: the scores of the poisoned blocks are not finite
    for (psa_param r : {PSA_PARAM_RATIO_L1, PSA_PARAM_RATIO_L2, PSA_PARAM_RATIO_L4, PSA_PARAM_RATIO_L8, PSA_PARAM_RATIO_L0})
      EXPECT_EQ(PSA_OK, psa_config_set_double(cfg, r, 1.0)) << psa_last_error_message();
  EXPECT_EQ(PSA_OK, psa_config_validate(cfg)) << psa_last_error_message();
  return cfg;
}

struct ForwardRun {
  psa_status status = PSA_OK;
  std::string message;
  std::vector<uint16_t> out;  // strided as the caller's Q
  std::vector<float> lse;
  std::vector<int8_t> levels;
  std::vector<int64_t> q_order, k_order;
  psa_stats stats{};
};

// One CUDA forward (step past the warm-up) on fresh device copies; `graph_replays` > 0 also
// captures a second forward into a CUDA graph and checks that each replay gives the same bits.
ForwardRun run_cuda(const Case& c, psa_precision precision, const Tensor& q, const Tensor& k, const Tensor& v,
             int graph_replays = 0) {
  ForwardRun r;
  psa_config* cfg = make_config(c, precision);
  psa_context* ctx = nullptr;
  r.status = psa_context_create(cfg, PSA_BACKEND_CUDA, -1, &ctx);
  psa_config_destroy(cfg);
  if (r.status != PSA_OK) {
    r.message = psa_last_error_message();
    return r;
  }
  psa_context_set_video_grid(ctx, c.t, c.h, c.w, c.text, c.text > 0 ? PSA_TEXT_LAST : PSA_TEXT_NONE);
  psa_context_set_step(ctx, 1000);
  DevBuf<uint16_t> dq(q.bits), dk(k.bits), dv(v.bits), dout(q.bits.size());
  dout.fill_bytes(0xff);
  DevBuf<float> dlse(static_cast<size_t>(c.B * c.Hq * c.L()));
  uint64_t bytes = 0;
  r.status = psa_workspace_size(ctx, &q.desc, &k.desc, &v.desc, &q.desc, &bytes);
  DevBuf<unsigned char> ws(std::max<uint64_t>(bytes, 1));
  cudaStream_t stream = nullptr;
  cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
  auto forward = [&] {
    return psa_attention_forward(ctx, &q.desc, dq.get(), &k.desc, dk.get(), &v.desc, dv.get(), &q.desc, dout.get(),
                                 dlse.get(), ws.get(), bytes, stream);
  };
  if (r.status == PSA_OK) r.status = forward();
  r.message = psa_last_error_message();
  if (r.status == PSA_OK) {
    cudaStreamSynchronize(stream);
    r.out = dout.download();
    r.lse = dlse.download();
    r.stats.struct_size = sizeof(psa_stats);
    psa_context_get_stats(ctx, &r.stats);
    const int64_t mq = r.stats.query_blocks, nk = r.stats.key_blocks;
    r.levels.assign(static_cast<size_t>(c.B * c.Hq * mq * nk), 0);
    EXPECT_EQ(PSA_OK, psa_context_get_level_map(ctx, r.levels.data(), r.levels.size())) << psa_last_error_message();
    r.q_order.assign(static_cast<size_t>(c.L()), 0);
    r.k_order.assign(static_cast<size_t>(c.L()), 0);
    int64_t len = 0;
    EXPECT_EQ(PSA_OK, psa_context_get_token_order(ctx, 0, r.q_order.data(), c.L(), &len, nullptr, nullptr));
    EXPECT_EQ(PSA_OK, psa_context_get_token_order(ctx, 1, r.k_order.data(), c.L(), &len, nullptr, nullptr));
  }
  if (r.status == PSA_OK && graph_replays > 0) {
    cudaGraph_t graph = nullptr;
    EXPECT_EQ(cudaSuccess, cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
    const psa_status captured = forward();
    const std::string msg = psa_last_error_message();
    EXPECT_EQ(cudaSuccess, cudaStreamEndCapture(stream, &graph));
    EXPECT_EQ(PSA_OK, captured) << msg;
    cudaGraphExec_t exec = nullptr;
    if (captured == PSA_OK && graph != nullptr && cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess) {
      for (int rep = 0; rep < graph_replays; ++rep) {
        dout.fill_bytes(0xff);
        dlse.fill_bytes(0xff);
        EXPECT_EQ(cudaSuccess, cudaGraphLaunch(exec, stream));
        EXPECT_EQ(cudaSuccess, cudaStreamSynchronize(stream));
        EXPECT_TRUE(r.out == dout.download()) << "graph replay " << rep << ": output differs";
        const std::vector<float> lse = dlse.download();
        EXPECT_EQ(0, std::memcmp(r.lse.data(), lse.data(), lse.size() * 4)) << "graph replay " << rep << ": lse";
      }
      cudaGraphExecDestroy(exec);
    } else {
      ADD_FAILURE() << "the fp8 forward could not be captured and instantiated";
    }
    if (graph != nullptr) cudaGraphDestroy(graph);
  }
  cudaStreamDestroy(stream);
  psa_context_destroy(ctx);
  return r;
}

// The level map of the same forward on the CPU backend at precision fp8: the importance on the
// 8-bit rule's operands (importance_spec.h), the GPU's oracle.
std::vector<int8_t> cpu_fp8_levels(const Case& c, const Tensor& q, const Tensor& k, const Tensor& v) {
  psa_config* cfg = make_config(c, PSA_PRECISION_FP8);
  psa_context* ctx = nullptr;
  EXPECT_EQ(PSA_OK, psa_context_create(cfg, PSA_BACKEND_CPU, -1, &ctx)) << psa_last_error_message();
  psa_config_destroy(cfg);
  if (ctx == nullptr) return {};
  psa_context_set_video_grid(ctx, c.t, c.h, c.w, c.text, c.text > 0 ? PSA_TEXT_LAST : PSA_TEXT_NONE);
  psa_context_set_step(ctx, 1000);
  std::vector<uint16_t> out(q.bits.size());
  uint64_t bytes = 0;
  EXPECT_EQ(PSA_OK, psa_workspace_size(ctx, &q.desc, &k.desc, &v.desc, &q.desc, &bytes)) << psa_last_error_message();
  std::vector<unsigned char> ws(std::max<uint64_t>(bytes, 1));
  EXPECT_EQ(PSA_OK, psa_attention_forward(ctx, &q.desc, q.bits.data(), &k.desc, k.bits.data(), &v.desc, v.bits.data(),
                                          &q.desc, out.data(), nullptr, ws.data(), bytes, nullptr))
      << psa_last_error_message();
  psa_stats st{};
  st.struct_size = sizeof(psa_stats);
  psa_context_get_stats(ctx, &st);
  EXPECT_EQ(PSA_PRECISION_FP8, st.precision);
  std::vector<int8_t> levels(static_cast<size_t>(c.B * c.Hq * st.query_blocks * st.key_blocks));
  EXPECT_EQ(PSA_OK, psa_context_get_level_map(ctx, levels.data(), levels.size())) << psa_last_error_message();
  psa_context_destroy(ctx);
  return levels;
}

bool row_finite(const float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    if (!std::isfinite(x[i])) return false;
  return true;
}

// The fp8 forward against the host oracle and the exact attention on its own level map.
void check_against_oracle(const Case& c) {
  SCOPED_TRACE(testing::Message() << "B " << c.B << " Hq " << c.Hq << " Hkv " << c.Hkv << " L " << c.L() << " bn "
                                  << c.block_n << (c.dtype == PSA_DTYPE_F16 ? " f16" : " bf16")
                                  << (c.rearrange ? " rearranged" : "") << " pad " << c.pad
                                  << (c.non_finite() ? " non-finite" : ""));
  Tensor q = make_tensor(c, c.Hq, true, c.seed), k = make_tensor(c, c.Hkv, true, c.seed + 1),
         v = make_tensor(c, c.Hkv, false, c.seed + 2);
  if (c.nan_q) poison(c, &q, c.Hq, std::nanf(""), c.seed + 3);
  if (c.inf_k) poison(c, &k, c.Hkv, INFINITY, c.seed + 4);
  if (c.nan_v) poison(c, &v, c.Hkv, std::nanf(""), c.seed + 5);
  if (c.overflow) {
    const int64_t channel = static_cast<int64_t>(c.seed % static_cast<uint32_t>(c.D));
    std::vector<int64_t> all(static_cast<size_t>(c.B * c.Hq * c.L()));
    std::iota(all.begin(), all.end(), int64_t{0});
    poison_channel(c, &q, 1e20f, channel, all);
    std::vector<int64_t> keys;
    if (c.overflow_key >= 0) {
      keys.push_back(c.overflow_key);
    } else {
      std::mt19937 gen(c.seed + 7);
      for (int e = 0; e < 3; ++e) keys.push_back(static_cast<int64_t>(gen() % static_cast<uint32_t>(c.B * c.Hkv * c.L())));
    }
    poison_channel(c, &k, 1e20f, channel, keys);
  }
  const ForwardRun r8 = run_cuda(c, PSA_PRECISION_FP8, q, k, v, c.non_finite() ? 0 : 2);
  ASSERT_EQ(PSA_OK, r8.status) << r8.message;
  EXPECT_EQ(PSA_PRECISION_FP8, r8.stats.precision) << "a Hopper GPU runs the 8-bit kernels on this shape";
  const ForwardRun r16 = run_cuda(c, PSA_PRECISION_DEFAULT, q, k, v);
  ASSERT_EQ(PSA_OK, r16.status) << r16.message;
  EXPECT_EQ(PSA_PRECISION_DEFAULT, r16.stats.precision);
  // The level map is the importance's on the 8-bit rule's operands: the CPU backend's bit for bit,
  // and close to the default precision's (BENCHMARKS.md, "Importance on int8 operands").
  EXPECT_TRUE(r8.levels == cpu_fp8_levels(c, q, k, v)) << "the level map is the host 8-bit rule's";
  int64_t same = 0;
  for (size_t e = 0; e < r8.levels.size(); ++e) same += r8.levels[e] == r16.levels[e];
  const double agree = static_cast<double>(same) / static_cast<double>(std::max<size_t>(r8.levels.size(), 1));
  std::printf("[fp8 forward] level map: %.1f%% of the default precision's levels\n", 100.0 * agree);
  if (!c.non_finite()) EXPECT_GE(agree, 0.8) << "the 8-bit importance keeps most of the 16-bit level map";
  bool pooled = false;
  for (int8_t l : r8.levels) pooled = pooled || l > 1;
  if (!c.overflow && !c.all_level1) EXPECT_TRUE(pooled) << "the case exercises pooled levels";

  const int64_t L = c.L(), D = c.D, row = D + c.pad, bm = 128, bn = c.block_n;
  const int64_t mq = r8.stats.query_blocks, nk = r8.stats.key_blocks;
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(D)));
  double sum_gpu = 0, sum_oracle = 0, worst_gpu = 0, worst_oracle = 0, lse_gpu = 0, lse_oracle = 0;
  int64_t nan_rows = 0, heads = 0;
  for (int64_t b = 0; b < c.B; ++b)
    for (int64_t hh = 0; hh < c.Hq; ++hh) {
      const int64_t hk = b * c.Hkv + hh / (c.Hq / c.Hkv), hq = b * c.Hq + hh;
      // The head in the forward's computing order.
      std::vector<float> qh(static_cast<size_t>(L * D)), kh(qh.size()), vh(qh.size());
      for (int64_t x = 0; x < L; ++x) {
        const int64_t qs = r8.q_order[static_cast<size_t>(x)], ks = r8.k_order[static_cast<size_t>(x)];
        std::memcpy(&qh[static_cast<size_t>(x * D)], &q.f[static_cast<size_t>((hq * L + qs) * D)], D * 4);
        std::memcpy(&kh[static_cast<size_t>(x * D)], &k.f[static_cast<size_t>((hk * L + ks) * D)], D * 4);
        std::memcpy(&vh[static_cast<size_t>(x * D)], &v.f[static_cast<size_t>((hk * L + ks) * D)], D * 4);
      }
      std::vector<float> pk[3], pv[3];
      for (int l = 0; l < 3; ++l) {
        pk[l].resize(static_cast<size_t>(nk * bn / (2 << l) * D));
        pv[l].resize(pk[l].size());
      }
      pool_pyramid_cpu(kh.data(), L, D, nk, bn, pk[0].data(), pk[1].data(), pk[2].data());
      pool_pyramid_cpu(vh.data(), L, D, nk, bn, pv[0].data(), pv[1].data(), pv[2].data());
      for (int l = 0; l < 3; ++l) {  // the GPU pools into the input's 16-bit type
        for (float& x : pk[l]) x = test::round16(x, c.dtype);
        for (float& x : pv[l]) x = test::round16(x, c.dtype);
      }
      Pyramid K, V;
      K.level[0] = kh.data();
      V.level[0] = vh.data();
      for (int l = 0; l < 3; ++l) {
        K.level[l + 1] = pk[l].data();
        V.level[l + 1] = pv[l].data();
      }
      const int8_t* lv = r8.levels.data() + hq * mq * nk;
      const size_t n = static_cast<size_t>(L * D);
      std::vector<float> exact(n), oracle(n), lse_x(static_cast<size_t>(L)), lse_o(lse_x.size());
      sparse_attention_cpu(qh.data(), L, K, V, L, D, bm, bn, lv, scale, false, exact.data(), lse_x.data());
      const Fp8HeadCpu h8 = fp8_quantize_head_cpu(qh.data(), L, K, V, L, D, bm, bn);
      sparse_attention_fp8_cpu(h8, lv, scale, false, 0, L, oracle.data(), lse_o.data());
      // The GPU's rows back in computing order.
      std::vector<float> gpu(n), glse(static_cast<size_t>(L));
      for (int64_t x = 0; x < L; ++x) {
        const int64_t src = r8.q_order[static_cast<size_t>(x)];
        for (int64_t e = 0; e < D; ++e)
          gpu[static_cast<size_t>(x * D + e)] =
              test::from16(r8.out[static_cast<size_t>((hq * L + src) * row + e)], c.dtype);
        glse[static_cast<size_t>(x)] = r8.lse[static_cast<size_t>(hq * L + src)];
      }
      // Finite rows are compared as numbers; the others must be NaN exactly where the oracle's are.
      std::vector<float> fg, fo, fx;
      for (int64_t x = 0; x < L; ++x) {
        const size_t o = static_cast<size_t>(x * D), xs = static_cast<size_t>(x);
        const bool oracle_finite = row_finite(&oracle[o], D);
        if (!oracle_finite) {
          ++nan_rows;
          for (int64_t e = 0; e < D; ++e)
            EXPECT_EQ(std::isnan(oracle[o + e]), std::isnan(gpu[o + e]))
                << "head " << hq << " row " << x << " col " << e;
          EXPECT_EQ(std::isnan(lse_o[xs]), std::isnan(glse[xs])) << "head " << hq << " row " << x << " lse";
          continue;
        }
        ASSERT_TRUE(row_finite(&gpu[o], D)) << "head " << hq << " row " << x << ": the oracle's row is finite";
        if (c.overflow) continue;
        fg.insert(fg.end(), gpu.begin() + o, gpu.begin() + o + D);
        fo.insert(fo.end(), oracle.begin() + o, oracle.begin() + o + D);
        fx.insert(fx.end(), exact.begin() + o, exact.begin() + o + D);
        worst_gpu = std::max(worst_gpu, test::rel_l2(&gpu[o], &exact[o], static_cast<size_t>(D)));
        worst_oracle = std::max(worst_oracle, test::rel_l2(&oracle[o], &exact[o], static_cast<size_t>(D)));
        lse_gpu = std::max(lse_gpu, std::fabs(static_cast<double>(glse[xs]) - lse_x[xs]));
        lse_oracle = std::max(lse_oracle, std::fabs(static_cast<double>(lse_o[xs]) - lse_x[xs]));
      }
      if (!fx.empty()) {
        sum_gpu += test::rel_l2(fg.data(), fx.data(), fx.size());
        sum_oracle += test::rel_l2(fo.data(), fx.data(), fx.size());
        ++heads;
      }
    }
  std::printf("[fp8 forward] L=%lld bn=%lld%s%s: error vs exact (GPU / oracle) mean %.3e / %.3e, worst row %.3e / "
              "%.3e, worst |lse| %.2e / %.2e, NaN rows %lld\n",
              static_cast<long long>(L), static_cast<long long>(bn), c.rearrange ? " rearranged" : "",
              c.non_finite() ? " non-finite" : "", sum_gpu / std::max<int64_t>(heads, 1),
              sum_oracle / std::max<int64_t>(heads, 1), worst_gpu, worst_oracle, lse_gpu, lse_oracle,
              static_cast<long long>(nan_rows));
  if (c.non_finite()) EXPECT_GT(nan_rows, 0) << "the poisoned values reach some rows";
  if (c.overflow) return;
  if (c.nan_q && !c.inf_k) EXPECT_GT(heads, 0) << "rows without a poisoned value stay finite";
  if (heads > 0) EXPECT_GT(sum_oracle, 0.0);
  EXPECT_LE(sum_gpu, 1.25 * sum_oracle + 2e-3 * static_cast<double>(heads)) << "the forward's error is the rule's";
  EXPECT_LE(worst_gpu, 1.5 * worst_oracle + 5e-3) << "no row beyond the rule's worst";
  EXPECT_LE(lse_gpu, 1.5 * lse_oracle + 2e-3) << "lse";
}

TEST(CudaFp8Forward, MatchesTheHostOracleOnItsOwnLevelMap) {
  PSA_REQUIRE_GPU();
  if (!fp8_kernels_run())
    GTEST_SKIP() << "the 8-bit kernels run on compute capability 9.x (FallsBackToDefault covers others)";
  Case a;  // rearranged (Q read in place through the row index), bf16, block_n 64, graph replay
  check_against_oracle(a);
  Case b;  // token order (Q read in place), f16, GQA, text tokens, block_n 32
  b.rearrange = false;
  b.dtype = PSA_DTYPE_F16;
  b.Hq = 4;
  b.Hkv = 2;
  b.text = 70;
  b.block_n = 32;
  b.seed = 7;
  check_against_oracle(b);
  Case c;  // unaligned caller rows (Q gathered), block_n 128, batch 2
  c.B = 2;
  c.pad = 4;
  c.block_n = 128;
  c.t = 5;
  c.seed = 13;
  check_against_oracle(c);
}

TEST(CudaFp8Forward, NonFiniteValuesAreNaNWhereTheOraclesAre) {
  PSA_REQUIRE_GPU();
  if (!fp8_kernels_run()) GTEST_SKIP() << "the 8-bit kernels run on compute capability 9.x";
  Case a;  // NaN in Q rows: those rows NaN (int8 Q has no NaN: the kernel marks them)
  a.nan_q = true;
  a.seed = 21;
  check_against_oracle(a);
  Case b;  // Q in place; NaN in Q and V, +inf in K
  b.rearrange = false;
  b.nan_q = b.inf_k = b.nan_v = true;
  b.seed = 22;
  check_against_oracle(b);
  // +inf in K alone, 3 values per seed at random tokens: NaN logits in columns of every position
  // of the softmax's 8-column blocks (an eighth of its exponentials take another path). Every
  // block at level 1: the importance scores a key block holding a non-finite value 0, and a
  // pooled level would not reach these columns.
  for (uint32_t seed = 40; seed < 48; ++seed) {
    SCOPED_TRACE(testing::Message() << "+inf in K, seed " << seed);
    Case k;
    k.inf_k = true;
    k.all_level1 = true;
    k.seed = seed;
    check_against_oracle(k);
  }
  // Finite inputs, logits that overflow to +inf: x = inf - inf in the softmax, which must stay
  // NaN on both of its exponential paths. Three random K tokens per seed; then one token in
  // token order (no rearrangement: key t is column t % 128 of its 128-key tile) in the row's
  // last tile and in the columns whose exponentials run on the FMA pipe (56-63 of each 64), so
  // that nothing after it makes the row NaN if that path drops the NaN.
  for (uint32_t seed = 50; seed < 56; ++seed) {
    SCOPED_TRACE(testing::Message() << "overflowing logits, seed " << seed);
    Case o;
    o.overflow = true;
    o.seed = seed;
    check_against_oracle(o);
  }
  for (int64_t key : {int64_t{256 + 56}, int64_t{256 + 64 + 61}, int64_t{256 + 127}}) {
    SCOPED_TRACE(testing::Message() << "overflowing logits at key " << key);
    Case o;
    o.overflow = true;
    o.overflow_key = key;
    o.rearrange = false;
    o.seed = 60 + static_cast<uint32_t>(key % 7);
    ASSERT_EQ(384, o.L());
    check_against_oracle(o);
  }
}

// Where the 8-bit path does not run, the forward is the default precision's, bit for bit.
TEST(CudaFp8Forward, FallsBackToTheDefaultWhereTheKernelsDoNotRun) {
  PSA_REQUIRE_GPU();
  Case d64;
  d64.D = 64;
  Case causal;
  causal.causal = true;
  causal.rearrange = false;
  std::vector<Case> cases = {d64, causal};
  if (!fp8_kernels_run()) cases.push_back(Case{});  // sm_80 / sm_89: every shape falls back
  for (const Case& c : cases) {
    SCOPED_TRACE(testing::Message() << "D " << c.D << (c.causal ? " causal" : ""));
    const Tensor q = make_tensor(c, c.Hq, true, 31), k = make_tensor(c, c.Hkv, true, 32),
                 v = make_tensor(c, c.Hkv, false, 33);
    const ForwardRun r8 = run_cuda(c, PSA_PRECISION_FP8, q, k, v);
    const ForwardRun r16 = run_cuda(c, PSA_PRECISION_DEFAULT, q, k, v);
    ASSERT_EQ(PSA_OK, r8.status) << r8.message;
    ASSERT_EQ(PSA_OK, r16.status) << r16.message;
    EXPECT_EQ(PSA_PRECISION_DEFAULT, r8.stats.precision);
    EXPECT_TRUE(r8.out == r16.out) << "the fallback is the default precision's forward";
    EXPECT_EQ(0, std::memcmp(r8.lse.data(), r16.lse.data(), r8.lse.size() * 4));
    EXPECT_TRUE(r8.levels == r16.levels);
  }
}

}  // namespace
}  // namespace psa

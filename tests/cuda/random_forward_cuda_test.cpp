// tests/cuda/random_forward_cuda_test.cpp -- problems drawn at random (shape, grouped heads, head
// dim, dtype, layout and row padding, text tokens, video grid or none, Lq != Lk, a shipped preset
// with block sizes, mask mode, ratio ends, sampling, rearrangement, similarity cap, causal, scale,
// step and precision drawn over it) run on the CUDA backend and on the CPU backend through the C
// API. Both backends must give the same status; a failing forward writes nothing; where both run,
// their level maps agree on almost every block and the outputs agree within the 16-bit (or 8-bit)
// tolerance -- exactly when the maps are equal, and within what the differing blocks can move
// otherwise. Some problems hold one NaN in V: the output is NaN exactly where the CPU backend's
// is, except that under causal masking it may also reach the rows that do not see its key in a
// query block that attends to the key's tile (psa.h, psa_attention_forward). The seed is fresh
// per run (PSA_TEST_SEED replays one) and printed with each problem.
// PSA_RANDOM_FORWARD_PROBLEMS sets how many problems (default 40). Skips without a GPU.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "common/random_problem.h"
#include "cuda_test_util.h"
#include "psa.h"

namespace psa {
namespace {

using test::DevBuf;
using test::Operands;
using test::Outcome;
using test::Problem;

Outcome run_cuda(const Problem& p, const psa_config* cfg, const Operands& in) {
  Outcome r;
  psa_context* ctx = test::make_context(p, cfg, PSA_BACKEND_CUDA);
  if (ctx == nullptr) {
    r.status = psa_last_error_status();
    r.message = psa_last_error_message();
    return r;
  }
  DevBuf<uint16_t> q(in.q), k(in.k), v(in.v), out(in.q.size());
  out.fill_bytes(0xff);
  DevBuf<float> lse(static_cast<size_t>(p.B * p.Hq * p.Lq));
  uint64_t bytes = 0;
  r.status = psa_workspace_size(ctx, &in.qd, &in.kd, &in.vd, &in.od, &bytes);
  if (r.status == PSA_OK) {
    DevBuf<unsigned char> ws(std::max<uint64_t>(bytes, 1));
    r.status = psa_attention_forward(ctx, &in.qd, q.get(), &in.kd, k.get(), &in.vd, v.get(), &in.od, out.get(),
                                     lse.get(), ws.get(), bytes, nullptr);
    EXPECT_EQ(cudaSuccess, cudaDeviceSynchronize());
  }
  r.message = psa_last_error_message();
  const std::vector<uint16_t> o = out.download();
  if (r.status == PSA_OK) {
    r.out = test::unpack(o, in.od, [&](uint16_t e) { return test::from16(e, p.dtype); });
    r.lse = lse.download();
    test::read_back(ctx, &r);
  } else {
    r.untouched = std::all_of(o.begin(), o.end(), [](uint16_t e) { return e == 0xffffu; });
  }
  psa_context_destroy(ctx);
  return r;
}

TEST(CudaRandomForward, RandomProblemsMatchTheCpuBackend) {
  PSA_REQUIRE_GPU();
  const test::Sweep sweep = test::begin_sweep("random forward", "PSA_RANDOM_FORWARD_PROBLEMS", 40);
  const uint64_t seed = sweep.seed;
  const int problems = sweep.problems;
  std::mt19937_64 rng(seed);
  psa_catalog* cat = nullptr;
  ASSERT_EQ(PSA_OK, psa_catalog_open(nullptr, &cat)) << psa_last_error_message();
  int ran = 0, refused = 0, maps_equal = 0, sparse = 0, ran_fp8 = 0;
  for (int n = 0; n < problems; ++n) {
    Problem p = test::draw(rng, cat);
    ASSERT_NE(nullptr, p.cfg);
    SCOPED_TRACE(testing::Message() << "seed " << seed << " problem " << n << ": " << p.describe);
    const Operands in = test::make_operands(p, static_cast<uint32_t>(rng()));
    Outcome cpu = test::run_cpu(p, p.cfg, in);
    const Outcome gpu = run_cuda(p, p.cfg, in);
    EXPECT_EQ(cpu.status, gpu.status) << "cpu: " << cpu.message << " / cuda: " << gpu.message;
    if (gpu.status != PSA_OK) {
      EXPECT_TRUE(gpu.untouched) << "a failing CUDA forward wrote its output";
    }
    if (cpu.status != PSA_OK) {
      EXPECT_TRUE(cpu.untouched) << "a failing CPU forward wrote its output";
    }
    if (cpu.status != PSA_OK || gpu.status != PSA_OK) {
      ++refused;
      std::printf("[random forward] %3d %s: %s / %s (%.160s)\n", n, p.describe.c_str(), psa_status_name(cpu.status),
                  psa_status_name(gpu.status), cpu.message.c_str());
      psa_config_destroy(p.cfg);
      continue;
    }
    // Where the 8-bit kernels do not run (head dim 64, causal), the GPU runs the default precision:
    // the CPU backend's 8-bit rule is then not its oracle.
    if (gpu.stats.precision != cpu.stats.precision) {
      EXPECT_EQ(PSA_PRECISION_DEFAULT, gpu.stats.precision);
      psa_config* c16 = nullptr;
      ASSERT_EQ(PSA_OK, psa_config_clone(p.cfg, &c16));
      ASSERT_EQ(PSA_OK, psa_config_set_int(c16, PSA_PARAM_PRECISION, PSA_PRECISION_DEFAULT));
      cpu = test::run_cpu(p, c16, in);
      psa_config_destroy(c16);
      ASSERT_EQ(PSA_OK, cpu.status) << cpu.message;
    }
    ++ran;
    EXPECT_EQ(cpu.stats.ran_dense, gpu.stats.ran_dense);
    ASSERT_EQ(cpu.levels.size(), gpu.levels.size());
    int64_t differ = 0;
    for (size_t e = 0; e < cpu.levels.size(); ++e) differ += cpu.levels[e] != gpu.levels[e];
    maps_equal += differ == 0;
    // Elements NaN in the CPU backend's output (a NaN in V reaches the rows that attend its
    // block) must be NaN in the GPU's; the rest are compared as numbers.
    // Under causal masking the GPU's tensor cores multiply the masked weights (zeros) by V, so
    // a NaN V value at key j also reaches the rows that do not see j of a query block that
    // attends j's key tile: 128 keys for a dense forward, j's key block for a sparse one (psa.h,
    // psa_attention_forward, "Values"). There a NaN where the CPU backend has a number is allowed.
    int64_t causal = 0, method = 0, bm = 128, bn = 64;
    psa_config_get_int(p.cfg, PSA_PARAM_CAUSAL, &causal);
    psa_config_get_int(p.cfg, PSA_PARAM_METHOD, &method);
    psa_config_get_int(p.cfg, PSA_PARAM_BLOCK_M, &bm);
    psa_config_get_int(p.cfg, PSA_PARAM_BLOCK_N, &bn);
    const bool is_causal = causal != 0 || method == PSA_METHOD_PSA_CAUSAL;
    const bool sparse_order = !gpu.stats.ran_dense;  // a dense forward keeps the caller's order
    const std::vector<int64_t> qpos = test::positions(gpu.q_order), kpos = test::positions(gpu.k_order);
    const int64_t offset = p.Lk - p.Lq;  // bottom-right aligned
    auto leak_allowed = [&](size_t i) {
      if (!is_causal || in.nan_x < 0) return false;
      const int64_t x = static_cast<int64_t>(i / static_cast<size_t>(p.D)) % p.Lq;
      const int64_t hq = static_cast<int64_t>(i / static_cast<size_t>(p.D * p.Lq)) % p.Hq;
      const int64_t b = static_cast<int64_t>(i / static_cast<size_t>(p.D * p.Lq * p.Hq));
      if (b != in.nan_b || hq / (p.Hq / p.Hkv) != in.nan_h) return false;
      const int64_t pq = sparse_order ? qpos[static_cast<size_t>(x)] : x;
      const int64_t pk = sparse_order ? kpos[static_cast<size_t>(in.nan_x)] : in.nan_x;
      if (pq < 0 || pk < 0 || pq + offset >= pk) return false;  // (row pq sees key pk)
      if (sparse_order) {
        const int64_t mq = gpu.stats.query_blocks, nk = gpu.stats.key_blocks;
        return gpu.levels[static_cast<size_t>(((b * p.Hq + hq) * mq + pq / bm) * nk + pk / bn)] > 0;
      }
      const int64_t last = std::min(pq / bm * bm + bm, p.Lq) - 1 + offset;  // the block's last visible key
      return last >= 0 && pk / 128 <= last / 128;
    };
    std::vector<float> g_num, c_num;
    int64_t nan_out = 0, nan_mismatch = 0, non_finite = 0, leaked = 0;
    for (size_t i = 0; i < cpu.out.size(); ++i) {
      if (std::isnan(cpu.out[i])) {
        ++nan_out;
        nan_mismatch += !std::isnan(gpu.out[i]);
        continue;
      }
      if (std::isnan(gpu.out[i]) && leak_allowed(i)) {
        ++leaked;
        continue;
      }
      non_finite += !std::isfinite(gpu.out[i]);
      g_num.push_back(gpu.out[i]);
      c_num.push_back(cpu.out[i]);
    }
    const double err = test::rel_l2(g_num, c_num);
    // Tolerances grow with the amplitude a of Q and K: the logits scale with a^2, and the 16-bit
    // rounding of the pooled keys (the 8-bit rule's weights) moves them in proportion. lse: an
    // absolute part times max(1, a^2) plus 2^-8 of its size (2^-6 at 8 bits); lse_diff is the
    // largest difference, lse_over the largest ratio to that bound. The output: rel-L2 times
    // max(1, a).
    const double amp2 = std::max(1.0, static_cast<double>(p.amplitude) * p.amplitude);
    const bool fp8 = gpu.stats.precision == PSA_PRECISION_FP8;
    double lse_diff = 0, lse_over = 0;
    int64_t lse_inf = 0;
    for (size_t i = 0; i < cpu.lse.size(); ++i) {
      if (!std::isfinite(cpu.lse[i]) || !std::isfinite(gpu.lse[i])) {
        lse_inf += !(cpu.lse[i] == gpu.lse[i]);
        continue;
      }
      const double d = std::fabs(static_cast<double>(cpu.lse[i]) - gpu.lse[i]);
      lse_diff = std::max(lse_diff, d);
      lse_over = std::max(lse_over, d / ((fp8 ? 6e-2 : 3e-2) * amp2 + std::fabs(cpu.lse[i]) / (fp8 ? 64.0 : 256.0)));
    }
    sparse += gpu.stats.density < 1.0;
    ran_fp8 += fp8;
    std::printf(
        "[random forward] %3d %s: density %.3f%s%s, map blocks differing %lld of %zu, rel-L2 %.2e, "
        "max|lse diff| %.2e%s\n",
        n, p.describe.c_str(), gpu.stats.density, gpu.stats.ran_dense ? " dense" : "",
        gpu.stats.precision == PSA_PRECISION_FP8 ? " fp8" : "", static_cast<long long>(differ), cpu.levels.size(), err,
        lse_diff,
        p.nan_v ? (" NaN elements " + std::to_string(nan_out) + " + " + std::to_string(leaked) +
                   " more in blocks that attend the key's tile")
                      .c_str()
                : "");
    EXPECT_EQ(0, non_finite) << "elements finite in the CPU backend's output are not in the GPU's";
    EXPECT_EQ(0, nan_mismatch) << "NaN in the CPU backend's output, a number in the GPU's (of " << nan_out << ")";
    if (!p.nan_v) {
      EXPECT_EQ(0, nan_out) << "finite inputs give a finite output";
    }
    EXPECT_EQ(0, lse_inf) << "lse is infinite in one backend only";
    if (differ == 0) {
      EXPECT_LE(err, (fp8 ? 4e-2 : 1.5e-2) * std::max(1.0, static_cast<double>(p.amplitude)));
      EXPECT_LE(lse_over, 1.0) << "lse differs by " << lse_diff;
    } else {
      // A near-tie in the importance may rank a block differently (rare: none in the first
      // sweeps of this test): the maps must still agree almost everywhere, and the outputs
      // stay close.
      EXPECT_LE(static_cast<double>(differ), 0.03 * static_cast<double>(cpu.levels.size()) + 1.0)
          << "the level maps agree on almost every block";
      EXPECT_LE(err, 0.1);
    }
    psa_config_destroy(p.cfg);
  }
  psa_catalog_destroy(cat);
  std::printf(
      "[random forward] %d problems: %d ran on both backends (%d with equal level maps, %d sparse, %d at "
      "8 bits), %d refused by both\n",
      problems, ran, maps_equal, sparse, ran_fp8, refused);
  EXPECT_GT(ran, problems / 2);
  if (problems >= 20) {
    EXPECT_GT(sparse, 0) << "some problems run sparse";
  }
}

}  // namespace
}  // namespace psa

// tests/cuda/parallel_cuda_test.cu -- the sequence-parallel building blocks on the CUDA
// backend: psa_merge_attention's kernel equals the CPU merge (f32, and bf16 parts), in place
// too; a forward on heads [4, 8) with PSA_PARAM_HEAD_OFFSET = 4 equals heads 4..7 of the
// whole forward bit for bit. Skips without a device.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <memory>
#include <random>
#include <vector>

#include "core/half.h"
#include "cuda/cuda_test_util.h"
#include "psa.h"

namespace {

using psa::test::DevBuf;

TEST(MergeAttentionCuda, KernelEqualsCpuMerge) {
  PSA_REQUIRE_GPU();
  std::mt19937_64 rng(19);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  const int64_t B = 2, H = 3, L = 129, D = 128, rows = B * H * L;
  for (psa_dtype dt : {PSA_DTYPE_F32, PSA_DTYPE_BF16}) {
    const int parts = 3;
    const int64_t es = psa_dtype_size(dt);
    std::vector<std::vector<uint8_t>> outs(parts);
    std::vector<std::vector<float>> lses(parts);
    for (int i = 0; i < parts; ++i) {
      outs[i].resize(static_cast<size_t>(rows * D * es));
      for (int64_t e = 0; e < rows * D; ++e) psa::store_from_float(outs[i].data(), e, dt, nd(rng));
      lses[i].resize(static_cast<size_t>(rows));
      for (int64_t r = 0; r < rows; ++r)
        lses[i][r] = r % 5 == i ? -std::numeric_limits<float>::infinity() : 4.0f * nd(rng);
    }
    for (int i = 0; i < parts; ++i) lses[i][3] = -std::numeric_limits<float>::infinity();
    psa_tensor_desc desc;
    PSA_OK_MSG(psa_tensor_desc_init(&desc, PSA_LAYOUT_BSND, dt, B, H, L, D));
    std::vector<const void*> hp(parts);
    std::vector<const float*> hl(parts);
    for (int i = 0; i < parts; ++i) {
      hp[i] = outs[i].data();
      hl[i] = lses[i].data();
    }
    std::vector<uint8_t> cpu_out(static_cast<size_t>(rows * D * es));
    std::vector<float> cpu_lse(static_cast<size_t>(rows));
    PSA_OK_MSG(psa_merge_attention(parts, &desc, hp.data(), hl.data(), cpu_out.data(),
                                   cpu_lse.data(), PSA_BACKEND_CPU, nullptr));
    std::vector<std::unique_ptr<DevBuf<uint8_t>>> dout;
    std::vector<std::unique_ptr<DevBuf<float>>> dlse;
    std::vector<const void*> dp(parts);
    std::vector<const float*> dl(parts);
    for (int i = 0; i < parts; ++i) {
      dout.push_back(std::make_unique<DevBuf<uint8_t>>(outs[i]));
      dlse.push_back(std::make_unique<DevBuf<float>>(lses[i]));
    }
    for (int i = 0; i < parts; ++i) {
      dp[i] = dout[i]->get();
      dl[i] = dlse[i]->get();
    }
    cudaStream_t stream;
    PSA_CUDA_OK(cudaStreamCreate(&stream));
    // In place: into part 0 and its lse.
    PSA_OK_MSG(psa_merge_attention(parts, &desc, dp.data(), dl.data(), dout[0]->get(),
                                   dlse[0]->get(), PSA_BACKEND_AUTO, stream));
    PSA_CUDA_OK(cudaStreamSynchronize(stream));
    PSA_CUDA_OK(cudaStreamDestroy(stream));
    const std::vector<uint8_t> gpu_out = dout[0]->download();
    const std::vector<float> gpu_lse = dlse[0]->download();
    for (int64_t r = 0; r < rows; ++r) {
      if (std::isinf(cpu_lse[r])) {
        EXPECT_TRUE(std::isinf(gpu_lse[r])) << r;
      } else {
        EXPECT_NEAR(gpu_lse[r], cpu_lse[r], 1e-6f * (1.0f + std::fabs(cpu_lse[r]))) << r;
      }
    }
    const double tol = dt == PSA_DTYPE_F32 ? 1e-6 : 8e-3;
    for (int64_t e = 0; e < rows * D; ++e)
      ASSERT_NEAR(psa::load_as_float(gpu_out.data(), e, dt),
                  psa::load_as_float(cpu_out.data(), e, dt), tol)
          << "element " << e;
  }
}

TEST(MergeAttentionCuda, HostPointersAreRejected) {
  PSA_REQUIRE_GPU();
  psa_tensor_desc desc;
  PSA_OK_MSG(psa_tensor_desc_init(&desc, PSA_LAYOUT_BNSD, PSA_DTYPE_F32, 1, 1, 4, 8));
  std::vector<float> a(32), l(4), out(32);
  const void* op[1] = {a.data()};
  const float* lp[1] = {l.data()};
  EXPECT_EQ(psa_merge_attention(1, &desc, op, lp, out.data(), nullptr, PSA_BACKEND_CUDA, nullptr),
            PSA_ERR_WRONG_MEMORY_SPACE);
}

TEST(HeadOffsetCuda, ShardOfHeadsEqualsWholeForwardBitForBit) {
  PSA_REQUIRE_GPU();
  std::mt19937_64 rng(20);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  const int64_t H = 8, L = 8 * 16 * 32, D = 128;
  const size_t n = static_cast<size_t>(H * L * D);
  std::vector<uint16_t> hq(n), hk(n), hv(n);
  for (auto* t : {&hq, &hk, &hv})
    for (auto& x : *t) x = psa::float_to_bf16(nd(rng));
  auto run = [&](int64_t h0, int64_t heads, std::vector<uint16_t>* result) {
    psa_config* cfg = nullptr;
    ASSERT_EQ(psa_config_load_embedded("Wan2.1_1.3b", "psa_balanced", &cfg), PSA_OK);
    ASSERT_EQ(psa_config_set_int(cfg, PSA_PARAM_HEAD_OFFSET, h0), PSA_OK);
    psa_context* ctx = nullptr;
    PSA_OK_MSG(psa_context_create(cfg, PSA_BACKEND_CUDA, -1, &ctx));
    psa_config_destroy(cfg);
    PSA_OK_MSG(psa_context_set_step(ctx, 1000));
    PSA_OK_MSG(psa_context_set_video_grid(ctx, 8, 16, 32, 0, PSA_TEXT_NONE));
    psa_tensor_desc d;
    PSA_OK_MSG(psa_tensor_desc_init(&d, PSA_LAYOUT_BNSD, PSA_DTYPE_BF16, 1, heads, L, D));
    const size_t m = static_cast<size_t>(heads * L * D), from = static_cast<size_t>(h0 * L * D);
    DevBuf<uint16_t> q(std::vector<uint16_t>(hq.begin() + from, hq.begin() + from + m));
    DevBuf<uint16_t> k(std::vector<uint16_t>(hk.begin() + from, hk.begin() + from + m));
    DevBuf<uint16_t> v(std::vector<uint16_t>(hv.begin() + from, hv.begin() + from + m));
    DevBuf<uint16_t> o(m);
    uint64_t bytes = 0;
    PSA_OK_MSG(psa_workspace_size(ctx, &d, &d, &d, &d, &bytes));
    DevBuf<uint8_t> ws(bytes ? bytes : 1);
    PSA_OK_MSG(psa_attention_forward(ctx, &d, q.get(), &d, k.get(), &d, v.get(), &d, o.get(),
                                     nullptr, ws.get(), bytes, nullptr));
    PSA_CUDA_OK(cudaDeviceSynchronize());
    *result = o.download();
    psa_context_destroy(ctx);
  };
  std::vector<uint16_t> whole, shard;
  run(0, H, &whole);
  run(4, 4, &shard);
  ASSERT_EQ(shard.size(), whole.size() / 2);
  EXPECT_TRUE(std::equal(shard.begin(), shard.end(), whole.begin() + whole.size() / 2));
}

}  // namespace

// tests/cuda/pool_cuda_test.cpp -- pool stage on the GPU against pool_pyramid_cpu: the GPU
// rounds the CPU's fp32 hierarchical means once, so every pooled element must equal the
// CPU value rounded to the input type (0 mismatches), on random and video-like inputs.
#include "cuda/pool/pool_cuda.h"
#include "cuda_test_util.h"
#include "pool/pool.h"
#include "pool/pool_spec.h"

namespace psa {
namespace {

using test::DevBuf;

void run_pool(psa_dtype dt, int64_t heads, int64_t len, int64_t d, int64_t bn, bool video) {
  const int64_t nk = (len + bn - 1) / bn;
  test::Tensor16 x = video ? test::make_video_like(heads, len, d, dt, 11u)
                           : test::make_random(static_cast<size_t>(heads * len * d), dt, 12u);
  DevBuf<uint16_t> dx(x.bits);
  std::vector<std::unique_ptr<DevBuf<uint16_t>>> out;
  gpu::PoolArgs a;
  a.dtype = dt;
  a.x = dx.get();
  a.heads = heads;
  a.len = len;
  a.head_dim = d;
  a.n_blocks = nk;
  a.block_n = bn;
  for (int l = 0; l < 3; ++l) {
    out.push_back(std::make_unique<DevBuf<uint16_t>>(static_cast<size_t>(heads * pooled_length(nk, bn, 2 << l) * d)));
    out.back()->fill_bytes(0xff);
    a.out[l] = out.back()->get();
  }
  ASSERT_EQ(PSA_OK, gpu::pool_pyramid_cuda(a, nullptr)) << psa_last_error_message();
  int64_t mismatches = 0, total = 0;
  double max_err = 0;
  for (int64_t h = 0; h < heads; ++h) {
    std::vector<float> ref[3];
    for (int l = 0; l < 3; ++l) ref[l].resize(static_cast<size_t>(pooled_length(nk, bn, 2 << l) * d));
    pool_pyramid_cpu(x.f.data() + h * len * d, len, d, nk, bn, ref[0].data(), ref[1].data(), ref[2].data());
    for (int l = 0; l < 3; ++l) {
      const std::vector<uint16_t> got = out[l]->download();
      const size_t per = ref[l].size();
      for (size_t e = 0; e < per; ++e) {
        const uint16_t g = got[h * per + e];
        ++total;
        if (g != test::to16(ref[l][e], dt)) ++mismatches;
        max_err = std::max(max_err, std::fabs(static_cast<double>(test::from16(g, dt)) - ref[l][e]));
      }
    }
  }
  EXPECT_EQ(0, mismatches) << "of " << total << " pooled elements; max |gpu - cpu32| = " << max_err;
  std::printf("[pool] dtype=%s len=%lld d=%lld bn=%lld %s: %lld elements, %lld mismatches, max|gpu-cpu32|=%.3g\n",
              dt == PSA_DTYPE_F16 ? "f16" : "bf16", static_cast<long long>(len),
              static_cast<long long>(d), static_cast<long long>(bn), video ? "video" : "random",
              static_cast<long long>(total), static_cast<long long>(mismatches), max_err);
}

TEST(CudaPool, MatchesCpuPyramidBitForBit) {
  PSA_REQUIRE_GPU();
  run_pool(PSA_DTYPE_BF16, 3, 512, 64, 64, false);
  run_pool(PSA_DTYPE_BF16, 2, 333, 128, 32, false);   // partial last block: replicate padding
  run_pool(PSA_DTYPE_F16, 2, 1000, 128, 128, false);
  run_pool(PSA_DTYPE_BF16, 2, 777, 64, 128, true);
  run_pool(PSA_DTYPE_F16, 1, 95, 64, 32, true);
  run_pool(PSA_DTYPE_BF16, 1, 1, 64, 32, false);       // a single token
}

}  // namespace
}  // namespace psa

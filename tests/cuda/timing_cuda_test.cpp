// tests/cuda/timing_cuda_test.cpp -- informative timings of whole CUDA forwards at a
// production-like shape (Wan2.1 480p: 1 x 12 heads x 32760 tokens x 128), dense vs sparse
// presets. Disabled by default (no assertion beyond success); scripts/gpu_check.sh runs it
// with --gtest_also_run_disabled_tests. Times with CUDA events, median of 5 after warm-up.
#include <algorithm>
#include <string>

#include "cuda_test_util.h"
#include "psa.h"

namespace psa {
namespace {

using test::DevBuf;

TEST(CudaTiming, DISABLED_Wan480pForward) {
  PSA_REQUIRE_GPU();
  const int64_t t = 21, h = 30, w = 52, L = t * h * w, H = 12, D = 128;
  psa_tensor_desc qd;
  ASSERT_EQ(PSA_OK, psa_tensor_desc_init(&qd, PSA_LAYOUT_BSND, PSA_DTYPE_BF16, 1, H, L, D));
  const size_t n = static_cast<size_t>(L * H * D);
  DevBuf<uint16_t> q(test::make_video_like(1, L * H, D, PSA_DTYPE_BF16, 1).bits);
  DevBuf<uint16_t> k(test::make_video_like(1, L * H, D, PSA_DTYPE_BF16, 2).bits);
  DevBuf<uint16_t> v(test::make_random(n, PSA_DTYPE_BF16, 3).bits);
  DevBuf<uint16_t> out(n);
  const char* presets[4][2] = {{"Wan2.1_1.3b", "baseline"},
                               {"Wan2.1_1.3b", "psa_topk"},
                               {"Wan2.1_1.3b", "psa_balanced"},
                               {"Wan2.1_14b", "psa_balanced"}};
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  for (const auto& p : presets) {
    psa_config* cfg = nullptr;
    ASSERT_EQ(PSA_OK, psa_config_load_embedded(p[0], p[1], &cfg));
    psa_context* ctx = nullptr;
    ASSERT_EQ(PSA_OK, psa_context_create(cfg, PSA_BACKEND_CUDA, -1, &ctx)) << psa_last_error_message();
    psa_context_set_video_grid(ctx, t, h, w, 0, PSA_TEXT_NONE);
    psa_context_set_step(ctx, 1000);
    uint64_t bytes = 0;
    ASSERT_EQ(PSA_OK, psa_workspace_size(ctx, &qd, &qd, &qd, &qd, &bytes)) << psa_last_error_message();
    DevBuf<unsigned char> ws(bytes);
    std::vector<float> ms;
    for (int rep = 0; rep < 7; ++rep) {
      cudaEventRecord(e0, nullptr);
      ASSERT_EQ(PSA_OK, psa_attention_forward(ctx, &qd, q.get(), &qd, k.get(), &qd, v.get(), &qd, out.get(), nullptr,
                                              ws.get(), bytes, nullptr))
          << psa_last_error_message();
      cudaEventRecord(e1, nullptr);
      cudaEventSynchronize(e1);
      float m = 0;
      cudaEventElapsedTime(&m, e0, e1);
      if (rep >= 2) ms.push_back(m);
    }
    std::sort(ms.begin(), ms.end());
    psa_stats st{};
    st.struct_size = sizeof(st);
    psa_context_get_stats(ctx, &st);
    const double flops = 4.0 * L * L * D * H;
    std::printf("[timing] %s/%s: L=%lld H=%lld D=%lld bf16: median %.2f ms (density %.3f; %.0f dense-equivalent TFLOP/s)\n",
                p[0], p[1], static_cast<long long>(L), static_cast<long long>(H), static_cast<long long>(D),
                ms[ms.size() / 2], st.density, flops / (ms[ms.size() / 2] * 1e-3) / 1e12);
    psa_context_destroy(ctx);
    psa_config_destroy(cfg);
  }
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
}

}  // namespace
}  // namespace psa

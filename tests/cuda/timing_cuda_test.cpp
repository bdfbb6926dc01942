// tests/cuda/timing_cuda_test.cpp -- informative timings at Wan2.1 480p (1 x 12 x 32760 x 128):
// whole forwards per preset and per-stage times. Disabled by default; scripts/gpu_check.sh runs
// them with --gtest_also_run_disabled_tests. CUDA events, median/mean after warm-up.
#include <algorithm>
#include <string>

#include "cuda/attention/attention_cuda.h"
#include "cuda/importance/importance_cuda.h"
#include "cuda/mask/mask_cuda.h"
#include "cuda/pool/pool_cuda.h"
#include "cuda/rearrange/gather_cuda.h"
#include "cuda_test_util.h"
#include "psa.h"
#include "rearrange/rearrange.h"

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
    std::printf("[timing] %s/%s: L=%lld H=%lld D=%lld bf16: median %.2f ms (density %.3f; %.0f TFLOP/s, dense-equivalent)\n",
                p[0], p[1], static_cast<long long>(L), static_cast<long long>(H), static_cast<long long>(D),
                ms[ms.size() / 2], st.density, flops / (ms[ms.size() / 2] * 1e-3) / 1e12);
    psa_context_destroy(ctx);
    psa_config_destroy(cfg);
  }
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
}

// Per-stage times of one sparse forward at the same shape (psa_topk: bn 32, topk
// .05/.1/.15/.25/1, Gilbert order), each stage launched alone between two events.
TEST(CudaTiming, DISABLED_Wan480pStages) {
  PSA_REQUIRE_GPU();
  const int64_t t = 21, h = 30, w = 52, L = t * h * w, H = 12, D = 128, bm = 128, bn = 32;
  const int64_t mq = (L + bm - 1) / bm, nk = (L + bn - 1) / bn, n = L * H * D;
  Config cfg;
  cfg.use_rearrange = true;
  VideoGeometry geo;
  geo.set = true;
  geo.t = t;
  geo.h = h;
  geo.w = w;
  SequencePlan plan;
  ASSERT_EQ(PSA_OK, build_sequence_plan(cfg, geo, L, &plan));
  DevBuf<int64_t> src(plan.src);
  DevBuf<uint16_t> q(test::make_video_like(1, L * H, D, PSA_DTYPE_BF16, 1).bits);
  DevBuf<uint16_t> k(test::make_video_like(1, L * H, D, PSA_DTYPE_BF16, 2).bits);
  DevBuf<uint16_t> v(test::make_random(static_cast<size_t>(n), PSA_DTYPE_BF16, 3).bits);
  DevBuf<uint16_t> qr(n), kr(n), vr(n), out(n), kp[3], vp[3];
  for (int l = 0; l < 3; ++l) {
    kp[l].alloc(static_cast<size_t>(H * nk * bn / (2 << l) * D));
    vp[l].alloc(kp[l].size());
  }
  DevBuf<int32_t> qoff(H * 32), koff(H * 8), wl(H * mq * nk), wc(H * mq * 4);
  DevBuf<float> scores(H * mq * nk);
  DevBuf<int8_t> levels(H * mq * nk);
  const int64_t bsnd[4] = {L * H * D, D, H * D, 1};
  cudaEvent_t ev[8];
  for (auto& e : ev) cudaEventCreate(&e);
  float acc[7] = {0, 0, 0, 0, 0, 0, 0};
  const char* names[7] = {"gather q,k,v", "pool k,v", "importance", "levels", "work list", "attention", "total"};
  for (int rep = 0; rep < 6; ++rep) {
    int s = 0;
    cudaEventRecord(ev[s++], nullptr);
    gpu::GatherArgs g;
    g.dtype = PSA_DTYPE_BF16;
    std::copy(bsnd, bsnd + 4, g.stride);
    g.batch = 1;
    g.heads = H;
    g.len = L;
    g.head_dim = D;
    g.index = src.get();
    const void* ins[3] = {q.get(), k.get(), v.get()};
    void* outs[3] = {qr.get(), kr.get(), vr.get()};
    for (int i = 0; i < 3; ++i) {
      g.src = ins[i];
      g.dst = outs[i];
      ASSERT_EQ(PSA_OK, gpu::gather_rows_cuda(g, nullptr));
    }
    cudaEventRecord(ev[s++], nullptr);
    gpu::PoolArgs pa;
    pa.heads = H;
    pa.len = L;
    pa.head_dim = D;
    pa.n_blocks = nk;
    pa.block_n = bn;
    for (int i = 0; i < 2; ++i) {
      pa.x = i == 0 ? kr.get() : vr.get();
      for (int l = 0; l < 3; ++l) pa.out[l] = i == 0 ? kp[l].get() : vp[l].get();
      ASSERT_EQ(PSA_OK, gpu::pool_pyramid_cuda(pa, nullptr));
    }
    cudaEventRecord(ev[s++], nullptr);
    gpu::OffsetArgs oa;
    oa.dims.batch = 1;
    oa.dims.heads_q = H;
    oa.dims.block_m = bm;
    oa.q_count = 32;
    oa.dims.block_n = bn;
    oa.k_count = 8;
    oa.q_off = qoff.get();
    oa.k_off = koff.get();
    ASSERT_EQ(PSA_OK, gpu::sample_offsets_cuda(oa, nullptr));
    gpu::ScoreArgs sa;
    sa.q = qr.get();
    sa.k = kr.get();
    sa.dims.batch = 1;
    sa.dims.heads_q = H;
    sa.dims.heads_kv = H;
    sa.dims.len_q = L;
    sa.dims.len_k = L;
    sa.dims.head_dim = D;
    sa.dims.block_m = bm;
    sa.dims.block_n = bn;
    sa.q_off = qoff.get();
    sa.k_off = koff.get();
    sa.q_count = 32;
    sa.k_count = 8;
    sa.scale = 0.0883883f;
    sa.scores = scores.get();
    ASSERT_EQ(PSA_OK, gpu::block_scores_cuda(sa, nullptr)) << psa_last_error_message();
    cudaEventRecord(ev[s++], nullptr);
    gpu::LevelArgs la;
    la.scores = scores.get();
    la.dims.batch = 1;
    la.dims.heads_q = H;
    la.dims.heads_kv = H;
    la.dims.mq = mq;
    la.dims.nk = nk;
    la.dims.block_m = bm;
    la.dims.block_n = bn;
    la.tile_n = 32;
    la.dims.len_q = L;
    la.dims.len_k = L;
    const double ratio[5] = {0.05, 0.1, 0.15, 0.25, 1.0};
    std::copy(ratio, ratio + 5, la.ratio_end);
    la.levels = levels.get();
    ASSERT_EQ(PSA_OK, gpu::build_levels_cuda(la, nullptr)) << psa_last_error_message();
    cudaEventRecord(ev[s++], nullptr);
    gpu::WorklistArgs wa;
    wa.levels = levels.get();
    wa.rows = H * mq;
    wa.nk = nk;
    wa.blocks = wl.get();
    wa.count = wc.get();
    ASSERT_EQ(PSA_OK, gpu::build_worklist_cuda(wa, nullptr));
    cudaEventRecord(ev[s++], nullptr);
    gpu::AttentionArgs at;
    at.dims.batch = 1;
    at.dims.heads_q = H;
    at.dims.heads_kv = H;
    at.dims.len_q = L;
    at.dims.len_k = L;
    at.dims.head_dim = D;
    at.dims.block_m = bm;
    at.dims.block_n = bn;
    at.scale = 0.0883883f;
    const int64_t bhld[4] = {H * L * D, L * D, D, 1};
    at.q = qr.get();
    at.k = kr.get();
    at.v = vr.get();
    std::copy(bhld, bhld + 4, at.q_stride);
    std::copy(bhld, bhld + 4, at.k_stride);
    std::copy(bhld, bhld + 4, at.v_stride);
    for (int l = 0; l < 3; ++l) {
      at.k_pooled[l] = kp[l].get();
      at.v_pooled[l] = vp[l].get();
    }
    at.wl_blocks = wl.get();
    at.wl_count = wc.get();
    at.out = out.get();
    std::copy(bsnd, bsnd + 4, at.o_stride);
    at.out_rows = src.get();
    ASSERT_EQ(PSA_OK, gpu::attention_cuda(at, nullptr)) << psa_last_error_message();
    cudaEventRecord(ev[s++], nullptr);
    cudaEventSynchronize(ev[s - 1]);
    if (rep == 0) continue;
    for (int i = 0; i < 6; ++i) {
      float m = 0;
      cudaEventElapsedTime(&m, ev[i], ev[i + 1]);
      acc[i] += m / 5;
    }
    float m = 0;
    cudaEventElapsedTime(&m, ev[0], ev[6]);
    acc[6] += m / 5;
  }
  for (int i = 0; i < 7; ++i)
    std::printf("[timing] stages psa_topk 480p: %-13s %7.3f ms (mean of 5)\n", names[i], acc[i]);
  for (auto& e : ev) cudaEventDestroy(e);
}

}  // namespace
}  // namespace psa

// tests/cuda/importance_cuda_test.cpp -- importance stage on the GPU: offsets equal sample_offsets
// exactly; scores match importance_cpu to fp32 rounding (tensor-core dot order) on random and
// video-like inputs, GQA, Lq != Lk, odd L, 2..128 samples per block.
#include "cuda/importance/importance_cuda.h"
#include "cuda_test_util.h"
#include "importance/importance.h"
#include "importance/importance_spec.h"

namespace psa {
namespace {

using test::DevBuf;

struct ScoreCase {
  psa_dtype dt;
  int64_t B, Hq, Hkv, Lq, Lk, D, bm, bn, divisor;
  bool video;
  uint64_t seed;
};

void run_scores(const ScoreCase& c) {
  const int32_t qs = static_cast<int32_t>(c.bm / c.divisor), ks = static_cast<int32_t>(c.bn / c.divisor);
  const int64_t mq = (c.Lq + c.bm - 1) / c.bm, nk = (c.Lk + c.bn - 1) / c.bn;
  test::Tensor16 q = c.video ? test::make_video_like(c.B * c.Hq, c.Lq, c.D, c.dt, 21u)
                             : test::make_random(static_cast<size_t>(c.B * c.Hq * c.Lq * c.D), c.dt, 22u);
  test::Tensor16 k = c.video ? test::make_video_like(c.B * c.Hkv, c.Lk, c.D, c.dt, 23u)
                             : test::make_random(static_cast<size_t>(c.B * c.Hkv * c.Lk * c.D), c.dt, 24u);
  DevBuf<uint16_t> dq(q.bits), dk(k.bits);
  DevBuf<int32_t> qoff(static_cast<size_t>(c.B * c.Hq * qs)), koff(static_cast<size_t>(c.B * c.Hq * ks));
  DevBuf<float> scores(static_cast<size_t>(c.B * c.Hq * mq * nk));
  scores.fill_bytes(0xff);
  gpu::OffsetArgs oa;
  oa.seed = c.seed;
  oa.batch = c.B;
  oa.heads_q = c.Hq;
  oa.block_m = static_cast<int32_t>(c.bm);
  oa.q_count = qs;
  oa.block_n = static_cast<int32_t>(c.bn);
  oa.k_count = ks;
  oa.q_off = qoff.get();
  oa.k_off = koff.get();
  ASSERT_EQ(PSA_OK, gpu::sample_offsets_cuda(oa, nullptr)) << psa_last_error_message();
  gpu::ScoreArgs sa;
  sa.dtype = c.dt;
  sa.q = dq.get();
  sa.k = dk.get();
  sa.batch = c.B;
  sa.heads_q = c.Hq;
  sa.heads_kv = c.Hkv;
  sa.len_q = c.Lq;
  sa.len_k = c.Lk;
  sa.head_dim = c.D;
  sa.block_m = c.bm;
  sa.block_n = c.bn;
  sa.q_off = qoff.get();
  sa.k_off = koff.get();
  sa.q_count = qs;
  sa.k_count = ks;
  sa.scale = 1.0f / std::sqrt(static_cast<float>(c.D));
  sa.scores = scores.get();
  ASSERT_EQ(PSA_OK, gpu::block_scores_cuda(sa, nullptr)) << psa_last_error_message();
  const std::vector<int32_t> gq = qoff.download(), gk = koff.download();
  const std::vector<float> gs = scores.download();

  std::vector<int32_t> scratch(256), hq(static_cast<size_t>(qs)), hk(static_cast<size_t>(ks));
  std::vector<float> ref(static_cast<size_t>(mq * nk));
  int64_t exact = 0, total = 0;
  double max_rel = 0;
  for (int64_t b = 0; b < c.B; ++b)
    for (int64_t h = 0; h < c.Hq; ++h) {
      const int64_t bh = b * c.Hq + h;
      sample_offsets(c.seed, b, h, kSampleQuery, static_cast<int32_t>(c.bm), qs, scratch.data(), hq.data());
      sample_offsets(c.seed, b, h, kSampleKey, static_cast<int32_t>(c.bn), ks, scratch.data(), hk.data());
      for (int32_t t = 0; t < qs; ++t) ASSERT_EQ(hq[t], gq[bh * qs + t]) << "q offset " << t << " of (b,h)=" << bh;
      for (int32_t t = 0; t < ks; ++t) ASSERT_EQ(hk[t], gk[bh * ks + t]) << "k offset " << t << " of (b,h)=" << bh;
      const int64_t hkv = h / (c.Hq / c.Hkv);
      importance_cpu(q.f.data() + bh * c.Lq * c.D, c.Lq, k.f.data() + (b * c.Hkv + hkv) * c.Lk * c.D, c.Lk, c.D,
                     c.bm, c.bn, hq.data(), qs, hk.data(), ks, sa.scale, ref.data());
      for (int64_t e = 0; e < mq * nk; ++e) {
        const float g = gs[static_cast<size_t>(bh * mq * nk + e)], r = ref[static_cast<size_t>(e)];
        ++total;
        exact += g == r;
        const double rel = std::fabs(static_cast<double>(g) - r) / std::max(1e-30, static_cast<double>(std::fabs(r)));
        if (!(rel <= max_rel)) max_rel = rel;
      }
    }
  std::printf("[importance] %s D=%lld Lq=%lld Lk=%lld bm=%lld bn=%lld div=%lld %s: %lld/%lld scores "
              "bit-identical, max rel diff %.3g\n",
              c.dt == PSA_DTYPE_F16 ? "f16" : "bf16", static_cast<long long>(c.D),
              static_cast<long long>(c.Lq), static_cast<long long>(c.Lk), static_cast<long long>(c.bm),
              static_cast<long long>(c.bn), static_cast<long long>(c.divisor), c.video ? "video" : "random",
              static_cast<long long>(exact), static_cast<long long>(total), max_rel);
  EXPECT_LE(max_rel, 2e-4);
}

TEST(CudaImportance, OffsetsAndScoresMatchCpu) {
  PSA_REQUIRE_GPU();
  run_scores({PSA_DTYPE_BF16, 2, 4, 2, 1000, 1000, 64, 128, 64, 4, false, 0});
  run_scores({PSA_DTYPE_BF16, 1, 3, 1, 777, 901, 128, 128, 32, 4, true, 5});    // MQA, Lq != Lk, odd
  run_scores({PSA_DTYPE_F16, 1, 2, 2, 300, 1500, 128, 64, 128, 4, false, 9});
  run_scores({PSA_DTYPE_BF16, 1, 2, 2, 513, 513, 64, 128, 128, 1, true, 3});     // 128 key samples per block
  run_scores({PSA_DTYPE_F16, 2, 2, 1, 640, 600, 64, 64, 32, 16, false, 77});     // 2 key samples
}

}  // namespace
}  // namespace psa

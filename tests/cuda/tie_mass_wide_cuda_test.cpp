// Tie masses of the CUDA score kernels on rows of more than 2048 key blocks, against the CPU
// reference bit for bit. The GEMM path's finish marks a lane's P == 1 blocks in a 64-bit mask
// (bit k % 64 for its block lane + 32 k), so past 64 groups of 32 blocks the bits alias and the
// tie pass recomputes P for the aliased groups; the shorter rows of tie_rank_cuda_test.cpp never
// reach that branch. Inputs are integers in [-1, 1], so the logits are exact and rows tie often;
// 32 query blocks against 68,000 keys keep the CPU reference to a few seconds.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "cuda/importance/importance_cuda.h"
#include "cuda/importance/score_scratch.h"
#include "importance/importance.h"
#include "importance/importance_spec.h"
#include "psa.h"
#include "cuda_test_util.h"

namespace psa {
namespace {

using test::DevBuf;

// [n] integers in [-1, 1] as bf16 bits (exact: the top half of the fp32 bits) and their values.
test::Tensor16 small_ints(size_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  test::Tensor16 t;
  t.bits.resize(n);
  t.f.resize(n);
  for (size_t i = 0; i < n; ++i) {
    t.f[i] = static_cast<float>(static_cast<int>(gen() % 3) - 1);
    uint32_t u;
    std::memcpy(&u, &t.f[i], 4);
    t.bits[i] = static_cast<uint16_t>(u >> 16);
  }
  return t;
}

TEST(CudaTieRank, ScoreKernelsGiveTheCpuTieMassesOnLongRows) {
  PSA_REQUIRE_GPU();
  // 68,000 keys at block_n 32: 2125 key blocks per row = 67 groups of 32, so groups 64..66
  // share mask bits with groups 0..2.
  const int64_t H = 1, Lq = 4096, L = 68000, D = 64, bm = 128, bn = 32;
  const int64_t mq = (Lq + bm - 1) / bm, nk = (L + bn - 1) / bn;
  ASSERT_GT(nk, 64 * 32);
  const int32_t qs = 4, ks = 8;
  const uint64_t seed = 7;
  const test::Tensor16 q = small_ints(static_cast<size_t>(H * Lq * D), 21u);
  const test::Tensor16 k = small_ints(static_cast<size_t>(H * L * D), 22u);
  DevBuf<uint16_t> dq(q.bits.size()), dk(k.bits.size());
  dq.upload(q.bits);
  dk.upload(k.bits);
  DevBuf<int32_t> qoff(static_cast<size_t>(H * qs)), koff(static_cast<size_t>(H * ks));
  gpu::OffsetArgs oa;
  oa.seed = seed;
  oa.dims.batch = 1;
  oa.dims.heads_q = H;
  oa.dims.block_m = static_cast<int32_t>(bm);
  oa.q_count = qs;
  oa.dims.block_n = static_cast<int32_t>(bn);
  oa.k_count = ks;
  oa.q_off = qoff.get();
  oa.k_off = koff.get();
  ASSERT_EQ(PSA_OK, gpu::sample_offsets_cuda(oa, nullptr));
  std::vector<float> want(static_cast<size_t>(H * mq * nk)), want_s(want.size());
  std::vector<int32_t> scratch(256), hq(qs), hk(ks);
  for (int64_t h = 0; h < H; ++h) {
    sample_offsets(seed, 0, h, kSampleQuery, static_cast<int32_t>(bm), qs, scratch.data(), hq.data());
    sample_offsets(seed, 0, h, kSampleKey, static_cast<int32_t>(bn), ks, scratch.data(), hk.data());
    importance_cpu(q.f.data() + h * Lq * D, Lq, k.f.data() + h * L * D, L, D, bm, bn, hq.data(), qs, hk.data(), ks,
                   0.125f, want_s.data() + h * mq * nk, want.data() + h * mq * nk);
  }
  // Ties in the aliased groups (blocks 2048.. and 0..2047 with the same group bit) must occur.
  int64_t tied = 0, tied_far = 0;
  for (int64_t r = 0; r < H * mq; ++r)
    for (int64_t j = 0; j < nk; ++j)
      if (want[static_cast<size_t>(r * nk + j)] != 0.0f) {
        ++tied;
        tied_far += j >= 64 * 32;
      }
  EXPECT_GT(tied, H * mq);
  EXPECT_GT(tied_far, 0);
  int64_t slots = 0;
  ASSERT_EQ(PSA_OK, gpu::score_scratch_slots(&slots));
  const uint64_t bytes = gpu::score_scratch_bytes(H, mq, nk, qs, ks, slots);
  ASSERT_GT(bytes, 0u);
  DevBuf<unsigned char> scr(bytes);
  DevBuf<float> ds(want.size()), dt(want.size());
  struct Path {
    const char* name;
    bool scratch;
    gpu::ScoreKernel kernel;
    int finish_overlap;  // sm90: -1 auto, 0 the consumers finish, 1 the finisher warps do
  };
  const Path paths[] = {{"per-block", false, gpu::ScoreKernel::kAuto, -1},
                        {"sm80", true, gpu::ScoreKernel::kSm80, -1},
                        {"sm90 consumers", true, gpu::ScoreKernel::kSm90, 0},
                        {"sm90 finisher warps", true, gpu::ScoreKernel::kSm90, 1}};
  for (const Path& path : paths) {
    if (path.kernel == gpu::ScoreKernel::kSm90 && !gpu::score_sm90_available()) continue;
    gpu::ScoreArgs sa;
    sa.q = dq.get();
    sa.k = dk.get();
    sa.dims.batch = 1;
    sa.dims.heads_q = sa.dims.heads_kv = H;
    sa.dims.len_q = Lq;
    sa.dims.len_k = L;
    sa.dims.head_dim = D;
    sa.dims.block_m = bm;
    sa.dims.block_n = bn;
    sa.q_off = qoff.get();
    sa.k_off = koff.get();
    sa.q_count = qs;
    sa.k_count = ks;
    sa.scale = 0.125f;
    sa.scores = ds.get();
    sa.ties = dt.get();
    sa.scratch = path.scratch ? scr.get() : nullptr;
    sa.scratch_bytes = path.scratch ? bytes : 0;
    sa.kernel = path.kernel;
    sa.finish_overlap = path.finish_overlap;
    PSA_CUDA_OK(cudaMemset(dt.get(), 0x7f, want.size() * 4));
    ASSERT_EQ(PSA_OK, gpu::block_scores_cuda(sa, nullptr)) << path.name << ": " << psa_last_error_message();
    const std::vector<float> got = dt.download();
    int64_t differ = 0, differ_far = 0;
    for (size_t e = 0; e < got.size(); ++e)
      if (std::memcmp(&got[e], &want[e], 4) != 0) {
        ++differ;
        differ_far += static_cast<int64_t>(e % static_cast<size_t>(nk)) >= 64 * 32;
      }
    EXPECT_EQ(0, differ) << path.name << " (" << tied << " tie masses, " << tied_far << " past block 2047; "
                         << differ_far << " of the differences there)";
    // Scores: the GPU's row sum has its own fixed order (the CPU's may differ in the last bit),
    // so they are compared to a rounding of the division, the tie masses above exactly.
    const std::vector<float> sc = ds.download();
    int64_t far_scores = 0;
    for (size_t e = 0; e < sc.size(); ++e) far_scores += std::fabs(sc[e] - want_s[e]) > 1e-6f * want_s[e] + 1e-12f;
    EXPECT_EQ(0, far_scores) << path.name;
  }
}

}  // namespace
}  // namespace psa

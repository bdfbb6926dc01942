// tests/cuda/tie_rank_cuda_test.cpp -- the tie-mass rank rule on the CUDA backend (importance_spec.h,
// mask_spec.h): the level builder orders a row's top run of equal scores by tie mass exactly as
// build_mask_row does (where a rank interval ends inside the run: runs under 32 by warp 0 with
// the masses it loaded after the sort, others by one warp or a second radix sort; rows of 1 to
// 2100 key blocks, runs of 1 to 200 and whole rows); every score kernel (per-block, sm80 GEMM,
// sm90 GEMM with and without finisher warps) gives importance_cpu's tie masses bit for bit on
// inputs whose logits are exact, rows of more than 2048 key blocks and rows of more than 64 tied
// blocks included, and with tie_run_min give them for the rows of longer top runs only (zeros
// for the rest); whole forwards on such inputs give the CPU backend's level map. A disabled
// timing test measures the cost of the rule. Skips without a device.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "cuda/importance/importance_cuda.h"
#include "cuda/importance/score_scratch.h"
#include "cuda/mask/mask_cuda.h"
#include "importance/importance.h"
#include "importance/importance_spec.h"
#include "mask/mask.h"
#include "psa.h"
#include "cuda_test_util.h"

namespace psa {
namespace {

using test::DevBuf;

// bf16 bits of a small integer (exact: the top half of its fp32 bits).
uint16_t bf16_of(float v) {
  uint32_t u;
  std::memcpy(&u, &v, 4);
  return static_cast<uint16_t>(u >> 16);
}

// [n] integers in [-vmax, vmax] as bf16 (and their values): every dot over d <= 128 is exact in
// fp32.
test::Tensor16 small_ints(size_t n, uint32_t seed, int vmax = 2) {
  std::mt19937 gen(seed);
  test::Tensor16 t;
  t.bits.resize(n);
  t.f.resize(n);
  for (size_t i = 0; i < n; ++i) {
    t.f[i] = static_cast<float>(static_cast<int>(gen() % static_cast<uint32_t>(2 * vmax + 1)) - vmax);
    t.bits[i] = bf16_of(t.f[i]);
  }
  return t;
}

// Rows whose top run (equal top score) has a chosen length, tie masses on that run only (as
// importance produces them), coarse scores below it (more ties, ranked by key index).
void make_rows(std::mt19937_64& rng, int64_t rows, int64_t nk, std::vector<float>* s, std::vector<float>* t) {
  s->assign(static_cast<size_t>(rows * nk), 0.0f);
  t->assign(s->size(), 0.0f);
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t pick = static_cast<int64_t>(rng() % 4);
    const int64_t run = pick == 0 ? 1 + static_cast<int64_t>(rng() % 8)
                        : pick == 1 ? 1 + static_cast<int64_t>(rng() % 32)
                        : pick == 2 ? 1 + static_cast<int64_t>(rng() % std::min<int64_t>(nk, 200))
                                    : static_cast<int64_t>(rng() % (nk + 1));
    float* sr = s->data() + r * nk;
    float* tr = t->data() + r * nk;
    for (int64_t j = 0; j < nk; ++j) sr[j] = static_cast<float>(rng() % 7) * 0.01f;
    for (int64_t m = 0; m < run; ++m) {
      const int64_t j = static_cast<int64_t>(rng() % nk);
      sr[j] = 0.25f;
      tr[j] = rng() % 5 == 0 ? 0.0f : 1.0f + static_cast<float>(rng() % 9) * 0.5f;
    }
  }
}

TEST(CudaTieRank, LevelBuilderRanksTheTopRunByTieMass) {
  PSA_REQUIRE_GPU();
  std::mt19937_64 rng(20261125);
  struct Case {
    int64_t nk, bn;
    bool causal;
  };
  for (const Case c : {Case{20, 128, false}, Case{100, 64, false}, Case{139, 128, true}, Case{600, 32, false},
                       Case{2100, 32, true}}) {
    for (psa_mask_mode mode : {PSA_MASK_MODE_TOPK, PSA_MASK_MODE_THRESHOLDBOUND}) {
      const int64_t heads = 2, bm = 128, L = c.nk * c.bn - 5, mq = (L + bm - 1) / bm;
      std::vector<float> s, t;
      make_rows(rng, heads * mq, c.nk, &s, &t);
      DevBuf<float> ds(s.size()), dt(t.size());
      DevBuf<int8_t> dl(s.size());
      ds.upload(s);
      dt.upload(t);
      gpu::LevelArgs la;
      la.scores = ds.get();
      la.ties = dt.get();
      la.dims.batch = 1;
      la.dims.heads_q = la.dims.heads_kv = heads;
      la.dims.mq = mq;
      la.dims.nk = c.nk;
      la.dims.block_m = bm;
      la.dims.block_n = c.bn;
      la.tile_n = 32;
      la.dims.len_q = la.dims.len_k = L;
      la.mode = mode;
      if (mode == PSA_MASK_MODE_THRESHOLDBOUND) {
        const double tb[5] = {0.4, 0.5, 0.6, 0.8, 1.0};
        std::copy(tb, tb + 5, la.ratio_end);
      }
      la.causal = c.causal;
      la.levels = dl.get();
      ASSERT_EQ(PSA_OK, gpu::build_levels_cuda(la, nullptr)) << psa_last_error_message();
      const std::vector<int8_t> got = dl.download();
      // The CPU mask stage on the same scores and tie masses.
      MaskRowParams rp;
      rp.mode = mode;
      rp.block_n = c.bn;
      rp.tile_n = 32;
      std::copy(la.ratio_end, la.ratio_end + 5, rp.ratio_end);
      MaskPostParams post;
      post.block_m = bm;
      post.block_n = c.bn;
      post.lq = post.lk = L;
      post.causal = c.causal;
      std::vector<int8_t> want(s.size(), 0);
      std::vector<int32_t> order(static_cast<size_t>(c.nk));
      for (int64_t h = 0; h < heads; ++h) {
        int8_t* lv = want.data() + h * mq * c.nk;
        for (int64_t i = 0; i < mq; ++i) {
          const int64_t n = c.causal ? causal_visible_blocks(i, bm, c.bn, L, L) : c.nk;
          const size_t at = static_cast<size_t>((h * mq + i) * c.nk);
          if (n > 0) build_mask_row(s.data() + at, n, rp, lv + i * c.nk, order.data(), nullptr, t.data() + at);
        }
        postprocess_levels(lv, mq, c.nk, post);
      }
      EXPECT_EQ(want, got) << "nk " << c.nk << " mode " << mode;
      // And the rule mattered: the index-only map differs.
      la.ties = nullptr;
      ASSERT_EQ(PSA_OK, gpu::build_levels_cuda(la, nullptr));
      EXPECT_NE(got, dl.download()) << "nk " << c.nk << " mode " << mode;
    }
  }
}

TEST(CudaTieRank, ScoreKernelsGiveTheCpuTieMasses) {
  PSA_REQUIRE_GPU();
  struct Case {
    int64_t H, Lq, Lk, D, bn;
    int32_t qs, ks;
    int vmax;  // inputs are integers in [-vmax, vmax]
    uint32_t q_seed, k_seed;
    uint64_t seed;  // sampled offsets
  };
  // The finishers list a row's tied blocks in shared memory, up to 64; a row with more is found
  // again from the scratch. The fourth case has rows of 2125 key blocks (68,000 keys at block_n
  // 32; integers in [-1, 1] make such rows tie often; 32 query blocks keep the CPU reference to a
  // few seconds); the last has all-zero inputs, so every block of every row ties (256 per row).
  for (const Case c : {Case{2, 3000, 3000, 64, 64, 32, 16, 2, 11, 12, 99},
                       Case{2, 2500, 2500, 128, 128, 32, 32, 2, 11, 12, 99},
                       Case{1, 4000, 4000, 128, 32, 32, 8, 2, 11, 12, 99},
                       Case{1, 4096, 68000, 64, 32, 4, 8, 1, 21, 22, 7},
                       Case{2, 1000, 8192, 128, 32, 32, 8, 0, 31, 32, 5}}) {
    const int64_t bm = 128, mq = (c.Lq + bm - 1) / bm, nk = (c.Lk + c.bn - 1) / c.bn;
    const int32_t qs = c.qs, ks = c.ks;
    const test::Tensor16 q = small_ints(static_cast<size_t>(c.H * c.Lq * c.D), c.q_seed, c.vmax);
    const test::Tensor16 k = small_ints(static_cast<size_t>(c.H * c.Lk * c.D), c.k_seed, c.vmax);
    DevBuf<uint16_t> dq(q.bits.size()), dk(k.bits.size());
    dq.upload(q.bits);
    dk.upload(k.bits);
    DevBuf<int32_t> qoff(static_cast<size_t>(c.H * qs)), koff(static_cast<size_t>(c.H * ks));
    gpu::OffsetArgs oa;
    oa.seed = c.seed;
    oa.dims.batch = 1;
    oa.dims.heads_q = c.H;
    oa.dims.block_m = static_cast<int32_t>(bm);
    oa.q_count = qs;
    oa.dims.block_n = static_cast<int32_t>(c.bn);
    oa.k_count = ks;
    oa.q_off = qoff.get();
    oa.k_off = koff.get();
    ASSERT_EQ(PSA_OK, gpu::sample_offsets_cuda(oa, nullptr));
    // CPU reference.
    std::vector<float> want(static_cast<size_t>(c.H * mq * nk)), want_s(want.size());
    std::vector<int32_t> scratch(256), hq(qs), hk(ks);
    for (int64_t h = 0; h < c.H; ++h) {
      sample_offsets(c.seed, 0, h, kSampleQuery, static_cast<int32_t>(bm), qs, scratch.data(), hq.data());
      sample_offsets(c.seed, 0, h, kSampleKey, static_cast<int32_t>(c.bn), ks, scratch.data(), hk.data());
      importance_cpu(q.f.data() + h * c.Lq * c.D, c.Lq, k.f.data() + h * c.Lk * c.D, c.Lk, c.D, bm, c.bn, hq.data(),
                     qs, hk.data(), ks, 0.125f, want_s.data() + h * mq * nk, want.data() + h * mq * nk);
    }
    // More than one top block per row on average; the rows of more than 64 (the finishers'
    // list capacity) counted.
    int64_t tied = 0, rows_over = 0;
    for (int64_t r = 0; r < c.H * mq; ++r) {
      const int64_t n = std::count_if(want.begin() + r * nk, want.begin() + (r + 1) * nk,
                                      [](float v) { return v != 0.0f; });
      tied += n;
      rows_over += n > 64;
    }
    EXPECT_GT(tied, mq * c.H);
    if (c.vmax == 0) EXPECT_EQ(c.H * mq, rows_over);
    int64_t slots = 0;
    ASSERT_EQ(PSA_OK, gpu::score_scratch_slots(&slots));
    const uint64_t bytes = gpu::score_scratch_bytes(c.H, mq, nk, qs, ks, slots);
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
      sa.dims.heads_q = sa.dims.heads_kv = c.H;
      sa.dims.len_q = c.Lq;
      sa.dims.len_k = c.Lk;
      sa.dims.head_dim = c.D;
      sa.dims.block_m = bm;
      sa.dims.block_n = c.bn;
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
      int64_t differ = 0;
      for (size_t e = 0; e < got.size(); ++e) differ += std::memcmp(&got[e], &want[e], 4) != 0;
      EXPECT_EQ(0, differ) << path.name << " D " << c.D << " bn " << c.bn << " nk " << nk << " (" << tied
                           << " tie masses, " << rows_over << " rows of more than 64)";
      // The blocks with a tie mass have the row's top score. Against the CPU: the GPU's row sum
      // has its own fixed order (the CPU's may differ in the last bit), so the scores are
      // compared to a rounding of the division, the tie masses above exactly.
      const std::vector<float> sc = ds.download();
      int64_t far_scores = 0;
      for (int64_t r = 0; r < c.H * mq; ++r) {
        const float top = *std::max_element(sc.begin() + r * nk, sc.begin() + (r + 1) * nk);
        for (int64_t j = 0; j < nk; ++j) {
          const size_t e = static_cast<size_t>(r * nk + j);
          if (got[e] != 0.0f) EXPECT_EQ(top, sc[e]);
          far_scores += std::fabs(sc[e] - want_s[e]) > 1e-6f * want_s[e] + 1e-12f;
        }
      }
      EXPECT_EQ(0, far_scores) << path.name << " D " << c.D << " bn " << c.bn << " nk " << nk;
      if (!path.scratch) continue;  // tie_run_min: the GEMM paths
      // With tie_run_min = the median top-run length (blocks at the row's top score), the rows
      // of longer runs get the CPU's tie masses and the others zeros.
      std::vector<int64_t> runs(static_cast<size_t>(c.H * mq));
      for (int64_t r = 0; r < c.H * mq; ++r) {
        const float top = *std::max_element(sc.begin() + r * nk, sc.begin() + (r + 1) * nk);
        runs[static_cast<size_t>(r)] = std::count(sc.begin() + r * nk, sc.begin() + (r + 1) * nk, top);
      }
      std::vector<int64_t> sorted_runs = runs;
      std::nth_element(sorted_runs.begin(), sorted_runs.begin() + sorted_runs.size() / 2, sorted_runs.end());
      const int64_t median = sorted_runs[sorted_runs.size() / 2];
      sa.tie_run_min = static_cast<int32_t>(median);
      PSA_CUDA_OK(cudaMemset(dt.get(), 0x7f, want.size() * 4));
      ASSERT_EQ(PSA_OK, gpu::block_scores_cuda(sa, nullptr)) << path.name << ": " << psa_last_error_message();
      sa.tie_run_min = 0;
      const std::vector<float> got_min = dt.download();
      int64_t kept = 0, zeroed = 0, wrong = 0;
      for (int64_t r = 0; r < c.H * mq; ++r) {
        const bool keep = runs[static_cast<size_t>(r)] > median;
        (keep ? kept : zeroed) += 1;
        for (int64_t j = 0; j < nk; ++j) {
          const size_t e = static_cast<size_t>(r * nk + j);
          const float expect = keep ? want[e] : 0.0f;
          wrong += std::memcmp(&got_min[e], &expect, 4) != 0;
        }
      }
      EXPECT_EQ(0, wrong) << path.name << " tie_run_min " << median << ": " << kept << " rows kept, " << zeroed
                          << " zeroed";
      EXPECT_GT(zeroed, 0) << path.name;
      if (c.vmax > 0) EXPECT_GT(kept, 0) << path.name << " tie_run_min " << median;
    }
  }
}

// Whole forwards of both backends on inputs with exact logits: the same level map.
TEST(CudaTieRank, ForwardLevelMapEqualsCpuBackend) {
  PSA_REQUIRE_GPU();
  const int64_t B = 1, H = 2, D = 64, t = 4, h = 16, w = 24, L = t * h * w;
  const test::Tensor16 q = small_ints(static_cast<size_t>(B * H * L * D), 21u);
  const test::Tensor16 k = small_ints(static_cast<size_t>(B * H * L * D), 22u);
  const test::Tensor16 v = test::make_random(static_cast<size_t>(B * H * L * D), PSA_DTYPE_BF16, 23u);
  psa_tensor_desc desc{};
  desc.struct_size = sizeof desc;
  psa_tensor_desc_init(&desc, PSA_LAYOUT_BNSD, PSA_DTYPE_BF16, B, H, L, D);
  // topk with the default interval ends, thresholdbound, and topk with wide ends: at block_n
  // 32 (48 key blocks) the first end, 19, is at least half the 32 sampled rows, so the backend
  // passes it to the score kernel as tie_run_min (the rows of shorter top runs get no tie
  // masses) and the level maps must still agree.
  for (int variant = 0; variant < 3; ++variant) {
    const psa_mask_mode mode = variant == 1 ? PSA_MASK_MODE_THRESHOLDBOUND : PSA_MASK_MODE_TOPK;
    for (int64_t bn : {32, 64, 128}) {
      psa_config* cfg = nullptr;
      ASSERT_EQ(PSA_OK, psa_config_create(&cfg));
      psa_config_set_int(cfg, PSA_PARAM_BLOCK_N, bn);
      psa_config_set_int(cfg, PSA_PARAM_MASK_MODE, mode);
      psa_config_set_int(cfg, PSA_PARAM_USE_REARRANGE, 1);
      psa_config_set_int(cfg, PSA_PARAM_WARMUP_STEPS, 0);
      if (variant > 0) {
        psa_config_set_double(cfg, PSA_PARAM_RATIO_L1, 0.4);
        psa_config_set_double(cfg, PSA_PARAM_RATIO_L2, 0.5);
        psa_config_set_double(cfg, PSA_PARAM_RATIO_L4, 0.6);
        psa_config_set_double(cfg, PSA_PARAM_RATIO_L8, 0.8);
      }
      std::vector<int8_t> maps[2];
      for (int be = 0; be < 2; ++be) {
        const bool cuda = be == 1;
        psa_context* ctx = nullptr;
        ASSERT_EQ(PSA_OK, psa_context_create(cfg, cuda ? PSA_BACKEND_CUDA : PSA_BACKEND_CPU, -1, &ctx));
        ASSERT_EQ(PSA_OK, psa_context_set_video_grid(ctx, t, h, w, 0, PSA_TEXT_LAST));
        uint64_t bytes = 0;
        ASSERT_EQ(PSA_OK, psa_workspace_size(ctx, &desc, &desc, &desc, &desc, &bytes));
        if (cuda) {
          DevBuf<uint16_t> dq(q.bits.size()), dk(k.bits.size()), dv(v.bits.size()), dout(q.bits.size());
          DevBuf<char> ws(bytes);
          dq.upload(q.bits);
          dk.upload(k.bits);
          dv.upload(v.bits);
          ASSERT_EQ(PSA_OK, psa_attention_forward(ctx, &desc, dq.get(), &desc, dk.get(), &desc, dv.get(), &desc,
                                                  dout.get(), nullptr, ws.get(), bytes, nullptr))
              << psa_last_error_message();
        } else {
          std::vector<char> ws(bytes);
          std::vector<uint16_t> out(q.bits.size());
          ASSERT_EQ(PSA_OK, psa_attention_forward(ctx, &desc, q.bits.data(), &desc, k.bits.data(), &desc,
                                                  v.bits.data(), &desc, out.data(), nullptr, ws.data(), bytes,
                                                  nullptr));
        }
        int64_t b = 0, hh = 0, mq = 0, nk = 0;
        ASSERT_EQ(PSA_OK, psa_context_level_map_shape(ctx, &b, &hh, &mq, &nk));
        maps[be].assign(static_cast<size_t>(b * hh * mq * nk), -1);
        ASSERT_EQ(PSA_OK, psa_context_get_level_map(ctx, maps[be].data(), maps[be].size())) << psa_last_error_message();
        psa_context_destroy(ctx);
      }
      int64_t differ = 0;
      for (size_t e = 0; e < maps[0].size(); ++e) differ += maps[0][e] != maps[1][e];
      EXPECT_EQ(0, differ) << "variant " << variant << " bn " << bn << " of " << maps[0].size();
      psa_config_destroy(cfg);
    }
  }
}

// Cost of the rule: score kernels and level builder with and without tie masses, video-like and
// random inputs, standard shapes (prints; run with --gtest_also_run_disabled_tests).
TEST(CudaTieRank, DISABLED_TieMassCost) {
  PSA_REQUIRE_GPU();
  struct Shape {
    const char* name;
    int64_t H, L, D, bn;
  };
  const Shape shapes[] = {{"cogvideox", 48, 17776, 64, 128},
                          {"wan13", 12, 32760, 128, 128},
                          {"wan13/bn32", 12, 32760, 128, 32},
                          {"wan14", 40, 75600, 128, 128},
                          {"cogvideox/bn64", 48, 17776, 64, 64},
                          {"wan13/bn64", 12, 32760, 128, 64},
                          {"wan14/bn64", 40, 75600, 128, 64}};
  using test::median_ms;
  for (const Shape& s : shapes) {
    if (!test::shape_selected("PSA_TIE_COST_SHAPES", s.name)) continue;
    for (int video = 1; video >= 0; --video) {
      const int64_t bm = 128, mq = (s.L + bm - 1) / bm, nk = (s.L + s.bn - 1) / s.bn;
      const int32_t qs = 32, ks = static_cast<int32_t>(s.bn / 4);
      const size_t n = static_cast<size_t>(s.H * s.L * s.D);
      const test::Tensor16 q = video ? test::make_video_like(s.H, s.L, s.D, PSA_DTYPE_BF16, 1u)
                                     : test::make_random(n, PSA_DTYPE_BF16, 1u);
      const test::Tensor16 k = video ? test::make_video_like(s.H, s.L, s.D, PSA_DTYPE_BF16, 2u)
                                     : test::make_random(n, PSA_DTYPE_BF16, 2u);
      DevBuf<uint16_t> dq(n), dk(n);
      dq.upload(q.bits);
      dk.upload(k.bits);
      DevBuf<int32_t> qoff(static_cast<size_t>(s.H * qs)), koff(static_cast<size_t>(s.H * ks));
      gpu::OffsetArgs oa;
      oa.seed = 7;
      oa.dims.batch = 1;
      oa.dims.heads_q = s.H;
      oa.dims.block_m = static_cast<int32_t>(bm);
      oa.q_count = qs;
      oa.dims.block_n = static_cast<int32_t>(s.bn);
      oa.k_count = ks;
      oa.q_off = qoff.get();
      oa.k_off = koff.get();
      ASSERT_EQ(PSA_OK, gpu::sample_offsets_cuda(oa, nullptr));
      int64_t slots = 0;
      ASSERT_EQ(PSA_OK, gpu::score_scratch_slots(&slots));
      const uint64_t bytes = gpu::score_scratch_bytes(s.H, mq, nk, qs, ks, slots);
      DevBuf<unsigned char> scr(bytes);
      DevBuf<float> ds(static_cast<size_t>(s.H * mq * nk)), dt(ds.size());
      DevBuf<int8_t> dl(ds.size());
      gpu::ScoreArgs sa;
      sa.q = dq.get();
      sa.k = dk.get();
      sa.dims.batch = 1;
      sa.dims.heads_q = sa.dims.heads_kv = s.H;
      sa.dims.len_q = sa.dims.len_k = s.L;
      sa.dims.head_dim = s.D;
      sa.dims.block_m = bm;
      sa.dims.block_n = s.bn;
      sa.q_off = qoff.get();
      sa.k_off = koff.get();
      sa.q_count = qs;
      sa.k_count = ks;
      sa.scale = 1.0f / std::sqrt(static_cast<float>(s.D));
      sa.scores = ds.get();
      sa.scratch = scr.get();
      sa.scratch_bytes = bytes;
      gpu::LevelArgs la;
      la.scores = ds.get();
      la.dims.batch = 1;
      la.dims.heads_q = la.dims.heads_kv = s.H;
      la.dims.mq = mq;
      la.dims.nk = nk;
      la.dims.block_m = bm;
      la.dims.block_n = s.bn;
      la.tile_n = 32;
      la.dims.len_q = la.dims.len_k = s.L;
      la.levels = dl.get();
      const int reps = s.H * s.L > 1000000 ? 5 : 9;
      float imp[2], lev[2][2];
      // Importance without and with tie masses, samples interleaved (3 * reps pairs) so that
      // clock drift over the run hits both alike: at Wan2.1-14B two consecutive blocks of 5
      // samples gave +10.3% in a run whose interleaved samples gave +1.1% to +2.2%.
      {
        std::vector<float> ms[2];
        for (int rep = 0; rep < 3 * reps; ++rep)
          for (int with = 0; with < 2; ++with) {
            sa.ties = with ? dt.get() : nullptr;
            ms[with].push_back(median_ms([&] { gpu::block_scores_cuda(sa, nullptr); }, 1));
          }
        for (int with = 0; with < 2; ++with) {
          std::sort(ms[with].begin(), ms[with].end());
          imp[with] = ms[with][ms[with].size() / 2];
        }
      }
      // Mask: the scores and tie masses of the run with tie masses.
      for (int mode = 0; mode < 2; ++mode) {
        la.mode = mode ? PSA_MASK_MODE_THRESHOLDBOUND : PSA_MASK_MODE_TOPK;
        for (int with = 0; with < 2; ++with) {
          la.ties = with ? dt.get() : nullptr;
          lev[mode][with] = median_ms([&] { gpu::build_levels_cuda(la, nullptr); }, reps);
        }
      }
      const std::vector<float> t = dt.download();
      int64_t tied = 0;
      for (float v : t) tied += v != 0.0f;
      std::printf("[tie cost] %-11s %-6s tie blocks/row %.2f | importance %.3f -> %.3f ms (%+.1f%%) | levels topk "
                  "%.3f -> %.3f, thresholdbound %.3f -> %.3f ms | added %.1f%% of importance\n",
                  s.name, video ? "video" : "random", static_cast<double>(tied) / static_cast<double>(s.H * mq),
                  imp[0], imp[1], 100.0 * (imp[1] - imp[0]) / imp[0], lev[0][0], lev[0][1], lev[1][0], lev[1][1],
                  100.0 * ((imp[1] - imp[0]) + std::max(lev[0][1] - lev[0][0], lev[1][1] - lev[1][0])) / imp[0]);
    }
  }
}

}  // namespace
}  // namespace psa

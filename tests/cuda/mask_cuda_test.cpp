// tests/cuda/mask_cuda_test.cpp -- mask stage on the GPU: given the CPU's scores and caps the
// level map is IDENTICAL to build_mask_row + postprocess_levels (all modes, blocks, causal, text,
// sim cap); cap and work list exact; disagreement rate reported with each side's own scores;
// informative timings of the level builder and work list on the standard shapes.
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <limits>
#include <map>
#include <random>

#include "cuda/importance/importance_cuda.h"
#include "cuda/mask/mask_cuda.h"
#include "cuda_test_util.h"
#include "importance/importance.h"
#include "importance/importance_spec.h"
#include "mask/mask.h"
#include "mask/mask_spec.h"

namespace psa {
namespace {

using test::DevBuf;

struct MaskCase {
  psa_mask_mode mode;
  int64_t bm, bn, tn;
  int64_t B, Hq, Hkv, Lq, Lk;
  bool causal;
  psa_text_rule rule;
  bool rows_dense;
  int64_t text_begin, text_end;
  bool sim;
  double ratio[5];
  int quantize;  // > 0: scores rounded to multiples of 1/quantize (many ties)
  bool special;  // rows of negative / signed-zero / subnormal, of NaN / inf, and of all-zero scores
};

// Scores of every (b, h, query block) row: exponential, optionally quantized; with c.special,
// row types cycle: plain; finite with negatives, +-0 and subnormals (non-monotone cumulative
// mass); NaN and +-inf sprinkled (uniform mass); all zeros of both signs (uniform mass, ties).
std::vector<float> make_scores(const MaskCase& c, uint32_t seed) {
  const int64_t mq = (c.Lq + c.bm - 1) / c.bm, nk = (c.Lk + c.bn - 1) / c.bn;
  std::mt19937 gen(seed);
  std::exponential_distribution<float> ed(1.0f);
  std::uniform_int_distribution<int> pick(0, 15);
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  const float finite_odd[] = {-0.0f, 0.0f, -1.5f, -FLT_MIN / 4, FLT_MIN / 8, -3.0f, 40.0f, -0.25f};
  const float nonfinite[] = {nan, -nan, inf, -inf};
  std::vector<float> scores(static_cast<size_t>(c.B * c.Hq * mq * nk));
  for (size_t e = 0; e < scores.size(); ++e) {
    float v = ed(gen);
    if (c.quantize > 0) v = std::floor(v * c.quantize) / c.quantize;
    if (c.special) {
      const int64_t type = static_cast<int64_t>(e / static_cast<size_t>(nk)) % 4;
      const int u = pick(gen);
      if (type == 1 && u < 4) v = finite_odd[pick(gen) % 8];
      if (type == 2 && u < 2) v = nonfinite[pick(gen) % 4];
      if (type == 3) v = u < 8 ? 0.0f : -0.0f;
    }
    scores[e] = v;
  }
  return scores;
}

// Host pipeline of the CPU backend for one (b, h) row set.
std::vector<int8_t> cpu_levels(const MaskCase& c, const std::vector<float>& scores,
                               const std::vector<int8_t>& caps) {
  const int64_t mq = (c.Lq + c.bm - 1) / c.bm, nk = (c.Lk + c.bn - 1) / c.bn;
  Config cfg;
  cfg.mask_mode = c.mode;
  cfg.block_n = c.bn;
  cfg.tile_n = c.tn;
  std::copy(c.ratio, c.ratio + 5, cfg.ratio_end);
  const MaskRowParams rp = mask_row_params(cfg);
  std::vector<int8_t> out(scores.size());
  std::vector<int32_t> order(static_cast<size_t>(nk));
  for (int64_t bh = 0; bh < c.B * c.Hq; ++bh) {
    int8_t* lv = out.data() + bh * mq * nk;
    for (int64_t i = 0; i < mq; ++i) {
      int8_t* row = lv + i * nk;
      const int64_t n = c.causal ? causal_visible_blocks(i, c.bm, c.bn, c.Lq, c.Lk) : nk;
      std::fill(row, row + nk, int8_t{0});
      if (n > 0) build_mask_row(scores.data() + (bh * mq + i) * nk, n, rp, row, order.data(), nullptr);
    }
    MaskPostParams post;
    post.block_m = c.bm;
    post.block_n = c.bn;
    post.lq = c.Lq;
    post.lk = c.Lk;
    post.causal = c.causal;
    post.text_rule = c.rule;
    post.text_rows_dense = c.rows_dense;
    post.text_begin = c.text_begin;
    post.text_end = c.text_end;
    const int64_t b = bh / c.Hq, h = bh % c.Hq;
    post.sim_cap = c.sim ? caps.data() + (b * c.Hkv + h / (c.Hq / c.Hkv)) * nk : nullptr;
    postprocess_levels(lv, mq, nk, post);
  }
  return out;
}

gpu::LevelArgs level_args(const MaskCase& c) {
  gpu::LevelArgs a;
  a.dims.batch = c.B;
  a.dims.heads_q = c.Hq;
  a.dims.heads_kv = c.Hkv;
  a.dims.mq = (c.Lq + c.bm - 1) / c.bm;
  a.dims.nk = (c.Lk + c.bn - 1) / c.bn;
  a.dims.block_m = c.bm;
  a.dims.block_n = c.bn;
  a.tile_n = c.tn;
  a.dims.len_q = c.Lq;
  a.dims.len_k = c.Lk;
  a.mode = c.mode;
  std::copy(c.ratio, c.ratio + 5, a.ratio_end);
  a.causal = c.causal;
  a.text_rule = c.rule;
  a.text_rows_dense = c.rows_dense;
  a.text_begin = c.text_begin;
  a.text_end = c.text_end;
  return a;
}

// Padded fp32 keys of every kv head -> caps via sim_cap_row (the CPU backend's path).
std::vector<int8_t> cpu_caps(const test::Tensor16& k, int64_t heads, int64_t lk, int64_t d, int64_t bn,
                             const double th[3]) {
  const int64_t nk = (lk + bn - 1) / bn;
  std::vector<int8_t> caps(static_cast<size_t>(heads * nk));
  std::vector<float> pad(static_cast<size_t>(nk * bn * d));
  for (int64_t h = 0; h < heads; ++h) {
    for (int64_t t = 0; t < nk * bn; ++t)
      std::copy_n(k.f.data() + (h * lk + std::min(t, lk - 1)) * d, d, pad.data() + t * d);
    sim_cap_row(pad.data(), nk, bn, d, th, caps.data() + h * nk);
  }
  return caps;
}

// sim_cap_cuda's arguments for K [heads][lk][d] of dtype dt, block_n bn (nk from lk), into cap.
gpu::SimCapArgs sim_cap_args(psa_dtype dt, const void* k, int64_t heads, int64_t lk, int64_t d, int64_t bn,
                             const double th[3], int8_t* cap) {
  gpu::SimCapArgs sa;
  sa.dtype = dt;
  sa.k = k;
  sa.heads = heads;
  sa.len_k = lk;
  sa.head_dim = d;
  sa.n_blocks = (lk + bn - 1) / bn;
  sa.block_n = bn;
  std::copy(th, th + 3, sa.threshold);
  sa.cap = cap;
  return sa;
}

void run_mask_case(const MaskCase& c, uint32_t seed) {
  const int64_t mq = (c.Lq + c.bm - 1) / c.bm, nk = (c.Lk + c.bn - 1) / c.bn, d = 64;
  const std::vector<float> scores = make_scores(c, seed);
  const double th[3] = {0.7, 0.65, 0.6};
  test::Tensor16 k = test::make_video_like(c.B * c.Hkv, c.Lk, d, PSA_DTYPE_BF16, seed + 1);
  std::vector<int8_t> caps;
  DevBuf<int8_t> dcap;
  if (c.sim) {
    caps = cpu_caps(k, c.B * c.Hkv, c.Lk, d, c.bn, th);
    DevBuf<uint16_t> dk(k.bits);
    dcap.alloc(caps.size());
    const gpu::SimCapArgs sa = sim_cap_args(PSA_DTYPE_BF16, dk.get(), c.B * c.Hkv, c.Lk, d, c.bn, th, dcap.get());
    ASSERT_EQ(PSA_OK, gpu::sim_cap_cuda(sa, nullptr)) << psa_last_error_message();
    ASSERT_EQ(caps, dcap.download()) << "similarity cap differs from sim_cap_row";
  }
  const std::vector<int8_t> want = cpu_levels(c, scores, caps);
  DevBuf<float> ds(scores);
  DevBuf<int8_t> dl(scores.size());
  dl.fill_bytes(0x7f);
  gpu::LevelArgs a = level_args(c);
  a.scores = ds.get();
  a.cap = c.sim ? dcap.get() : nullptr;
  a.levels = dl.get();
  ASSERT_EQ(PSA_OK, gpu::build_levels_cuda(a, nullptr)) << psa_last_error_message();
  const std::vector<int8_t> got = dl.download();
  int64_t diff = 0;
  for (size_t e = 0; e < got.size(); ++e) diff += got[e] != want[e];
  EXPECT_EQ(0, diff) << "mode=" << c.mode << " bn=" << c.bn << " tn=" << c.tn << " causal=" << c.causal
                     << " rule=" << c.rule << " sim=" << c.sim << " nk=" << nk << " special=" << c.special;

  // Work list: exact compaction and level counts.
  DevBuf<int32_t> wl(got.size()), wc(static_cast<size_t>(c.B * c.Hq * mq * 4));
  DevBuf<unsigned long long> stats(std::vector<unsigned long long>(5, 0));
  // The kernel writes only the first (non-skipped) entries of each row, the ones the attention
  // kernel reads; the rest is poisoned here so that the download reads defined memory and a
  // stray write past a row's count shows up.
  wl.fill_bytes(0xff);
  gpu::WorklistArgs wa;
  wa.levels = dl.get();
  wa.rows = c.B * c.Hq * mq;
  wa.nk = nk;
  wa.blocks = wl.get();
  wa.count = wc.get();
  wa.stats = stats.get();
  ASSERT_EQ(PSA_OK, gpu::build_worklist_cuda(wa, nullptr)) << psa_last_error_message();
  const std::vector<int32_t> gw = wl.download(), gc = wc.download();
  const std::vector<unsigned long long> gst = stats.download();
  unsigned long long want_stats[5] = {0, 0, 0, 0, 0};
  for (int64_t r = 0; r < wa.rows; ++r) {
    int64_t pos = 0;
    for (int li = 0; li < 4; ++li) {
      int64_t cnt = 0;
      for (int64_t j = 0; j < nk; ++j)
        if (want[static_cast<size_t>(r * nk + j)] == (1 << li)) {
          ASSERT_EQ(j, gw[static_cast<size_t>(r * nk + pos + cnt)]) << "row " << r << " level " << (1 << li);
          ++cnt;
        }
      ASSERT_EQ(cnt, gc[static_cast<size_t>(r * 4 + li)]);
      want_stats[li] += static_cast<unsigned long long>(cnt);
      pos += cnt;
    }
    want_stats[4] += static_cast<unsigned long long>(nk - pos);
    for (int64_t j = pos; j < nk; ++j)
      ASSERT_EQ(-1, gw[static_cast<size_t>(r * nk + j)]) << "row " << r << ": written past its count " << pos;
  }
  for (int s = 0; s < 5; ++s) EXPECT_EQ(want_stats[s], gst[s]) << "slot " << s;
}

TEST(CudaMask, LevelsIdenticalGivenCpuScores) {
  PSA_REQUIRE_GPU();
  const double balanced[5] = {0.4, 0.5, 0.6, 0.8, 1.0};
  const double topk[5] = {0.1, 0.15, 0.15, 0.35, 1.0};
  const double partial[5] = {0.05, 0.1, 0.15, 0.25, 0.9};
  const int64_t bt[5][2] = {{128, 32}, {64, 32}, {32, 32}, {128, 64}, {128, 16}};
  int cases = 0;
  uint32_t seed = 100;
  for (psa_mask_mode mode : {PSA_MASK_MODE_TOPK, PSA_MASK_MODE_THRESHOLDBOUND})
    for (const auto& p : bt)
      for (bool causal : {false, true})
        for (int text = 0; text < 4; ++text) {
          MaskCase c{};
          c.mode = mode;
          c.bm = text == 3 ? 64 : 128;
          c.bn = p[0];
          c.tn = p[1];
          c.B = 2;
          c.Hq = 2;
          c.Hkv = text == 2 ? 1 : 2;
          c.Lk = 40 * c.bn + 17;
          c.Lq = causal && text == 1 ? c.Lk - 300 : c.Lk;
          c.causal = causal;
          c.rule = text == 2 ? PSA_TEXT_RULE_REFERENCE_SUFFIX : PSA_TEXT_RULE_SPAN;
          c.rows_dense = text == 3;
          c.text_begin = text == 0 ? 0 : c.Lk - 150;
          c.text_end = text == 0 ? 0 : c.Lk;
          c.sim = text >= 2 && !causal;
          const double* r = mode == PSA_MASK_MODE_TOPK ? (text == 1 ? partial : topk) : balanced;
          std::copy(r, r + 5, c.ratio);
          c.quantize = (cases % 3 == 0) ? 16 : 0;
          run_mask_case(c, seed++);
          ++cases;
          if (HasFatalFailure()) return;
        }
  std::printf("[mask] %d configurations: GPU level maps identical to the CPU's\n", cases);
}

TEST(CudaMask, LargeRowsAndTies) {
  PSA_REQUIRE_GPU();
  MaskCase c{};
  c.mode = PSA_MASK_MODE_THRESHOLDBOUND;
  c.bm = 128;
  c.bn = 32;
  c.tn = 32;
  c.B = 1;
  c.Hq = 2;
  c.Hkv = 2;
  c.Lk = 32 * 3000 + 5;  // 3001 key blocks: the sort spans many threads' strides
  c.Lq = 128 * 3;
  c.rule = PSA_TEXT_RULE_SPAN;
  const double r[5] = {0.5, 0.6, 0.6, 0.8, 1.0};
  std::copy(r, r + 5, c.ratio);
  c.quantize = 8;
  run_mask_case(c, 7);
  c.mode = PSA_MASK_MODE_TOPK;
  c.quantize = 0;
  c.causal = true;
  c.Lq = c.Lk;
  c.Lk = 32 * 700;
  c.Lq = c.Lk;
  run_mask_case(c, 8);
}

// rank_key (the GPU's sort key) against ranks_before on the values where float order is
// subtle: NaNs of both signs, infinities, signed zeros, subnormals, extremes. Host only.
TEST(CudaMask, RankKeyOrdersLikeRanksBefore) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  const float v[] = {nan, -nan, std::numeric_limits<float>::signaling_NaN(), inf, -inf, FLT_MAX, -FLT_MAX,
                     1.0f, -1.0f, 1.0f + FLT_EPSILON, FLT_MIN, -FLT_MIN, FLT_MIN / 2, -FLT_MIN / 2,
                     std::numeric_limits<float>::denorm_min(), -std::numeric_limits<float>::denorm_min(),
                     0.0f, -0.0f, 0.5f, -0.5f};
  const int n = static_cast<int>(sizeof(v) / sizeof(v[0]));
  for (int a = 0; a < n; ++a)
    for (int b = 0; b < n; ++b)
      for (int64_t ia : {3, 7})
        for (int64_t ib : {3, 7}) {
          if (a != b && ia == ib) continue;  // one index names one block
          const uint32_t ka = rank_key(v[a]), kb = rank_key(v[b]);
          EXPECT_EQ(ranks_before(v[a], ia, v[b], ib), ka < kb || (ka == kb && ia < ib))
              << v[a] << " (" << ia << ") vs " << v[b] << " (" << ib << ")";
        }
}

// Every level tile of the builder (64x3 up to 512x32 candidates), both modes, rows of signed
// zeros, negatives, subnormals, NaN and inf, causal and not.
TEST(CudaMask, EveryTileWithSpecialScores) {
  PSA_REQUIRE_GPU();
  const int64_t nks[] = {41, 150, 200, 600, 1000, 2000, 4000, 8000, 12000};
  uint32_t seed = 900;
  for (int64_t nk : nks)
    for (psa_mask_mode mode : {PSA_MASK_MODE_TOPK, PSA_MASK_MODE_THRESHOLDBOUND}) {
      MaskCase c{};
      c.mode = mode;
      c.bm = 128;
      c.bn = 32;
      c.tn = 32;
      c.B = 1;
      c.Hq = 2;
      c.Hkv = 1;
      c.Lk = nk * c.bn - 5;
      c.causal = nk <= 1000 && mode == PSA_MASK_MODE_TOPK;
      c.Lq = c.causal ? c.Lk : 128 * 4;
      c.rule = PSA_TEXT_RULE_SPAN;
      const double r[5] = {0.1, 0.2, 0.3, 0.6, 0.9};
      const double rb[5] = {0.4, 0.5, 0.6, 0.8, 1.0};
      std::copy(mode == PSA_MASK_MODE_TOPK ? r : rb, (mode == PSA_MASK_MODE_TOPK ? r : rb) + 5, c.ratio);
      c.quantize = nk % 3 == 0 ? 4 : 0;
      c.special = true;
      run_mask_case(c, seed++);
      if (HasFatalFailure()) return;
    }
}

// topk rows built to reach every branch of the selection (levels.cu, select_levels): all keys
// equal; keys differing only in their last bits; both signs, NaN and inf (keys differing in the
// top bit); few distinct values (ends inside runs of equal keys, settled by index); a top run
// of 1 to 100 equal scores with tie masses (split by an end or not; longer than 32 goes to the
// sort); one to 4000 candidates (every tile up to 160 x 8 and two wider ones); ratio ends at 0,
// inside the row and at its end. Against build_mask_row on the same scores and tie masses.
TEST(CudaMask, TopkSelectionEdgeRows) {
  PSA_REQUIRE_GPU();
  std::mt19937 gen(20261129);
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  const double ratio_sets[4][5] = {
      {0.1, 0.15, 0.15, 0.35, 1.0}, {0.0, 0.0, 0.5, 0.5, 0.5}, {0.01, 0.02, 0.03, 0.04, 1.0}, {0.3, 0.6, 0.9, 1.0, 1.0}};
  constexpr int kPatterns = 9;
  // Scores of row pattern `pat` with n candidates; the top run length for pattern 8.
  auto make_row = [&](int pat, int64_t n, int64_t run, float* x) {
    std::uniform_real_distribution<float> ud(0.0f, 1.0f);
    std::uniform_int_distribution<int> pick(0, 7);
    const float odd[] = {nan, -nan, inf, -inf, -0.0f, 0.0f, -2.5f, 3.0f};
    float chain = 0.5f;
    for (int64_t j = 0; j < n; ++j) {
      switch (pat) {
        case 0: x[j] = 0.25f; break;                                          // every key equal
        case 1: x[j] = pick(gen) < 4 ? 0.0f : -0.0f; break;                   // one key (-0 is +0)
        case 2: x[j] = (chain = std::nextafter(chain, 1.0f)); break;          // last bits only
        case 3: x[j] = odd[pick(gen)]; break;                                  // both signs, NaN, inf
        case 4: x[j] = static_cast<float>(pick(gen)) / 8.0f; break;            // eight values
        case 5: x[j] = pick(gen) == 0 ? ud(gen) : 0.125f; break;               // mostly one value
        case 6: x[j] = std::exp(-20.0f * ud(gen)); break;                      // distinct
        case 7: x[j] = pick(gen) < 2 ? -ud(gen) : ud(gen); break;              // both signs
        default: x[j] = j < run ? 1.0f : 0.5f * ud(gen); break;                // top run of `run`
      }
    }
    if (pat == 8) std::shuffle(x, x + n, gen);
  };
  const int64_t nks[] = {1, 2, 5, 41, 150, 280, 400, 600, 1000, 1182, 2000, 4000};
  const int64_t runs[] = {1, 5, 31, 32, 33, 100};
  int rows_checked = 0;
  for (int64_t nk : nks)
    for (const auto& ratio : ratio_sets)
      for (bool with_ties : {false, true}) {
        const int64_t bm = 128, bn = 32, L = nk * bn, mq = static_cast<int64_t>(kPatterns + 5);
        std::vector<float> s(static_cast<size_t>(mq * nk)), t(s.size(), 0.0f);
        for (int64_t i = 0; i < mq; ++i) {
          float* x = s.data() + i * nk;
          const int pat = i < kPatterns ? static_cast<int>(i) : 8;
          const int64_t run = i < kPatterns ? runs[0] : runs[i - kPatterns + 1];
          make_row(pat, nk, std::min(run, nk), x);
          // Tie masses where importance gives them: the blocks of the row's top score (a few
          // equal masses among them, so that the index decides too).
          if (with_ties) {
            int64_t top = 0;
            for (int64_t j = 1; j < nk; ++j)
              if (ranks_before(x[j], j, x[top], top)) top = j;
            std::uniform_int_distribution<int> mass(1, 12);
            for (int64_t j = 0; j < nk; ++j)
              if (rank_key(x[j]) == rank_key(x[top]) && x[j] == x[j]) t[static_cast<size_t>(i * nk + j)] = mass(gen) / 4.0f;
          }
        }
        DevBuf<float> ds(s), dt(t);
        DevBuf<int8_t> dl(s.size());
        dl.fill_bytes(0x7f);
        gpu::LevelArgs la;
        la.scores = ds.get();
        la.ties = with_ties ? dt.get() : nullptr;
        la.dims.batch = 1;
        la.dims.heads_q = la.dims.heads_kv = 1;
        la.dims.mq = mq;
        la.dims.nk = nk;
        la.dims.block_m = bm;
        la.dims.block_n = bn;
        la.tile_n = 32;
        la.dims.len_q = bm * mq;
        la.dims.len_k = L;
        la.mode = PSA_MASK_MODE_TOPK;
        std::copy(ratio, ratio + 5, la.ratio_end);
        la.levels = dl.get();
        ASSERT_EQ(PSA_OK, gpu::build_levels_cuda(la, nullptr)) << psa_last_error_message();
        const std::vector<int8_t> got = dl.download();
        MaskRowParams rp;
        rp.mode = PSA_MASK_MODE_TOPK;
        rp.block_n = bn;
        rp.tile_n = 32;
        std::copy(ratio, ratio + 5, rp.ratio_end);
        std::vector<int8_t> want(s.size(), 0);
        std::vector<int32_t> order(static_cast<size_t>(nk));
        for (int64_t i = 0; i < mq; ++i) {
          const size_t at = static_cast<size_t>(i * nk);
          build_mask_row(s.data() + at, nk, rp, want.data() + at, order.data(), nullptr,
                         with_ties ? t.data() + at : nullptr);
          for (int64_t j = 0; j < nk; ++j)
            ASSERT_EQ(want[at + static_cast<size_t>(j)], got[at + static_cast<size_t>(j)])
                << "nk " << nk << " row " << i << " (pattern " << (i < kPatterns ? i : 8) << ") block " << j
                << " ties " << with_ties << " ratio ends " << ratio[0] << " " << ratio[1] << " " << ratio[2] << " "
                << ratio[3] << " " << ratio[4];
          ++rows_checked;
        }
      }
  std::printf("[mask] %d topk rows: GPU levels identical to build_mask_row\n", rows_checked);
}

// Informative timings of build_levels_cuda and build_worklist_cuda on the standard shapes
// (batch 1, 128-token query blocks; softmax-like rows), checked against the CPU on the way.
// Disabled by default: run with --gtest_also_run_disabled_tests.
TEST(CudaMask, DISABLED_StandardShapeTimings) {
  PSA_REQUIRE_GPU();
  struct Shape {
    const char* name;
    int64_t H, L, bn;
  };
  const Shape shapes[] = {{"wan14", 40, 75600, 128},
                          {"wan14/bn64", 40, 75600, 64},
                          {"wan13", 12, 32760, 128},
                          {"wan13/bn64", 12, 32760, 64},
                          {"wan13/bn32", 12, 32760, 32},
                          {"cogvideox", 48, 17776, 128},
                          {"cogvideox/bn64", 48, 17776, 64}};
  for (const Shape& sh : shapes) {
    if (!test::shape_selected("PSA_MASK_SHAPES", sh.name)) continue;
    for (psa_mask_mode mode : {PSA_MASK_MODE_TOPK, PSA_MASK_MODE_THRESHOLDBOUND}) {
      MaskCase c{};
      c.mode = mode;
      c.bm = 128;
      c.bn = sh.bn;
      c.tn = 32;
      c.B = 1;
      c.Hq = sh.H;
      c.Hkv = sh.H;
      c.Lq = sh.L;
      c.Lk = sh.L;
      c.rule = PSA_TEXT_RULE_SPAN;
      const double r[5] = {0.1, 0.15, 0.15, 0.35, 1.0};
      const double rb[5] = {0.4, 0.5, 0.6, 0.8, 1.0};
      std::copy(mode == PSA_MASK_MODE_TOPK ? r : rb, (mode == PSA_MASK_MODE_TOPK ? r : rb) + 5, c.ratio);
      const int64_t mq = (c.Lq + c.bm - 1) / c.bm, nk = (c.Lk + c.bn - 1) / c.bn;
      std::mt19937 gen(11);
      std::normal_distribution<float> nd(0.0f, 2.0f);
      std::vector<float> scores(static_cast<size_t>(c.Hq * mq * nk));
      for (size_t row = 0; row < scores.size() / static_cast<size_t>(nk); ++row) {
        float* x = scores.data() + row * static_cast<size_t>(nk);
        double sum = 0;
        for (int64_t j = 0; j < nk; ++j) sum += (x[j] = std::exp(nd(gen)));
        for (int64_t j = 0; j < nk; ++j) x[j] = static_cast<float>(x[j] / sum);
      }
      DevBuf<float> ds(scores);
      DevBuf<int8_t> dl(scores.size());
      DevBuf<int32_t> wl(scores.size()), wc(static_cast<size_t>(c.Hq * mq * 4));
      gpu::LevelArgs a = level_args(c);
      a.scores = ds.get();
      a.levels = dl.get();
      gpu::WorklistArgs wa;
      wa.levels = dl.get();
      wa.rows = c.Hq * mq;
      wa.nk = nk;
      wa.blocks = wl.get();
      wa.count = wc.get();
      auto time_ms = [&](auto&& launch) { return test::median_ms(launch, 15, 2); };
      ASSERT_EQ(PSA_OK, gpu::build_levels_cuda(a, nullptr)) << psa_last_error_message();
      const std::vector<int8_t> got = dl.download();
      const float lv_ms = time_ms([&] { gpu::build_levels_cuda(a, nullptr); });
      const float wl_ms = time_ms([&] { gpu::build_worklist_cuda(wa, nullptr); });
      PSA_CUDA_OK(cudaDeviceSynchronize());
      const std::vector<int8_t> want = cpu_levels(c, scores, {});
      int64_t diff = 0;
      for (size_t e = 0; e < got.size(); ++e) diff += got[e] != want[e];
      std::printf("[mask timing] %-10s %-14s %4lld x %5lld x %4lld: levels %7.4f ms, work list %7.4f ms, "
                  "%lld of %zu levels differ from the CPU\n",
                  sh.name, mode == PSA_MASK_MODE_TOPK ? "topk" : "thresholdbound", static_cast<long long>(c.Hq),
                  static_cast<long long>(mq), static_cast<long long>(nk), lv_ms, wl_ms, static_cast<long long>(diff),
                  got.size());
      EXPECT_EQ(0, diff) << sh.name;
    }
  }
}

// More kv heads (B*Hkv) than a y grid dimension holds: every head still gets its own caps.
// Odd heads repeat one key per block (similarity 1, cap 8), even heads are noise (cap 1 mostly).
TEST(CudaMask, SimCapPastGridLimit) {
  PSA_REQUIRE_GPU();
  const int64_t heads = 65536 + 1000, lk = 20, bn = 8, d = 64, nk = (lk + bn - 1) / bn;
  std::mt19937 gen(5);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  test::Tensor16 k;
  k.bits.resize(static_cast<size_t>(heads * lk * d));
  k.f.resize(k.bits.size());
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t t = 0; t < lk; ++t)
      for (int64_t c = 0; c < d; ++c) {
        const size_t i = static_cast<size_t>((h * lk + t) * d + c);
        k.bits[i] = h % 2 == 1 && t % bn != 0 ? k.bits[i - static_cast<size_t>(d)] : float_to_bf16(nd(gen));
        k.f[i] = bf16_to_float(k.bits[i]);
      }
  const double th[3] = {0.7, 0.65, 0.6};
  const std::vector<int8_t> want = cpu_caps(k, heads, lk, d, bn, th);
  DevBuf<uint16_t> dk(k.bits);
  DevBuf<int8_t> dcap(want.size());
  const gpu::SimCapArgs sa = sim_cap_args(PSA_DTYPE_BF16, dk.get(), heads, lk, d, bn, th, dcap.get());
  ASSERT_EQ(PSA_OK, gpu::sim_cap_cuda(sa, nullptr)) << psa_last_error_message();
  const std::vector<int8_t> got = dcap.download();
  int64_t diff = 0, first = -1;
  for (size_t e = 0; e < got.size(); ++e)
    if (got[e] != want[e] && diff++ == 0) first = static_cast<int64_t>(e);
  EXPECT_EQ(0, diff) << "caps differ from sim_cap_row; first at head " << first / nk << ", block " << first % nk;
  EXPECT_EQ(8, want[static_cast<size_t>((heads - 1) * nk)]) << "the test's repeated-key heads should cap at 8";
}

// The CPU's mean pair similarities (block_similarity on the replicate-padded keys) of every
// (head, key block) at levels 2, 4, 8: [heads * nk][3].
std::vector<float> cpu_block_sims(const test::Tensor16& k, int64_t heads, int64_t lk, int64_t d, int64_t bn) {
  const int64_t nk = (lk + bn - 1) / bn;
  std::vector<float> sims(static_cast<size_t>(heads * nk * 3));
  std::vector<float> block(static_cast<size_t>(bn * d));
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t j = 0; j < nk; ++j) {
      for (int64_t u = 0; u < bn; ++u)
        std::copy_n(k.f.data() + (h * lk + std::min(j * bn + u, lk - 1)) * d, d, block.data() + u * d);
      for (int l = 0; l < 3; ++l)
        sims[static_cast<size_t>((h * nk + j) * 3 + l)] = block_similarity(block.data(), bn, d, 2 << l);
    }
  return sims;
}

// sim_cap_cuda against sim_cap_row for every block size and both staging paths (16-byte chunks
// for d % 8 == 0 on aligned K, else element by element: d 36 and 30, and K one element off its
// allocation), 16-byte and 4-byte row reads (d % 4 == 0 or not), f16 and bf16, lengths that are not a multiple of block_n (replicate padding),
// on video-like heads (similarities spread around the thresholds), repeated-key heads (cap 8)
// and noise. The thresholds are the CPU's own means of chosen blocks, so a mean one ulp away
// from the CPU's flips a cap (sim > threshold is strict) and the caps must match bit for bit.
TEST(CudaMask, SimCapMatchesCpuEveryBlockSizeAndPath) {
  PSA_REQUIRE_GPU();
  struct Case {
    int64_t d, bn, lk;
    psa_dtype dt;
    bool offset;  // K starts one element into its buffer (2 bytes: not 16-byte aligned)
  };
  const Case cases[] = {{128, 128, 1000, PSA_DTYPE_BF16, false}, {128, 64, 777, PSA_DTYPE_F16, false},
                        {64, 128, 530, PSA_DTYPE_BF16, false},   {64, 32, 301, PSA_DTYPE_BF16, false},
                        {128, 16, 250, PSA_DTYPE_F16, false},    {64, 8, 99, PSA_DTYPE_BF16, false},
                        {36, 64, 200, PSA_DTYPE_BF16, false},    {30, 32, 150, PSA_DTYPE_F16, false},
                        {128, 128, 1000, PSA_DTYPE_BF16, true},
                        {8, 32, 100, PSA_DTYPE_F16, false}};
  uint32_t seed = 100;
  for (const Case& c : cases) {
    const int64_t heads = 4, nk = (c.lk + c.bn - 1) / c.bn;
    // Heads 0, 1 video-like, head 2 repeated keys within each block, head 3 noise.
    test::Tensor16 k = test::make_video_like(heads, c.lk, c.d, c.dt, ++seed);
    const test::Tensor16 noise = test::make_random(static_cast<size_t>(c.lk * c.d), c.dt, ++seed);
    for (int64_t t = 0; t < c.lk; ++t)
      for (int64_t e = 0; e < c.d; ++e) {
        const size_t rep = static_cast<size_t>((2 * c.lk + t - t % c.bn) * c.d + e);
        const size_t i2 = static_cast<size_t>((2 * c.lk + t) * c.d + e), i3 = static_cast<size_t>((3 * c.lk + t) * c.d + e);
        k.bits[i2] = k.bits[rep];
        k.f[i2] = k.f[rep];
        k.bits[i3] = noise.bits[static_cast<size_t>(t * c.d + e)];
        k.f[i3] = noise.f[static_cast<size_t>(t * c.d + e)];
      }
    const std::vector<float> sims = cpu_block_sims(k, heads, c.lk, c.d, c.bn);
    // Thresholds at the CPU's means of three blocks of the video-like heads (blocks whose mean
    // is -1, without a pair, skipped).
    double th[3] = {0.7, 0.65, 0.6};
    for (int l = 0; l < 3; ++l) {
      const int64_t b = (7 * (l + 1)) % (2 * nk);
      const float v = sims[static_cast<size_t>(b * 3 + l)];
      if (v > -1.0f) th[l] = static_cast<double>(v);
    }
    const std::vector<int8_t> want = cpu_caps(k, heads, c.lk, c.d, c.bn, th);
    std::vector<uint16_t> padded(k.bits.size() + 8);
    std::copy(k.bits.begin(), k.bits.end(), padded.begin() + (c.offset ? 1 : 0));
    DevBuf<uint16_t> dk(padded);
    DevBuf<int8_t> dcap(want.size());
    dcap.fill_bytes(0x7f);
    const gpu::SimCapArgs sa = sim_cap_args(c.dt, dk.get() + (c.offset ? 1 : 0), heads, c.lk, c.d, c.bn, th, dcap.get());
    ASSERT_EQ(PSA_OK, gpu::sim_cap_cuda(sa, nullptr)) << psa_last_error_message();
    const std::vector<int8_t> got = dcap.download();
    int64_t diff = 0, boundary = 0;
    for (size_t e = 0; e < got.size(); ++e) diff += got[e] != want[e];
    for (size_t e = 0; e < sims.size(); ++e) boundary += static_cast<double>(sims[e]) == th[e % 3];
    EXPECT_EQ(0, diff) << "d " << c.d << " bn " << c.bn << " lk " << c.lk << (c.offset ? " (K unaligned)" : "");
    EXPECT_GT(boundary, 0) << "no block sits on a threshold";
    std::map<int, int> hist;
    for (int8_t v : want) ++hist[v];
    EXPECT_GT(hist[8], 0) << "the repeated-key head caps at 8";
    EXPECT_GT(hist[1], 0) << "the noise head caps at 1";
  }
}

// Informative timings of sim_cap_cuda on the standard shapes (K as the forward passes it:
// contiguous [heads][len][d]), checked against sim_cap_row on the way.
TEST(CudaMask, DISABLED_SimCapTimings) {
  PSA_REQUIRE_GPU();
  struct Shape {
    const char* name;
    int64_t H, L, D, bn;
  };
  const Shape shapes[] = {{"wan13", 12, 32760, 128, 128}, {"wan13/bn64", 12, 32760, 128, 64},
                          {"wan13/bn32", 12, 32760, 128, 32}, {"wan14", 40, 75600, 128, 128},
                          {"cogvideox", 48, 17776, 64, 128}};
  for (const Shape& sh : shapes) {
    if (!test::shape_selected("PSA_MASK_SHAPES", sh.name)) continue;
    const int64_t nk = (sh.L + sh.bn - 1) / sh.bn;
    const test::Tensor16 k = test::make_video_like(sh.H, sh.L, sh.D, PSA_DTYPE_BF16, 5u);
    const double th[3] = {0.7, 0.65, 0.6};
    DevBuf<uint16_t> dk(k.bits);
    DevBuf<int8_t> dcap(static_cast<size_t>(sh.H * nk));
    const gpu::SimCapArgs sa = sim_cap_args(PSA_DTYPE_BF16, dk.get(), sh.H, sh.L, sh.D, sh.bn, th, dcap.get());
    ASSERT_EQ(PSA_OK, gpu::sim_cap_cuda(sa, nullptr)) << psa_last_error_message();
    const float ms = test::median_ms([&] { gpu::sim_cap_cuda(sa, nullptr); }, 15, 2);
    const std::vector<int8_t> got = dcap.download();
    const std::vector<int8_t> want = cpu_caps(k, sh.H, sh.L, sh.D, sh.bn, th);
    int64_t diff = 0;
    for (size_t e = 0; e < got.size(); ++e) diff += got[e] != want[e];
    std::printf("[sim cap timing] %-10s %3lld heads x %5lld blocks of %3lld x d%lld: %7.4f ms (%.0f GB/s of K), "
                "%lld of %zu caps differ from the CPU\n",
                sh.name, static_cast<long long>(sh.H), static_cast<long long>(nk), static_cast<long long>(sh.bn),
                static_cast<long long>(sh.D), ms, static_cast<double>(k.bits.size()) * 2 / (ms * 1e6),
                static_cast<long long>(diff), got.size());
    EXPECT_EQ(0, diff) << sh.name;
  }
}

// With each side computing its own scores: the full importance -> mask path.
TEST(CudaMask, DisagreementWithOwnScores) {
  PSA_REQUIRE_GPU();
  const int64_t B = 1, Hq = 4, Hkv = 2, L = 4096 + 77, D = 64, bm = 128, bn = 64;
  const int64_t mq = (L + bm - 1) / bm, nk = (L + bn - 1) / bn;
  const int32_t qs = 32, ks = 16;
  for (psa_mask_mode mode : {PSA_MASK_MODE_TOPK, PSA_MASK_MODE_THRESHOLDBOUND}) {
    test::Tensor16 q = test::make_video_like(B * Hq, L, D, PSA_DTYPE_BF16, 31u);
    test::Tensor16 k = test::make_video_like(B * Hkv, L, D, PSA_DTYPE_BF16, 32u);
    DevBuf<uint16_t> dq(q.bits), dk(k.bits);
    DevBuf<int32_t> qoff(static_cast<size_t>(B * Hq * qs)), koff(static_cast<size_t>(B * Hq * ks));
    DevBuf<float> ds(static_cast<size_t>(B * Hq * mq * nk));
    DevBuf<int8_t> dl(ds.size());
    gpu::OffsetArgs oa;
    oa.seed = 42;
    oa.dims.batch = B;
    oa.dims.heads_q = Hq;
    oa.dims.block_m = bm;
    oa.q_count = qs;
    oa.dims.block_n = bn;
    oa.k_count = ks;
    oa.q_off = qoff.get();
    oa.k_off = koff.get();
    ASSERT_EQ(PSA_OK, gpu::sample_offsets_cuda(oa, nullptr));
    gpu::ScoreArgs sa;
    sa.q = dq.get();
    sa.k = dk.get();
    sa.dims.batch = B;
    sa.dims.heads_q = Hq;
    sa.dims.heads_kv = Hkv;
    sa.dims.len_q = L;
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
    ASSERT_EQ(PSA_OK, gpu::block_scores_cuda(sa, nullptr)) << psa_last_error_message();
    MaskCase c{};
    c.mode = mode;
    c.bm = bm;
    c.bn = bn;
    c.tn = 32;
    c.B = B;
    c.Hq = Hq;
    c.Hkv = Hkv;
    c.Lq = L;
    c.Lk = L;
    const double r[5] = {0.1, 0.15, 0.15, 0.35, 1.0};
    const double rb[5] = {0.4, 0.5, 0.6, 0.8, 1.0};
    std::copy(mode == PSA_MASK_MODE_TOPK ? r : rb, (mode == PSA_MASK_MODE_TOPK ? r : rb) + 5, c.ratio);
    gpu::LevelArgs la = level_args(c);
    la.scores = ds.get();
    la.levels = dl.get();
    ASSERT_EQ(PSA_OK, gpu::build_levels_cuda(la, nullptr)) << psa_last_error_message();
    const std::vector<int8_t> got = dl.download();
    // CPU: its own offsets and scores.
    std::vector<float> scores(ds.size());
    std::vector<int32_t> scratch(256), hq(qs), hk(ks);
    for (int64_t h = 0; h < Hq; ++h) {
      sample_offsets(42, 0, h, kSampleQuery, bm, qs, scratch.data(), hq.data());
      sample_offsets(42, 0, h, kSampleKey, bn, ks, scratch.data(), hk.data());
      importance_cpu(q.f.data() + h * L * D, L, k.f.data() + (h / 2) * L * D, L, D, bm, bn, hq.data(), qs,
                     hk.data(), ks, 0.125f, scores.data() + h * mq * nk);
    }
    const std::vector<int8_t> want = cpu_levels(c, scores, {});
    int64_t diff = 0;
    for (size_t e = 0; e < got.size(); ++e) diff += got[e] != want[e];
    const double rate = static_cast<double>(diff) / static_cast<double>(got.size());
    std::printf("[mask] own scores, %s: %lld of %zu block levels differ (%.4f%%)\n",
                mode == PSA_MASK_MODE_TOPK ? "topk" : "thresholdbound", static_cast<long long>(diff),
                got.size(), 100.0 * rate);
    EXPECT_LE(rate, 0.005);
  }
}

}  // namespace
}  // namespace psa

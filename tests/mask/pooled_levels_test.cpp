// tests/mask/pooled_levels_test.cpp -- mask stage: pooled_levels_possible (mask_spec.h), the
// plan-time set of pooled levels the pool stage writes. Every pooled level that build_mask_row +
// postprocess_levels (mask_head_cpu) gives on random topk configurations and rows is in the set
// (and without causal masking, text or similarity cap the set is exactly what the rows give);
// the benchmarks' pyramid configuration excludes level 4 at the standard shapes; thresholdbound
// and the other routes keep every level. Host only; no CUDA.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "cli/standard_shapes.h"
#include "context/context.h"
#include "mask/mask.h"
#include "mask/mask_spec.h"

namespace {

using psa::kMaskSlots;
using psa::kPooledLevelsAll;

const double kRefDefault[kMaskSlots] = {0.10, 0.15, 0.15, 0.35, 1.0};

std::string set_name(unsigned set) {
  std::string s = "{";
  for (unsigned p : {2u, 4u, 8u})
    if ((set & p) != 0u) s += (s.size() > 1 ? "," : "") + std::to_string(p);
  return s + "}";
}

// Pooled levels present in a level map.
unsigned pooled_in(const std::vector<int8_t>& levels) {
  unsigned set = 0u;
  for (int8_t l : levels)
    if (l == 2 || l == 4 || l == 8) set |= static_cast<unsigned>(l);
  return set;
}

TEST(MaskPooledLevels, TopkRowSetIsTheNonEmptyIntervals) {
  // N = 20, ends .1 .15 .15 .35 1 at bn 64 / tn 32 (A = 1, 1, 2, 4): L1 2, L2 1, L4 0, L8 4.
  EXPECT_EQ(2u | 8u, psa::topk_pooled_levels(20, kRefDefault, 64, 32));
  // N = 10: L1 1, L2 trunc(1.5) - 1 = 0, L4 0, L8 aligned up to 4.
  EXPECT_EQ(8u, psa::topk_pooled_levels(10, kRefDefault, 64, 32));
  EXPECT_EQ(0u, psa::topk_pooled_levels(0, kRefDefault, 64, 32));
  const double all[kMaskSlots] = {0.1, 0.3, 0.5, 0.7, 1.0};
  EXPECT_EQ(kPooledLevelsAll, psa::topk_pooled_levels(100, all, 128, 32));
  const double dense[kMaskSlots] = {1.0, 1.0, 1.0, 1.0, 1.0};
  EXPECT_EQ(0u, psa::topk_pooled_levels(100, dense, 128, 32));
}

TEST(MaskPooledLevels, SimCapAddsEveryLowerPooledLevel) {
  const double only8[kMaskSlots] = {0.1, 0.1, 0.1, 0.5, 1.0};
  EXPECT_EQ(8u, psa::pooled_levels_possible(true, only8, 128, 128, 32, 4096, 4096, false, false));
  EXPECT_EQ(kPooledLevelsAll, psa::pooled_levels_possible(true, only8, 128, 128, 32, 4096, 4096, false, true));
  const double only2[kMaskSlots] = {0.1, 0.5, 0.5, 0.5, 1.0};
  EXPECT_EQ(2u, psa::pooled_levels_possible(true, only2, 128, 128, 32, 4096, 4096, false, true));
  const double only4[kMaskSlots] = {0.1, 0.1, 0.5, 0.5, 1.0};
  EXPECT_EQ(2u | 4u, psa::pooled_levels_possible(true, only4, 128, 128, 32, 4096, 4096, false, true));
}

TEST(MaskPooledLevels, ThresholdboundKeepsEveryLevel) {
  const double only8[kMaskSlots] = {0.1, 0.1, 0.1, 0.5, 1.0};
  EXPECT_EQ(kPooledLevelsAll, psa::pooled_levels_possible(false, only8, 128, 64, 32, 4096, 4096, false, false));
  EXPECT_EQ(kPooledLevelsAll, psa::pooled_levels_possible(false, kRefDefault, 128, 64, 32, 4096, 4096, true, false));
}

// The pyramid configuration of the benchmarks (topk, ends .10 .15 .15 .35, bn 64, tn 32): the
// level-4 interval is empty for every candidate count, so no row (causal or not) holds level 4.
TEST(MaskPooledLevels, RefDefaultNeverHoldsLevel4) {
  for (int64_t n = 1; n <= 20000; ++n)
    ASSERT_EQ(0u, psa::topk_pooled_levels(n, kRefDefault, 64, 32) & 4u) << "n = " << n;
  for (const psa_cli::StandardShape& s : psa_cli::kStandardShapes) {
    const int64_t len = s.t * s.h * s.w + s.text;
    for (bool causal : {false, true}) {
      const unsigned set = psa::pooled_levels_possible(true, kRefDefault, 128, 64, 32, len, len, causal, false);
      EXPECT_EQ(2u | 8u, set) << s.key << (causal ? " causal" : "") << ": " << set_name(set);
    }
  }
}

// The plan of each standard shape under make_pyramid_config holds the set (no level 4); other
// masks and routes keep every level.
TEST(MaskPooledLevels, PlanHoldsTheSetOfItsRoute) {
  for (const psa_cli::StandardShape& s : psa_cli::kStandardShapes) {
    psa_config* cfg = nullptr;
    ASSERT_EQ(PSA_OK, psa_cli::make_pyramid_config(s.model, 0.0, &cfg)) << psa_last_error_message();
    psa::VideoGeometry geo;
    geo.set = true;
    geo.t = s.t;
    geo.h = s.h;
    geo.w = s.w;
    geo.text_length = s.text;
    geo.text_position = s.position;
    psa::Problem pb;
    pb.batch = 1;
    pb.heads_q = pb.heads_kv = s.heads;
    pb.len_q = pb.len_k = geo.total_tokens();
    pb.head_dim = s.head_dim;
    psa::Plan plan;
    ASSERT_EQ(PSA_OK, psa::make_plan(cfg->cfg, geo, pb, &plan)) << psa_last_error_message();
    EXPECT_EQ(2u | 8u, plan.pooled_levels) << s.key << ": " << set_name(plan.pooled_levels);

    psa::Config other = cfg->cfg;
    other.mask_mode = PSA_MASK_MODE_THRESHOLDBOUND;
    ASSERT_EQ(PSA_OK, psa::make_plan(other, geo, pb, &plan));
    EXPECT_EQ(kPooledLevelsAll, plan.pooled_levels) << s.key << " thresholdbound";
    // level1_density > 0: every kept block at level 1, no pooled level at all.
    psa_config* level1 = nullptr;
    ASSERT_EQ(PSA_OK, psa_cli::make_pyramid_config(s.model, 0.15, &level1)) << psa_last_error_message();
    ASSERT_EQ(PSA_OK, psa::make_plan(level1->cfg, geo, pb, &plan));
    EXPECT_EQ(0u, plan.pooled_levels) << s.key << " level 1 only";
    psa_config_destroy(level1);
    psa_config_destroy(cfg);
  }
  // psa_causal applies its own level rule: every level.
  psa::Config causal_psa;
  causal_psa.method = PSA_METHOD_PSA_CAUSAL;
  causal_psa.use_rearrange = false;
  causal_psa.causal = true;
  causal_psa.mask_mode = PSA_MASK_MODE_TOPK;
  psa::Problem pb;
  pb.batch = pb.heads_q = pb.heads_kv = 1;
  pb.len_q = pb.len_k = 4096;
  pb.head_dim = 64;
  psa::Plan plan;
  ASSERT_EQ(PSA_OK, psa::make_plan(causal_psa, psa::VideoGeometry{}, pb, &plan)) << psa_last_error_message();
  EXPECT_EQ(kPooledLevelsAll, plan.pooled_levels);
}

// Random topk configurations (ends on a coarse grid, so that empty intervals are common), random
// shapes, causal masking, text rules and similarity caps; random scores with ties. Every pooled
// level of the post-processed map must be in the set; without causal masking, text or cap the
// map's pooled levels are the set exactly.
TEST(MaskPooledLevels, RandomTopkMapsStayInTheSet) {
  std::mt19937 gen(20240611u);
  const double grid[] = {0.0, 0.02, 0.05, 0.1, 0.12, 0.15, 0.2, 0.25, 0.35, 0.5, 0.7, 0.9, 1.0};
  const int64_t bns[] = {16, 32, 64, 128};
  auto pick = [&](int64_t n) { return std::uniform_int_distribution<int64_t>(0, n - 1)(gen); };
  int checked = 0, exact = 0;
  for (int c = 0; c < 1500; ++c) {
    psa::MaskRowParams row;
    row.mode = PSA_MASK_MODE_TOPK;
    double ends[4];
    for (double& e : ends) e = grid[pick(13)];
    std::sort(ends, ends + 4);
    std::copy(ends, ends + 4, row.ratio_end);
    row.ratio_end[4] = pick(4) == 0 ? std::max(ends[3], 0.8) : 1.0;
    row.block_n = bns[pick(4)];
    row.tile_n = std::max<int64_t>(8, row.block_n >> pick(4));
    const int64_t bm = pick(2) == 0 ? 64 : 128;
    const int64_t lk = 1 + pick(row.block_n * 48);
    const int64_t lq = pick(3) == 0 ? 1 + pick(bm * 12) : lk;
    const int64_t mq = (lq + bm - 1) / bm, nk = (lk + row.block_n - 1) / row.block_n;

    psa::MaskPostParams post;
    post.block_m = bm;
    post.block_n = row.block_n;
    post.lq = lq;
    post.lk = lk;
    post.causal = pick(2) == 0;
    const bool text = pick(3) == 0;
    post.text_rule = pick(2) == 0 ? PSA_TEXT_RULE_SPAN : PSA_TEXT_RULE_REFERENCE_SUFFIX;
    post.text_rows_dense = text && pick(2) == 0;
    if (text) {
      post.text_begin = pick(lk);
      post.text_end = post.text_begin + 1 + pick(lk - post.text_begin);
    }
    const bool sim_cap = pick(3) == 0;
    std::vector<int8_t> cap(static_cast<size_t>(nk));
    for (int8_t& x : cap) x = static_cast<int8_t>(1 << pick(4));
    post.sim_cap = sim_cap ? cap.data() : nullptr;

    const unsigned set = psa::pooled_levels_possible(true, row.ratio_end, bm, row.block_n, row.tile_n, lq, lk,
                                                     post.causal, sim_cap);
    unsigned seen = 0u;
    for (int head = 0; head < 2; ++head) {
      std::vector<float> scores(static_cast<size_t>(mq * nk)), ties(scores.size(), 0.0f);
      for (float& s : scores) s = static_cast<float>(pick(6));  // many equal scores
      for (int64_t e = 0; e < mq * nk; e += 1 + pick(5)) ties[static_cast<size_t>(e)] = static_cast<float>(pick(3));
      std::vector<int8_t> levels(scores.size());
      std::vector<int32_t> order(static_cast<size_t>(nk));
      psa::mask_head_cpu(scores.data(), mq, nk, row, post, head == 0 ? nullptr : ties.data(), levels.data(),
                         order.data());
      seen |= pooled_in(levels);
    }
    ASSERT_EQ(0u, seen & ~set) << "case " << c << ": map holds " << set_name(seen) << ", set " << set_name(set)
                               << " (lq " << lq << " lk " << lk << " bm " << bm << " bn " << row.block_n << " tn "
                               << row.tile_n << " causal " << post.causal << " cap " << sim_cap << ")";
    ++checked;
    if (!post.causal && !text && !sim_cap) {
      EXPECT_EQ(set, seen) << "case " << c << ": not tight without post-processing";
      ++exact;
    }
  }
  std::printf("[pooled levels] %d random topk maps within the set, %d of them compared exactly\n", checked, exact);
}

}  // namespace

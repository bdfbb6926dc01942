// mask/mask_cpu.cpp -- mask building stage, CPU reference (the oracle): sorts a row, asks
// mask_spec.h for the rank intervals and post-processing rules, writes levels / segments.
// Holds no count or visibility rule of its own; plain scalar code, no CUDA, no I/O.
#include <algorithm>
#include <numeric>
#include <vector>

#include "mask/mask.h"
#include "mask/mask_spec.h"

namespace psa {

static_assert(kMaskSlots == kNumSlots, "mask_spec.h and config.h must agree on the slots");
static_assert(level_of_slot(kSlotL1) == kSlotLevel[kSlotL1] &&
                  level_of_slot(kSlotL2) == kSlotLevel[kSlotL2] &&
                  level_of_slot(kSlotL4) == kSlotLevel[kSlotL4] &&
                  level_of_slot(kSlotL8) == kSlotLevel[kSlotL8] &&
                  level_of_slot(kSlotL0) == kSlotLevel[kSlotL0],
              "slot levels must be 1, 2, 4, 8, 0");

MaskRowParams mask_row_params(const Config& config) {
  MaskRowParams p;
  p.mode = config.mask_mode;
  p.block_n = config.block_n;
  p.tile_n = config.tile_n;
  std::copy(config.ratio_end, config.ratio_end + kNumSlots, p.ratio_end);
  p.min_full_ratio = config.min_full_ratio;
  return p;
}

void build_mask_row(const float* scores, int64_t n, const MaskRowParams& params, int8_t* levels,
                    int32_t* order, int64_t* seg_end, const float* ties) {
  if (n <= 0) return;
  std::vector<int32_t> own;
  if (order == nullptr) {
    own.resize(static_cast<size_t>(n));
    order = own.data();
  }
  std::iota(order, order + n, 0);
  if (ties != nullptr)
    std::stable_sort(order, order + n, [scores, ties](int32_t a, int32_t b) {
      return ranks_before(scores[a], ties[a], a, scores[b], ties[b], b);
    });
  else
    std::stable_sort(order, order + n, [scores](int32_t a, int32_t b) {
      return ranks_before(scores[a], a, scores[b], b);
    });

  int64_t ends[kMaskSlots];
  if (params.mode == PSA_MASK_MODE_THRESHOLDBOUND) {
    std::vector<float> mass(static_cast<size_t>(n));
    for (int64_t r = 0; r < n; ++r) mass[r] = scores[order[r]];
    relative_cumulative_mass(mass.data(), n, mass.data());
    thresholdbound_segment_ends(mass.data(), n, params.ratio_end, params.block_n, params.tile_n,
                                params.min_full_ratio, ends);
  } else {
    topk_segment_ends(n, params.ratio_end, params.block_n, params.tile_n, ends);
  }

  for (int64_t r = 0; r < n; ++r) levels[order[r]] = static_cast<int8_t>(level_of_rank(r, ends));
  if (seg_end != nullptr) std::copy(ends, ends + kMaskSlots, seg_end);
}

void segments_row(const int32_t* order, const int64_t* seg_end, int64_t n, int32_t* row) {
  std::fill(row, row + segments_width(n), 0);
  int64_t cur = 0;
  for (int s = 0; s < kMaskSlots; ++s) {
    for (int64_t r = cur; r < seg_end[s]; ++r) row[segments_position(s, r)] = order[r];
    row[segments_separator(s, seg_end)] = -1;
    cur = std::max(cur, seg_end[s]);
  }
}

void postprocess_levels(int8_t* levels, int64_t mq, int64_t nk, const MaskPostParams& params) {
  const bool suffix = params.text_rule == PSA_TEXT_RULE_REFERENCE_SUFFIX;
  for (int64_t i = 0; i < mq; ++i) {
    MaskPostRow row =
        mask_post_row(i, nk, params.block_m, params.block_n, params.lq, params.lk, params.causal,
                      suffix, params.text_rows_dense, params.text_begin, params.text_end);
    int8_t* out = levels + i * nk;
    for (int64_t j = 0; j < nk; ++j) {
      int cap = params.sim_cap != nullptr ? params.sim_cap[j] : 8;
      out[j] = static_cast<int8_t>(post_level(out[j], j, row, cap));
    }
  }
}

int64_t causal_visible_blocks(int64_t i, int64_t block_m, int64_t block_n, int64_t lq, int64_t lk) {
  return causal_key_blocks(i, block_m, block_n, lq, lk);
}

void mask_head_cpu(const float* scores, int64_t mq, int64_t nk, const MaskRowParams& row,
                   const MaskPostParams& post, const float* ties, int8_t* levels,
                   int32_t* order) {
  for (int64_t i = 0; i < mq; ++i) {
    int8_t* out = levels + i * nk;
    const int64_t n =
        post.causal ? causal_visible_blocks(i, post.block_m, post.block_n, post.lq, post.lk) : nk;
    std::fill(out, out + nk, int8_t{0});
    if (n > 0)
      build_mask_row(scores + i * nk, n, row, out, order, nullptr,
                     ties != nullptr ? ties + i * nk : nullptr);
  }
  postprocess_levels(levels, mq, nk, post);
}

}  // namespace psa

// cuda/importance/block_scores_finish.cuh -- importance stage, kernel layer (internal): the end of
// one CTA tile of the GEMM-shaped score path, shared by the sm80 and the sm90 kernel so that both
// turn block-max logits into scores by the same operations. Must not define its own scoring rule.
#pragma once
#include <cstdint>

#include "cuda/importance/block_scores_gemm.h"
#include "cuda/importance/score_scratch.h"
#include "importance/importance_spec.h"

namespace psa {
namespace gpu {
namespace score_gemm {

// max_r (a[r] - m[r]) over the q_count rows of one query block (a: scratch column j of the
// block, m: its row maxima); fsub rounded alone, NaN differences skipped by fmaxf.
__device__ __forceinline__ float block_logit_max(const float* a, const float* m, int q_count) {
  float y = -INFINITY;
  if (q_count >= 4) {
#pragma unroll 4
    for (int r = 0; r < q_count; r += 4) {
      const float4 av = *reinterpret_cast<const float4*>(a + r);
      const float4 mv = *reinterpret_cast<const float4*>(m + r);
      y = fmaxf(y, __fsub_rn(av.x, mv.x));
      y = fmaxf(y, __fsub_rn(av.y, mv.y));
      y = fmaxf(y, __fsub_rn(av.z, mv.z));
      y = fmaxf(y, __fsub_rn(av.w, mv.w));
    }
  } else {
    for (int r = 0; r < q_count; ++r) y = fmaxf(y, __fsub_rn(a[r], m[r]));
  }
  return y;
}

// Given a complete scratch slot (a[r][j] at scratch[j * 256 + r]) and the row maxima s_m[r] of
// the tile (b*Hq + h = bh, row tile rt), per query block of the tile: (2) P[i][j] =
// exp(max_r (a[r][j] - m[r])) (= max_r exp(a - m): exp is monotone, so one double exp per block
// instead of one per row; an all-NaN block gives 0, as the CPU's isnan(e) ? 0 : e); (3) the row
// sum in double, fixed order (lane-strided over key blocks, then a fixed shuffle tree: the CPU's
// sequential sum may differ in the last bit); (4) scores = P / sum. Float operations on each value
// are the CPU's. Query block il goes to warp il % n_warps of the calling group (warp = 0 ..
// n_warps-1, lane = 0..31); no barrier inside, so the caller only orders the scratch and s_m
// writes before the call. A lane takes kBatch key blocks at a time (their loads first: up to
// 4 * kBatch float4 loads in flight); kBatch 2 spills at the sm90 finishers' 56 registers, so
// they use 1. With p.ties, (5) the tie masses: 0, and for the few P == 1 blocks of the row the
// warp-wide sum of their sampled weights (importance_spec.h order), from the same scratch.
template <int kBatch>
__device__ __forceinline__ void finish_tile(const GemmScoreParams& p, const float* scratch, const float* s_m,
                                            int64_t bh, int64_t rt, int warp, int n_warps, int lane) {
  static_assert(kBatch == 1 || kBatch == 2, "one or two key blocks per lane at a time");
  constexpr int kRows = static_cast<int>(kScoreTileRows);
  const int nqb = kRows >> p.q_shift;  // query blocks per tile
  const int nq_valid = static_cast<int>(min(static_cast<int64_t>(nqb), p.mq - rt * nqb));
  float* out = p.scores + (bh * p.mq + rt * nqb) * p.nk;  // query block il of this tile: out + il * nk
  for (int il = warp; il < nq_valid; il += n_warps) {
    float* row = out + static_cast<int64_t>(il) * p.nk;
    const int r0 = il << p.q_shift;
    const float* mr = s_m + r0;
    double s = 0.0;
    const float* a = scratch + r0 + lane * kRows;
    for (int64_t j = lane; j < p.nk; j += 32 * kBatch, a += 32 * kBatch * kRows) {
      float y[kBatch];
#pragma unroll
      for (int u = 0; u < kBatch; ++u)
        y[u] = j + 32 * u < p.nk ? block_logit_max(a + 32 * u * kRows, mr, p.q_count) : 0.0f;
#pragma unroll
      for (int u = 0; u < kBatch; ++u) {
        if (j + 32 * u >= p.nk) break;
        const float v = sample_weight(y[u]);
        row[j + 32 * u] = v;
        s += v;
      }
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    if (p.ties != nullptr) {
      float* tie_row = p.ties + (row - p.scores);
      // Tie masses, before the normalisation (P == 1 is tested on this lane's own writes): 0, and
      // for each P == 1 block the whole warp's sum in importance_spec.h order (lane l takes rows
      // l, l + 32, ..., then the xor butterfly). Warp-uniform loop; a separate pass keeps the
      // main loop's registers untouched.
#pragma unroll 1
      for (int64_t jb = 0; jb < p.nk; jb += 32) {
        const int64_t j = jb + lane;
        const bool in = j < p.nk;
        const bool top = in && row[j] == 1.0f;
        if (in) tie_row[j] = 0.0f;
        unsigned tied = __ballot_sync(0xffffffffu, top);
#pragma unroll 1
        while (tied != 0u) {
          const int src = __ffs(tied) - 1;
          tied &= tied - 1u;
          const float* at = scratch + r0 + (jb + src) * kRows;
          float w = 0.0f;
#pragma unroll 1
          for (int r = lane; r < p.q_count; r += 32) w += sample_weight(__fsub_rn(at[r], mr[r]));
#pragma unroll
          for (int o = kTieLanes / 2; o > 0; o >>= 1) w += __shfl_xor_sync(0xffffffffu, w, o);
          if (lane == src) tie_row[j] = w;  // after this lane's 0 above
        }
      }
    }
    if (s > 0.0)
      for (int64_t j = lane; j < p.nk; j += 32) row[j] = static_cast<float>(row[j] / s);  // this lane's own writes
  }
}

}  // namespace score_gemm
}  // namespace gpu
}  // namespace psa

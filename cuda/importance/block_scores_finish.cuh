// cuda/importance/block_scores_finish.cuh -- importance stage, kernel layer (internal): the end of
// one CTA tile of the GEMM-shaped score path, shared by the sm80 and the sm90 kernel so that both
// turn block-max logits into scores by the same operations. Must not define its own scoring rule.
#pragma once
#include <cstdint>

#include "cuda/importance/block_scores_gemm.h"
#include "cuda/importance/score_scratch.h"

namespace psa {
namespace gpu {
namespace score_gemm {

// Given a complete scratch slot (a[r][j] at scratch[j * 256 + r]) and the row maxima s_m[r] of
// the tile (b*Hq + h = bh, row tile rt): (2) P[i][j] = exp(max_r (a[r][j] - m[r])) per query
// block (= max_r exp(a - m): exp is monotone, so one double exp per block instead of one per
// row; NaN differences are skipped and an all-NaN block gives 0, as the CPU's isnan(e) ? 0 : e),
// written unnormalised to scores; (3) row sums in double, fixed order; (4) scores /= sum. Float
// operations on each value are the CPU's (fsub rounded alone). Run by kThreads threads (tid
// 0..kThreads-1); `sync` is a barrier over exactly those threads. s_tot holds 256 doubles.
template <int kThreads, typename Sync>
__device__ __forceinline__ void finish_tile(const GemmScoreParams& p, const float* scratch, const float* s_m,
                                            double* s_tot, int64_t bh, int64_t rt, int tid, Sync sync) {
  constexpr int kRows = static_cast<int>(kScoreTileRows);
  constexpr int kWarps = kThreads / 32;
  const int warp = tid >> 5, lane = tid & 31;
  const int nqb = kRows >> p.q_shift;  // query blocks per tile
  // (2) One thread per (query block, key block); consecutive threads take consecutive key
  // blocks of one query block, so s_m reads are broadcasts.
  const int64_t nq_valid = min(static_cast<int64_t>(nqb), p.mq - rt * nqb);
  const int64_t items = nq_valid * p.nk;
  float* out = p.scores + (bh * p.mq + rt * nqb) * p.nk;  // row il of this tile: out + il * nk
  for (int64_t idx = tid; idx < items; idx += kThreads) {
    const int il = static_cast<int>(idx / p.nk);
    const int64_t j = idx - static_cast<int64_t>(il) * p.nk;
    const int r0 = il << p.q_shift;
    const float* a = scratch + j * kRows + r0;
    const float* mr = s_m + r0;
    float y = -INFINITY;
    if (p.q_count >= 4) {
      for (int r = 0; r < p.q_count; r += 4) {
        const float4 av = *reinterpret_cast<const float4*>(a + r);
        const float4 mv = *reinterpret_cast<const float4*>(mr + r);
        y = fmaxf(y, __fsub_rn(av.x, mv.x));
        y = fmaxf(y, __fsub_rn(av.y, mv.y));
        y = fmaxf(y, __fsub_rn(av.z, mv.z));
        y = fmaxf(y, __fsub_rn(av.w, mv.w));
      }
    } else {
      for (int r = 0; r < p.q_count; ++r) y = fmaxf(y, __fsub_rn(a[r], mr[r]));
    }
    const float e = static_cast<float>(exp(static_cast<double>(y)));
    out[idx] = e != e ? 0.0f : e;
  }
  sync();
  // (3) Row sums: warp w sums query blocks w, w+kWarps, ...; lanes stride over key blocks, then
  // a fixed shuffle tree (deterministic; the CPU's sequential double sum may differ in the last bit).
  for (int il = warp; il < nq_valid; il += kWarps) {
    const float* row = out + static_cast<int64_t>(il) * p.nk;
    double s = 0.0;
    for (int64_t j = lane; j < p.nk; j += 32) s += row[j];
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    if (lane == 0) s_tot[il] = s;
  }
  sync();
  // (4) Normalise.
  for (int64_t idx = tid; idx < items; idx += kThreads) {
    const double s = s_tot[idx / p.nk];
    if (s > 0.0) out[idx] = static_cast<float>(out[idx] / s);
  }
}

}  // namespace score_gemm
}  // namespace gpu
}  // namespace psa

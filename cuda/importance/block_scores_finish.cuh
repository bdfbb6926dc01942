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

// P == 1 for one block, recomputed from the scratch (a: its column, m: the rows' maxima): the max
// of the rounded differences by a scalar loop -- fmaxf skips NaN and the maximum of the other
// values does not depend on the order (a tie of -0 and +0 gives exp = 1 either way), so P is
// block_logit_max's -- then the same sample_weight.
__device__ __forceinline__ bool block_is_top(const float* a, const float* m, int q_count) {
  float y = -INFINITY;
#pragma unroll 1
  for (int r = 0; r < q_count; ++r) y = fmaxf(y, __fsub_rn(a[r], m[r]));
  return sample_weight(y) == 1.0f;
}

// Tie masses of up to kTie blocks list[0..n) of one row (n >= 1, list in shared memory; entries
// past n repeat list[0] and are not written), summed by the whole warp in importance_spec.h
// order: lane l adds the tie weights of rows l, l + 32, ... (ascending, from 0.0f), then the xor
// butterfly, as a reduce-scatter: at each of the first log2(kTie) steps (o = 16, 8, ..) a lane
// keeps half of its blocks (the upper half where lane & o) and adds its partner's copy of them,
// so kTie blocks take kTie - 1 + 5 - log2(kTie) shuffles instead of 5 kTie. Every partial is still w[l] + w[l ^ o] of the
// butterfly (fp32 addition commutes), so the bits are those of importance_spec.h. The blocks'
// loads and tie weights (fp32, on the FMA pipe) are independent. a0 = scratch + r0 (column j at
// a0 + j * 256), mr = the rows' maxima; block u ends in lanes u << (5 - log2(kTie)) ..., the
// first of which writes tie_row[list[u]] (the caller orders this after the row's zeros).
template <int kTie>
__device__ __forceinline__ void tie_batch(const GemmScoreParams& p, const float* a0, const float* mr, float* tie_row,
                                          const int32_t* list, int n, int lane) {
  static_assert(kTie == 1 || kTie == 2 || kTie == 4 || kTie == 8, "a power of two up to 8");
  constexpr int kRows = static_cast<int>(kScoreTileRows);
  constexpr int kLg = kTie == 1 ? 0 : kTie == 2 ? 1 : kTie == 4 ? 2 : 3;
  int j[kTie];
#pragma unroll
  for (int u = 0; u < kTie; ++u) j[u] = list[u < n ? u : 0];  // shared-memory broadcasts
  float w[kTie];
#pragma unroll
  for (int u = 0; u < kTie; ++u) w[u] = 0.0f;
#pragma unroll 1
  for (int r = lane; r < p.q_count; r += 32) {
    const float m = mr[r];
    float d[kTie];
#pragma unroll
    for (int u = 0; u < kTie; ++u) d[u] = a0[static_cast<int64_t>(j[u]) * kRows + r];
#pragma unroll
    for (int u = 0; u < kTie; ++u) w[u] += tie_weight(__fsub_rn(d[u], m));
  }
#pragma unroll
  for (int s = 0; s < kLg; ++s) {
    const int o = 16 >> s, half = kTie >> (s + 1);
    const bool up = (lane & o) != 0;
#pragma unroll
    for (int u = 0; u < half; ++u) {
      const float send = up ? w[u] : w[u + half];
      const float keep = up ? w[u + half] : w[u];
      w[u] = keep + __shfl_xor_sync(0xffffffffu, send, o);
    }
  }
#pragma unroll
  for (int o = 16 >> kLg; o > 0; o >>= 1) w[0] += __shfl_xor_sync(0xffffffffu, w[0], o);
  const int u = lane >> (5 - kLg);
  if ((lane & ((32 >> kLg) - 1)) == 0 && u < n) tie_row[list[u]] = w[0];
}

// Per warp of the CTA (warp index threadIdx.x / 32 < kTieListWarps), a list of up to 32 tied
// key blocks of the row being finished: the tie pass appends a 32-block group's tied blocks
// with one shared store per tied lane, then sums the list kTie blocks at a time.
constexpr int kTieListWarps = 12;
__device__ __forceinline__ int32_t* tie_list() {
  __shared__ int32_t list[kTieListWarps][32];
  return list[threadIdx.x >> 5];
}

// Tie masses of the n >= 1 listed blocks, kTie at a time (the last batch repeats its first).
template <int kTie>
__device__ __forceinline__ void tie_flush(const GemmScoreParams& p, const float* a0, const float* mr, float* tie_row,
                                          const int32_t* list, int n, int lane) {
  __syncwarp();  // the list's stores are visible to every lane
#pragma unroll 1
  for (int b = 0; b < n; b += kTie) tie_batch<kTie>(p, a0, mr, tie_row, list + b, min(kTie, n - b), lane);
  __syncwarp();  // every lane has read the list before it is written again
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
// Finding the P == 1 blocks costs the main loop one bit per block: lane l's block l + 32k sets
// bit k % 64 of its `top` mask, so the tie pass visits only the 32-block groups whose bit some
// lane set (the union over the warp) and does not read the row back (an earlier version
// re-read every block's P from global memory, one dependent load per 32 blocks); a row of more
// than 64 groups (nk > 2048) recomputes P of the aliased groups' candidates (block_is_top). A
// group's tied blocks go to the warp's list (tie_list, one shared store per tied lane), and the
// list is summed kTie blocks at a time (tie_batch: their loads and fp32 tie weights overlap, one
// reduce-scatter per batch). The zeros of the tie row are written by the normalisation loop;
// the tie pass runs after it, so the row sum is no longer live in it. kTie is the caller's:
// 4 on the sm90 finishers, 8 on the sm90 consumers, 2 on the sm80 kernel (PERF_NOTES.md, "Tie
// masses: fp32 tie weights").
template <int kBatch, int kTie>
__device__ __forceinline__ void finish_tile(const GemmScoreParams& p, const float* scratch, const float* s_m,
                                            int64_t bh, int64_t rt, int warp, int n_warps, int lane) {
  static_assert(kBatch == 1 || kBatch == 2, "one or two key blocks per lane at a time");
  static_assert(kTie == 1 || kTie == 2 || kTie == 4 || kTie == 8, "1, 2, 4 or 8 tied blocks summed at a time");
  constexpr int kRows = static_cast<int>(kScoreTileRows);
  const int nqb = kRows >> p.q_shift;  // query blocks per tile
  const int nq_valid = static_cast<int>(min(static_cast<int64_t>(nqb), p.mq - rt * nqb));
  float* out = p.scores + (bh * p.mq + rt * nqb) * p.nk;  // query block il of this tile: out + il * nk
  for (int il = warp; il < nq_valid; il += n_warps) {
    float* row = out + static_cast<int64_t>(il) * p.nk;
    const int r0 = il << p.q_shift;
    const float* mr = s_m + r0;
    double s = 0.0;
    uint64_t top = 0;  // bit k % 64: this lane's block lane + 32 k has P == 1
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
        if (v == 1.0f) top |= uint64_t{1} << (static_cast<int>((j >> 5) + u) & 63);
      }
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    float* tie_row = p.ties != nullptr ? p.ties + (row - p.scores) : nullptr;
    if (s > 0.0 || tie_row != nullptr)
      for (int64_t j = lane; j < p.nk; j += 32) {  // this lane's own writes; its tie masses 0 (ties below)
        if (s > 0.0) row[j] = static_cast<float>(row[j] / s);
        if (tie_row != nullptr) tie_row[j] = 0.0f;
      }
    if (tie_row != nullptr) {
      __syncwarp();  // the zeros before any lane's tie mass (tie_batch writes from another lane)
      const int nk = static_cast<int>(p.nk);  // < 2^31: a scratch slot holds nk KB
      const int groups = (nk + 31) >> 5;
      const uint32_t lo = __reduce_or_sync(0xffffffffu, static_cast<uint32_t>(top));
      const uint32_t hi = __reduce_or_sync(0xffffffffu, static_cast<uint32_t>(top >> 32));
      uint64_t any = (static_cast<uint64_t>(hi) << 32) | lo;  // warp-uniform
      // The marked blocks' scratch columns (q_count floats, 1-4 lines each) are fetched into L1
      // at once, so the warp's sums below do not wait on L2 one tied block after another (no
      // registers, no effect on any value; with aliasing, groups > 64, a line may be a wasted one).
      for (uint64_t t = top; t != 0u; t &= t - 1u) {
        const int j = (__ffsll(static_cast<long long>(t)) - 1) * 32 + lane;
        if (j < nk) {
          const float* col = scratch + r0 + static_cast<int64_t>(j) * kRows;
          for (int r = 0; r < p.q_count; r += 32) asm volatile("prefetch.global.L1 [%0];" ::"l"(col + r));
        }
      }
      int32_t* list = tie_list();
      int n = 0;  // listed blocks (warp-uniform)
#pragma unroll 1
      while (any != 0u) {
        const int bit = __ffsll(static_cast<long long>(any)) - 1;
        any &= any - 1u;
        const bool mine = ((top >> bit) & 1u) != 0u;
#pragma unroll 1
        for (int k = bit; k < groups; k += 64) {
          const int j = k * 32 + lane;
          // Without aliasing (groups <= 64) the bit is the block's; else P == 1 is recomputed
          // from the scratch by the main loop's operations (rare: nk > 2048).
          const bool t = mine && j < nk &&
                         (groups <= 64 ||
                          block_is_top(scratch + r0 + static_cast<int64_t>(j) * kRows, mr, p.q_count));
          const unsigned tied = __ballot_sync(0xffffffffu, t);
          const int c = __popc(tied);
          if (n + c > 32) {  // rare: more than 32 ties in the row so far
            tie_flush<kTie>(p, scratch + r0, mr, tie_row, list, n, lane);
            n = 0;
          }
          if (t) list[n + __popc(tied & ((1u << lane) - 1u))] = j;
          n += c;
        }
      }
      if (n > 0) tie_flush<kTie>(p, scratch + r0, mr, tie_row, list, n, lane);
    }
  }
}

}  // namespace score_gemm
}  // namespace gpu
}  // namespace psa

// cuda/importance/block_scores_finish.cuh -- importance stage, kernel layer (internal): the end of
// one CTA tile of the GEMM-shaped score path, shared by the sm80 and the sm90 kernel so that both
// turn block-max logits into scores by the same operations. Must not define its own scoring rule.
#pragma once
#include <cstdint>

#include "cuda/importance/block_scores_gemm.h"
#include "cuda/importance/score_scratch.h"
#include "importance/importance_spec.h"
#include "importance/score_division.h"

namespace psa {
namespace gpu {
namespace score_gemm {

// max(y, a.x - m.x, .., a.w - m.w): each difference rounded alone, NaN ones skipped by fmaxf
// (a maximum does not depend on the order of its terms, so the four are taken as a tree and
// y waits on one fmaxf per call).
__device__ __forceinline__ float fold_logit_diffs(float y, float4 a, float4 m) {
  const float x01 = fmaxf(__fsub_rn(a.x, m.x), __fsub_rn(a.y, m.y));
  const float x23 = fmaxf(__fsub_rn(a.z, m.z), __fsub_rn(a.w, m.w));
  return fmaxf(y, fmaxf(x01, x23));
}

// max_r (a[r] - m[r]) over the q_count rows of one query block (a: scratch column j of the
// block, m: its row maxima); fsub rounded alone, NaN differences skipped by fmaxf.
__device__ __forceinline__ float block_logit_max(const float* a, const float* m, int q_count) {
  float y = -INFINITY;
  if (q_count >= 4) {
#pragma unroll 4
    for (int r = 0; r < q_count; r += 4)
      y = fold_logit_diffs(y, *reinterpret_cast<const float4*>(a + r), *reinterpret_cast<const float4*>(m + r));
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
    for (int u = 0; u < kTie; ++u) w[u] += sample_weight(__fsub_rn(d[u], m));
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

// Per warp of the CTA (warp index threadIdx.x / 32 < kTieListWarps): the tied key blocks
// (P == 1) of the row being finished, appended by the main loop (one shared atomicAdd per tied
// block; the list order varies, and no value depends on it), up to kTieListCap of them.
constexpr int kTieListWarps = 12, kTieListCap = 64;
struct TieList {
  int32_t* e;  // [kTieListCap]
  int* count;  // entries appended; past kTieListCap the row is rescanned
};
__device__ __forceinline__ TieList tie_list() {
  __shared__ int32_t list[kTieListWarps][kTieListCap];
  __shared__ int count[kTieListWarps];
  const int w = static_cast<int>(threadIdx.x >> 5);
  return TieList{list[w], count + w};
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

// Where finish_tile reads the block-max logits of the query block it finishes. begin_row(r0)
// starts query block rows r0 ..; logits<kBatch>(j0, lane, mr, y) gives y[u] = block_logit_max of
// block j = j0 + lane + 32u (0 past nk) for j0 = 0, 32 kBatch, ... in turn, every lane of the warp
// calling it for every j0. This one: each lane loads its blocks' columns from the scratch in
// global memory.
struct ScratchLogits {
  const float* scratch;  // the slot: column j of row r at scratch[j * 256 + r]
  int q_count;
  int64_t nk;
  const float* a = nullptr;  // column 0 of rows r0 ..
  __device__ __forceinline__ void begin_row(int r0) { a = scratch + r0; }
  template <int kBatch>
  __device__ __forceinline__ void logits(int64_t j0, int lane, const float* mr, float (&y)[kBatch]) {
    constexpr int64_t kRows = kScoreTileRows;
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {
      const int64_t j = j0 + lane + 32 * u;
      y[u] = j < nk ? block_logit_max(a + j * kRows, mr, q_count) : 0.0f;
    }
  }
};

// Given a complete scratch slot (a[r][j] at scratch[j * 256 + r]) and the row maxima s_m[r] of
// the tile (b*Hq + h = bh, row tile rt), per query block of the tile: (2) P[i][j] =
// sample_weight(max_r (a[r][j] - m[r])) (importance_spec.h: one exp per block, of the largest
// difference; an all-NaN block gives sample_weight(-inf) = 0); (3) the row sum in
// double, fixed order (lane-strided over key blocks, then a fixed shuffle tree: the CPU's
// sequential sum may differ in the last bit); (4) scores = P / sum. Float operations on each value
// are the CPU's; the division gives the rule's double-precision quotient by fp32 arithmetic
// (score_division.h), so the finisher warps stay off the pipe of the tensor cores. Query block
// il goes to warp il % n_warps of the calling group (warp = 0 ..
// n_warps-1, lane = 0..31); no barrier inside, so the caller only orders the scratch and s_m
// writes before the call. `src` supplies max_r (a[r][j] - m[r]) (ScratchLogits: from global
// memory, a lane taking kBatch key blocks at a time with their loads first, up to 4 * kBatch
// float4 loads in flight; kBatch 2 spills at the sm90 finishers' 56 registers; the sm90
// finishers read shared-memory copies instead, block_scores_kernel_sm90.cuh). With p.ties, (5)
// the tie masses: 0, and for the few P == 1 blocks of the row the
// warp-wide sum of their sampled weights (importance_spec.h order), from the same scratch. The
// main loop appends each P == 1 block to the warp's list (tie_list); after the normalisation
// (whose loop also writes the tie row's zeros) the list is summed kTie blocks at a time
// (tie_batch: their loads and fp32 tie weights overlap, one reduce-scatter per batch). A row of
// more than kTieListCap tied blocks (degenerate inputs) finds them again from the scratch
// (block_is_top), 32 blocks at a time. kTie is the caller's: 4 on the sm90 finishers, 8 on the
// sm90 consumers, 2 on the sm80 kernel (PERF_NOTES.md, "Tie masses: the list filled by the main
// loop"). With kTrack and p.tie_run_min > 0 a row whose top run is no longer than that keeps
// the zeros (ScoreArgs::tie_run_min); without kTrack every row's tie masses are computed (the
// sm90 kernel is instantiated both ways: the tracking's registers cost the finisher warps 2-4%
// where it is not used).
template <int kBatch, int kTie, bool kTrack, class Src>
__device__ __forceinline__ void finish_tile(const GemmScoreParams& p, const float* scratch, const float* s_m,
                                            int64_t bh, int64_t rt, int warp, int n_warps, int lane, Src&& src) {
  static_assert(kBatch == 1 || kBatch == 2, "one or two key blocks per lane at a time");
  static_assert(kTie == 1 || kTie == 2 || kTie == 4 || kTie == 8, "1, 2, 4 or 8 tied blocks summed at a time");
  constexpr int kRows = static_cast<int>(kScoreTileRows);
  constexpr int kNorm = 4;  // normalised blocks per lane at a time (their loads first)
  const int nqb = kRows >> p.q_shift;  // query blocks per tile
  const int nq_valid = static_cast<int>(min(static_cast<int64_t>(nqb), p.mq - rt * nqb));
  float* out = p.scores + (bh * p.mq + rt * nqb) * p.nk;  // query block il of this tile: out + il * nk
  // With p.tie_run_min, a row's top run (its blocks at the highest score) is measured: its tied
  // blocks, and any block whose weight, below 1, rounds to the same score. The division is
  // monotone, so the largest weight under 1 (`below`) tells whether one does (rare: then the
  // run is counted from the scores).
  const bool track = kTrack && p.ties != nullptr && p.tie_run_min > 0;
  for (int il = warp; il < nq_valid; il += n_warps) {
    float* row = out + static_cast<int64_t>(il) * p.nk;
    const int r0 = il << p.q_shift;
    const float* mr = s_m + r0;
    double s = 0.0;
    float below = 0.0f;  // this lane's largest weight under 1 (track)
    if (p.ties != nullptr) {  // the row's list starts empty (the previous row's reads are done)
      __syncwarp();
      if (lane == 0) *tie_list().count = 0;
      __syncwarp();
    }
    src.begin_row(r0);
    for (int64_t j0 = 0; j0 < p.nk; j0 += 32 * kBatch) {
      float y[kBatch];
      src.template logits<kBatch>(j0, lane, mr, y);
#pragma unroll
      for (int u = 0; u < kBatch; ++u) {
        const int64_t j = j0 + lane + 32 * u;
        if (j >= p.nk) break;
        const float v = sample_weight(y[u]);
        row[j] = v;
        s += v;
        if (v == 1.0f && p.ties != nullptr) {
          const TieList tl = tie_list();
          const int pos = atomicAdd(tl.count, 1);
          if (pos < kTieListCap) tl.e[pos] = static_cast<int>(j);
        } else if (track) {
          below = fmaxf(below, v);
        }
      }
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    float* tie_row = p.ties != nullptr ? p.ties + (row - p.scores) : nullptr;
    int run = -1;  // the top run's length when track and a weight under 1 joins it; else -1
    if (s > 0.0) {  // this lane's own values (kNorm loads in flight)
      const ScoreDivisor dv = score_divisor(s);
      for (int64_t j = lane; j < p.nk; j += 32 * kNorm) {
        float v[kNorm];
#pragma unroll
        for (int u = 0; u < kNorm; ++u) v[u] = j + 32 * u < p.nk ? row[j + 32 * u] : 0.0f;
#pragma unroll
        for (int u = 0; u < kNorm; ++u)
          if (j + 32 * u < p.nk) row[j + 32 * u] = normalised_score(v[u], s, dv);
      }
      if (track) {
        const float top = normalised_score(1.0f, s, dv);
        if (__any_sync(0xffffffffu, normalised_score(below, s, dv) == top)) {
          __syncwarp();  // every lane's scores are written
          int c = 0;
          for (int64_t j = lane; j < p.nk; j += 32) c += row[j] == top ? 1 : 0;
          run = __reduce_add_sync(0xffffffffu, c);
        }
      }
    }
    if (tie_row != nullptr) {  // this lane's tie masses 0 (ties below)
      for (int64_t j = lane; j < p.nk; j += 32) tie_row[j] = 0.0f;
      __syncwarp();  // the zeros and the list's entries before the sums (tie_batch writes from another lane)
      const TieList tl = tie_list();
      const int n = *tl.count;  // warp-uniform
      // No interval end falls inside a top run of at most p.tie_run_min blocks: the level
      // builder does not read such a row's tie masses, which stay 0.
      const bool wanted = !track || (run >= 0 ? run : n) > p.tie_run_min;
      if (wanted && n <= kTieListCap) {
        if (n > 0) tie_flush<kTie>(p, scratch + r0, mr, tie_row, tl.e, n, lane);
      } else if (wanted) {  // more than kTieListCap ties: P == 1 found again from the scratch
        const int nk = static_cast<int>(p.nk);  // < 2^31: a scratch slot holds nk KB
        __syncwarp();  // every lane has read the count before the list is rewritten
        int m = 0;  // listed blocks (warp-uniform)
#pragma unroll 1
        for (int k = 0; k < ((nk + 31) >> 5); ++k) {
          const int j = k * 32 + lane;
          const bool t = j < nk && block_is_top(scratch + r0 + static_cast<int64_t>(j) * kRows, mr, p.q_count);
          const unsigned tied = __ballot_sync(0xffffffffu, t);
          const int c = __popc(tied);
          if (m + c > kTieListCap) {
            tie_flush<kTie>(p, scratch + r0, mr, tie_row, tl.e, m, lane);
            m = 0;
          }
          if (t) tl.e[m + __popc(tied & ((1u << lane) - 1u))] = j;
          m += c;
        }
        if (m > 0) tie_flush<kTie>(p, scratch + r0, mr, tie_row, tl.e, m, lane);
      }
    }
  }
}

// finish_tile reading the scratch from global memory.
template <int kBatch, int kTie, bool kTrack>
__device__ __forceinline__ void finish_tile(const GemmScoreParams& p, const float* scratch, const float* s_m,
                                            int64_t bh, int64_t rt, int warp, int n_warps, int lane) {
  finish_tile<kBatch, kTie, kTrack>(p, scratch, s_m, bh, rt, warp, n_warps, lane,
                                    ScratchLogits{scratch, p.q_count, p.nk});
}

}  // namespace score_gemm
}  // namespace gpu
}  // namespace psa

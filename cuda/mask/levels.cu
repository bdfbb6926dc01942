// cuda/mask/levels.cu -- mask stage (level map), kernel + launcher + entry: per topk row a radix
// selection of the elements at the intervals' ends; per thresholdbound row a stable block radix
// sort of mask_spec.h's rank keys and its rank intervals (sequential cumulative mass, as the
// CPU); the top run of equal scores re-ranked by tie mass when an interval ends inside it; then
// post-processing. Must not hold a count, order or visibility rule of its own.
#include <cub/block/block_radix_rank.cuh>
#include <cub/block/block_radix_sort.cuh>

#include <cstdint>

#include "cuda/core/cuda_status.h"
#include "cuda/mask/mask_cuda.h"
#include "mask/mask_spec.h"

namespace psa {
namespace gpu {
namespace {

struct LevelKernelParams {
  const float* scores;
  const float* ties;  // tie masses [B*Hq, mq, nk] or NULL (equal scores: key index)
  int64_t heads_q, group, mq, nk, block_m, block_n, tile_n, len_q, len_k;
  int thresholdbound;
  double ratio_end[kMaskSlots];
  double min_full_ratio;
  int causal, text_suffix, text_rows_dense;
  int64_t text_begin, text_end;
  const int8_t* cap;
  int8_t* levels;
};

// Digit of an 8-bit radix pass over rank keys (CUB's ranking calls Digit()).
struct KeyDigit8 {
  int shift;
  __device__ __forceinline__ uint32_t Digit(uint32_t key) const { return (key >> shift) & 0xffu; }
};

// Row sort choice: the match ranking (warp-private histograms, 8-bit digits: 4 passes over the
// 32-bit keys) while its per-key counter pointers fit in registers (kItems <= 8); CUB's
// BlockRadixSort (4-bit digits, 8 passes) for the 16- and 32-item tiles, and for all tiles when
// false. H100, Wan2.1-14B (40 x 591 rows of 591): topk 0.283 ms with it vs 0.362 without,
// thresholdbound 0.377 vs 0.449 (PERF_NOTES, mask v2).
constexpr bool kMatchRanking = true;

// topk by selection (select_levels): at most one target rank per interval end.
constexpr int kSelTargets = kMaskSlots;  // the ends inside the row

template <int kWarps>
struct SelectSmem {
  uint32_t hist[kSelTargets][256];    // per distinct prefix: at the first target holding it
  uint32_t prefix[2][kSelTargets];    // key >> shift of each target's element (pass parity)
  int rank[kSelTargets];              // rank of the target's element among the prefix's elements
  int count[kSelTargets];             // elements holding the prefix
  int first[kSelTargets];             // whole-key ties: index of the target's element
  int slot_target[kMaskSlots];        // target of slot s's end; -1: e <= 0, -2: e >= n
  int targets;
  uint32_t key_min, key_max;
  int warp_count[kWarps];
  int top_run;  // elements holding the smallest key (the top score)
  int run_n;
  uint16_t run_idx[32];
};

// One CTA sorts one row of at most kThreads * kItems candidates, by a stable LSD radix sort of
// (rank_key, index) pairs handed in in index order: equal keys keep ascending indices, which
// is exactly ranks_before's order (mask_spec.h).
template <int kThreads, int kItems>
struct LevelTile {
  static constexpr int kCapacity = kThreads * kItems;
  static_assert(kCapacity <= 65536, "key indices travel as 16 bits");
  static_assert(kThreads % 32 == 0, "whole warps");
  static constexpr bool kMatch = kMatchRanking && kItems <= 8;
  using Sort = cub::BlockRadixSort<uint32_t, kThreads, kItems, uint16_t>;
  using Rank = cub::BlockRadixRankMatch<kThreads, 8, false>;
  // Position (index before the sort, rank after it) of thread t's item k. The match ranking
  // orders a warp's keys item-major (all lanes' item 0 first), so it gets warp-striped rows;
  // BlockRadixSort takes and returns blocked ones.
  static __device__ __forceinline__ int position(int t, int k) {
    return kMatch ? (t / 32) * (32 * kItems) + k * 32 + t % 32 : t * kItems + k;
  }
  struct Smem {
    union {
      typename Sort::TempStorage sort;
      typename Rank::TempStorage rank;
      float sorted[kCapacity];  // after the sort: the scores in rank order
      SelectSmem<kThreads / 32> sel;  // topk: the interval ends by selection (select_levels)
    };
    uint32_t ex_key[kMatch ? kCapacity : 1];  // match ranking: keys and indices by rank
    uint16_t ex_idx[kMatch ? kCapacity : 1];
    float score[kCapacity];   // the row's scores by key index; thresholdbound: then the running sums
    int8_t level[kCapacity];  // level of each key block before post-processing
    int64_t ends[kMaskSlots];
    int counts[kMaskSlots];
    uint32_t top_key;  // rank key of rank 0
    int top_run;       // ranks [0, top_run) share it
    int warp_run;      // top_run_warp0's run length, or -1 (the run fills warp 0)
    uint16_t top_idx[32];
  };
};

// Sorts the CTA's row: on return item k of thread t holds rank position(t, k).
template <int kThreads, int kItems>
__device__ __forceinline__ void sort_row(typename LevelTile<kThreads, kItems>::Smem& sm,
                                         uint32_t (&key)[kItems], uint16_t (&idx)[kItems]) {
  using Tile = LevelTile<kThreads, kItems>;
  if constexpr (Tile::kMatch) {
    for (int shift = 0; shift < 32; shift += 8) {
      int rank[kItems];
      typename Tile::Rank(sm.rank).RankKeys(key, rank, KeyDigit8{shift});
#pragma unroll
      for (int k = 0; k < kItems; ++k) {
        sm.ex_key[rank[k]] = key[k];
        sm.ex_idx[rank[k]] = idx[k];
      }
      __syncthreads();
#pragma unroll
      for (int k = 0; k < kItems; ++k) {
        const int q = Tile::position(threadIdx.x, k);
        key[k] = sm.ex_key[q];
        idx[k] = sm.ex_idx[q];
      }
      // The next pass's ranking passes barriers before anyone scatters into ex_* again.
    }
  } else {
    typename Tile::Sort(sm.sort).Sort(key, idx);
  }
}

// Position of lane's (tie mass t, block j) among lanes 0 .. run - 1's pairs in the top run's
// order (ranks_before with equal scores: tie mass, then block); warp-wide, run <= 32 (lanes
// at or past run hold no pair and get a meaningless position).
__device__ __forceinline__ int run_position(int j, float t, int run, int lane) {
  int pos = 0;
  for (int l = 0; l < run; ++l) {
    const int jl = __shfl_sync(0xffffffffu, j, l);
    const float tl = __shfl_sync(0xffffffffu, t, l);
    pos += l != lane && ranks_before(0.0f, tl, jl, 0.0f, t, j) ? 1 : 0;
  }
  return pos;
}

// Tie masses (mask_spec.h ranks_before): only the P == 1 blocks have a non-zero one, and they
// all share the row's top score, so after the sort by (rank_key, index) only the run of ranks
// [0, run) with rank 0's key can change order: by tie mass descending, then key index. A run of
// at most 32 (the usual 1-16) is re-ranked by one warp (each lane counts the lanes before it);
// a longer one by a second stable radix sort of the rank-ordered items by tie_key, which keeps
// ranks >= run (key 0xffffffff) in place. Ends with idx[k] = block of rank position(tid, k).
// The kernel calls it only where the order can change a level (top_run_split), and for the
// match ranking's tiles only when top_run_warp0 cannot (a run of 32 or more). H200,
// CogVideoX-5B: the mask stage's share of the tie-mass cost went from +0.005-0.006 ms to
// +0.001-0.002 ms (PERF_NOTES.md, "Tie masses: re-rank only a split run").
template <int kThreads, int kItems>
__device__ __forceinline__ void reorder_top_run(typename LevelTile<kThreads, kItems>::Smem& sm,
                                                uint32_t (&key)[kItems], uint16_t (&idx)[kItems],
                                                int n, const float* ties) {
  using Tile = LevelTile<kThreads, kItems>;
  const int tid = threadIdx.x, lane = tid % 32;
#pragma unroll
  for (int k = 0; k < kItems; ++k)
    if (Tile::position(tid, k) == 0) sm.top_key = key[k];
  __syncthreads();
  int c = 0;
#pragma unroll
  for (int k = 0; k < kItems; ++k) c += Tile::position(tid, k) < n && key[k] == sm.top_key ? 1 : 0;
  c = __reduce_add_sync(0xffffffffu, c);
  if (lane == 0 && c > 0) atomicAdd(&sm.top_run, c);
  __syncthreads();
  const int run = sm.top_run;  // uniform
  if (run <= 1) return;
  if (run <= 32) {
#pragma unroll
    for (int k = 0; k < kItems; ++k) {
      const int r = Tile::position(tid, k);
      if (r < run) sm.top_idx[r] = idx[k];
    }
    __syncthreads();
    if (tid < 32) {
      const int j = lane < run ? sm.top_idx[lane] : 0;
      const int pos = run_position(j, lane < run ? ties[j] : 0.0f, run, lane);
      __syncwarp();
      if (lane < run) sm.top_idx[pos] = static_cast<uint16_t>(j);
    }
    __syncthreads();
#pragma unroll
    for (int k = 0; k < kItems; ++k) {
      const int r = Tile::position(tid, k);
      if (r < run) idx[k] = sm.top_idx[r];
    }
  } else {
#pragma unroll
    for (int k = 0; k < kItems; ++k) key[k] = Tile::position(tid, k) < run ? tie_key(ties[idx[k]]) : 0xffffffffu;
    sort_row<kThreads, kItems>(sm, key, idx);
  }
}

// Whether the order inside the row's top run can change a level: a rank interval ends strictly
// inside it (ranks e - 1 and e both hold the top key). The levels are a function of the rank
// (level_of_rank), and the intervals' ends depend on the scores in rank order only (equal
// within the run), so a run that no end splits takes one level in any order and needs no tie
// masses. The match ranking leaves the keys in rank order in ex_key; the CUB sort does not, so
// its tiles always re-rank. Uniform over the CTA (shared reads after a barrier).
template <int kThreads, int kItems>
__device__ __forceinline__ bool top_run_split(const typename LevelTile<kThreads, kItems>::Smem& sm, int n) {
  if constexpr (LevelTile<kThreads, kItems>::kMatch) {
    const uint32_t top = sm.ex_key[0];
    bool split = false;
#pragma unroll
    for (int sl = 0; sl < kMaskSlots; ++sl) {
      const int64_t e = sm.ends[sl];
      split |= e > 0 && e < n && sm.ex_key[e] == top;
    }
    return split;
  } else {
    return true;
  }
}

// reorder_top_run for the match ranking's tiles when the run is shorter than 32: there warp 0's
// item 0 is rank `lane` (LevelTile::position), so warp 0 finds the run by one ballot (sorted
// keys: the lanes holding the top key are a prefix) and ranks it by shuffles with the tie masses
// it loaded right after the sort (`tie`: rank lane's, 0 past the candidates), then one barrier
// hands the order to the CTA. Returns false, with nothing changed, for a run of 32 or more (the
// caller then runs reorder_top_run). Uniform over the CTA.
template <int kThreads, int kItems>
__device__ __forceinline__ bool top_run_warp0(typename LevelTile<kThreads, kItems>::Smem& sm,
                                              const uint32_t (&key)[kItems], uint16_t (&idx)[kItems], int n,
                                              float tie) {
  using Tile = LevelTile<kThreads, kItems>;
  static_assert(Tile::kMatch, "warp 0's item 0 holds ranks 0..31 only under the match ranking");
  const int tid = threadIdx.x;
  if (tid < 32) {
    const uint32_t top = __shfl_sync(0xffffffffu, key[0], 0);
    const int run = __popc(__ballot_sync(0xffffffffu, tid < n && key[0] == top));
    if (run < 32) {
      const int j = idx[0];
      int pos = 0;
      for (int l = 0; l < run; ++l) {
        const int jl = __shfl_sync(0xffffffffu, j, l);
        const float tl = __shfl_sync(0xffffffffu, tie, l);
        pos += ranks_before(0.0f, tl, jl, 0.0f, tie, j) ? 1 : 0;
      }
      if (tid < run) sm.top_idx[pos] = static_cast<uint16_t>(j);
    }
    if (tid == 0) sm.warp_run = run < 32 ? run : -1;
  }
  __syncthreads();
  const int run = sm.warp_run;
  if (run < 0) return false;
#pragma unroll
  for (int k = 0; k < kItems; ++k) {
    const int r = Tile::position(tid, k);
    if (r < run) idx[k] = sm.top_idx[r];
  }
  return true;
}

// ---- topk by selection ----------------------------------------------------------------------
// topk's interval ends are the same ranks e_s for every row of n candidates (topk_segment_ends),
// and a block's level depends only on which ends its rank is below. So a topk row needs no
// sort: the element of rank e in the stable (rank_key, index) order -- the threshold T_e -- is
// found by a radix selection, and an element x has rank < e iff (key_x, index_x) < T_e. The
// selection refines, per target rank, the key prefix holding it: each pass a histogram of the
// next digit of the elements under each distinct prefix, then the digit where the target's
// remaining rank falls. The passes start at the highest bit in which the row's keys differ, and
// stop once every target's prefix holds one element; a target whose whole key is shared by
// several elements takes, among them, the (remaining rank)-th in index order.
// The top run (equal top scores) orders by tie mass when an end splits it (mask_spec.h
// ranks_before): a run of at most 32 is ranked by warp 0 as in top_run_warp0; a longer split
// run returns false, and the caller sorts the row instead.

// Warp-striped position of thread t's item k: warp w holds 32 * kItems consecutive indices,
// item k of lane l is index w * 32 * kItems + 32 k + l (conflict-free shared reads; a ballot
// per item walks them in index order).
template <int kItems>
__device__ __forceinline__ int striped(int t, int k) {
  return (t / 32) * (32 * kItems) + k * 32 + t % 32;
}

// Levels of a topk row into sm.level by selection; the candidates' scores in sm.score, the
// intervals' ends in sm.ends, n > 0. False (nothing written) for a top run of more than 32
// that an end splits. Uniform over the CTA; ends with a barrier.
template <int kThreads, int kItems>
__device__ __forceinline__ bool select_levels(typename LevelTile<kThreads, kItems>::Smem& sm, int n,
                                              const float* ties_row) {
  constexpr int kWarps = kThreads / 32;
  SelectSmem<kWarps>& sel = sm.sel;
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  uint32_t key[kItems];
  uint32_t lo = 0xffffffffu, hi = 0u;
#pragma unroll
  for (int k = 0; k < kItems; ++k) {
    const int j = striped<kItems>(tid, k);
    key[k] = j < n ? rank_key(sm.score[j]) : 0u;
    if (j < n) {
      lo = min(lo, key[k]);
      hi = max(hi, key[k]);
    }
  }
  lo = __reduce_min_sync(0xffffffffu, lo);
  hi = __reduce_max_sync(0xffffffffu, hi);
  if (lane == 0) {
    atomicMin(&sel.key_min, lo);
    atomicMax(&sel.key_max, hi);
  }
  __syncthreads();
  // The target ranks (thread 0): each distinct end in (0, n). With tie masses, the length of
  // the top run (the elements of the smallest key).
  const uint32_t top = sel.key_min;
  const uint32_t diff = top ^ sel.key_max;
  const int top_bit = diff != 0u ? 31 - __clz(diff) : -1;  // highest bit in which keys differ
  if (ties_row != nullptr) {
    int c = 0;
#pragma unroll
    for (int k = 0; k < kItems; ++k) c += striped<kItems>(tid, k) < n && key[k] == top ? 1 : 0;
    c = __reduce_add_sync(0xffffffffu, c);
    if (lane == 0 && c > 0) atomicAdd(&sel.top_run, c);
  }
  if (tid == 0) {
    int t = 0, last = -1;
    for (int s = 0; s < kMaskSlots; ++s) {
      const int e = static_cast<int>(sm.ends[s]);
      if (e <= 0 || e >= n) {
        sel.slot_target[s] = e <= 0 ? -1 : -2;
        continue;
      }
      if (e != last) sel.rank[t++] = last = e;
      sel.slot_target[s] = t - 1;
    }
    sel.targets = t;
    for (int u = 0; u < t; ++u) {
      sel.prefix[0][u] = top_bit >= 31 ? 0u : top >> (top_bit + 1);  // the bits every key shares
      sel.count[u] = n;
      sel.first[u] = 0;
    }
  }
  __syncthreads();
  const int nt = sel.targets;
  // Passes of 8-bit digits from the top differing bit down; `shift` is the digit's lowest bit,
  // `above` the previous pass's (the prefix is key >> above).
  int above = top_bit + 1, pass = 0;
  while (above > 0 && nt > 0) {
    const int shift = above > 8 ? above - 8 : 0;
    const uint32_t dmask = (1u << (above - shift)) - 1u;
    const int q = pass & 1;
    uint32_t pre[kSelTargets];
#pragma unroll
    for (int t = 0; t < kSelTargets; ++t) pre[t] = t < nt ? sel.prefix[q][t] : 0xffffffffu;
    for (int i = tid; i < nt * 256; i += kThreads) (&sel.hist[0][0])[i] = 0u;
    __syncthreads();
#pragma unroll
    for (int k = 0; k < kItems; ++k) {
      const int j = striped<kItems>(tid, k);
      const uint32_t h = above > 31 ? 0u : key[k] >> above;
      int g = -1;  // the first target whose prefix the element holds
#pragma unroll
      for (int t = kSelTargets - 1; t >= 0; --t)
        if (t < nt && pre[t] == h) g = t;
      if (j >= n) g = -1;
      const uint32_t code = g >= 0 ? (static_cast<uint32_t>(g) << 8) | ((key[k] >> shift) & dmask) : 0xffffffffu;
      const unsigned peers = __match_any_sync(0xffffffffu, code);
      if (g >= 0 && __ffs(peers) - 1 == lane) atomicAdd(&sel.hist[g][code & 0xffu], __popc(peers));
    }
    __syncthreads();
    // Warp w refines targets w, w + kWarps, ...: lane l scans bins 8l .. 8l + 7.
    for (int t = warp; t < nt; t += kWarps) {
      int g = t;
      while (g > 0 && sel.prefix[q][g - 1] == sel.prefix[q][t]) --g;
      const uint32_t* hg = sel.hist[g];
      const int r = sel.rank[t];
      uint32_t c[8], tot = 0;
#pragma unroll
      for (int i = 0; i < 8; ++i) tot += (c[i] = hg[lane * 8 + i]);
      uint32_t incl = tot;
#pragma unroll
      for (int o = 1; o < 32; o <<= 1) {
        const uint32_t y = __shfl_up_sync(0xffffffffu, incl, o);
        if (lane >= o) incl += y;
      }
      uint32_t before = incl - tot;
      __syncwarp();  // every lane has read rank[t] before one rewrites it
      if (before <= static_cast<uint32_t>(r) && static_cast<uint32_t>(r) < incl) {
#pragma unroll
        for (int i = 0; i < 8; ++i) {
          if (static_cast<uint32_t>(r) < before + c[i]) {
            sel.prefix[q ^ 1][t] = (sel.prefix[q][t] << (above - shift)) | static_cast<uint32_t>(lane * 8 + i);
            sel.rank[t] = r - static_cast<int>(before);
            sel.count[t] = static_cast<int>(c[i]);
            break;
          }
          before += c[i];
        }
      }
    }
    __syncthreads();
    above = shift;
    ++pass;
    bool resolved = true;  // every target's prefix holds one element: the rest of the key decides nothing
    for (int t = 0; t < nt; ++t) resolved &= sel.count[t] == 1;
    if (resolved) break;
  }
  const int q = pass & 1;  // the final prefixes: key >> above
  // Whole-key ties at a target (only when the passes reached bit 0): the target's element is the
  // (rank)-th of the key's elements in index order.
  for (int t = 0; t < nt; ++t) {
    if (sel.count[t] <= 1) continue;
    const uint32_t kt = sel.prefix[q][t];
    const int r = sel.rank[t];
    unsigned b[kItems];
    int wc = 0;
#pragma unroll
    for (int k = 0; k < kItems; ++k) {
      b[k] = __ballot_sync(0xffffffffu, striped<kItems>(tid, k) < n && key[k] == kt);
      wc += __popc(b[k]);
    }
    if (lane == 0) sel.warp_count[warp] = wc;
    __syncthreads();
    int base = 0;
    for (int w = 0; w < warp; ++w) base += sel.warp_count[w];
#pragma unroll
    for (int k = 0; k < kItems; ++k) {
      if (((b[k] >> lane) & 1u) != 0u && base + __popc(b[k] & ((1u << lane) - 1u)) == r)
        sel.first[t] = striped<kItems>(tid, k);
      base += __popc(b[k]);
    }
    __syncthreads();
  }
  // The top run, when an end splits it.
  const bool ties = ties_row != nullptr;
  const int run = ties ? sel.top_run : 0;
  bool split = false;
#pragma unroll
  for (int s = 0; s < kMaskSlots; ++s) split |= ties && sm.ends[s] > 0 && sm.ends[s] < run;
  if (split && run > 32) {
    __syncthreads();  // every thread has read `sel` before the caller's sort reuses its storage
    return false;
  }
  if (split) {
    if (tid == 0) sel.run_n = 0;
    __syncthreads();
#pragma unroll
    for (int k = 0; k < kItems; ++k) {
      const int j = striped<kItems>(tid, k);
      if (j < n && key[k] == top) sel.run_idx[atomicAdd(&sel.run_n, 1)] = static_cast<uint16_t>(j);
    }
    __syncthreads();
    if (warp == 0) {  // positions in the run by (tie mass, index); the order of the list is irrelevant
      const int j = lane < run ? sel.run_idx[lane] : 0;
      const int pos = run_position(j, lane < run ? ties_row[j] : 0.0f, run, lane);
      if (lane < run) sm.level[j] = static_cast<int8_t>(level_of_rank(pos, sm.ends));
    }
  }
  // Each element's slot: the number of ends whose threshold it is not below (the thresholds
  // ascend with the slots).
  uint32_t tk[kMaskSlots];
  int ti[kMaskSlots];
  bool whole[kMaskSlots];  // e >= n: every element is below; compared as whole keys (NaN's included)
#pragma unroll
  for (int s = 0; s < kMaskSlots; ++s) {
    const int t = sel.slot_target[s];
    whole[s] = t == -2;
    tk[s] = t == -1 ? 0u : t == -2 ? 0xffffffffu : sel.prefix[q][t];
    ti[s] = t == -1 ? 0 : t == -2 ? INT32_MAX : sel.count[t] > 1 ? sel.first[t] : 0;
  }
#pragma unroll
  for (int k = 0; k < kItems; ++k) {
    const int j = striped<kItems>(tid, k);
    if (j >= n || (split && key[k] == top)) continue;
    const uint32_t h = above > 31 ? 0u : key[k] >> above;
    int s = 0;
#pragma unroll
    for (int u = 0; u < kMaskSlots; ++u) {
      const uint32_t x = whole[u] ? key[k] : h;
      s += x < tk[u] || (x == tk[u] && j < ti[u]) ? 0 : 1;
    }
    sm.level[j] = static_cast<int8_t>(s < kMaskSlots ? level_of_slot(s) : 0);
  }
  __syncthreads();
  return true;
}

template <int kThreads, int kItems>
__global__ void __launch_bounds__(kThreads) build_levels_kernel(LevelKernelParams p) {
  using Tile = LevelTile<kThreads, kItems>;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  typename Tile::Smem& sm = *reinterpret_cast<typename Tile::Smem*>(smem_raw);

  const int tid = threadIdx.x;
  const int64_t i = blockIdx.x, h = blockIdx.y, b = blockIdx.z;
  const int64_t row = (b * p.heads_q + h) * p.mq + i;
  const int64_t visible = p.causal ? causal_key_blocks(i, p.block_m, p.block_n, p.len_q, p.len_k) : p.nk;
  const int n = static_cast<int>(visible < p.nk ? visible : p.nk);  // candidates, <= kCapacity

  const float* s = p.scores + row * p.nk;
  for (int j = tid; j < n; j += kThreads) sm.score[j] = s[j];
  if (tid < kMaskSlots) sm.counts[tid] = 0;
  const bool topk = !p.thresholdbound;
  if (tid == 0) {
    sm.top_run = 0;
    if (topk) {
      topk_segment_ends(n, p.ratio_end, p.block_n, p.tile_n, sm.ends);
      sm.sel.key_min = 0xffffffffu;
      sm.sel.key_max = 0u;
      sm.sel.top_run = 0;
    }
  }
  __syncthreads();

  // topk rows by selection; thresholdbound rows (whose ends need the running mass in rank
  // order) and the rare topk row that select_levels gives back by a stable sort.
  const bool selected = n > 0 && topk && select_levels<kThreads, kItems>(sm, n, p.ties ? p.ties + row * p.nk : nullptr);
  if (n > 0 && !selected) {  // uniform over the CTA
    // Padding takes the NaN key; being last in index order, the stable sort puts it after
    // every candidate.
    uint32_t key[kItems];
    uint16_t idx[kItems];
#pragma unroll
    for (int k = 0; k < kItems; ++k) {
      const int j = Tile::position(tid, k);
      key[k] = j < n ? rank_key(sm.score[j]) : 0xffffffffu;
      idx[k] = static_cast<uint16_t>(j);
    }
    sort_row<kThreads, kItems>(sm, key, idx);
    // Match ranking: warp 0 loads the tie masses of ranks 0..31 now, so that the loads are
    // done by the time top_run_warp0 may need them (after the intervals).
    float tie = 0.0f;
    if constexpr (Tile::kMatch)
      if (p.ties != nullptr && tid < 32 && tid < n) tie = p.ties[row * p.nk + idx[0]];
    __syncthreads();  // the sort's storage becomes `sorted`

    if (p.thresholdbound) {
#pragma unroll
      for (int k = 0; k < kItems; ++k) {
        const int r = Tile::position(tid, k);
        if (r < n) sm.sorted[r] = sm.score[idx[k]];
      }
      __syncthreads();
      if (tid == 0) running_mass(sm.sorted, n, sm.score);  // one sequential sum, as the CPU
      __syncthreads();
      const float total = sm.score[n - 1];
      int cnt[kMaskSlots] = {0, 0, 0, 0, 0};
#pragma unroll
      for (int k = 0; k < kItems; ++k) {
        const int r = Tile::position(tid, k);
        if (r < n) {
          const float e = relative_mass(sm.score[r], total, r, n);
#pragma unroll
          for (int sl = 0; sl < kMaskSlots; ++sl) cnt[sl] += within_mass(e, p.ratio_end[sl]) ? 1 : 0;
        }
      }
#pragma unroll
      for (int sl = 0; sl < kMaskSlots; ++sl) {
        const int c = __reduce_add_sync(0xffffffffu, cnt[sl]);
        if (tid % 32 == 0 && c > 0) atomicAdd(&sm.counts[sl], c);
      }
      __syncthreads();
      if (tid == 0) {
        int64_t c[kMaskSlots];
        for (int sl = 0; sl < kMaskSlots; ++sl) c[sl] = sm.counts[sl];
        thresholdbound_ends_from_counts(c, n, p.block_n, p.tile_n, p.min_full_ratio, sm.ends);
      }
    } else if (tid == 0) {
      topk_segment_ends(n, p.ratio_end, p.block_n, p.tile_n, sm.ends);
    }
    __syncthreads();
    // Tie masses only where they can change a level (`sorted`, the sort's former storage, is
    // no longer read: a long run's second sort may reuse it).
    if (p.ties != nullptr && top_run_split<kThreads, kItems>(sm, n)) {
      bool done = false;
      if constexpr (Tile::kMatch) done = top_run_warp0<kThreads, kItems>(sm, key, idx, n, tie);
      if (!done) reorder_top_run<kThreads, kItems>(sm, key, idx, n, p.ties + row * p.nk);
    }
#pragma unroll
    for (int k = 0; k < kItems; ++k) {
      const int r = Tile::position(tid, k);
      if (r < n) sm.level[idx[k]] = static_cast<int8_t>(level_of_rank(r, sm.ends));
    }
    __syncthreads();
  }

  const MaskPostRow post = mask_post_row(i, p.nk, p.block_m, p.block_n, p.len_q, p.len_k,
                                         p.causal != 0, p.text_suffix != 0,
                                         p.text_rows_dense != 0, p.text_begin, p.text_end);
  const int8_t* cap = p.cap ? p.cap + (b * (p.heads_q / p.group) + h / p.group) * p.nk : nullptr;
  int8_t* out = p.levels + row * p.nk;
  for (int j = tid; j < p.nk; j += kThreads)
    out[j] = static_cast<int8_t>(post_level(j < n ? sm.level[j] : 0, j, post, cap ? cap[j] : 8));
}

template <int kThreads, int kItems>
constexpr size_t tile_smem_bytes() {
  return sizeof(typename LevelTile<kThreads, kItems>::Smem);
}

template <int kThreads, int kItems>
psa_status launch_tile(const LevelKernelParams& p, dim3 grid, cudaStream_t stream) {
  constexpr size_t smem = tile_smem_bytes<kThreads, kItems>();
  if (smem > 48 * 1024)
    PSA_CUDA_TRY(cudaFuncSetAttribute(build_levels_kernel<kThreads, kItems>,
                                      cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)),
                 "build_levels_kernel: cudaFuncSetAttribute");
  build_levels_kernel<kThreads, kItems><<<grid, kThreads, smem, stream>>>(p);
  return launch_status("build_levels_kernel");
}

// Tiles by row length, smallest first: 128 threads up to 1024 candidates, then wider CTAs. The
// standard shapes have 139, 256, 591, 1024 key blocks at block_n 128 and 278, 512, 1182 at
// block_n 64 (the shipped presets' size): 64 x 3 keeps CogVideoX's 139 from padding to 256,
// 128 x 3 its 278 from padding to 640, 160 x 8 Wan2.1-14B's 1182 from 2048. The cost follows
// the capacity: H200, 40 x 591 rows of 1182, topk 1.03 -> 0.63 ms and thresholdbound 1.61 ->
// 0.94 ms with 160 x 8. The last tile's capacity is the builder's limit.
#define PSA_LEVEL_TILES(X) \
  X(64, 3) X(128, 2) X(128, 3) X(128, 4) X(128, 5) X(128, 8) X(160, 8) X(256, 8) X(512, 8) X(512, 16) X(512, 32)

}  // namespace

int64_t max_mask_blocks() {
  const int limit = smem_optin_limit();
  if (limit == 0) return 0;
  int64_t n = 0;
#define PSA_FITS(T, I) \
  if (tile_smem_bytes<T, I>() <= static_cast<size_t>(limit)) n = int64_t{T} * I;
  PSA_LEVEL_TILES(PSA_FITS)
#undef PSA_FITS
  return n;
}

psa_status levels_supported(int64_t batch, int64_t heads_q, int64_t mq, int64_t nk, int64_t block_n) {
  const int64_t max_nk = max_mask_blocks();
  PSA_RETURN_IF(nk > max_nk, PSA_ERR_UNSUPPORTED,
                "k: %lld key blocks of %lld tokens; the CUDA mask builder sorts at most %lld per row "
                "(raise block_size.n)",
                static_cast<long long>(nk), static_cast<long long>(block_n),
                static_cast<long long>(max_nk));
  // Grid (mq, heads_q, batch): y and z hold at most 65535 (a wrapped dimension would silently
  // skip rows).
  PSA_RETURN_IF(heads_q > 65535 || batch > 65535 || mq > INT32_MAX, PSA_ERR_UNSUPPORTED,
                "mask: batch = %lld, heads = %lld, %lld query blocks; the CUDA level builder's grid "
                "allows at most 65535, 65535 and 2^31 - 1",
                static_cast<long long>(batch), static_cast<long long>(heads_q),
                static_cast<long long>(mq));
  return PSA_OK;
}

psa_status build_levels_cuda(const LevelArgs& a, cudaStream_t stream) {
  if (a.dims.batch == 0 || a.dims.heads_q == 0 || a.dims.mq == 0 || a.dims.nk == 0) return PSA_OK;
  PSA_TRY(levels_supported(a.dims.batch, a.dims.heads_q, a.dims.mq, a.dims.nk, a.dims.block_n));
  LevelKernelParams p{};
  p.scores = a.scores;
  p.ties = a.ties;
  p.heads_q = a.dims.heads_q;
  p.group = a.dims.heads_q / a.dims.heads_kv;
  p.mq = a.dims.mq;
  p.nk = a.dims.nk;
  p.block_m = a.dims.block_m;
  p.block_n = a.dims.block_n;
  p.tile_n = a.tile_n;
  p.len_q = a.dims.len_q;
  p.len_k = a.dims.len_k;
  p.thresholdbound = a.mode == PSA_MASK_MODE_THRESHOLDBOUND;
  for (int s = 0; s < kMaskSlots; ++s) p.ratio_end[s] = a.ratio_end[s];
  p.min_full_ratio = a.min_full_ratio;
  p.causal = a.causal;
  p.text_suffix = a.text_rule == PSA_TEXT_RULE_REFERENCE_SUFFIX;
  p.text_rows_dense = a.text_rows_dense;
  p.text_begin = a.text_begin;
  p.text_end = a.text_end;
  p.cap = a.cap;
  p.levels = a.levels;
  const dim3 grid(static_cast<unsigned>(a.dims.mq), static_cast<unsigned>(a.dims.heads_q),
                  static_cast<unsigned>(a.dims.batch));
#define PSA_LAUNCH_IF_FITS(T, I) \
  if (a.dims.nk <= int64_t{T} * I) return launch_tile<T, I>(p, grid, stream);
  PSA_LEVEL_TILES(PSA_LAUNCH_IF_FITS)
#undef PSA_LAUNCH_IF_FITS
  return set_error(PSA_ERR_UNSUPPORTED, "mask: %lld key blocks per row; no level tile holds them",
                   static_cast<long long>(a.dims.nk));
}

}  // namespace gpu
}  // namespace psa

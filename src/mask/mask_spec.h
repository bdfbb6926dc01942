// mask/mask_spec.h -- meaning of mask building (spec 4, 5, 6.5), shared by the CPU reference
// (mask_cpu.cpp, sim_cap.cpp) and the CUDA mask kernels: rank order, per-slot rank intervals,
// causal / text block rules, similarity cap. Header-only: no containers, no CUDA includes.
#pragma once
#include <cmath>
#include <cstdint>

#include "core/bits.h"
#include "core/hd.h"

namespace psa {

// ---- Slots and levels -------------------------------------------------------------------
// Slots in processing order L1, L2, L4, L8, L0 (same numbering as LevelSlot in config.h;
// ratio ends are validated non-decreasing in this order, so slot order = processing order).
constexpr int kMaskSlots = 5;

PSA_HD constexpr int level_of_slot(int slot) { return slot < 4 ? (1 << slot) : 0; }
// Inverse of level_of_slot: slot of level 1, 2, 4, 8, 0; -1 for any other value.
PSA_HD constexpr int slot_of_level(int level) {
  return level == 1 ? 0 : level == 2 ? 1 : level == 4 ? 2 : level == 8 ? 3 : level == 0 ? 4 : -1;
}
PSA_HD constexpr bool is_mask_level(int level) {
  return level == 0 || level == 1 || level == 2 || level == 4 || level == 8;
}

// Alignment multiple A(p) (spec 4.2): a level-p block holds bn/p pooled tokens; when that
// is less than a tile of tn, ceil(p / (bn/tn)) blocks share one tile, so a row's level-p
// count must be a multiple of it. A(0) = 1. Requires 1 <= tn <= bn (validated by config).
PSA_HD constexpr int64_t alignment_multiple(int level, int64_t bn, int64_t tn) {
  return level <= 0 ? 1 : (level + bn / tn - 1) / (bn / tn);
}

// ---- Rank order (spec 4.2) --------------------------------------------------------------
// Strict total order of a row's key blocks: higher score first; among equal scores higher tie
// mass first (importance_spec.h tie_mass; 0 where not computed, so without tie masses this is
// the reference's order); then lower key index. NaN scores rank after every number (so a sort
// never sees an invalid comparator). Tie masses are finite and >= 0.
// The cumulative mass of thresholdbound runs over the scores in this order; within a run of
// equal scores the prefix sums are the same whatever the order, so the tie rule changes which
// blocks take a level, never a level's count (topk and thresholdbound keep their densities).
// Importance gives a non-zero tie mass only to blocks of the row's top score, so only the run of
// ranks holding the top score can reorder (the CUDA level builder relies on it).
PSA_HD bool ranks_before(float a, float ta, int64_t ia, float b, float tb, int64_t ib) {
  bool a_nan = a != a, b_nan = b != b;
  if (a_nan != b_nan) return b_nan;
  if (!a_nan && a != b) return a > b;
  if (ta != tb) return ta > tb;
  return ia < ib;
}
// Without tie masses (equal tie masses): score, then key index.
PSA_HD bool ranks_before(float a, int64_t ia, float b, int64_t ib) {
  return ranks_before(a, 0.0f, ia, b, 0.0f, ib);
}

// Sort key of the score part of that order: rank_key(a) < rank_key(b) implies ranks_before(a, ia,
// b, ib) for any indices, and equal keys are exactly the score ties (tie mass, then index decide).
// Higher scores get smaller keys, -0 and +0 share one key (they compare equal), every NaN maps to
// the largest key. A stable ascending sort of the keys of a row in index order therefore yields
// the rank order without tie masses.
PSA_HD uint32_t rank_key(float s) {
  if (s != s) return 0xffffffffu;
  if (s == 0.0f) s = 0.0f;  // -0 -> +0
  const uint32_t u = float_bits(s);
  const uint32_t ascending = (u & 0x80000000u) != 0u ? ~u : (u | 0x80000000u);
  return ~ascending;
}

// Sort key of the tie part: tie_key(ta) < tie_key(tb) iff ta > tb, for tie masses >= 0 (a
// second stable sort by it reorders a run of equal scores; -0 counts as 0).
PSA_HD uint32_t tie_key(float t) {
  if (!(t > 0.0f)) return 0xffffffffu;
  return ~float_bits(t);
}

// ---- Rank intervals per slot (spec 4.3, 4.4) ----------------------------------------------
// Slot s owns ranks [seg_end[s-1], seg_end[s]) (seg_end[-1] = 0); ranks >= seg_end[4] are
// uncovered and stay level 0. seg_end is non-decreasing and within [0, n].

// End of a slot's interval from its raw end: with A > 1 the count is rounded up to a
// multiple of A, or down when the round-up reaches the row end (so counts are always
// multiples of A); an end before `cur` leaves the slot empty.
PSA_HD int64_t aligned_segment_end(int64_t cur, int64_t raw_end, int64_t a, int64_t n) {
  int64_t end = raw_end;
  if (a > 1) {
    int64_t want = raw_end > cur ? raw_end - cur : 0;
    end = cur + (want + a - 1) / a * a;
    if (end >= n) end = cur + (n - cur) / a * a;
  }
  if (end > n) end = n;
  return end > cur ? end : cur;
}

// min(n, trunc(n * f)) with the product in double and truncation toward zero (spec 4.3:
// 0.1 * 3 = 0.30000000000000004 -> 0; 139 * 0.15 = 20.849999... -> 20). NaN or <= 0 -> 0.
PSA_HD int64_t truncated_fraction(int64_t n, double f) {
  double prod = static_cast<double>(n) * f;
  if (!(prod > 0.0)) return 0;
  if (prod >= static_cast<double>(n)) return n;
  return static_cast<int64_t>(prod);
}

// topk: the counts depend only on n, so every row gets the same seg_end.
PSA_HD void topk_segment_ends(int64_t n, const double ratio_end[kMaskSlots], int64_t bn, int64_t tn,
                              int64_t seg_end[kMaskSlots]) {
  int64_t cur = 0;
  for (int s = 0; s < kMaskSlots; ++s) {
    int64_t raw = truncated_fraction(n, ratio_end[s]);
    cur = aligned_segment_end(cur, raw, alignment_multiple(level_of_slot(s), bn, tn), n);
    seg_end[s] = cur;
  }
}

// Running fp32 sum of a row in rank order (one sequential accumulation, so both backends get
// the same bits): prefix[r] = sorted[0] + ... + sorted[r]; returns the total (0 when n = 0).
// `prefix` may equal `sorted`, but not overlap it otherwise. Each full batch is loaded before it
// is summed, so a GPU thread running this overlaps the loads instead of waiting on each.
PSA_HD float running_mass(const float* sorted, int64_t n, float* prefix) {
  constexpr int kBatch = 16;
  float c = 0.0f;
  int64_t r0 = 0;
  for (; r0 + kBatch <= n; r0 += kBatch) {
    const float* in = sorted + r0;
    float* out = prefix + r0;
    float v[kBatch];
    for (int u = 0; u < kBatch; ++u) v[u] = in[u];
    for (int u = 0; u < kBatch; ++u) {
      c += v[u];
      out[u] = c;
    }
  }
  for (; r0 < n; ++r0) {
    c += sorted[r0];
    prefix[r0] = c;
  }
  return c;
}

// Relative mass of rank r from its running sum: prefix / total. When the total is not a finite
// positive number (all-zero, inf or NaN scores) the mass is taken as uniform, (r+1)/n.
PSA_HD float relative_mass(float prefix, float total, int64_t r, int64_t n) {
  const bool usable = total > 0.0f && total - total == 0.0f;
  return usable ? prefix / total : static_cast<float>(r + 1) / static_cast<float>(n);
}

// Relative cumulative mass of a descending-sorted row, in fp32: running_mass, each prefix
// divided by the total (relative_mass); E[n-1] = 1 exactly. `E` may alias `sorted`.
PSA_HD void relative_cumulative_mass(const float* sorted, int64_t n, float* E) {
  const float c = running_mass(sorted, n, E);
  for (int64_t r = 0; r < n; ++r) E[r] = relative_mass(E[r], c, r, n);
}

// Whether a relative mass counts towards a slot with ratio end e: E <= e + 1e-6, compared in
// double (the reference compares in bf16).
PSA_HD bool within_mass(float E, double e) { return static_cast<double>(E) <= e + 1e-6; }

// #{ r : within_mass(E[r], e) }.
PSA_HD int64_t mass_count(const float* E, int64_t n, double e) {
  int64_t cnt = 0;
  for (int64_t r = 0; r < n; ++r) cnt += within_mass(E[r], e) ? 1 : 0;
  return cnt;
}

// thresholdbound from the per-slot counts of mass_count (lets a kernel count in parallel):
// the crossing rank is included (raw = cnt + 1); cnt = 0 leaves the slot empty; level 1
// gets at least min(n, trunc(n * min_full_ratio) + 1) blocks.
PSA_HD void thresholdbound_ends_from_counts(const int64_t cnt[kMaskSlots], int64_t n, int64_t bn,
                                            int64_t tn, double min_full_ratio,
                                            int64_t seg_end[kMaskSlots]) {
  int64_t cur = 0;
  for (int s = 0; s < kMaskSlots; ++s) {
    int level = level_of_slot(s);
    int64_t raw = cnt[s] > 0 ? cnt[s] + 1 : cur;
    int64_t end = aligned_segment_end(cur, raw, alignment_multiple(level, bn, tn), n);
    if (level == 1) {
      int64_t floor_end = truncated_fraction(n, min_full_ratio) + 1;
      if (floor_end > n) floor_end = n;
      if (end < floor_end) end = floor_end;
    }
    cur = end;
    seg_end[s] = cur;
  }
}

// The first interval end of a topk row of n >= 1 candidates inside (0, n), or n when none is
// (the ends depend on n alone; ends at 0 or n split nothing). A top run of equal scores no
// longer than this holds whole intervals only, so the order inside it (ranks_before's tie
// masses) decides no level.
PSA_HD int64_t topk_unsplit_top_run(int64_t n, const double ratio_end[kMaskSlots], int64_t bn, int64_t tn) {
  int64_t seg_end[kMaskSlots];
  topk_segment_ends(n, ratio_end, bn, tn, seg_end);
  for (int s = 0; s < kMaskSlots; ++s)
    if (seg_end[s] > 0 && seg_end[s] < n) return seg_end[s];
  return n;
}

PSA_HD void thresholdbound_segment_ends(const float* E, int64_t n,
                                        const double ratio_end[kMaskSlots], int64_t bn, int64_t tn,
                                        double min_full_ratio, int64_t seg_end[kMaskSlots]) {
  int64_t cnt[kMaskSlots];
  for (int s = 0; s < kMaskSlots; ++s) cnt[s] = mass_count(E, n, ratio_end[s]);
  thresholdbound_ends_from_counts(cnt, n, bn, tn, min_full_ratio, seg_end);
}

// Slot of rank r (kMaskSlots when uncovered) and its level.
PSA_HD int slot_of_rank(int64_t r, const int64_t seg_end[kMaskSlots]) {
  int s = 0;
  while (s < kMaskSlots && r >= seg_end[s]) ++s;
  return s;
}
PSA_HD int level_of_rank(int64_t r, const int64_t seg_end[kMaskSlots]) {
  int s = slot_of_rank(r, seg_end);
  return s < kMaskSlots ? level_of_slot(s) : 0;
}

// SEGMENTS row (spec 4.6), width n + 5: rank r of slot s sits at s + r; slot s's separator
// (-1, also for an empty slot) at s + seg_end[s]; positions past the last separator are 0.
PSA_HD constexpr int64_t segments_width(int64_t n) { return n + kMaskSlots; }
PSA_HD int64_t segments_position(int slot, int64_t r) { return slot + r; }
PSA_HD int64_t segments_separator(int slot, const int64_t seg_end[kMaskSlots]) {
  return slot + seg_end[slot];
}

// ---- Post-processing of a level map (mask.h postprocess_levels) ---------------------------
// Half-open range of block indices.
struct BlockSpan {
  int64_t begin;
  int64_t end;
};
PSA_HD bool in_span(int64_t j, BlockSpan s) { return j >= s.begin && j < s.end; }

// Blocks of size `block` (at most n_blocks) that intersect tokens [t0, t1).
PSA_HD BlockSpan token_span_blocks(int64_t t0, int64_t t1, int64_t block, int64_t n_blocks) {
  if (t0 < 0) t0 = 0;
  if (t1 <= t0) return BlockSpan{0, 0};
  int64_t b = t0 / block, e = (t1 + block - 1) / block;
  if (e > n_blocks) e = n_blocks;
  return b < e ? BlockSpan{b, e} : BlockSpan{0, 0};
}

// REFERENCE_SUFFIX text rule (spec 4.7): the last ceil(t / bn) of nk key blocks.
PSA_HD BlockSpan suffix_blocks(int64_t t, int64_t bn, int64_t nk) {
  if (t <= 0) return BlockSpan{0, 0};
  int64_t tb = (t + bn - 1) / bn;
  return BlockSpan{tb < nk ? nk - tb : 0, nk};
}

// Causal, bottom-right aligned: query row x sees key t iff t <= x + (lk - lq). Query block
// i holds rows [i*bm, min((i+1)*bm, lq)). Number of leading key blocks that hold a key
// visible to at least one of its rows (0 when none).
PSA_HD int64_t causal_key_blocks(int64_t i, int64_t bm, int64_t bn, int64_t lq, int64_t lk) {
  int64_t x0 = i * bm, x1 = ((i + 1) * bm < lq ? (i + 1) * bm : lq) - 1;
  int64_t last = x1 + (lk - lq);
  if (last > lk - 1) last = lk - 1;
  return (x1 < x0 || last < 0) ? 0 : last / bn + 1;
}

// Key blocks that intersect block i's diagonal band [x0 + off, x1 + off] clipped to [0, lk):
// they are forced to level 1 so each row with a visible key sees its diagonal key in full.
PSA_HD BlockSpan causal_band_blocks(int64_t i, int64_t bm, int64_t bn, int64_t lq, int64_t lk) {
  int64_t x0 = i * bm, x1 = ((i + 1) * bm < lq ? (i + 1) * bm : lq) - 1;
  int64_t lo = x0 + (lk - lq), hi = x1 + (lk - lq);
  if (lo < 0) lo = 0;
  if (hi > lk - 1) hi = lk - 1;
  return (x1 < x0 || hi < lo) ? BlockSpan{0, 0} : BlockSpan{lo / bn, hi / bn + 1};
}

// Everything the post-processing of query block i needs, computed once per row.
struct MaskPostRow {
  int64_t visible;      // key blocks j >= visible become 0 (nk when not causal)
  BlockSpan band;       // causal diagonal band -> 1
  BlockSpan text_cols;  // text key blocks -> 1
  bool text_row;        // SPAN + text_rows_dense and block i intersects the text -> all 1
};

PSA_HD MaskPostRow mask_post_row(int64_t i, int64_t nk, int64_t bm, int64_t bn, int64_t lq,
                                 int64_t lk, bool causal, bool text_suffix, bool text_rows_dense,
                                 int64_t text_begin, int64_t text_end) {
  MaskPostRow row;
  row.visible = causal ? causal_key_blocks(i, bm, bn, lq, lk) : nk;
  if (row.visible > nk) row.visible = nk;
  row.band = causal ? causal_band_blocks(i, bm, bn, lq, lk) : BlockSpan{0, 0};
  if (text_suffix) {
    row.text_cols = suffix_blocks(text_end - text_begin, bn, nk);
    row.text_row = false;
  } else {
    row.text_cols = token_span_blocks(text_begin, text_end, bn, nk);
    int64_t mq_bound = (lq + bm - 1) / bm;
    row.text_row =
        text_rows_dense && in_span(i, token_span_blocks(text_begin, text_end, bm, mq_bound));
  }
  return row;
}

// Similarity cap application (spec 5): levels are powers of two, so min caps the pooling
// factor; skip stays skip (cap >= 1).
PSA_HD constexpr int cap_level(int level, int cap) { return level < cap ? level : cap; }

// The three post-processing steps for one block, in order: causal (future -> 0, band -> 1),
// text (-> 1; never revives a block with no visible key), sim cap (pass cap = 8 for none).
PSA_HD int post_level(int level, int64_t j, const MaskPostRow& row, int cap) {
  if (j >= row.visible) return 0;
  if (in_span(j, row.band) || in_span(j, row.text_cols) || row.text_row) level = 1;
  return cap_level(level, cap);
}

// ---- Pooled levels a level map can hold (plan time) ---------------------------------------
// A set of pooled levels is a bit mask whose bit p stands for level p in {2, 4, 8}, so that
// `set & p` tests level p. The pool stage writes the level-p tensors of the set only.
constexpr unsigned kPooledLevelsAll = 2u | 4u | 8u;

// Pooled levels a topk row of n candidates gives some block: those whose slot owns a non-empty
// rank interval (topk_segment_ends depends on n only). 0 when n <= 0 (no candidate).
PSA_HD unsigned topk_pooled_levels(int64_t n, const double ratio_end[kMaskSlots], int64_t bn, int64_t tn) {
  if (n <= 0) return 0u;
  int64_t seg_end[kMaskSlots];
  topk_segment_ends(n, ratio_end, bn, tn, seg_end);
  unsigned set = 0u;
  for (int s = 1; s < 4; ++s)
    if (seg_end[s] > seg_end[s - 1]) set |= static_cast<unsigned>(level_of_slot(s));
  return set;
}

// Pooled levels that some block of a PSA level map (build_mask_row on each row's candidates,
// then the post-processing of post_level) can hold, for lq queries and lk keys in blocks of
// bm / bn (tile tn). A superset, computed once per plan:
//   - topk: a row's levels depend only on its candidate count n: nk = ceil(lk / bn) for every
//     row, or under causal masking causal_key_blocks of each query block (clipped to nk, 0:
//     the row has no candidate); the set is the union of topk_pooled_levels over those n;
//   - any other mode (thresholdbound's intervals depend on the scores): every pooled level;
//   - post-processing: causal and text rules only give levels 0 and 1; the similarity cap
//     (`sim_cap`) lowers level p to min(p, cap) with cap in {1, 2, 4, 8}, so level p becomes
//     possible once any level >= p is.
// Host only (a loop over the query blocks when causal).
inline unsigned pooled_levels_possible(bool topk, const double ratio_end[kMaskSlots], int64_t bm, int64_t bn,
                                       int64_t tn, int64_t lq, int64_t lk, bool causal, bool sim_cap) {
  if (!topk) return kPooledLevelsAll;
  const int64_t nk = (lk + bn - 1) / bn, mq = (lq + bm - 1) / bm;
  unsigned set = 0u;
  if (!causal) {
    set = topk_pooled_levels(nk, ratio_end, bn, tn);
  } else {
    int64_t last = -1;  // n is non-decreasing in i: each value is evaluated once
    for (int64_t i = 0; i < mq && set != kPooledLevelsAll; ++i) {
      int64_t n = causal_key_blocks(i, bm, bn, lq, lk);
      if (n > nk) n = nk;
      if (n == last) continue;
      last = n;
      set |= topk_pooled_levels(n, ratio_end, bn, tn);
    }
  }
  if (sim_cap) {
    if ((set & 8u) != 0u) set |= 4u;
    if ((set & 4u) != 0u) set |= 2u;
  }
  return set;
}

// ---- Similarity cap (spec 5) --------------------------------------------------------------
// fp32 products rounded on their own (mul_rn, core/bits.h), so a kernel that runs these loops
// per thread reproduces the CPU bits.

// Cosine with the Triton path's epsilons: dot / (sqrt(|a|^2 + 1e-12) sqrt(|b|^2 + 1e-12) + 1e-6).
PSA_HD float cosine_f32(float dot, float a2, float b2) {
  return dot / (mul_rn(sqrtf(a2 + 1e-12f), sqrtf(b2 + 1e-12f)) + 1e-6f);
}

// Pooling factor p in {2, 4, 8} compares tokens t*p and t*p + p - 1 of a block, for
// t < block_n / p (adjacent pairs for p = 2). Requires block_n % 8 == 0.
PSA_HD constexpr int64_t sim_pair_count(int level, int64_t block_n) { return block_n / level; }
PSA_HD constexpr int64_t sim_pair_first(int level, int64_t t) { return t * level; }
PSA_HD constexpr int64_t sim_pair_second(int level, int64_t t) { return t * level + level - 1; }

// Cosine of the key rows a and b (row_pair_cosine), and of pair t at pooling `level` in a key
// block whose rows are `ld` floats apart (pair_cosine): the dot products a.b, a.a and b.b, each
// a sequential fp32 sum in index order 0..d-1, then cosine_f32. The three sums share one loop,
// four indices per step with their loads first (the same operations in the same order; a GPU
// thread then has eight shared-memory loads in flight, or two 16-byte ones: written out, since
// nvcc does not merge the loads of a four-element array loop into 16-byte ones).
PSA_HD float row_pair_cosine(const float* a, const float* b, int64_t d) {
  float ab = 0.0f, aa = 0.0f, bb = 0.0f;
  auto step = [&](float x, float y) {  // index k of the three sums
    ab += mul_rn(x, y);
    aa += mul_rn(x, x);
    bb += mul_rn(y, y);
  };
  int64_t k = 0;
  for (; k + 4 <= d; k += 4) {
    const float x0 = a[k], x1 = a[k + 1], x2 = a[k + 2], x3 = a[k + 3];
    const float y0 = b[k], y1 = b[k + 1], y2 = b[k + 2], y3 = b[k + 3];
    step(x0, y0);
    step(x1, y1);
    step(x2, y2);
    step(x3, y3);
  }
  for (; k < d; ++k) step(a[k], b[k]);
  return cosine_f32(ab, aa, bb);
}
PSA_HD float pair_cosine(const float* block, int64_t ld, int64_t d, int level, int64_t t) {
  return row_pair_cosine(block + sim_pair_first(level, t) * ld, block + sim_pair_second(level, t) * ld, d);
}

// Mean of `pairs` pair cosines: a sequential fp32 sum, divided by their number; -1 (never
// above a threshold in [-1, 1)) when there is no pair.
PSA_HD float mean_pair_cosine(const float* cosines, int64_t pairs) {
  if (pairs <= 0) return -1.0f;
  float sum = 0.0f;
  int64_t t = 0;
  for (; t + 4 <= pairs; t += 4) {  // four loads, then four additions in order
    const float c0 = cosines[t], c1 = cosines[t + 1], c2 = cosines[t + 2], c3 = cosines[t + 3];
    sum += c0;
    sum += c1;
    sum += c2;
    sum += c3;
  }
  for (; t < pairs; ++t) sum += cosines[t];
  return sum / static_cast<float>(pairs);
}

// Mean pair cosine of one key block (`block` is [block_n, d]) at pooling `level` (the
// order of mean_pair_cosine). A block shorter than `level` has no pair and gives -1.
PSA_HD float block_similarity(const float* block, int64_t block_n, int64_t d, int level) {
  int64_t pairs = sim_pair_count(level, block_n);
  if (pairs <= 0) return -1.0f;
  float sum = 0.0f;
  for (int64_t t = 0; t < pairs; ++t) sum += pair_cosine(block, d, d, level, t);
  return sum / static_cast<float>(pairs);
}

// cap = 8 if sim8 > t8, else 4 if sim4 > t4, else 2 if sim2 > t2, else 1 (thresholds in
// double, order x2, x4, x8; sims are the fp32 means of the pair cosines).
PSA_HD int sim_cap_from_means(float sim2, float sim4, float sim8, const double threshold[3]) {
  if (static_cast<double>(sim8) > threshold[2]) return 8;
  if (static_cast<double>(sim4) > threshold[1]) return 4;
  if (static_cast<double>(sim2) > threshold[0]) return 2;
  return 1;
}

}  // namespace psa

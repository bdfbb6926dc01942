// cuda/attention/sm90/row_parts_sm90.cuh -- attention stage, kernel layer for Hopper: the parts
// of a row's walk that the 16-bit kernel (attention_kernel_sm90.cuh) and the 8-bit one
// (attention_fp8_kernel_sm90.cuh) share: the producer's view of one tile of the packed key
// stream (its entries and their key blocks, the token list of the consumers' masked path), Q
// read in place through the row index, the consumers' running-maximum update, and the
// epilogue in their tile layout (row_epilogue.cuh). Device code of the sm_90a pass only.
#pragma once
#include <cstdint>

#include "attention/attention_spec.h"
#include "cuda/attention/attention_params.h"
#include "cuda/attention/row_epilogue.cuh"
#include "cuda/attention/row_stream.cuh"
#include "cuda/core/device.cuh"
#include "cuda/core/sm90.cuh"

namespace psa {
namespace gpu {
namespace sm90 {

#ifdef PSA_SM90_DEVICE
// Tile t of a row's stream (plan) as the producer's warp sees it: level index, first stream
// position, rows per entry P = box_rows[li] (a power of two, 2^lg), the entries (one TMA box
// each) and the rows they load; the key block of entry lane + 32 j in ent[j] (work list `wl`
// of the row; unused on the dense path, whose entries are consecutive).
struct TileEntries {
  int li;
  int32_t w0, P, lg, entries, loaded;
  int32_t ent[4];
};
template <int KT>
__device__ __forceinline__ TileEntries tile_entries(const AttnKernelParams& p, const RowPlan* plan, int32_t t,
                                                    const int32_t* box_rows, const int32_t* wl, int lane) {
  TileEntries te;
  te.li = level_of_tile(t, plan->tiles, KT, te.w0);
  te.P = box_rows[te.li];
  te.lg = 31 - __clz(te.P);
  const int32_t rows = min(KT, plan->ntok[te.li] - te.w0);
  te.entries = (rows + te.P - 1) >> te.lg;
  te.loaded = te.entries << te.lg;
#pragma unroll
  for (int j = 0; j < 4; ++j) te.ent[j] = 0;
  if (!p.dense) {  // one list read per tile, before the stage wait so that it overlaps it
    const int32_t* src = wl + plan->woff[te.li] + (te.w0 >> te.lg);
#pragma unroll
    for (int j = 0; j < 4; ++j)
      if (lane + 32 * j < te.entries) te.ent[j] = __ldg(src + lane + 32 * j);
  }
  return te;
}

// Per-column view of per-entry values: v[j] holds a value of entry lane + 32 j (as TileEntries'
// ent); returns the value of the entry of column rr = 32 u + lane, entry rr >> lg, held by lane
// (rr >> lg) & 31 in slot u >> lg (the same slot on every lane, since 32 columns span at most 32
// entries).
template <typename V>
__device__ __forceinline__ V column_entry_value(const V (&v)[4], int u, int lg, int lane) {
  const int j = u >> lg;
  const V vj = j == 0 ? v[0] : j == 1 ? v[1] : j == 2 ? v[2] : v[3];
  return __shfl_sync(0xffffffffu, vj, ((u * 32 + lane) >> lg) & 31);
}

// Whether every row of the tile is a valid token, told from the entries (one test per lane):
// rows past the level's stream are not, nor at level 1 the tokens of a key block past len_k.
// Warp-uniform.
template <int KT>
__device__ __forceinline__ bool tile_all_valid(const AttnKernelParams& p, const RowPlan* plan, const TileEntries& te) {
  bool all = te.w0 + KT <= plan->ntok[te.li];
  if (all && te.li == 0 && !p.dense) {
    const int lane = static_cast<int>(threadIdx.x % 32);
    bool in = true;
#pragma unroll
    for (int j = 0; j < 4; ++j)
      if (lane + 32 * j < te.entries) in = in && (static_cast<int64_t>(te.ent[j]) + 1) * te.P <= p.len_k;
    all = __all_sync(0xffffffffu, in) != 0;
  }
  return all;
}

// The per-key token list of the tile (tok[rr]: the token of key row rr, -1 when not valid), for
// the consumers' masked path; returns whether every row is valid and sets `last` to the last key
// position any token covers (the causal fast path). Warp-uniform results.
template <int KT>
__device__ __forceinline__ bool tile_token_list(const AttnKernelParams& p, const RowPlan* plan, const TileEntries& te,
                                                int32_t* tok, int32_t& last) {
  const int lane = static_cast<int>(threadIdx.x % 32);
  bool all = true;
#pragma unroll
  for (int u = 0; u < KT / 32; ++u) {
    const int rr = u * 32 + lane;
    const int32_t w = te.w0 + rr;
    const int32_t blk = column_entry_value(te.ent, u, te.lg, lane);  // key rr's entry
    int64_t t = -1;
    if (w < plan->ntok[te.li]) t = p.dense ? w : static_cast<int64_t>(blk) * te.P + (rr & (te.P - 1));
    const bool valid = t >= 0 && (te.li > 0 || t < p.len_k);
    all = all && valid;
    if (valid) last = max(last, static_cast<int32_t>(((t + 1) << te.li) - 1));
    tok[rr] = valid ? static_cast<int32_t>(t) : -1;
  }
  last = __reduce_max_sync(0xffffffffu, last);
  return __all_sync(0xffffffffu, all) != 0;
}

// Q read in place through the rearrangement's row index (p.q_rows), by one producer warp: lane
// l loads rows x0 + l + 32 j of the query block starting at x0. q_source_rows gives their source
// rows (a row past len_q keeps its own index, out of bounds, so TMA fills it with zeros), to be
// read ahead of the row; load_q_rows issues one single-row box per row and 64-column panel into
// the [D / 64][BM][64] Q slot (the Q map's boxes are one row when q_rows is set), completing on
// `bar`, whose expected bytes the caller has set.
template <int BM>
__device__ __forceinline__ void q_source_rows(const AttnKernelParams& p, int64_t x0, int lane, int (&src)[BM / 32]) {
#pragma unroll
  for (int j = 0; j < BM / 32; ++j) {
    const int64_t x = x0 + lane + 32 * j;
    src[j] = static_cast<int>(x < p.len_q ? p.q_rows[x] : x);
  }
}
template <int BM, int D, typename T>
__device__ __forceinline__ void load_q_rows(const CUtensorMap* map, T* slot, uint32_t bar, const int (&src)[BM / 32],
                                            int lane, int64_t h, int64_t b) {
#pragma unroll
  for (int j = 0; j < BM / 32; ++j)
#pragma unroll
    for (int pn = 0; pn < D / 64; ++pn)
      tma_load_4d(smem_addr(slot + pn * BM * 64 + (lane + 32 * j) * 64), map, bar, pn * 64, src[j],
                  static_cast<int>(h), static_cast<int>(b));
}

// Consumers, after a tile's logits: the quad's row maxima mx[2] (each lane saw 2 of every 8
// columns) join the running state; alpha = the old state's rescale factor, m_use = the maximum
// to subtract (0 for a row that has seen no visible key), l scaled by alpha.
__device__ __forceinline__ void update_row_max(float mx[2], float m_run[2], float l_run[2], float alpha[2],
                                               float m_use[2]) {
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));
    mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2));
    const float m_new = fmaxf(m_run[r], mx[r]);
    alpha[r] = m_run[r] == neg_inf() ? 0.0f : fast_exp2(m_run[r] - m_new);
    m_run[r] = m_new;
    m_use[r] = m_new == neg_inf() ? 0.0f : m_new;
    l_run[r] *= alpha[r];
  }
}

// Epilogue (cuda/attention/row_epilogue.cuh) in the Hopper kernels' layout: staging of the
// thread's accumulator o (rows wrow + g and + 8, D / 8 column groups) times inv[row] into the
// [BM][D] swizzled tile `stage` (the row's Q slot), and consumer warpgroup cw's 64 staged rows
// stored by its 128 threads.
template <typename T, int BM, int D>
__device__ __forceinline__ void stage_out_rows(T* stage, const float* o, const float inv[2], int wrow, int g, int tq) {
  stage_rows<T, D>(stage, [&](int n, int i) { return o[n * 4 + i]; }, inv, wrow, g, tq,
                   [](int r, int c) { return tile_off<BM>(r, c); });
}
template <typename T, int BM, int D>
__device__ __forceinline__ void store_out_rows(const AttnKernelParams& p, const T* stage, int64_t b, int64_t h,
                                               int64_t x0, int cw, int ctid) {
  store_rows<T, D>(p, stage, b, h, x0, cw * 64, 64, ctid, 128, [](int r, int c) { return tile_off<BM>(r, c); });
}
#endif  // PSA_SM90_DEVICE

}  // namespace sm90
}  // namespace gpu
}  // namespace psa

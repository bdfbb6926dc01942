// cuda/attention/sm90/attention_kernel_sm90.cuh -- attention stage, kernel layer for Hopper
// (sm_90a): the device half only (the tensor maps, parameter encoding and launcher are host
// code in attention_launch_sm90.cuh); warp-specialised, wgmma-based version of
// attention_kernel_sm80.cuh with the same meaning (attention_spec.h) and the same parameter
// block. Persistent: one CTA per SM walks the query blocks ("rows": 128 query rows of one
// (batch, head) and their work list) r = blockIdx.x, blockIdx.x + gridDim.x, ...; at any time
// the CTAs work on neighbouring rows, so they share K/V in L2 as a (Mq, Hq, B) grid did (with
// dense causal attention the walk goes longest rows first across heads: see decode).
//   warpgroup 0 (producer, two working warps; a third when Q is read in place through q_rows:
//     warp 1 then loads Q as one box per row and panel): per row, warp 0 (the K warp) plans
//     the row's tile stream, loads its Q into one of two Q slots and its K tiles of 128 packed
//     tokens into a ring of shared-memory stages with TMA; warp 2 (the V warp) walks the same
//     plan and loads the V tiles, so a K tile never waits behind the previous V tile's free
//     slot (one warp for both measured 5-17% slower on pyramid rows and presets;
//     PERF_NOTES.md). The ring runs on across rows, so the next row's Q and first tiles load
//     while the consumers finish the current one (its last products and its epilogue). A tile
//     is a list of work-list entries, each a contiguous run of block_n/p rows of one level's
//     K/V, so every entry is one TMA box (per 64-column panel, or for the 8-row group layout
//     below one box; tensor maps per level, boxes of block_n/p rows); completion is counted in
//     bytes on the stage's mbarrier;
//   warpgroups 1, 2 (consumers, 64 query rows each): S = Q K^T with wgmma (both operands in
//     shared memory), online softmax in registers, O += P V with P from registers. The
//     QK^T of tile t is issued before the PV of tile t-1, so the softmax of one overlaps the
//     tensor-core work of the other. The epilogue stages the output rows in the row's Q slot
//     and then frees the slot for the row after next.
// Shared tiles use the 128-byte swizzle of wgmma: a [rows][D] tile is stored as D/64 panels
// of [rows][64] elements, 16-byte chunk c of row r at chunk (c ^ (r & 7)). At d128 the K and V
// tiles are instead kept in 8-row groups when the launcher can map K / V that way
// (Sm90Params::kv_grouped): group g holds rows 8g..8g+7 of both panels side by side (2 KB), so
// an entry of 8 or more rows lands as one TMA box (5-D: 64 columns, 8 rows, 2 panels, P / 8
// groups, one (batch, head)) instead of one box per panel, which halves the requests of every
// tile; the wgmma descriptors step 1 KB between panels and 2 KB between groups there.
#pragma once
#include <cuda_runtime_api.h>


#include <cstdint>
#include <type_traits>

#include "attention/attention_spec.h"
#include "cuda/attention/attention_params.h"
#include "cuda/attention/row_stream.cuh"
#include "cuda/attention/sm90/row_parts_sm90.cuh"
#include "cuda/core/device.cuh"
#include "cuda/core/sm90.cuh"


namespace psa {
namespace gpu {
namespace sm90 {

// Tile choices. 128 query rows = two consumer warpgroups of 64 (the wgmma M). 128 keys per
// tile: S is 64 fp32 registers per thread and each wgmma is m64n128. Stages: at d128 one
// stage of K+V is 64 KB, so 2 stages + two Q slots (32 KB each) = 192 KB; at d64 a stage is
// 32 KB and 4 stages + 2 x 16 KB of Q = 160 KB. One CTA per SM either way (384 threads, 168
// registers each at launch; the producer gives registers to the consumers with setmaxnreg).
template <int D>
struct Traits {
  static_assert(D == 64 || D == 128, "head dims 64 and 128");
  static constexpr int kBM = 128;
  static constexpr int kKT = 128;
  static constexpr int kStages = D == 64 ? 4 : 2;
  static constexpr int kThreads = 384;
  static constexpr int kProducerRegs = 56;
  static constexpr int kConsumerRegs = 224;  // 128 * 56 + 256 * 224 = 64512 = 384 * 168
  static constexpr int kChunks = D / 8;      // 16-byte chunks per row
  static constexpr size_t kQBytes = size_t{2} * kBM * D;
  static constexpr size_t kTileBytes = size_t{2} * kKT * D;
  static constexpr size_t kOffQ = 0;
  static constexpr size_t kOffK = kOffQ + 2 * kQBytes;  // two Q slots
  static constexpr size_t kOffV = kOffK + kStages * kTileBytes;
  static constexpr size_t kOffTok = kOffV + kStages * kTileBytes;
  static constexpr size_t kOffFlag = kOffTok + sizeof(int32_t) * kStages * kKT;
  static constexpr size_t kOffBar = kOffFlag + sizeof(int32_t) * kStages * 4;
  static constexpr int kBars = 4 * kStages + 6;  // full K, full V, empty K, empty V; Q full, Q free, plan x 2
  static constexpr size_t kOffPlan = kOffBar + sizeof(uint64_t) * kBars;  // a RowPlan per Q slot
  // +1024: the dynamic shared window is rounded up to the 1024-byte swizzle atom.
  static constexpr size_t kSmemBytes = kOffPlan + 2 * sizeof(RowPlan) + 1024;
  static_assert(kSmemBytes <= 227 * 1024, "fits the sm90 shared-memory carve-out");
  static_assert(kOffK % 1024 == 0 && kOffV % 1024 == 0 && kTileBytes % 1024 == 0,
                "swizzle atoms start on 1024 bytes");
  static_assert(kOffBar % 8 == 0, "mbarriers are 8-byte aligned");
};

// Kernel parameters: the common block plus TMA descriptors. Q: [B, Hq, Lq, D]; K/V of level
// index li: [B, Hkv, rows_li, D]; boxes of 64 columns x box_rows rows (128 for Q and for the
// dense path, block_n >> li for a sparse level; 1 for Q read through q_rows), 128-byte
// swizzle, zero fill out of bounds. With kv_grouped, a level whose box_rows is a multiple of 8
// is mapped instead as [B * Hkv][rows / 8][2 panels][8][64] with boxes of box_rows / 8 groups
// (the 8-row group layout above; (batch, head) folded into one coordinate, b * Hkv + h).
struct Sm90Params {
  AttnKernelParams a;
  int64_t batch;
  CUtensorMap q;
  CUtensorMap k[4];
  CUtensorMap v[4];
  int32_t box_rows[4];
  int32_t kv_grouped;
};

// Element offset of (row, 16-byte chunk) in a K / V tile of KT rows at d128 in the 8-row group
// layout (the kernel's header comment).
template <int D>
__device__ __forceinline__ int grouped_off(int row, int chunk) {
  return (row >> 3) * (8 * D) + (chunk >> 3) * 512 + (row & 7) * 64 + (((chunk & 7) ^ (row & 7)) << 3);
}



template <typename T, int D>
__global__ void __launch_bounds__(384, 1) sparse_attention_sm90_kernel(const __grid_constant__ Sm90Params sp) {
#ifdef PSA_SM90_DEVICE
  const AttnKernelParams& p = sp.a;
  using Tr = Traits<D>;
  constexpr int BM = Tr::kBM, KT = Tr::kKT, NC = Tr::kChunks, S = Tr::kStages;
  extern __shared__ unsigned char smem_raw[];
  unsigned char* smem = align_smem<1024>(smem_raw);
  T* sK = reinterpret_cast<T*>(smem + Tr::kOffK);
  T* sV = reinterpret_cast<T*>(smem + Tr::kOffV);
  int32_t* sTok = reinterpret_cast<int32_t*>(smem + Tr::kOffTok);
  int32_t* sFlag = reinterpret_cast<int32_t*>(smem + Tr::kOffFlag);
  const uint32_t bar0 = smem_addr(smem + Tr::kOffBar);
  // Barriers per stage s: K tile landed (+ its token list), V tile landed, K free, V free.
  // Per Q slot q: Q landed (+ the row plan), slot free (its epilogue staging is read).
  // K is freed right after the softmax that used it, V after its PV product.
  auto bar_k = [&](int s) { return bar0 + 8u * s; };
  auto bar_v = [&](int s) { return bar0 + 8u * (S + s); };
  auto bar_ek = [&](int s) { return bar0 + 8u * (2 * S + s); };
  auto bar_ev = [&](int s) { return bar0 + 8u * (3 * S + s); };
  auto bar_qf = [&](int q) { return bar0 + 8u * (4 * S + q); };
  auto bar_qe = [&](int q) { return bar0 + 8u * (4 * S + 2 + q); };
  auto bar_pl = [&](int q) { return bar0 + 8u * (4 * S + 4 + q); };
  // Q slot q and its row plan.
  auto q_slot = [&](int q) { return reinterpret_cast<T*>(smem + Tr::kOffQ + q * Tr::kQBytes); };
  auto plan_of = [&](int q) { return reinterpret_cast<RowPlan*>(smem + Tr::kOffPlan) + q; };

  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int wg = tid / 128;
  const int64_t n_rows = p.mq * p.heads_q * sp.batch;
  const int64_t offset = p.len_k - p.len_q;
  // Row = ((b * Hq + h) * Mq + i): query block i of head h, batch b (the work list's row).
  // The r-th row walked is that row itself, except for dense causal attention, where row i has
  // i + 1 tiles: then the walk takes the longest rows first across all (batch, head) pairs, so
  // the CTAs' round-robin shares end within a few tiles of each other (8% apart at Mq = 256 in
  // row order); every head streams the same key prefix, so the GQA group's heads still share
  // K/V in L2. (Sparse causal rows keep row order: their heads pick different blocks, and the
  // longest-first walk measured 7% slower at 128k tokens, PERF_NOTES.md.)
  const int64_t n_bh = p.heads_q * sp.batch;
  const bool longest_first = p.causal && p.dense;
  auto decode = [&](int64_t r, int64_t& row, int64_t& i, int64_t& h, int64_t& b) {
    row = longest_first ? (r % n_bh) * p.mq + (p.mq - 1 - r / n_bh) : r;
    i = row % p.mq;
    h = (row / p.mq) % p.heads_q;
    b = row / (p.mq * p.heads_q);
  };

  if (tid == 0) {
    for (int s = 0; s < S; ++s) {
      // K landed: every lane of the K warp (each releases its own token-list writes; lane 0
      // also sets the expected bytes), then the TMA bytes. V landed: every lane of the V warp
      // (each releases its own reads of the row plan, which the K warp rewrites two rows
      // later), then the bytes. K free: every consumer thread (each releases its own reads of
      // the token list). V free: one arrival per consumer warp. Per-thread arrivals where
      // shared data is handed over keep compute-sanitizer racecheck able to see the ordering.
      mbar_init(bar_k(s), 32);
      mbar_init(bar_v(s), 32);
      mbar_init(bar_ek(s), 256);
      mbar_init(bar_ev(s), 8);
    }
    for (int q = 0; q < 2; ++q) {
      // Q landed: producer lane 0 (plan writes) + the Q bytes; with Q read in place also lane 0
      // of warp 1, which loads Q (and sets the expected bytes) on its own.
      mbar_init(bar_qf(q), p.q_rows != nullptr ? 2 : 1);
      // Q slot and row plan free: every consumer thread after its last read of the slot, and
      // every V-warp lane after its last read of the plan (a row without tiles has no V
      // arrival that would order those reads before the K warp rewrites the plan).
      mbar_init(bar_qe(q), 256 + 32);
      mbar_init(bar_pl(q), 1);    // producer lane 0, after writing the row plan (for the V warp)
    }
    mbar_init_fence();
  }
  __syncthreads();

  if (wg == 0) {
    // ================================ producer ================================
    // Two warps do the work, the K warp (0) and the V warp (2): per tile, lanes take the
    // entries (and for the K warp's token list, 4 tokens each) and issue their TMA boxes;
    // warp 3 (and warp 1 unless Q is read in place) only gives up its registers.
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(Tr::kProducerRegs));
    if (warp == 1 && p.q_rows != nullptr) {
      // Q read in place: one single-row box per row and 64-column panel (the map's boxes are
      // one row), issued by this warp as soon as the row's Q slot is free -- about a row ahead
      // of the K/V stream, so the 128 small boxes and the index loads are off its path. Rows
      // past len_q keep their own index, out of bounds, so TMA fills them with zeros.
      int n = 0;
      for (int64_t r = blockIdx.x; r < n_rows; r += gridDim.x, ++n) {
        int64_t row, i, h, b;
        decode(r, row, i, h, b);
        const int q = n & 1;
        int src[BM / 32];
        q_source_rows<BM>(p, i * BM, lane, src);
        if (n >= 2) mbar_wait(bar_qe(q), ((n >> 1) - 1) & 1);
        if (lane == 0) mbar_arrive_expect_tx(bar_qf(q), static_cast<uint32_t>(Tr::kQBytes));
        __syncwarp();
        load_q_rows<BM, D>(&sp.q, q_slot(q), bar_qf(q), src, lane, h, b);
      }
      return;
    }
    const bool vw = warp == 2;  // the V warp (warp 0 is the K warp)
    if (warp != 0 && !vw) return;
    constexpr int kPanels = D / 64;
    const bool grouped = D == 128 && sp.kv_grouped != 0;
    const int panel_e = grouped ? 512 : KT * 64;  // elements between a row's two panels
    int32_t T0 = 0;  // ring position of the row's first tile
    int n = 0;       // rows done by this CTA
    for (int64_t r = blockIdx.x; r < n_rows; r += gridDim.x, ++n) {
      int64_t row, i, h, b;
      decode(r, row, i, h, b);
      const int64_t hk = h / p.group;
      const int hb = static_cast<int>(hk + b * (p.heads_q / p.group));  // the grouped maps' (batch, head)
      const int64_t x0 = i * BM;
      const int q = n & 1;
      RowPlan* plan = plan_of(q);
      if (vw) {
        mbar_wait(bar_pl(q), (n >> 1) & 1);  // the row's plan is in place
      } else if (n >= 2) {
        mbar_wait(bar_qe(q), ((n >> 1) - 1) & 1);
      }
      if (lane == 0 && !vw) {
        plan_row_stream(p, row, x0, BM, KT, plan);
        mbar_arrive(bar_pl(q));  // releases the plan to the V warp
        if (p.q_rows != nullptr) {
          mbar_arrive(bar_qf(q));  // releases the plan; warp 1 loads Q
        } else {
          mbar_arrive_expect_tx(bar_qf(q), static_cast<uint32_t>(Tr::kQBytes));  // releases the plan
          for (int pn = 0; pn < kPanels; ++pn)
            tma_load_4d(smem_addr(q_slot(q) + pn * BM * 64), &sp.q, bar_qf(q), pn * 64, static_cast<int>(x0),
                        static_cast<int>(h), static_cast<int>(b));
        }
      }
      __syncwarp();
      const int32_t total = plan->total;
      const int32_t* wl = p.dense ? nullptr : p.wl_blocks + row * p.nk;
      for (int32_t t = 0; t < total; ++t) {
        const int32_t u_ring = T0 + t;
        const int s = u_ring % S;
        const uint32_t use_parity = ((u_ring / S) - 1) & 1;  // phase of the stage's previous use
        const TileEntries te = tile_entries<KT>(p, plan, t, sp.box_rows, wl, lane);
        const int li = te.li, lg = te.lg;
        const int32_t w0 = te.w0, entries = te.entries, loaded = te.loaded;
        const int32_t* ent = te.ent;
        // Rows past the stream's end get zeros (never NaN garbage into the products); then one
        // TMA box per entry: per 64-column panel, except for entries of 8 or more rows in the
        // 8-row group layout, which are one box.
        T* dk = sK + s * KT * D;
        T* dv = sV + s * KT * D;
        // Zeros need no swizzle: the tail is written as contiguous byte runs (per panel, or in
        // the 8-row group layout from the first whole group on), 512 bytes per warp store; a
        // per-chunk loop through the swizzled offsets made a tile with a tail cost about as much
        // as two full ones (PERF_NOTES.md, "Pooled tiles: one TMA box per entry, and tiles with
        // a tail").
        auto zero_tail = [&](T* dst) {
          if (loaded == KT) return;  // warp-uniform: no tail, no fence
          unsigned char* base = reinterpret_cast<unsigned char*>(dst);
          if (grouped) {
            const int r8 = (loaded + 7) & ~7;  // rows of a partly loaded group (entries of < 8 rows)
            for (int c = loaded * NC + lane; c < r8 * NC; c += 32)
              *reinterpret_cast<uint4*>(dst + grouped_off<D>(c / NC, c % NC)) = make_uint4(0, 0, 0, 0);
            warp_zero_bytes(base, r8 * D * 2, KT * D * 2, lane);
          } else {
            for (int pn = 0; pn < kPanels; ++pn)
              warp_zero_bytes(base, (pn * KT + loaded) * 128, (pn + 1) * KT * 128, lane);
          }
          fence_proxy_async();
        };
        auto load_boxes = [&](T* dst, const CUtensorMap* map, uint32_t bar) {
#pragma unroll
          for (int j = 0; j < 4; ++j) {
            const int e = lane + 32 * j;
            if (e < entries) {
              const int row0 = p.dense ? (w0 + (e << lg)) : ent[j] << lg;
              const int r = e << lg;  // the entry's first row in the tile
              if (grouped && lg >= 3) {
                tma_load_5d(smem_addr(dst + r * D), map, bar, 0, 0, 0, row0 >> 3, hb);
              } else {
                // the entry's first row of panel pn (a box of fewer than 8 rows stays in a group)
                const int r0 = grouped ? (r >> 3) * 8 * D + (r & 7) * 64 : r * 64;
                for (int pn = 0; pn < kPanels; ++pn)
                  tma_load_4d(smem_addr(dst + r0 + pn * panel_e), map, bar, pn * 64, row0, static_cast<int>(hk),
                              static_cast<int>(b));
              }
            }
          }
        };
        const uint32_t bytes = static_cast<uint32_t>(loaded) * D * 2;
        if (!vw) {  // the K warp: the token list where a consumer reads it, then the K boxes
          // The per-key token list (sTok) is what the consumers' masked path reads; a
          // non-causal tile whose every row is a valid token does not need it. Told from the
          // entries (one test per lane): rows past the level's stream are not valid, nor at
          // level 1 the tokens of a key block past len_k. The list loop costs this warp, which
          // is on the critical path, 4 shuffles, token arithmetic and 4 shared stores per tile:
          // skipping it (and the proxy fences of an empty zero tail) made level-1 tiles 12-15%
          // faster (PERF_NOTES.md, "The producer warp's per-tile work"). Causal tiles keep it
          // (they need the last covered key; computing that from the entries too added a
          // 52-byte spill at d128).
          bool all = tile_all_valid<KT>(p, plan, te);
          int32_t last = -1;  // last key position any token of the tile covers (causal fast path)
          if (u_ring >= S) mbar_wait(bar_ek(s), use_parity);
          if (!all || p.causal) all = tile_token_list<KT>(p, plan, te, sTok + s * KT, last);  // warp-uniform
          zero_tail(dk);
          if (lane == 0) {  // the tile's flags for the consumers: all rows valid, last key, level
            sFlag[s * 4] = all;
            sFlag[s * 4 + 1] = last;
            sFlag[s * 4 + 2] = li;
          }
          __syncwarp();
          if (lane == 0)
            mbar_arrive_expect_tx(bar_k(s), bytes);  // releases sTok / sFlag / zeros
          else
            mbar_arrive(bar_k(s));
          load_boxes(dk, &sp.k[li], bar_k(s));
        } else {  // the V warp: the V boxes once the consumers have freed the stage's V
          if (u_ring >= S) mbar_wait(bar_ev(s), use_parity);
          zero_tail(dv);
          __syncwarp();
          if (lane == 0)
            mbar_arrive_expect_tx(bar_v(s), bytes);  // releases the zeros and this lane's plan reads
          else
            mbar_arrive(bar_v(s));
          load_boxes(dv, &sp.v[li], bar_v(s));
        }
      }
      if (vw) mbar_arrive(bar_qe(q));  // this lane's reads of the plan are done
      T0 += total;
    }
    return;
  }

  // ================================ consumers ================================
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(Tr::kConsumerRegs));
  const int cw = wg - 1;                 // consumer warpgroup: query rows 64*cw .. 64*cw+63
  const int ctid = tid - 128 * wg;       // thread within the warpgroup
  const int g = lane >> 2, tq = lane & 3;
  const int wrow = cw * 64 + (warp & 3) * 16;  // this warp's first row in the CTA tile
  constexpr float kLog2e = 1.4426950408889634f;
  const float sl2 = p.scale * kLog2e;
  // K / V tile strides in bytes: between the two 64-column panels of a row and between 8-row
  // groups (the 8-row group layout at d128, or panels of [KT][64]).
  const bool grouped = D == 128 && sp.kv_grouped != 0;
  const uint32_t panel_b = grouped ? 1024u : KT * 128u;
  const uint32_t group_b = grouped ? 16u * D : 1024u;
  const Sw128Desc k_desc = sw128_desc_words(smem_addr(sK), 16, group_b);
  const Sw128Desc v_desc = sw128_desc_words(smem_addr(sV), panel_b, group_b);

  float o[D / 2];
  float sc[KT / 2];
  uint32_t pf[KT / 16][4];
  float m_run[2], l_run[2];
  Sw128Desc q_desc{0u, 0u};

  // S = Q K_t^T into sc (K-major operands; k-step kk = 16 head-dim elements).
  auto issue_qk = [&](int s) {
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      const uint64_t da = q_desc.at((kk >> 2) * BM * 128 + (kk & 3) * 32);
      const uint64_t db = k_desc.at(s * static_cast<uint32_t>(Tr::kTileBytes) + (kk >> 2) * panel_b + (kk & 3) * 32);
      Wgmma<T, KT>::ss(sc, da, db, kk > 0 ? 1 : 0);
    }
    wgmma_commit();
  };
  // O += P V_s (V is MN-major for this product: panels of 64 head-dim columns panel_b bytes
  // apart, 8-key groups group_b bytes apart; k-step j = 16 keys).
  auto issue_pv = [&](int s) {
    wgmma_fence();
#pragma unroll
    for (int j = 0; j < KT / 16; ++j) {
      Wgmma<T, D>::rs(o, pf[j], v_desc.at(s * static_cast<uint32_t>(Tr::kTileBytes) + j * 2 * group_b));
    }
    wgmma_commit();
  };
  // Logits of the tile in ring stage s in the log2 domain, new running max, p = 2^(z - m) in
  // sc, row sums; returns the rescale factor of the old state per row.
  // The tile's flags come from the K warp: all rows valid, the last covered key and the level
  // index, read as scalar words (a 16-byte read of all three made ptxas re-test `full` for every
  // column pair). Finding the level from the row plan here, a dependent shared-memory walk at
  // the start of every softmax, is what this replaces (PERF_NOTES.md, "The tile's level from
  // the K warp").
  auto softmax = [&](int s, int64_t x0, float alpha[2]) {
    const bool full = sFlag[s * 4] != 0;
    const int li = sFlag[s * 4 + 2];
    const int level = 1 << li;
    const float bias2 = level_log_bias(level) * kLog2e;
    const int32_t* tok = sTok + s * KT;
    float mx[2] = {neg_inf(), neg_inf()};
    // Causal: a tile whose every token is valid and whose last covered key is visible to this
    // warp's first row (hence to all 16 of its rows) needs no per-element test.
    if (!p.causal || (full && static_cast<int64_t>(sFlag[s * 4 + 1]) <= x0 + wrow + offset)) {
#pragma unroll
      for (int n = 0; n < KT / 8; ++n) {
#pragma unroll
        for (int e1 = 0; e1 < 2; ++e1) {
          float cb = bias2;
          if (!full) cb = tok[n * 8 + tq * 2 + e1] >= 0 ? bias2 : neg_inf();
          sc[n * 4 + e1] = fmaf(sc[n * 4 + e1], sl2, cb);
          sc[n * 4 + e1 + 2] = fmaf(sc[n * 4 + e1 + 2], sl2, cb);
          mx[0] = fmaxf(mx[0], sc[n * 4 + e1]);
          mx[1] = fmaxf(mx[1], sc[n * 4 + e1 + 2]);
        }
      }
    } else {
#pragma unroll
      for (int n = 0; n < KT / 8; ++n) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int32_t tk = tok[n * 8 + tq * 2 + (e & 1)];
          const int64_t x = x0 + wrow + g + (e >> 1) * 8;
          const bool vis = tk >= 0 && token_visible(x, tk, level, p.len_k, true, offset);
          sc[n * 4 + e] = vis ? fmaf(sc[n * 4 + e], sl2, bias2) : neg_inf();
          mx[e >> 1] = fmaxf(mx[e >> 1], sc[n * 4 + e]);
        }
      }
    }
    float m_use[2];
    update_row_max(mx, m_run, l_run, alpha, m_use);
#pragma unroll
    for (int j = 0; j < KT / 2; ++j) {
      sc[j] = fast_exp2(sc[j] - m_use[(j >> 1) & 1]);
      l_run[(j >> 1) & 1] += sc[j];
    }
  };
  auto rescale_and_pack = [&](const float alpha[2]) {
    // Once a row's maximum settles, alpha is exactly 1 and the rescale changes no bit: at d128
    // skipped when that holds for every row of the warp (a warp-uniform branch). Not at d64:
    // there the branch made dense CogVideoX-5B 19% slower on the H200 (11.41 vs 9.6 ms), while
    // d128 dense got 3-5% faster.
    if (D < 128 || __any_sync(0xffffffffu, alpha[0] != 1.0f || alpha[1] != 1.0f)) {
#pragma unroll
      for (int j = 0; j < D / 2; ++j) o[j] *= alpha[(j >> 1) & 1];
    }
#pragma unroll
    for (int kk = 0; kk < KT / 16; ++kk) {
      pf[kk][0] = Elem<T>::pack(sc[8 * kk + 0], sc[8 * kk + 1]);
      pf[kk][1] = Elem<T>::pack(sc[8 * kk + 2], sc[8 * kk + 3]);
      pf[kk][2] = Elem<T>::pack(sc[8 * kk + 4], sc[8 * kk + 5]);
      pf[kk][3] = Elem<T>::pack(sc[8 * kk + 6], sc[8 * kk + 7]);
    }
  };
  auto release = [&](uint32_t bar) {
    __syncwarp();
    if (lane == 0) mbar_arrive(bar);
  };
  // TMA data is written by the async proxy like wgmma reads it; the producer fenced its own
  // (generic) zero rows before arriving.
  auto wait_full = [&](uint32_t bar, uint32_t parity) { mbar_wait(bar, parity); };

  int32_t T0 = 0;  // ring position of the row's first tile (same sequence as the producer's)
  int n = 0;
  for (int64_t r = blockIdx.x; r < n_rows; r += gridDim.x, ++n) {
    int64_t row, i, h, b;
    decode(r, row, i, h, b);
    const int64_t x0 = i * BM;
    const int q = n & 1;
    T* sQ = q_slot(q);
    q_desc = sw128_desc_words(smem_addr(sQ) + cw * 64 * 128, 16, 1024);
    mbar_wait(bar_qf(q), (n >> 1) & 1);
    const int32_t total = plan_of(q)->total;
#pragma unroll
    for (int j = 0; j < D / 2; ++j) o[j] = 0.0f;
    m_run[0] = m_run[1] = neg_inf();
    l_run[0] = l_run[1] = 0.0f;

    if (total > 0) {
      float alpha[2];
      const int s0 = T0 % S;
      wait_full(bar_k(s0), (T0 / S) & 1);
      issue_qk(s0);
      wgmma_wait<0>();
      fence_regs(sc);
      softmax(s0, x0, alpha);
      mbar_arrive(bar_ek(s0));  // every thread
      rescale_and_pack(alpha);
      for (int32_t t = 1; t < total; ++t) {
        const int32_t u = T0 + t;
        const int s = u % S, sp = (u - 1) % S;
        wait_full(bar_k(s), (u / S) & 1);
        fence_regs(o);
        fence_regs(pf);
        issue_qk(s);
        wait_full(bar_v(sp), ((u - 1) / S) & 1);
        issue_pv(sp);
        wgmma_wait<1>();  // QK^T of tile t done; PV of tile t-1 may still run
        fence_regs(sc);
        softmax(s, x0, alpha);
        mbar_arrive(bar_ek(s));  // K tile and its token list are no longer read (every thread)
        wgmma_wait<0>();
        fence_regs(o);
        fence_regs(pf);
        release(bar_ev(sp));
        rescale_and_pack(alpha);
      }
      const int32_t ul = T0 + total - 1;
      const int sl = ul % S;
      wait_full(bar_v(sl), (ul / S) & 1);
      fence_regs(o);
      fence_regs(pf);
      issue_pv(sl);
      wgmma_wait<0>();
      fence_regs(o);
      release(bar_ev(sl));
    }
    T0 += total;

    // Epilogue: out = o / l (0 for an empty row), lse = m ln2 + ln l (-inf for an empty row);
    // rows go back to the caller's order through out_rows. The warpgroup's own 64 rows of the
    // Q slot stage the output tile (its wgmma reads of them are complete). The rules live in
    // row_epilogue.cuh, shared with the sm80 kernel and the 8-bit one.
    float inv[2];
    finish_row_sums(p, l_run, m_run, 1.0f, inv, b, h, x0, wrow, g, tq, [](int) { return -0.0f; });
    stage_out_rows<T, BM, D>(sQ, o, inv, wrow, g, tq);
    named_bar_sync(2 + cw, 128);
    store_out_rows<T, BM, D>(p, sQ, b, h, x0, cw, ctid);
    // The slot's next use is a TMA write (async proxy) of the row after next: order this
    // thread's generic accesses of it before that, then free it.
    fence_proxy_async();
    mbar_arrive(bar_qe(q));
  }
#endif  // PSA_SM90_DEVICE
}

}  // namespace sm90
}  // namespace gpu
}  // namespace psa

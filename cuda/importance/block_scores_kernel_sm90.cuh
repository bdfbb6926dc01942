// cuda/importance/block_scores_kernel_sm90.cuh -- importance stage, kernel + launcher templates of
// the GEMM-shaped score path for Hopper (sm_90a): the meaning, tiles and scratch of the sm80
// kernel (block_scores_kernel_sm80.cuh), with S = Qs Ks^T by wgmma and the sampled keys loaded by
// TMA. Included by block_scores_sm90.cu only. Must not define its own sampling or scoring rule.
//
// One CTA = 256 sampled query rows (whole query blocks), persistent over (b, h, row tile):
//   warpgroup 0 (producer, one working warp): streams the sampled keys of the (b, kv head)
//     through a ring of 128-key shared-memory stages. The keys go sample-major: a stage holds
//     in-block offsets c, c+1 of 64 consecutive key blocks, and the keys of one offset over
//     consecutive blocks are rows block_n apart, so one 5-d TMA box (64 columns x 1 offset x
//     64 blocks) fetches them: no gather pass, no per-row copies;
//   warpgroups 1, 2 (consumers, 128 rows each as two m64 halves): S = Q K^T by wgmma
//     m64n128k16 (Q and K both from 128-byte-swizzled shared memory), two accumulators, stages
//     taken in pairs so that one half's product runs while the other half is folded (three of
//     every four folds overlap a product). The block maximum is then an
//     elementwise fmax of S into a register tile M[64 rows][64 blocks] (column 8i + 2tq + e of
//     S is block 8(i mod 8) + 2tq + e of offset c + i/8): no shuffles, no per-tile stores. After
//     the last offset of a chunk, a = scale * M goes to the scratch slot and the row maxima.
//     After the sweep the consumers hand the tile (its scratch slot and row maxima) to the
//     finishers and go straight on: the next tile's query rows are gathered by cp.async;
//   warps 1-3 of warpgroup 0 (finishers, when sp.overlap): finish_tile (block_scores_finish.cuh)
//     of tile n while the consumers sweep tile n + 1; the CTA's last tile is finished by all 11
//     warps. With sp.fin_tma a finisher reads the scratch through TMA into its own ring of
//     shared buffers (PieceLogits), not by per-lane global loads. Each CTA has two scratch
//     slots and two row-maxima buffers; tile n uses slot n % 2, handed over by mbarriers
//     (ready: consumers -> finishers, free: finishers -> consumers). Without overlap the
//     consumers finish each tile themselves after its sweep.
// The last chunk packs 128/W offsets of W = 8/16/32/64 blocks (the fewest that cover it) into a
// stage; the block past the last full one (replicate padding: clamped tokens, which TMA cannot
// express) is a stage of its own, gathered by cp.async, whose 128 columns all belong to it.
// kI8 (precision fp8, head dim 128; importance_spec.h's 8-bit rule): K is the 8-bit pool pass's
// int8 level-1 K (one byte per value, 128-byte rows: one swizzle panel, TMA boxes of 128 bytes),
// Q is quantized by the consumers in shared memory after its 16-bit copy lands (one scale per
// query block over its sampled rows), S = Q8 K8^T by wgmma m64n128k32 s8 into exact int32, the
// block maxima are folded as integers, and the flush multiplies each by (scale * s_q) * s_k.
// fp32 dot order: wgmma accumulates over the head dim in k16 steps like mma.sync; the order inside
// a step is the hardware's and undocumented. Measured on the H100, every score of the tests and
// of the standard shapes was bit-identical to the sm80 kernel's; the tests allow last-bit drift.
#pragma once
#include <cuda_runtime_api.h>

#include <cuda.h>  // CUtensorMap (encoded through the runtime's driver entry point)

#include <cstdint>
#include <type_traits>

#include "attention/fp8_spec.h"
#include "cuda/core/device.cuh"
#include "cuda/core/fp8.cuh"
#include "cuda/core/sm90.cuh"
#include "cuda/importance/block_scores_finish.cuh"
#include "cuda/importance/block_scores_gemm.h"
#include "cuda/importance/score_scratch.h"
#include "importance/importance_spec.h"

namespace psa {
namespace gpu {
namespace score_gemm {

// The finisher piece buffers' layout (PieceLogits), one rule for the host's TMA map
// (encode_scratch_map) and the device's reads: a piece is [32 key blocks][q_count rows] fp32,
// each block's rows one box row of q_count * 4 bytes (16 .. 128), written by TMA with the swizzle
// of that row width (128B / 64B / 32B; none for 16-byte rows). The swizzle XORs a row's 16-byte
// chunk index with the bits of its address above 128 bytes (piece_chunk_xor), so the 8 lanes of
// one LDS.128 phase, each reading the same logical chunk c of its own block, hit 8 different
// 16-byte bank groups; and chunk c of the row maxima is one address for the whole warp.
__host__ __device__ constexpr uint32_t piece_chunk_xor(int q_count, int block) {
  return static_cast<uint32_t>((block * q_count * 4) >> 7) & static_cast<uint32_t>(q_count / 4 - 1);
}

// d128: Q 64 KB + 4 stages x 32 KB = 192 KB; d64: Q 32 KB + 8 stages x 16 KB = 160 KB; one CTA
// per SM either way, with two scratch slots (score_scratch_slots gives two per SM). Consumers
// hold two S accumulators (2 x 64 fp32) and M (2 halves x 32).
template <int D, bool kI8 = false>
struct Sm90ScoreTraits {
  static_assert(D == 64 || D == 128, "head dims 64 and 128");
  static_assert(!kI8 || D == 128, "the 8-bit rule at head dim 128 (one 128-byte panel per row)");
  static constexpr int kRows = static_cast<int>(kScoreTileRows);
  static constexpr int kThreads = 384;          // producer warpgroup + 2 consumer warpgroups
  static constexpr int kConsumers = 256;
  static constexpr int kFinishWarps = 3;        // warps 1-3 of the producer warpgroup
  // Tied blocks summed at a time by finish_tile (tie_batch): measured on the H100 against 2/4,
  // 4/4 and 8/8 (PERF_NOTES.md, "Tie masses: fp32 tie weights").
  static constexpr int kFinishTie = 4;
  static constexpr int kConsumerTie = 8;
  static constexpr int kKeys = 128;             // keys per stage = wgmma N
  static constexpr int kChunk = 64;             // key blocks per chunk (M columns)
  // int8 K: a stage is half the bytes; five fit beside the int8 copy of Q.
  static constexpr int kStages = kI8 ? 5 : D == 64 ? 8 : 4;
  static constexpr int kProducerRegs = 56;
  static constexpr int kConsumerRegs = 224;     // 128 * 56 + 256 * 224 = 64512 = 384 * 168
  static constexpr int kChunks16 = D / 8;       // 16-byte chunks per row
  static constexpr size_t kQBytes = size_t{2} * kRows * D;
  static constexpr size_t kStageBytes = size_t{kI8 ? 1 : 2} * kKeys * D;
  static constexpr size_t kQ8Bytes = kI8 ? size_t{1} * kRows * D : 0;  // int8 Q [256][128], swizzled
  static constexpr size_t kOffQ = 0;
  static constexpr size_t kOffQ8 = kOffQ + kQBytes;
  static constexpr size_t kOffK = kOffQ8 + kQ8Bytes;
  // Finisher copies of the scratch: per finisher warp kPieces buffers of one piece (32 key
  // blocks x q_count <= 32 rows, fp32; piece_chunk_xor) each, after the K stages: on 1024 bytes,
  // the swizzle atom.
  static constexpr int kPieces = D == 64 ? 4 : 2;
  static constexpr int kPieceFloats = 32 * 32;  // PieceLogits::kFloats
  static constexpr size_t kPieceBytes = sizeof(float) * kPieceFloats;
  static constexpr size_t kOffFin = kOffK + kStages * kStageBytes;
  static constexpr size_t kOffQo = kOffFin + kFinishWarps * kPieces * kPieceBytes;
  static constexpr size_t kOffM = kOffQo + sizeof(int32_t) * 128;
  // kI8: per query row (scale * s_q) of its block, NaN for a row with a non-finite value
  static constexpr size_t kOffQc = kOffM + sizeof(float) * 2 * kRows;  // after the row maxima per slot
  static constexpr size_t kOffBar = kOffQc + (kI8 ? sizeof(float) * kRows : 0);
  // full, empty per stage; ready, free per slot; one per finisher piece buffer
  static constexpr int kBars = 2 * kStages + 4 + kFinishWarps * kPieces;
  // +1024: the dynamic shared window is rounded up to the 1024-byte swizzle atom.
  static constexpr size_t kSmem = kOffBar + sizeof(uint64_t) * kBars + 1024;
  static_assert(kRows == 2 * 128, "two consumer warpgroups of 2 x 64 rows");
  static_assert(kKeys == 2 * kChunk, "a full-chunk stage holds two offsets");
  static_assert(kOffQ8 % 1024 == 0 && kOffK % 1024 == 0 && kStageBytes % 1024 == 0,
                "swizzle atoms start on 1024 bytes");
  static_assert(kOffFin % 1024 == 0 && kPieceBytes % 1024 == 0, "piece buffers on the swizzle atom");
  static_assert(kOffBar % 8 == 0, "mbarriers are 8-byte aligned");
  static constexpr size_t kRowMaxBytes = sizeof(float) * 4 * kConsumers;  // s_rm (static)
  static_assert(kSmem + sizeof(int32_t) * kTieListWarps * (kTieListCap + 1) + kRowMaxBytes <= 227 * 1024,
                "with finish_tile's tie lists and the consumers' row maxima (static), fits the sm90 "
                "shared-memory opt-in");
};

// Order of the stages of one CTA tile (the same for every tile): the tail block's stage when
// len_k % block_n != 0, then per chunk of 64 full key blocks ceil(k_count / 2) stages; the last
// chunk has width 64 >> w_last and ceil(k_count / (2 << w_last)) stages.
struct Sm90Schedule {
  int32_t has_tail;  // 0 or 1
  int32_t nch;       // chunks of full key blocks (ceil(nk_full / 64))
  int32_t ntf;       // stages per chunk of width 64
  int32_t w_last;    // 0..3
  int32_t nt_last;   // stages of the last chunk
  int32_t total;
};

// Kernel parameters: the sm80 block plus the K tensor maps. kmap[w]: K as [B][Hkv][nk_full]
// [block_n][D] (full key blocks only), boxes of 64 columns x 1 offset x (64 >> w) blocks,
// 128-byte swizzle, zero fill past nk_full. smap (when fin_tma): the scratch as [slots][nk][256]
// fp32, boxes of q_count rows x 32 blocks, swizzled by the row width (piece_chunk_xor), zero
// fill past nk.
struct Sm90ScoreParams {
  GemmScoreParams g;
  CUtensorMap kmap[4];
  CUtensorMap smap;
  int32_t k_count;
  int32_t nk_full;
  Sm90Schedule sched;
  int32_t overlap;  // 1: finisher warps finish tile n during the sweep of n + 1; 0: the consumers
                    // finish each tile after its sweep
  int32_t fin_tma;  // 1: the finisher warps read the scratch through smap (4 <= q_count <= 32)
  // kI8: kmap[w] describe k8 as [B*Hkv][nk_full][block_n][128] bytes (boxes of 128 bytes x 1
  // offset x (64 >> w) blocks); k8 is read directly for the partial last block; k_scale[kv *
  // ks_head + j] is s_k of level-1 key block j (Fp8KvOut::k_scale).
  const int8_t* k8;
  const float* k_scale;
  int64_t ks_head;
};

#ifdef PSA_SM90_DEVICE
// finish_tile's source on a finisher warp: the query block's scratch columns, a piece of 32 key
// blocks at a time, copied by TMA into this warp's ring of kP = Tr::kPieces shared buffers (kP
// pieces in flight), so the loads need no registers and the warp waits once per piece. A piece
// is [32 blocks][q_count rows], swizzled (piece_chunk_xor). Lane l takes block l and reads
// logical chunk c of its rows at step c (lockstep): the swizzle puts the 8 lanes of a
// shared-memory phase on different banks, and the row maxima's chunk c is one address for the
// whole warp (a broadcast).
// The maximum does not depend on the order of its terms: fmaxf skips NaN, and a tie of -0 and
// +0 gives exp = 1 either way (block_is_top's argument), so y is block_logit_max's.
template <class Tr>
struct PieceLogits {
  static constexpr int kP = Tr::kPieces;
  static constexpr int kFloats = Tr::kPieceFloats;  // one buffer: 32 blocks x up to 32 rows
  const CUtensorMap* map;
  const float* gbuf;  // buffer 0 (buffers kFloats apart)
  uint32_t buf;       // its shared address
  uint32_t bar;       // mbarrier of buffer 0 (8 bytes apart)
  int slot, q_count;
  int64_t nk;
  uint32_t base;  // pieces of earlier rows (all consumed)
  int r0 = 0, np = 0;
  __device__ __forceinline__ void issue(int k, int lane) {  // piece k of the row into its buffer
    if (lane == 0) {
      const uint32_t g = base + static_cast<uint32_t>(k), b = g % kP;
      sm90::fence_proxy_async();  // this buffer's generic reads (previous piece) before the async write
      sm90::mbar_arrive_expect_tx(bar + 8u * b, static_cast<uint32_t>(q_count * 32 * sizeof(float)));
      sm90::tma_load_3d(buf + b * static_cast<uint32_t>(kFloats * sizeof(float)), map, bar + 8u * b, r0, k * 32, slot);
    }
  }
  __device__ __forceinline__ void begin_row(int row0) {
    base += static_cast<uint32_t>(np);
    r0 = row0;
    np = static_cast<int>((nk + 31) / 32);
    const int lane = static_cast<int>(threadIdx.x & 31);
    for (int k = 0; k < kP && k < np; ++k) issue(k, lane);
  }
  template <int kBatch>
  __device__ __forceinline__ void logits(int64_t j0, int lane, const float* mr, float (&y)[1]) {
    static_assert(kBatch == 1, "one piece at a time");
    const int k = static_cast<int>(j0 >> 5);
    const uint32_t g = base + static_cast<uint32_t>(k), b = g % kP;
    sm90::mbar_wait(bar + 8u * b, (g / kP) & 1);
    float v = -INFINITY;
    if (j0 + lane < nk) {
      const float* col = gbuf + b * kFloats + lane * q_count;
      const uint32_t sw = piece_chunk_xor(q_count, lane);
#ifdef PSA_MEASURE_NO_FOLD
      // measurement only: bounds the fold's cost; wrong scores
      v = fold_logit_diffs(v, *reinterpret_cast<const float4*>(col + sw * 4), *reinterpret_cast<const float4*>(mr));
#else
      const int nc = q_count >> 2;
#pragma unroll 4
      for (int c = 0; c < nc; ++c)
        v = fold_logit_diffs(v, *reinterpret_cast<const float4*>(col + ((static_cast<uint32_t>(c) ^ sw) << 2)),
                             *reinterpret_cast<const float4*>(mr + c * 4));
#endif
    }
    y[0] = j0 + lane < nk ? v : 0.0f;
    __syncwarp();  // every lane has read the buffer
    if (k + kP < np) issue(k + kP, lane);
  }
};
#endif  // PSA_SM90_DEVICE

// Stage k of a CTA tile: w = log2(64 / W) (4: the tail block), first block j0, index v within its
// chunk, and whether it is the chunk's last (M is complete after it).
struct Sm90Stage {
  int w, j0, v;
  bool last;
};
// The stages of a CTA tile in order, one step at a time (no division per stage).
struct Sm90StageWalk {
  int tail;    // 1 while the tail block's stage is next
  int ch = 0;  // chunk
  int v = 0;   // stage within the chunk
  __device__ __forceinline__ explicit Sm90StageWalk(const Sm90Schedule& s) : tail(s.has_tail) {}
  __device__ __forceinline__ Sm90Stage stage(const Sm90Schedule& s) const {
    if (tail) return {4, 0, 0, true};
    if (ch < s.nch - 1) return {0, ch * 64, v, v == s.ntf - 1};
    return {s.w_last, ch * 64, v, v == s.nt_last - 1};
  }
  __device__ __forceinline__ void next(const Sm90Schedule& s) {
    if (tail) {
      tail = 0;
    } else if (++v == s.ntf && ch < s.nch - 1) {
      ++ch;
      v = 0;
    }
  }
};

// M[i*4+e] (block 8i + 2tq + (e&1), row g + 8(e>>1)) = max(M, S at the same block for each of the
// 128/W offsets in the stage). fmaxf skips NaN dots as the CPU's std::max(best, dot) does.
__device__ __forceinline__ float vmax(float a, float b) { return fmaxf(a, b); }
__device__ __forceinline__ int32_t vmax(int32_t a, int32_t b) { return max(a, b); }

template <int W, typename A>
__device__ __forceinline__ void fold_block_max(const A (&acc)[64], A (&m)[32]) {
  constexpr int kN = W / 8, kSpt = 128 / W;
#pragma unroll
  for (int i = 0; i < kN; ++i)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      A x = m[i * 4 + e];
#pragma unroll
      for (int u = 0; u < kSpt; u += 2) x = vmax(x, vmax(acc[(u * kN + i) * 4 + e], acc[((u + 1) * kN + i) * 4 + e]));
      m[i * 4 + e] = x;
    }
}

// A consumer thread's partial row maxima of one m64 half live in shared memory (s_rm in the
// kernel): rows g and g + 8 at rm[0] and rm[kRowMaxStride].
constexpr int kRowMaxStride = 256;

// Block-max logit a of a folded maximum M: ScaleLogit (16-bit operands) a = scale * M, rounded
// alone as the CPU; Int8Logit (the 8-bit rule) a = ((scale * s_q) * s_k(j)) * M, with qc[8r] the
// (scale * s_q) of the thread's row g + 8r (shared memory; NaN for a row with a non-finite value)
// and ks the head's level-1 key block scales; M is exact (|M| < 2^21 at d128), so its conversion
// is too. kEmpty: M's value before any fold. load() reads what a flush needs once, at the flush
// (a version that read the row scales per element ran 1.5-2% slower, in a run not alternated).
struct ScaleLogit {
  float scale;
  static constexpr float kEmpty = -INFINITY;
  __device__ __forceinline__ ScaleLogit load() const { return *this; }
  __device__ __forceinline__ float operator()(int, int, float m) const { return __fmul_rn(scale, m); }
};
struct Int8Logit {
  const float* qc;
  const float* ks;
  static constexpr int32_t kEmpty = INT32_MIN;
  struct Loaded {
    float c[2];
    const float* ks;
    __device__ __forceinline__ float operator()(int j, int r, int32_t m) const {
      return __fmul_rn(__fmul_rn(c[r], __ldg(ks + j)), small_int_to_float(m));
    }
  };
  __device__ __forceinline__ Loaded load() const { return Loaded{{qc[0], qc[8]}, ks}; }
};

// a for the chunk's blocks j < j_end: into the scratch slot (row `row` = this thread's row g of
// its m64 half) and the row maxima; M restarts empty.
// The chunk's maxima of the two rows are taken in registers and joined to rm once: updating rm
// per element made every update a shared-memory load and store, ordered after the scratch
// store before it (the compiler cannot tell the two pointers apart).
template <typename A, class Logit>
__device__ __forceinline__ void flush_block_max(A (&m)[32], float* rm, float* scratch, int row, int j0, int j_end,
                                                int tq, const Logit& logit) {
  float x[2] = {-INFINITY, -INFINITY};
  const auto to_logit = logit.load();
#pragma unroll
  for (int i = 0; i < 8; ++i)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int j = j0 + i * 8 + tq * 2 + (e & 1);
      if (j < j_end) {
        const float a = to_logit(j, e >> 1, m[i * 4 + e]);
        x[e >> 1] = fmaxf(x[e >> 1], a);
        scratch[static_cast<int64_t>(j) * kScoreTileRows + row + (e >> 1) * 8] = a;
      }
      m[i * 4 + e] = Logit::kEmpty;
    }
  rm[0] = fmaxf(rm[0], x[0]);
  rm[kRowMaxStride] = fmaxf(rm[kRowMaxStride], x[1]);
}

// The tail block's stage: every column is a sample of block j, so the block max is the row max
// of S (within the thread, then over the quad).
template <typename A, class Logit>
__device__ __forceinline__ void tail_block_max(const A (&acc)[64], float* rm, float* scratch, int row, int j, int tq,
                                               const Logit& logit) {
  A x[2] = {Logit::kEmpty, Logit::kEmpty};
#pragma unroll
  for (int i = 0; i < 16; ++i) {
    x[0] = vmax(x[0], vmax(acc[i * 4], acc[i * 4 + 1]));
    x[1] = vmax(x[1], vmax(acc[i * 4 + 2], acc[i * 4 + 3]));
  }
  const auto to_logit = logit.load();
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    x[r] = vmax(x[r], __shfl_xor_sync(0xffffffffu, x[r], 1));
    x[r] = vmax(x[r], __shfl_xor_sync(0xffffffffu, x[r], 2));
    const float a = to_logit(j, r, x[r]);
    rm[r * kRowMaxStride] = fmaxf(rm[r * kRowMaxStride], a);
    if (tq == 0) scratch[static_cast<int64_t>(j) * kScoreTileRows + row + r * 8] = a;
  }
}

// Folds a finished accumulator of stage `st` into M (and flushes M after the chunk's last stage).
template <typename A, class Logit>
__device__ __forceinline__ void fold_stage(const Sm90Stage& st, const A (&acc)[64], A (&m)[32], float* rm,
                                           float* scratch, int row, int nk_full, int tq, const Logit& logit) {
  switch (st.w) {
    case 0: fold_block_max<64>(acc, m); break;
    case 1: fold_block_max<32>(acc, m); break;
    case 2: fold_block_max<16>(acc, m); break;
    case 3: fold_block_max<8>(acc, m); break;
    default: tail_block_max(acc, rm, scratch, row, nk_full, tq, logit); return;
  }
  if (st.last) flush_block_max(m, rm, scratch, row, st.j0, min(st.j0 + 64, nk_full), tq, logit);
}

template <typename T, int D, bool kTrack, bool kI8>
__global__ void __launch_bounds__(384, 1) block_scores_sm90_kernel(const __grid_constant__ Sm90ScoreParams sp) {
#ifdef PSA_SM90_DEVICE
  using namespace sm90;
  using Tr = Sm90ScoreTraits<D, kI8>;
  using Acc = typename std::conditional<kI8, int32_t, float>::type;
  using Logit = typename std::conditional<kI8, Int8Logit, ScaleLogit>::type;
  constexpr int S = Tr::kStages, NC = Tr::kChunks16, kRows = Tr::kRows;
  const GemmScoreParams& p = sp.g;
  const Sm90Schedule& sch = sp.sched;
  extern __shared__ unsigned char smem_raw[];
  unsigned char* smem = align_smem<1024>(smem_raw);
  T* sQ = reinterpret_cast<T*>(smem + Tr::kOffQ);  // [D/64][256][64] swizzled
  T* sK = reinterpret_cast<T*>(smem + Tr::kOffK);  // [S][D/64][128][64] swizzled
  int32_t* s_qo = reinterpret_cast<int32_t*>(smem + Tr::kOffQo);
  float* s_m = reinterpret_cast<float*>(smem + Tr::kOffM);  // [2][kRows]
  unsigned char* sQ8 = smem + Tr::kOffQ8;                   // kI8: [256][128] bytes, swizzled
  float* s_qc = reinterpret_cast<float*>(smem + Tr::kOffQc);  // kI8: [kRows]
  const uint32_t bar0 = smem_addr(smem + Tr::kOffBar);
  auto bar_full = [&](int s) { return bar0 + 8u * s; };        // stage landed
  auto bar_empty = [&](int s) { return bar0 + 8u * (S + s); };  // stage read by all 8 consumer warps
  auto bar_ready = [&](int q) { return bar0 + 8u * (2 * S + q); };  // slot q written by the consumers
  auto bar_free = [&](int q) { return bar0 + 8u * (2 * S + 2 + q); };  // slot q read by the finishers
  auto bar_piece = [&](int fw) { return bar0 + 8u * (2 * S + 4 + fw * Tr::kPieces); };  // finisher fw's buffers

  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, wg = tid >> 7;
  const int kc = sp.k_count;
  // Tile n of this CTA (tile blockIdx.x + n * gridDim.x) uses slot n % 2: scratch slot
  // blockIdx.x + (n % 2) * gridDim.x (< the number of tiles, so the workspace has it) and
  // s_m + (n % 2) * kRows. Slot q's k-th use completes phase k of ready(q) (every consumer
  // thread arrives after its writes) and, when the CTA has a tile two later, of free(q) (every
  // finisher thread arrives after its reads): per-thread arrivals, so compute-sanitizer
  // racecheck sees the hand-over.
  auto slot_scratch = [&](int n) {
    return p.scratch + (static_cast<int64_t>(blockIdx.x) + (n & 1) * static_cast<int64_t>(gridDim.x)) * p.nk * kRows;
  };
  if (tid == 0) {
    for (int s = 0; s < S; ++s) {
      mbar_init(bar_full(s), 1);   // producer lane 0 (+ TMA bytes)
      mbar_init(bar_empty(s), 8);  // one arrival per consumer warp
    }
    for (int q = 0; q < 2; ++q) {
      mbar_init(bar_ready(q), Tr::kConsumers);
      mbar_init(bar_free(q), 32 * Tr::kFinishWarps);
    }
    for (int b = 0; b < Tr::kFinishWarps * Tr::kPieces; ++b) mbar_init(bar_piece(0) + 8u * b, 1);
    mbar_init_fence();
  }
  __syncthreads();

  if (wg == 0) {
    // ================================ producer ================================
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(Tr::kProducerRegs));
    if (warp != 0) {
      // ============================== finishers ==============================
      if (!sp.overlap) return;
      const int fw = warp - 1;
      const uint32_t fbuf = Tr::kOffFin + static_cast<uint32_t>(fw * Tr::kPieces * Tr::kPieceBytes);
      PieceLogits<Tr> src{&sp.smap, reinterpret_cast<const float*>(smem + fbuf), smem_addr(smem + fbuf),
                          bar_piece(fw), 0, p.q_count, p.nk, 0u};
      int n = 0;
      for (int64_t tile = blockIdx.x; tile < p.tiles; tile += gridDim.x, ++n) {
        const int q = n & 1;
        mbar_wait(bar_ready(q), (n >> 1) & 1);  // the consumers' slot writes are visible
        // The CTA's last tile is finished by the consumers' 8 warps and these 3 together. Before
        // it, query block il of tile n goes to finisher (n * nqb + il) mod 3: the blocks of
        // consecutive tiles are dealt round the three warps as one sequence, so that 8 blocks
        // per tile cost each warp 8 / 3 blocks per tile on average instead of 3 of every 8.
        const bool last = tile + gridDim.x >= p.tiles;
        const int rot = static_cast<int>((static_cast<int64_t>(n) * (kRows >> p.q_shift)) % Tr::kFinishWarps);
        const int fwarp = last ? 8 + fw : (fw - rot + Tr::kFinishWarps) % Tr::kFinishWarps;
        const int fwarps = last ? 8 + Tr::kFinishWarps : Tr::kFinishWarps;
        if (sp.fin_tma) {
          src.slot = static_cast<int>(blockIdx.x + (n & 1) * gridDim.x);
          finish_tile<1, Tr::kFinishTie, kTrack>(p, slot_scratch(n), s_m + q * kRows, tile / p.row_tiles, tile % p.row_tiles,
                                         fwarp, fwarps, lane, src);
        } else {
          finish_tile<1, Tr::kFinishTie, kTrack>(p, slot_scratch(n), s_m + q * kRows, tile / p.row_tiles, tile % p.row_tiles,
                                         fwarp, fwarps, lane);
        }
        // The consumers wait for this slot again only when the CTA has tile n + 2.
        if (tile + 2 * static_cast<int64_t>(gridDim.x) < p.tiles) mbar_arrive(bar_free(q));
      }
      return;
    }
    uint32_t it = 0;
    for (int64_t tile = blockIdx.x; tile < p.tiles; tile += gridDim.x) {
      const int64_t bh = tile / p.row_tiles;
      const int64_t b = bh / p.heads_q, h = bh % p.heads_q, hk = h / p.group;
      const int64_t kvh = bh / p.group;  // b * (heads_q / group) + hk: K's (batch, head) row
      const int32_t* ko = p.k_off + bh * kc;
      Sm90StageWalk walk(sch);
      for (int k = 0; k < sch.total; ++k, ++it, walk.next(sch)) {
        const int s = static_cast<int>(it % S);
        if (it >= S) mbar_wait(bar_empty(s), ((it / S) - 1) & 1);
        const Sm90Stage st = walk.stage(sch);
        if (st.w == 4) {
          // Tail block: row r = sample min(r, kc - 1) (repeats do not change a maximum), copied
          // in 16-byte chunks into the swizzle of 64-column panels of 16-bit values (byte offset
          // 2 * tile_off); an int8 row is 128 bytes, chunks 0-7 of panel 0.
          constexpr int kRowChunks = kI8 ? D / 16 : NC;
          const unsigned char* kb;
          int64_t row_bytes;
          if constexpr (kI8) {
            kb = reinterpret_cast<const unsigned char*>(sp.k8 + kvh * p.len_k * D);
            row_bytes = D;
          } else {
            kb = reinterpret_cast<const unsigned char*>(static_cast<const T*>(p.k) + b * p.k_sb + hk * p.k_sh);
            row_bytes = p.k_sl * static_cast<int64_t>(sizeof(T));
          }
          unsigned char* dk = reinterpret_cast<unsigned char*>(sK) + s * Tr::kStageBytes;
          for (int c = lane; c < Tr::kKeys * kRowChunks; c += 32) {
            const int r = c / kRowChunks, cc = c % kRowChunks;
            const int64_t tok = sampled_token(p.nk - 1, p.block_n, ko[min(r, kc - 1)], p.len_k);
            cp_async_16(dk + 2 * tile_off<Tr::kKeys>(r, cc), kb + tok * row_bytes + cc * 16, true);
          }
          cp_async_commit();
          cp_async_wait<0>();
          fence_proxy_async();
          __syncwarp();
          if (lane == 0) mbar_arrive(bar_full(s));
        } else if (lane == 0) {
          const int W = 64 >> st.w, spt = 128 / W;
          const uint32_t dst = smem_addr(sK) + static_cast<uint32_t>(s * Tr::kStageBytes);
          mbar_arrive_expect_tx(bar_full(s), static_cast<uint32_t>(Tr::kStageBytes));
          for (int u = 0; u < spt; ++u) {
            const int off = ko[min(st.v * spt + u, kc - 1)];
            if constexpr (kI8) {
              tma_load_4d(dst + u * W * 128, &sp.kmap[st.w], bar_full(s), 0, off, st.j0, static_cast<int>(kvh));
            } else {
#pragma unroll
              for (int pn = 0; pn < D / 64; ++pn)
                tma_load_5d(dst + pn * (Tr::kKeys * 128) + u * W * 128, &sp.kmap[st.w], bar_full(s), pn * 64, off,
                            st.j0, static_cast<int>(hk), static_cast<int>(b));
            }
          }
        }
        __syncwarp();
      }
    }
    return;
  }

  // ================================ consumers ================================
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(Tr::kConsumerRegs));
  const int cw = wg - 1, ct = tid - 128;  // consumer warpgroup (rows 128 cw ..), thread 0..255
  const int g = lane >> 2, tq = lane & 3;
  const int row0 = cw * 128 + (warp & 3) * 16 + g;  // this thread's row g in half 0 (+64: half 1)
  // This warpgroup's 128 rows: 128 bytes each in both layouts (panel 0 of 16-bit Q; int8 Q).
  const uint32_t q_addr = (kI8 ? smem_addr(sQ8) : smem_addr(sQ)) + cw * 128 * 128;
  const uint32_t k_addr = smem_addr(sK);
  const int nqb = kRows >> p.q_shift;
  const int nk_full = sp.nk_full;
  auto sync_consumers = [] { named_bar_sync(1, 256); };

  // S_half = Q_half K_s^T: 8 k16 steps (d128) over 128-byte-swizzled panels of 64 columns; kI8:
  // 4 k32 steps over one panel of 128 bytes.
  auto issue = [&](Acc(&acc)[64], int s, int half) {
    wgmma_fence();
    if constexpr (kI8) {
#pragma unroll
      for (int kk = 0; kk < 4; ++kk) {
        const uint64_t da = sw128_desc(q_addr + half * 64 * 128 + kk * 32, 16, 1024);
        const uint64_t db = sw128_desc(k_addr + static_cast<uint32_t>(s * Tr::kStageBytes) + kk * 32, 16, 1024);
        sm90::Wgmma8<128>::ss_s8(acc, da, db, kk > 0 ? 1 : 0);
      }
    } else {
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk) {
        const uint64_t da = sw128_desc(q_addr + (kk >> 2) * (kRows * 128) + half * 64 * 128 + (kk & 3) * 32, 16, 1024);
        const uint64_t db = sw128_desc(
            k_addr + static_cast<uint32_t>(s * Tr::kStageBytes) + (kk >> 2) * (Tr::kKeys * 128) + (kk & 3) * 32, 16,
            1024);
        sm90::Wgmma<T, 128>::ss(acc, da, db, kk > 0 ? 1 : 0);
      }
    }
    wgmma_commit();
  };

  Acc sa[64], sb[64], m0[32], m1[32];
  uint32_t it = 0;
  int n = 0;
  for (int64_t tile = blockIdx.x; tile < p.tiles; tile += gridDim.x, ++n) {
    const int64_t bh = tile / p.row_tiles, rt = tile % p.row_tiles;
    const int64_t b = bh / p.heads_q, h = bh % p.heads_q;
    float* scratch = slot_scratch(n);
    float* sm_slot = s_m + (n & 1) * kRows;
    if (sp.overlap && n >= 2) mbar_wait(bar_free(n & 1), ((n >> 1) - 1) & 1);  // finishers done with tile n - 2
    if (ct < p.q_count) s_qo[ct] = p.q_off[bh * p.q_count + ct];
    sync_consumers();
    // Sampled query rows: row r is sample (r mod q_count) of block rt*nqb + r/q_count.
    for (int c = ct; c < kRows * NC; c += Tr::kConsumers) {
      const int r = c / NC, cc = c % NC;
      const int64_t i = rt * nqb + (r >> p.q_shift);
      const bool valid = i < p.mq;
      const int64_t tok = valid ? sampled_token(i, p.block_m, s_qo[r & (p.q_count - 1)], p.len_q) : 0;
      cp_async_16(sQ + tile_off<kRows>(r, cc), p.q.row<T>(b, h, tok) + cc * 8, valid);
    }
    cp_async_commit();
    cp_async_wait<0>();
    if constexpr (kI8) {
      // Q -> int8, one row per thread: its largest finite magnitude (into the slot's row maxima,
      // free until the sweep's end), then its query block's over the sampled rows, the scale,
      // and the row's 128 codes (int8_quantize; -128 for a non-finite value, whose row's
      // (scale * s_q) is NaN).
      sync_consumers();
      const int r = ct;
      float amax = 0.0f;
      int bad = 0;
#pragma unroll 4
      for (int cc = 0; cc < NC; ++cc) {
        float x[8];
        unpack8<T>(*reinterpret_cast<const uint4*>(sQ + tile_off<kRows>(r, cc)), x);
#pragma unroll
        for (int e = 0; e < 8; ++e) {
          amax = fp8_amax(amax, x[e]);
          bad |= !(fabsf(x[e]) <= 3.402823466e38f);
        }
      }
      sm_slot[r] = amax;
      sync_consumers();
      const int rb = r & ~(p.q_count - 1);
      float qa = 0.0f;
#pragma unroll 1
      for (int u = 0; u < p.q_count; ++u) qa = fmaxf(qa, sm_slot[rb + u]);
      const Fp8Scale qsc = fp8_scale(qa, kInt8Max);
      s_qc[r] = bad ? __int_as_float(0x7fc00000) : __fmul_rn(p.scale, qsc.s);
#pragma unroll 2
      for (int c8 = 0; c8 < 8; ++c8) {  // 16 values = 16 bytes: chunk c8 of the int8 row
        float x[16];
        unpack8<T>(*reinterpret_cast<const uint4*>(sQ + tile_off<kRows>(r, 2 * c8)), x);
        unpack8<T>(*reinterpret_cast<const uint4*>(sQ + tile_off<kRows>(r, 2 * c8 + 1)), x + 8);
        *reinterpret_cast<uint4*>(sQ8 + 2 * tile_off<kRows>(r, c8)) = int8_quantize_x16(x, qsc.inv);
      }
    }
    fence_proxy_async();
    sync_consumers();

    // This thread's partial row maxima (half hh, row r at s_rm[hh * 2 + r][ct]) in shared memory:
    // in registers they made ptxas spill in the stage loop.
    static_assert(kRowMaxStride == Tr::kConsumers, "s_rm holds one entry per consumer thread per row");
    __shared__ float s_rm[4][kRowMaxStride];
#pragma unroll
    for (int i = 0; i < 4; ++i) s_rm[i][ct] = -INFINITY;
    float* const rm0 = &s_rm[0][ct];
    float* const rm1 = &s_rm[2][ct];
#pragma unroll
    for (int i = 0; i < 32; ++i) m0[i] = m1[i] = Logit::kEmpty;
    // The block-max logits of half `off` (0 or 64) of this thread's rows (kI8: the rows'
    // (scale * s_q) and the head's level-1 key scales).
    const float* ks = kI8 ? sp.k_scale + (bh / p.group) * sp.ks_head : nullptr;
    auto logit = [&](int off) {
      if constexpr (kI8) {
        return Int8Logit{s_qc + row0 + off, ks};
      } else {
        return ScaleLogit{p.scale};
      }
    };
    // Two stages per iteration: half 0 of stage k is folded while half 1 of k runs, half 1 of k
    // while half 0 of k + 1 runs, half 0 of k + 1 while half 1 of k + 1 runs; so this warpgroup
    // has a product in flight during three of every four folds. Nothing is in flight across
    // the loop's back edge (an accumulator kept in flight there made ptxas serialise every
    // wgmma, C7514). A stage is released when both of its halves are done.
    // (The stage and buffer of each fold are derived from walk and it where they are used: kept
    // live across the products in flight, they made ptxas spill in this loop.)
    Sm90StageWalk walk(sch);
    // Half 1 of stage `it` is done: the stage is no longer read; fold half 1.
    auto release_fold_half1 = [&] {
      fence_regs(sb);
      __syncwarp();
      if (lane == 0) mbar_arrive(bar_empty(it % S));
      fold_stage(walk.stage(sch), sb, m1, rm1, scratch, row0 + 64, nk_full, tq, logit(64));
    };
    for (int k = 0; k < sch.total; k += 2) {
      mbar_wait(bar_full(it % S), (it / S) & 1);
      fence_regs(sa);
      fence_regs(sb);
      issue(sa, it % S, 0);
      issue(sb, it % S, 1);
      wgmma_wait<1>();  // half 0 of stage k done; half 1 runs
      fence_regs(sa);
      fold_stage(walk.stage(sch), sa, m0, rm0, scratch, row0, nk_full, tq, logit(0));
      if (k + 1 == sch.total) {  // an odd last stage
        wgmma_wait<0>();
        release_fold_half1();
        ++it;
        break;
      }
      mbar_wait(bar_full((it + 1) % S), ((it + 1) / S) & 1);
      fence_regs(sa);
      issue(sa, (it + 1) % S, 0);
      wgmma_wait<1>();  // half 1 of stage k done; half 0 of k + 1 runs
      release_fold_half1();
      walk.next(sch);
      ++it;
      fence_regs(sb);
      issue(sb, it % S, 1);
      wgmma_wait<1>();  // half 0 of stage k + 1 done; half 1 runs
      fence_regs(sa);
      fold_stage(walk.stage(sch), sa, m0, rm0, scratch, row0, nk_full, tq, logit(0));
      wgmma_wait<0>();
      release_fold_half1();
      walk.next(sch);
      ++it;
    }
    // Row maxima over the quad (each lane saw 2 of every 8 columns).
#pragma unroll
    for (int hh = 0; hh < 2; ++hh)
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        float x = s_rm[hh * 2 + r][ct];
        x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
        x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
        if (tq == 0) sm_slot[row0 + hh * 64 + r * 8] = x;
      }
    const int cwarp = warp - 4;  // 0..7
    if (sp.overlap) {
      if (sp.fin_tma) fence_proxy_async_global();  // the slot's writes before the finishers' TMA reads
      mbar_arrive(bar_ready(n & 1));  // slot n % 2 (scratch and row maxima) to the finishers
      sync_consumers();  // s_qo and sQ are reused (every warpgroup's products are complete)
      if (tile + gridDim.x >= p.tiles)  // the CTA's last tile: help the finishers
        finish_tile<2, Tr::kConsumerTie, kTrack>(p, scratch, sm_slot, bh, rt, cwarp, 8 + Tr::kFinishWarps, lane);
    } else {
      sync_consumers();  // the slot's row maxima are complete; s_qo and sQ are reused after this
      finish_tile<2, Tr::kConsumerTie, kTrack>(p, scratch, sm_slot, bh, rt, cwarp, 8, lane);
    }
  }
#endif  // PSA_SM90_DEVICE
}

}  // namespace score_gemm
}  // namespace gpu
}  // namespace psa

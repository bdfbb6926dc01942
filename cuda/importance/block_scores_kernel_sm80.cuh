// cuda/importance/block_scores_kernel_sm80.cuh -- importance stage, kernel + launcher templates of
// the GEMM-shaped score path (mma.sync m16n8k16, sm80+): S = Qs Ks^T over the sampled rows,
// block maxima reduced in registers. Included by the per-(dtype, head dim) instantiation files
// only. Meaning in importance_spec.h; must not define its own sampling or scoring rule.
#pragma once
#include <algorithm>
#include <cstdint>

#include "cuda/core/cuda_status.h"
#include "cuda/core/device.cuh"
#include "cuda/importance/block_scores_finish.cuh"
#include "cuda/importance/block_scores_gemm.h"
#include "cuda/importance/score_scratch.h"
#include "importance/importance_spec.h"

namespace psa {
namespace gpu {
namespace score_gemm {

// One CTA = 256 sampled query rows (whole query blocks: 8 warps x 2 m16 tiles), persistent over
// (b, h, row tile). Each warp keeps its 32 rows' Q fragments in registers for the whole sweep,
// so every K fragment read by ldmatrix feeds two mma (0.25 ldmatrix.x4 per mma) and each 32 KB
// K stage serves 256 rows (the per-block kernel served 32). Sampled keys are gathered straight
// from the rearranged K by cp.async (rows of D contiguous elements: a separate gather pass
// would only add a round trip), kStages deep.
template <int D>
struct ScoreGemmTraits {
  static constexpr int kWarps = 8;
  static constexpr int kThreads = kWarps * 32;
  static constexpr int kMT = 2;  // m16 tiles per warp
  static constexpr int kRows = static_cast<int>(kScoreTileRows);
  static constexpr int kKeys = 128;              // sampled keys per shared-memory stage
  static constexpr int kSub = D == 64 ? 32 : 64;  // keys per warp accumulator pass (2 x kSub/8 x 4 fp32)
  static constexpr int kStages = 4;
  // d128: 64 Q-fragment + 64 accumulator registers, 196 KB of shared memory -> 1 CTA per SM.
  // d64: 32 + 32 registers, 100 KB -> 2 CTAs per SM (see score_gemm_min_ctas).
  static constexpr int kMinCtas = score_gemm_min_ctas(D);
  static constexpr int kChunks = D / 8;  // 16-byte chunks per row
  static constexpr size_t kSmemQ = sizeof(uint16_t) * kRows * D;
  static constexpr size_t kSmemK = sizeof(uint16_t) * kStages * kKeys * D;
  static constexpr size_t kSmemOff = sizeof(int32_t) * 256;        // q and k offsets
  static constexpr size_t kSmemM = sizeof(float) * kRows;          // row maxima
  static constexpr size_t kSmem = kSmemQ + kSmemK + kSmemOff + kSmemM;
  static_assert(kRows == kWarps * 16 * kMT, "a CTA tile is 8 warps x kMT m16 tiles");
  static_assert(kKeys % kSub == 0 && kSub % 16 == 0, "whole ldmatrix.x4 groups per pass");
  static_assert(D == 64 || D == 128, "head dims 64 and 128");
  static_assert(kSmem <= 227 * 1024, "fits the sm90 shared-memory opt-in");
};

// Row of the warp's 32 that accumulator slot s (= mt * 2 + half) of this lane holds.
__device__ __forceinline__ int slot_row(int slot, int g) { return (slot >> 1) * 16 + (slot & 1) * 8 + g; }

__device__ __forceinline__ float pick4(const float v[4], int i) {
  return i == 0 ? v[0] : i == 1 ? v[1] : i == 2 ? v[2] : v[3];
}

// Per-block maxima of one kSub-key accumulator pass -> a = scale * max (rounded alone, as the
// CPU), row maxima, scratch[j][row]. NaN dots are skipped as std::max skips them; a block of
// NaN dots only gives a = NaN here where the CPU has -inf, and both drop out alike (the row
// maximum skips them, their exp term is skipped here and 0 on the CPU).
// KC >= 8: a block covers whole n8 tiles: max over the lane's values, then a reduce-scatter
// over the quad (3 shuffles for 4 row slots, not 8) leaves lane tq with row slot tq, which it
// stores (the warp's 32 rows: one 128 B line); m[0] / carry[0] hold that slot only.
// KC < 8: a block lies inside a quad's 8 columns; m[s] / carry are per slot.
// KC > kSub: the block continues over the next pass(es) and `carry` holds its running maximum.
template <int KC, int kSub>
__device__ __forceinline__ void block_max_epilogue(const float (&acc)[2][kSub / 8][4], int pass,
                                                   const GemmScoreParams& p, float* scratch,
                                                   int warp_row, int lane, float (&m)[4],
                                                   float (&carry)[4]) {
  const int g = lane >> 2, tq = lane & 3;
  const float ninf = -INFINITY;
  const int key0 = pass * kSub;  // first sampled key of this pass (nk * KC < 2^31: L <= 2^30)
  const int nk = static_cast<int>(p.nk);
  if constexpr (KC >= 8) {
    constexpr int kSpan = KC >= kSub ? kSub / 8 : KC / 8;  // n8 tiles per block in this pass
    constexpr int kBlocks = KC >= kSub ? 1 : kSub / KC;
    const bool b0 = (tq & 1) != 0, b1 = (tq & 2) != 0;
#pragma unroll
    for (int bb = 0; bb < kBlocks; ++bb) {
      float x[4];
#pragma unroll
      for (int s = 0; s < 4; ++s) {
        x[s] = fmaxf(acc[s >> 1][bb * kSpan][(s & 1) * 2], acc[s >> 1][bb * kSpan][(s & 1) * 2 + 1]);
#pragma unroll
        for (int n = bb * kSpan + 1; n < (bb + 1) * kSpan; ++n)
          x[s] = fmaxf(x[s], fmaxf(acc[s >> 1][n][(s & 1) * 2], acc[s >> 1][n][(s & 1) * 2 + 1]));
      }
      // xor 1: keep slots {b0, 2 + b0}, send the other two; xor 2: keep slot 2 * b1 + b0 = tq.
      const float y0 = fmaxf(b0 ? x[1] : x[0], __shfl_xor_sync(0xffffffffu, b0 ? x[0] : x[1], 1));
      const float y1 = fmaxf(b0 ? x[3] : x[2], __shfl_xor_sync(0xffffffffu, b0 ? x[2] : x[3], 1));
      float z = fmaxf(b1 ? y1 : y0, __shfl_xor_sync(0xffffffffu, b1 ? y0 : y1, 2));
      if constexpr (KC > kSub) {
        carry[0] = fmaxf(carry[0], z);
        if ((pass + 1) % (KC / kSub) != 0) continue;
        z = carry[0];
        carry[0] = ninf;
      }
      const int j = key0 / KC + bb;
      if (j < nk) {
        const float a = __fmul_rn(p.scale, z);
        m[0] = fmaxf(m[0], a);
        scratch[static_cast<int64_t>(j) * kScoreTileRows + warp_row + slot_row(tq, g)] = a;
      }
    }
  } else {
#pragma unroll
    for (int s = 0; s < 4; ++s) {
      float* row = scratch + warp_row + slot_row(s, g);
#pragma unroll
      for (int n = 0; n < kSub / 8; ++n) {
        const float e0 = acc[s >> 1][n][(s & 1) * 2], e1 = acc[s >> 1][n][(s & 1) * 2 + 1];
        if constexpr (KC == 4) {
          float x = fmaxf(e0, e1);
          x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
          const int j = (key0 >> 2) + n * 2 + (tq >> 1);
          if (j < nk) {
            x = __fmul_rn(p.scale, x);
            m[s] = fmaxf(m[s], x);
            if ((tq & 1) == 0) row[static_cast<int64_t>(j) * kScoreTileRows] = x;
          }
        } else if constexpr (KC == 2) {
          const int j = (key0 >> 1) + n * 4 + tq;
          if (j < nk) {
            const float x = __fmul_rn(p.scale, fmaxf(e0, e1));
            m[s] = fmaxf(m[s], x);
            row[static_cast<int64_t>(j) * kScoreTileRows] = x;
          }
        } else {
          static_assert(KC == 1, "power-of-two key sample counts");
          const int j = key0 + n * 8 + tq * 2;
          if (j < nk) {
            const float x = __fmul_rn(p.scale, e0);
            m[s] = fmaxf(m[s], x);
            row[static_cast<int64_t>(j) * kScoreTileRows] = x;
          }
          if (j + 1 < nk) {
            const float x = __fmul_rn(p.scale, e1);
            m[s] = fmaxf(m[s], x);
            row[static_cast<int64_t>(j + 1) * kScoreTileRows] = x;
          }
        }
      }
    }
  }
}

// Per CTA tile: (1) sweep every sampled key of the (b, kv head): block-max logits a[r][j] to the
// CTA's scratch slot, row maxima m[r] in registers; then finish_tile (block_scores_finish.cuh):
// block scores from the slot, row sums, normalisation.
template <typename T, int D, int KC>
__global__ void __launch_bounds__(ScoreGemmTraits<D>::kThreads, ScoreGemmTraits<D>::kMinCtas)
    block_scores_gemm_kernel(GemmScoreParams p) {
  using Tr = ScoreGemmTraits<D>;
  constexpr int kRows = Tr::kRows, kKeys = Tr::kKeys, kSub = Tr::kSub, kStages = Tr::kStages;
  constexpr int kChunks = Tr::kChunks, kThreads = Tr::kThreads;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  T* sq = reinterpret_cast<T*>(smem_raw);                                  // [kRows][D]
  T* sk = sq + kRows * D;                                                  // [kStages][kKeys][D]
  int32_t* s_qo = reinterpret_cast<int32_t*>(sk + kStages * kKeys * D);    // [128]
  int32_t* s_ko = s_qo + 128;                                              // [128]
  float* s_m = reinterpret_cast<float*>(s_ko + 128);                       // [kRows]

  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, tq = lane & 3;
  const int warp_row = warp * 32;
  const float ninf = -INFINITY;
  float* scratch = p.scratch + static_cast<int64_t>(blockIdx.x) * p.nk * kRows;
  const int nqb = kRows >> p.q_shift;  // query blocks per tile
  const int nk = static_cast<int>(p.nk);
  const int key_tiles = (nk * KC + kKeys - 1) / kKeys;

  for (int64_t tile = blockIdx.x; tile < p.tiles; tile += gridDim.x) {
    const int64_t bh = tile / p.row_tiles, rt = tile % p.row_tiles;
    const int64_t b = bh / p.heads_q, h = bh % p.heads_q;
    const T* k = static_cast<const T*>(p.k) + b * p.k_sb + (h / p.group) * p.k_sh;
    if (tid < p.q_count) s_qo[tid] = p.q_off[bh * p.q_count + tid];
    if (tid < KC) s_ko[tid] = p.k_off[bh * KC + tid];
    __syncthreads();

    // Sampled query rows of the tile: row r is sample (r mod q_count) of block rt*nqb + r/q_count.
    for (int c = tid; c < kRows * kChunks; c += kThreads) {
      const int r = c / kChunks, cc = c % kChunks;
      const int64_t i = rt * nqb + (r >> p.q_shift);
      const bool valid = i < p.mq;
      const int64_t tok = valid ? sampled_token(i, p.block_m, s_qo[r & (p.q_count - 1)], p.len_q) : 0;
      cp_async_16(sq + swz<D>(r, cc), p.q.row<T>(b, h, tok) + cc * 8, valid);
    }
    cp_async_commit();
    // Sampled keys, stage t: key s = t*kKeys + r is sample s mod KC of key block s / KC.
    auto load_k = [&](int t) {
      T* dst = sk + (t % kStages) * kKeys * D;
      for (int c = tid; c < kKeys * kChunks; c += kThreads) {
        const int r = c / kChunks, cc = c % kChunks;
        const int s = t * kKeys + r;
        const int j = s / KC;
        const bool valid = j < nk;
        const int64_t tok = valid ? sampled_token(j, p.block_n, s_ko[s % KC], p.len_k) : 0;
        cp_async_16(dst + swz<D>(r, cc), k + tok * p.k_sl + cc * 8, valid);
      }
    };
#pragma unroll
    for (int t = 0; t < kStages - 1; ++t) {
      if (t < key_tiles) load_k(t);
      cp_async_commit();
    }
    cp_async_wait<kStages - 1>();  // the Q group
    __syncthreads();
    uint32_t qf[2][D / 16][4];
#pragma unroll
    for (int mt = 0; mt < 2; ++mt)
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk)
        ldmatrix_x4(qf[mt][kk], sq + swz<D>(warp_row + mt * 16 + (lane & 7) + ((lane >> 3) & 1) * 8,
                                            kk * 2 + (lane >> 4)));

    float m[4] = {ninf, ninf, ninf, ninf};
    float carry[4] = {ninf, ninf, ninf, ninf};
    for (int t = 0; t < key_tiles; ++t) {
      cp_async_wait<kStages - 2>();
      __syncthreads();  // stage t landed for every thread; stage t-1's readers are done
      if (t + kStages - 1 < key_tiles) load_k(t + kStages - 1);
      cp_async_commit();
      const T* tk = sk + (t % kStages) * kKeys * D;
#pragma unroll
      for (int sub = 0; sub < kKeys / kSub; ++sub) {
        float acc[2][kSub / 8][4];
#pragma unroll
        for (int mt = 0; mt < 2; ++mt)
#pragma unroll
          for (int n = 0; n < kSub / 8; ++n) acc[mt][n][0] = acc[mt][n][1] = acc[mt][n][2] = acc[mt][n][3] = 0.0f;
        // Same k order as the per-block kernel: one accumulator per 16x8 tile, kk ascending.
#pragma unroll
        for (int kk = 0; kk < D / 16; ++kk) {
#pragma unroll
          for (int np = 0; np < kSub / 16; ++np) {
            uint32_t kf[4];
            ldmatrix_x4(kf, tk + swz<D>(sub * kSub + np * 16 + (lane & 7) + (lane >> 4) * 8,
                                        kk * 2 + ((lane >> 3) & 1)));
#pragma unroll
            for (int mt = 0; mt < 2; ++mt) {
              mma_16816<T>(acc[mt][2 * np], qf[mt][kk], kf[0], kf[1]);
              mma_16816<T>(acc[mt][2 * np + 1], qf[mt][kk], kf[2], kf[3]);
            }
          }
        }
        block_max_epilogue<KC, kSub>(acc, t * (kKeys / kSub) + sub, p, scratch, warp_row, lane, m, carry);
      }
    }
    cp_async_wait<0>();
    if constexpr (KC >= 8) {
      s_m[warp_row + slot_row(tq, g)] = m[0];  // lane tq's own row slot
    } else {
#pragma unroll
      for (int s = 0; s < 4; ++s) {
        m[s] = fmaxf(m[s], __shfl_xor_sync(0xffffffffu, m[s], 1));
        m[s] = fmaxf(m[s], __shfl_xor_sync(0xffffffffu, m[s], 2));
      }
      s_m[warp_row + slot_row(tq, g)] = pick4(m, tq);
    }
    __syncthreads();  // s_m and the scratch slot are complete; K stages are free

    finish_tile<2, 2, true>(p, scratch, s_m, bh, rt, warp, Tr::kWarps, lane);
    __syncthreads();  // s_qo/s_ko/s_m, the scratch slot and the Q stage are reused
  }
}

template <typename T, int D, int KC>
psa_status launch_gemm(const GemmScoreParams& p, int64_t slots, cudaStream_t stream) {
  using Tr = ScoreGemmTraits<D>;
  auto kernel = block_scores_gemm_kernel<T, D, KC>;
  int dev = 0, sms = 0, per_sm = 0;
  PSA_CUDA_TRY(cudaGetDevice(&dev), "block_scores_gemm_kernel: cudaGetDevice");
  PSA_CUDA_TRY(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev),
               "block_scores_gemm_kernel: cudaDeviceGetAttribute");
  PSA_CUDA_TRY(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    static_cast<int>(Tr::kSmem)),
               "block_scores_gemm_kernel: cudaFuncSetAttribute");
  PSA_CUDA_TRY(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, Tr::kThreads, Tr::kSmem),
               "block_scores_gemm_kernel: cudaOccupancyMaxActiveBlocksPerMultiprocessor");
  PSA_RETURN_IF(per_sm < 1, PSA_ERR_UNSUPPORTED,
                "importance: the score kernel needs %zu bytes of shared memory per CTA; this "
                "device fits none", Tr::kSmem);
  const int64_t grid = std::min(std::min(p.tiles, slots), static_cast<int64_t>(sms) * per_sm);
  kernel<<<static_cast<unsigned>(grid), Tr::kThreads, Tr::kSmem, stream>>>(p);
  return launch_status("block_scores_gemm_kernel");
}

#define PSA_SCORE_KC_CASE(KC) \
  case KC: return launch_gemm<T, D, KC>(p, slots, stream);

// Runtime k_count -> compile-time KC; one instantiation file per (T, D) calls this.
template <typename T, int D>
psa_status dispatch_kc(const GemmScoreParams& p, int32_t k_count, int64_t slots, cudaStream_t stream) {
  switch (k_count) {
    PSA_SCORE_KC_CASE(1)
    PSA_SCORE_KC_CASE(2)
    PSA_SCORE_KC_CASE(4)
    PSA_SCORE_KC_CASE(8)
    PSA_SCORE_KC_CASE(16)
    PSA_SCORE_KC_CASE(32)
    PSA_SCORE_KC_CASE(64)
    PSA_SCORE_KC_CASE(128)
    default:
      return set_error(PSA_ERR_INTERNAL, "importance: %d key samples per block; the GEMM path takes "
                       "powers of two up to 128", k_count);
  }
}
#undef PSA_SCORE_KC_CASE

}  // namespace score_gemm
}  // namespace gpu
}  // namespace psa

// cuda/attention/attention_kernel_sm80.cuh -- attention stage, kernel + launcher templates
// (mma.sync m16n8k16, sm80+): a CTA walks its row's work list level by level, pooled blocks
// packed into full tiles. Bias, visibility, guarded rescale from attention_spec.h only.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "attention/attention_spec.h"
#include "cuda/attention/attention_params.h"
#include "cuda/attention/row_epilogue.cuh"
#include "cuda/attention/row_stream.cuh"
#include "cuda/core/device.cuh"

namespace psa {
namespace gpu {

// Tile shapes. kKeyTile = 64 keys per step: 2 stages of K and V at D = 128 are 64 KB, which
// with a 128 x 128 Q tile (32 KB) leaves room for two CTAs per SM on sm80 and sm90.
template <int D, int BM>
struct AttnTraits {
  static_assert(D == 64 || D == 128, "head dims 64 and 128");
  static_assert(BM == 64 || BM == 128, "query blocks of 64 or 128 rows");
  static constexpr int kWarps = BM / 16;  // each warp owns 16 query rows
  static constexpr int kThreads = kWarps * 32;
  static constexpr int kKeyTile = 64;
  static constexpr int kChunks = D / 8;  // 16-byte chunks per row
  static constexpr int kStages = 2;
  static constexpr size_t kSmemQ = sizeof(uint16_t) * BM * D;
  static constexpr size_t kSmemKV = sizeof(uint16_t) * kKeyTile * D;
  static constexpr size_t kSmemBytes = kSmemQ + 2 * kStages * kSmemKV + sizeof(int32_t) * kStages * kKeyTile;
};

template <typename T, int D, int BM>
__global__ void __launch_bounds__(AttnTraits<D, BM>::kThreads, (D == 64 ? 2 : 1))
    sparse_attention_kernel(const AttnKernelParams p) {
  using Tr = AttnTraits<D, BM>;
  constexpr int KT = Tr::kKeyTile;
  constexpr int NC = Tr::kChunks;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  T* sQ = reinterpret_cast<T*>(smem_raw);
  T* sK = reinterpret_cast<T*>(smem_raw + Tr::kSmemQ);
  T* sV = sK + Tr::kStages * KT * D;
  int32_t* sTok = reinterpret_cast<int32_t*>(sV + Tr::kStages * KT * D);

  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int g = lane >> 2, tq = lane & 3;
  const int64_t i = blockIdx.x, h = blockIdx.y, b = blockIdx.z;
  const int64_t hk = h / p.group;
  const int64_t row_id = (b * p.heads_q + h) * p.mq + i;
  const int64_t x0 = i * BM;
  const int64_t offset = p.len_k - p.len_q;

  // Tokens per level in this row's packed stream, tiles per level and list offsets; kept in
  // shared memory because they are indexed by a run-time level (registers would spill).
  __shared__ RowPlan plan;
  if (tid == 0) plan_row_stream(p, row_id, x0, BM, KT, &plan);
  __syncthreads();
  const int32_t total = plan.total;
  const int32_t* ntok = plan.ntok;
  const int32_t* tiles = plan.tiles;
  const int32_t* woff = plan.woff;
  const int32_t* wl = p.dense ? nullptr : p.wl_blocks + row_id * p.nk;

  // Q tile (rows past len_q are zero-filled, computed, never stored).
  {
    const T* qb = static_cast<const T*>(p.q) + b * p.q_sb + h * p.q_sh;
    for (int c = tid; c < BM * NC; c += Tr::kThreads) {
      const int r = c / NC, cc = c % NC;
      const int64_t x = x0 + r;
      const bool valid = x < p.len_q;
      const int64_t src = valid && p.q_rows != nullptr ? p.q_rows[x] : x;
      cp_async_16(sQ + swz<D>(r, cc), valid ? qb + src * p.q_sl + cc * 8 : qb, valid);
    }
  }

  auto level_of_tile = [&](int32_t t, int32_t& w0) { return gpu::level_of_tile(t, tiles, KT, w0); };

  // Packed stream position w of level li -> token of that level (-1 past the stream end):
  // entry w / P of the level's list, token w % P of that block (P = block_n / level).
  auto load_tile = [&](int32_t t, int stage) -> bool {
    bool all_valid = true;
    int32_t w0;
    const int li = level_of_tile(t, w0);
    const int32_t P = static_cast<int32_t>(p.block_n >> li);
    const T* kb = static_cast<const T*>(p.k[li]) + b * p.k_sb[li] + hk * p.k_sh[li];
    const T* vb = static_cast<const T*>(p.v[li]) + b * p.v_sb[li] + hk * p.v_sh[li];
    T* dk = sK + stage * KT * D;
    T* dv = sV + stage * KT * D;
    for (int c = tid; c < KT * NC; c += Tr::kThreads) {
      const int r = c / NC, cc = c % NC;
      const int32_t w = w0 + r;
      int64_t tok = -1;
      if (w < ntok[li]) {
        if (p.dense) {
          tok = w;
        } else {
          const int32_t e = w / P;
          tok = static_cast<int64_t>(wl[woff[li] + e]) * P + (w - e * P);
        }
      }
      const bool valid = tok >= 0 && (li > 0 || tok < p.len_k);
      all_valid = all_valid && valid;
      cp_async_16(dk + swz<D>(r, cc), valid ? kb + tok * p.k_sl[li] + cc * 8 : kb, valid);
      cp_async_16(dv + swz<D>(r, cc), valid ? vb + tok * p.v_sl[li] + cc * 8 : vb, valid);
      if (cc == 0) sTok[stage * KT + r] = static_cast<int32_t>(tok);
    }
    return all_valid;
  };

  uint32_t qf[D / 16][4];
  float acc[D / 8][4];
#pragma unroll
  for (int n = 0; n < D / 8; ++n) acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.0f;
  float m_run[2] = {neg_inf(), neg_inf()};
  float l_run[2] = {0.0f, 0.0f};
  const int wrow = warp * 16;
  constexpr float kLog2e = 1.4426950408889634f;
  // Logits live in the log2 domain: z2 = (scale * q.k + ln p) * log2(e), one FMA per score.
  const float sl2 = p.scale * kLog2e;

  // full_cur: every key of the current tile is a valid token (no per-column test needed
  // without causality); obtained from the barrier that follows the tile's loads.
  bool v0 = true;
  if (total > 0) v0 = load_tile(0, 0);
  cp_async_commit();
  bool full_cur = __syncthreads_and(v0) != 0;

  for (int32_t t = 0; t < total; ++t) {
    const int stage = t & 1;
    bool v_next = true;
    if (t + 1 < total) v_next = load_tile(t + 1, stage ^ 1);
    cp_async_commit();
    cp_async_wait<1>();
    const bool full_next = __syncthreads_and(v_next) != 0;
    if (t == 0) {
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk)
        ldmatrix_x4(qf[kk], sQ + swz<D>(wrow + (lane & 7) + ((lane >> 3) & 1) * 8, kk * 2 + (lane >> 4)));
    }
    int32_t w0;
    const int li = level_of_tile(t, w0);
    const int level = 1 << li;
    const float bias2 = level_log_bias(level) * kLog2e;
    const T* tk = sK + stage * KT * D;
    const T* tv = sV + stage * KT * D;
    const int32_t* tok = sTok + stage * KT;

    float s[KT / 8][4];
#pragma unroll
    for (int n = 0; n < KT / 8; ++n) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
#pragma unroll
      for (int np = 0; np < KT / 16; ++np) {
        uint32_t kf[4];
        ldmatrix_x4(kf, tk + swz<D>(np * 16 + (lane & 7) + (lane >> 4) * 8, kk * 2 + ((lane >> 3) & 1)));
        mma_16816<T>(s[2 * np], qf[kk], kf[0], kf[1]);
        mma_16816<T>(s[2 * np + 1], qf[kk], kf[2], kf[3]);
      }
    }

    // Logits z2 = (scale * q.k + ln p) * log2 e, -inf where the token is not visible to the
    // row. Without causality visibility depends on the column only: a full tile needs no test.
    float mx[2] = {neg_inf(), neg_inf()};
    if (!p.causal) {
#pragma unroll
      for (int n = 0; n < KT / 8; ++n) {
#pragma unroll
        for (int e1 = 0; e1 < 2; ++e1) {
          float cb = bias2;
          if (!full_cur) {
            const int32_t tk_idx = tok[n * 8 + tq * 2 + e1];
            cb = tk_idx >= 0 && (li > 0 || tk_idx < p.len_k) ? bias2 : neg_inf();
          }
          s[n][e1] = fmaf(s[n][e1], sl2, cb);
          s[n][e1 + 2] = fmaf(s[n][e1 + 2], sl2, cb);
          mx[0] = fmaxf(mx[0], s[n][e1]);
          mx[1] = fmaxf(mx[1], s[n][e1 + 2]);
        }
      }
    } else {
#pragma unroll
      for (int n = 0; n < KT / 8; ++n) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int col = n * 8 + tq * 2 + (e & 1);
          const int64_t x = x0 + wrow + g + (e >> 1) * 8;
          const int32_t tk_idx = tok[col];
          const bool vis = tk_idx >= 0 && token_visible(x, tk_idx, level, p.len_k, true, offset);
          s[n][e] = vis ? fmaf(s[n][e], sl2, bias2) : neg_inf();
          mx[e >> 1] = fmaxf(mx[e >> 1], s[n][e]);
        }
      }
    }
    float alpha[2], m_use[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));
      mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2));
      const float m_new = fmaxf(m_run[r], mx[r]);
      alpha[r] = m_run[r] == neg_inf() ? 0.0f : fast_exp2(m_run[r] - m_new);  // rescale_factor, log2 domain
      m_run[r] = m_new;
      m_use[r] = m_new == neg_inf() ? 0.0f : m_new;  // fully masked so far: every p is 0
      l_run[r] *= alpha[r];
    }
#pragma unroll
    for (int n = 0; n < KT / 8; ++n) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        s[n][e] = fast_exp2(s[n][e] - m_use[e >> 1]);
        l_run[e >> 1] += s[n][e];
      }
    }
#pragma unroll
    for (int n = 0; n < D / 8; ++n) {
      acc[n][0] *= alpha[0];
      acc[n][1] *= alpha[0];
      acc[n][2] *= alpha[1];
      acc[n][3] *= alpha[1];
    }
    // O += P V with P rounded to the input type (as the reference casts before P.V).
#pragma unroll
    for (int kk = 0; kk < KT / 16; ++kk) {
      uint32_t pa[4];
      pa[0] = Elem<T>::pack(s[2 * kk][0], s[2 * kk][1]);
      pa[1] = Elem<T>::pack(s[2 * kk][2], s[2 * kk][3]);
      pa[2] = Elem<T>::pack(s[2 * kk + 1][0], s[2 * kk + 1][1]);
      pa[3] = Elem<T>::pack(s[2 * kk + 1][2], s[2 * kk + 1][3]);
#pragma unroll
      for (int dp = 0; dp < D / 16; ++dp) {
        uint32_t vf[4];
        ldmatrix_x4_trans(vf, tv + swz<D>(kk * 16 + (lane & 7) + ((lane >> 3) & 1) * 8, dp * 2 + (lane >> 4)));
        mma_16816<T>(acc[2 * dp], pa, vf[0], vf[1]);
        mma_16816<T>(acc[2 * dp + 1], pa, vf[2], vf[3]);
      }
    }
    full_cur = full_next;
    __syncthreads();
  }
  cp_async_wait<0>();

  // Epilogue (row_epilogue.cuh, shared with the Hopper kernels): out = acc / l (0 for an empty
  // row), lse = m + ln l (-inf for an empty row); rows back in the caller's order.
  float inv[2];
  finish_row_sums(p, l_run, m_run, 1.0f, inv, b, h, x0, wrow, g, tq, [](int) { return -0.0f; });
  __syncthreads();  // sQ is reused for staging the output tile
  auto off = [](int r, int c) { return swz<D>(r, c); };
  stage_rows<T, D>(sQ, [&](int n, int i) { return acc[n][i]; }, inv, wrow, g, tq, off);
  __syncthreads();
  store_rows<T, D>(p, sQ, b, h, x0, 0, BM, tid, Tr::kThreads, off);
}

// Launcher: grid (Mq, Hq, B), dynamic shared memory raised past 48 KB when needed.
template <typename T, int D, int BM>
cudaError_t launch_sparse_attention(const AttnKernelParams& p, int64_t batch, cudaStream_t stream) {
  using Tr = AttnTraits<D, BM>;
  cudaError_t e = cudaFuncSetAttribute(sparse_attention_kernel<T, D, BM>,
                                       cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       static_cast<int>(Tr::kSmemBytes));
  if (e != cudaSuccess) return e;
  const dim3 grid(static_cast<unsigned>(p.mq), static_cast<unsigned>(p.heads_q),
                  static_cast<unsigned>(batch));
  sparse_attention_kernel<T, D, BM><<<grid, Tr::kThreads, Tr::kSmemBytes, stream>>>(p);
  return cudaGetLastError();
}

}  // namespace gpu
}  // namespace psa

// cuda/methods/causal_psa_levels.cu -- importance and mask stages of psa_causal (spec App. A):
// kernels, launchers and entries. Strided antidiagonal logits, fp32 online row softmax,
// block sums (a tensor-core GEMM per head, or a scalar kernel for the other shapes); then per
// row a bitonic sort and the rank rule. Every rule from src/methods/causal_psa_spec.h.
#include <cstdint>

#include "cuda/core/cuda_status.h"
#include "cuda/core/device.cuh"
#include "cuda/methods/causal_psa_cuda.h"
#include "cuda/methods/row_sort.cuh"
#include "cuda/methods/strided_tile.cuh"
#include "methods/causal_psa_spec.h"

namespace psa {
namespace gpu {
namespace {

constexpr int kMaxThreads = 256;

struct ScoreParams {
  const void* q;  // [B, Hq, L, d] 16-bit
  const void* k;  // [B, Hkv, L, d] 16-bit
  int64_t batch, heads_q, group, len, d, nb, groups, bs, stride, per;  // per = bs / stride
  int64_t gstride;  // floats between strided groups in a tile: stride * d + 1
  float s;          // scale / stride
  float* scores;
};

// causal_psa_group_dot on tiles (block-local groups), in the CPU's order without contraction.
__device__ __forceinline__ float tile_dot(const float* qg, const float* kg, int64_t stride, int64_t d) {
  float s = 0.0f;
  for (int64_t j = 0; j < stride; ++j) {
    const float* a = qg + (stride - 1 - j) * d;
    const float* b = kg + j * d;
    for (int64_t e = 0; e < d; ++e) s = __fadd_rn(s, __fmul_rn(a[e], b[e]));
  }
  return s;
}

// Pass 0's online update of one reshaped query row from its `per` logits of the current block
// pair (lg[0..per), -inf = not visible): the running max and the exp-sum rescaled to it, the
// new exps added in column order without contraction (causal_psa_importance_cpu's order).
__device__ __forceinline__ void online_row_update(const float* lg, int per, float& rmax, float& rsum) {
  const float neg_inf = __int_as_float(0xff800000);
  float cm = neg_inf;
  for (int cc = 0; cc < per; ++cc) cm = fmaxf(cm, lg[cc]);
  const float m_old = rmax, m_new = fmaxf(m_old, cm);
  if (m_new == neg_inf) return;
  float s = m_old == neg_inf ? 0.0f : rsum * expf(m_old - m_new);
  for (int cc = 0; cc < per; ++cc) {
    const float v = lg[cc];
    if (v != neg_inf) s = __fadd_rn(s, expf(v - m_new));
  }
  rmax = m_new;
  rsum = s;
}

// Scalar score kernel (per outside {8, 16, 32}, head_dim not a multiple of 64, or a device
// without the GEMM kernel's shared memory): one CTA per (query block I, head, batch). Entry
// x = (rr, cc) of the per x per grid of block pair (I, J): strided query row I*per + rr, key
// group J*per + cc. Pass 0: online row max / exp-sum over J = 0..I; pass 1: probabilities,
// summed per J in row-major order (the CPU's order for each block sum).
template <typename T>
__global__ void __launch_bounds__(kMaxThreads) causal_psa_scores_kernel(ScoreParams p) {
  extern __shared__ float smem[];
  const int64_t per = p.per, ents = per * per;
  float* qt = smem;                  // [per][gstride]
  float* kt = qt + per * p.gstride;  // [per][gstride]
  float* lg = kt + per * p.gstride;  // [per * per]
  float* rmax = lg + ents;           // [per]
  float* rsum = rmax + per;          // [per]

  const int64_t I = blockIdx.x, h = blockIdx.y, b = blockIdx.z;
  const int64_t bh = b * p.heads_q + h;
  const int64_t bkv = b * (p.heads_q / p.group) + h / p.group;
  const T* q = static_cast<const T*>(p.q) + bh * p.len * p.d;
  const T* k = static_cast<const T*>(p.k) + bkv * p.len * p.d;
  float* out = p.scores + (bh * p.nb + I) * p.nb;
  const int tid = threadIdx.x;
  const float neg_inf = __int_as_float(0xff800000);

  load_strided_tile<T>(qt, q, I * p.bs, p.bs, p.stride, p.len, p.d, p.gstride);
  for (int64_t j = I + 1 + tid; j < p.nb; j += blockDim.x) out[j] = 0.0f;
  for (int64_t x = tid; x < per; x += blockDim.x) {
    rmax[x] = neg_inf;
    rsum[x] = 0.0f;
  }
  for (int pass = 0; pass < 2; ++pass) {
    for (int64_t J = 0; J <= I; ++J) {
      __syncthreads();
      load_strided_tile<T>(kt, k, J * p.bs, p.bs, p.stride, p.len, p.d, p.gstride);
      __syncthreads();
      for (int64_t x = tid; x < ents; x += blockDim.x) {
        const int64_t rr = x / per, cc = x % per, r = I * per + rr, c = J * per + cc;
        const bool valid = r < p.groups && c < p.groups && c <= r;
        const float logit = valid ? __fmul_rn(p.s, tile_dot(qt + rr * p.gstride, kt + cc * p.gstride, p.stride, p.d)) : 0.0f;
        if (pass == 0)
          lg[x] = valid ? logit : neg_inf;
        else
          lg[x] = valid ? __fmul_rn(expf(logit - rmax[rr]), rsum[rr]) : 0.0f;
      }
      __syncthreads();
      if (pass == 0) {
        for (int64_t rr = tid; rr < per; rr += blockDim.x)
          online_row_update(lg + rr * per, static_cast<int>(per), rmax[rr], rsum[rr]);
      } else if (tid == 0) {
        float a = 0.0f;
        for (int64_t x = 0; x < ents; ++x) a = __fadd_rn(a, lg[x]);
        out[J] = a;
      }
    }
    __syncthreads();
    if (pass == 0)
      for (int64_t rr = tid; rr < per; rr += blockDim.x) rsum[rr] = rsum[rr] > 0.0f ? __fdiv_rn(1.0f, rsum[rr]) : 0.0f;
  }
}

// ---- tensor-core score kernel: the strided logits as one GEMM per head ------------------
// With G = ceil(L / S) strided groups, the logits of a head are Qr Kr^T over k = S * d, where
// Kr row t is the plain reshape of K (tokens t*S .. t*S+S-1 concatenated) and Qr row r the
// reshape of Q with its S tokens in reverse order (token r*S + S-1-j at k offset j*d), so a
// 64-element k step of either operand is one 128-byte piece of one token row: the reshape is
// only addressing. One CTA owns 128 strided query rows (128 / per query blocks) and streams the
// 128-wide key-group tiles 0..its diagonal twice: pass 0 keeps the row max / exp-sum (online,
// across tiles), pass 1 sums the probabilities per block pair. Every step of both passes is one
// [128 x 64] Q piece and one [128 x 64] K piece through a kStages-deep cp.async ring (the Q
// rows are re-read per key tile: a CTA cannot hold 128 x S*d of Q). mma.sync m16n8k16 with fp32
// accumulation; 8 warps as 4 (rows) x 2 (key groups), each a 32 x 64 warp tile, which holds
// whole per x per block pairs for per in {8, 16, 32}, so a block sum is one warp's reduction in
// a fixed order (deterministic run to run; not the CPU's sequential order, so scores agree to
// fp32 rounding). Row statistics of pass 0 combine the two key-group warps through shared
// memory in a fixed order.
constexpr int kGemmWarps = 8;
constexpr int kGemmThreads = kGemmWarps * 32;
constexpr int kGemmTile = 128;                     // strided rows per CTA = key groups per tile
constexpr int kGemmK = 64;                         // k elements per pipeline step (128 bytes)
constexpr int kGemmStages = 3;
constexpr int kGemmPiece = kGemmTile * kGemmK;     // 16-bit elements of one operand piece
constexpr size_t kGemmSmem =
    static_cast<size_t>(kGemmStages) * 2 * kGemmPiece * 2 +  // Q and K pieces
    (2 * 2 * kGemmTile + 2 * kGemmTile) * sizeof(float);    // red_max/red_sum [2][128], row stats
// 99 KB exactly: the opt-in limit of compute capability 8.6 / 8.9, so those devices run it too.
static_assert(kGemmSmem <= 101376, "fits the 99 KB shared memory of sm_86 / sm_89");

bool gemm_supported(int64_t per, int64_t d) { return (per == 8 || per == 16 || per == 32) && d % kGemmK == 0; }

// Element (row, k) of a [128 x 64] piece: 16-byte chunk k / 8 of a row stored at chunk
// (k / 8) ^ (row % 8), so the 8 rows of one ldmatrix phase hit 8 distinct bank groups.
__device__ __forceinline__ int piece_at(int row, int k) { return row * kGemmK + ((((k >> 3) ^ row) & 7) << 3) + (k & 7); }

// Sums each of the NB per-lane values over the 32 lanes of the warp; the total of value v ends
// in every lane whose lane >> (5 - log2 NB) == v (reduce-scatter halvings, then butterflies).
// NB in {2, 8, 32}; fixed order, so deterministic.
template <int NB>
__device__ __forceinline__ float warp_sum_scatter(float (&v)[NB], int lane) {
  constexpr int kSteps = NB == 32 ? 5 : (NB == 8 ? 3 : 1);
  int n = NB;
#pragma unroll
  for (int s = 0; s < kSteps; ++s) {
    const int half = n / 2, off = 16 >> s;
    const bool up = (lane & off) != 0;
#pragma unroll
    for (int i = 0; i < NB / 2; ++i) {
      if (i < half) {
        const float send = up ? v[i] : v[i + half];
        const float keep = up ? v[i + half] : v[i];
        v[i] = keep + __shfl_xor_sync(0xffffffffu, send, off);
      }
    }
    n = half;
  }
  float t = v[0];
#pragma unroll
  for (int off = 16 >> kSteps; off > 0; off >>= 1) t += __shfl_xor_sync(0xffffffffu, t, off);
  return t;
}

template <typename T, int PER>
__global__ void __launch_bounds__(kGemmThreads, 1) causal_psa_scores_gemm_kernel(ScoreParams p) {
  extern __shared__ __align__(128) unsigned char gsm[];
  T* sq = reinterpret_cast<T*>(gsm);                          // [kGemmStages][128 x 64]
  T* sk = sq + kGemmStages * kGemmPiece;                      // [kGemmStages][128 x 64]
  float* red_max = reinterpret_cast<float*>(sk + kGemmStages * kGemmPiece);  // [2][128]
  float* red_sum = red_max + 2 * kGemmTile;                   // [2][128]
  float* rmax = red_sum + 2 * kGemmTile;                      // [128]
  float* rsum = rmax + kGemmTile;  // [128] exp-sum; after pass 0 its inverse (0 for empty rows)

  // Longest rows first over the whole grid: CTA x takes row tile RT-1 - x / (B*Hq).
  const int64_t heads = p.heads_q * p.batch;
  const int64_t n_rt = (p.nb * PER + kGemmTile - 1) / kGemmTile;
  const int64_t rt = n_rt - 1 - static_cast<int64_t>(blockIdx.x) / heads;
  const int64_t bh = static_cast<int64_t>(blockIdx.x) % heads, b = bh / p.heads_q, h = bh % p.heads_q;
  const int64_t bkv = b * (p.heads_q / p.group) + h / p.group;
  const T* q = static_cast<const T*>(p.q) + bh * p.len * p.d;
  const T* k = static_cast<const T*>(p.k) + bkv * p.len * p.d;
  constexpr int kBlocksPerTile = kGemmTile / PER;
  const int64_t I0 = rt * kBlocksPerTile;  // first query block of the tile
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int wm = warp / 2, wn = warp % 2;             // warp tile: rows 32*wm.., key groups 64*wn..
  const int g = lane / 4, c2 = (lane % 4) * 2;
  const float neg_inf = __int_as_float(0xff800000);
  const int S = static_cast<int>(p.stride);
  const int KS = S * static_cast<int>(p.d) / kGemmK;  // pipeline steps per key tile
  const int n_ct = static_cast<int>(rt) + 1;
  const int total = 2 * n_ct * KS;

  // Block pairs right of the diagonal tile are zero.
  for (int64_t I = I0; I < I0 + kBlocksPerTile && I < p.nb; ++I)
    for (int64_t J = (rt + 1) * kBlocksPerTile + tid; J < p.nb; J += kGemmThreads) p.scores[(bh * p.nb + I) * p.nb + J] = 0.0f;
  if (tid < kGemmTile) {
    rmax[tid] = neg_inf;
    rsum[tid] = 0.0f;
  }

  // Step u: pass u / (n_ct * KS), key tile ct, k step kk -> token j = kk*64 / d, column e0.
  // Thread tid copies chunk tid % 8 of rows tid / 8 + 32 i of both pieces; rows as token
  // offsets from the tile's first group (q: its last token, read backwards by j).
  const int ch = tid % 8, row0 = tid / 8;
  const int64_t q_first = rt * kGemmTile * S + (S - 1);  // token of (row 0, j = 0)
  const int64_t tile_tokens = static_cast<int64_t>(kGemmTile) * S;
  auto load_step = [&](int u) {
    if (u < total) {
      const int rem = u % (n_ct * KS), ct = rem / KS, kk = rem % KS;
      const int j = kk * kGemmK / static_cast<int>(p.d), e0 = kk * kGemmK % static_cast<int>(p.d) + ch * 8;
      const int64_t qt = q_first - j, kt = ct * tile_tokens + j;
      T* dq = sq + (u % kGemmStages) * kGemmPiece;
      T* dk = sk + (u % kGemmStages) * kGemmPiece;
#pragma unroll
      for (int i = 0; i < kGemmTile / 32; ++i) {
        const int row = row0 + 32 * i;
        const int64_t qi = qt + static_cast<int64_t>(row) * S, ki = kt + static_cast<int64_t>(row) * S;
        const bool qv = qi < p.len, kv = ki < p.len;
        cp_async_16(dq + piece_at(row, ch * 8), q + (qv ? qi * p.d + e0 : 0), qv);
        cp_async_16(dk + piece_at(row, ch * 8), k + (kv ? ki * p.d + e0 : 0), kv);
      }
    }
    cp_async_commit();  // empty groups keep the wait count uniform
  };

  float acc[2][8][4];
  auto zero_acc = [&] {
#pragma unroll
    for (int m = 0; m < 2; ++m)
#pragma unroll
      for (int n = 0; n < 8; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[m][n][e] = 0.0f;
  };
  zero_acc();

#pragma unroll
  for (int u = 0; u < kGemmStages - 1; ++u) load_step(u);

  // ldmatrix lane roles: A x4 = rows 0..15 at k 0 / 8; B x4 = two 8-group n tiles at k 0 / 8.
  const int a_row = lane % 16, a_k = (lane / 16) * 8;
  const int b_row = (lane / 16) * 8 + lane % 8, b_k = ((lane / 8) % 2) * 8;

  for (int u = 0; u < total; ++u) {
    cp_async_wait<kGemmStages - 2>();
    __syncthreads();  // step u landed for every thread; stage (u - 1) % kGemmStages is free
    load_step(u + kGemmStages - 1);
    const T* tq = sq + (u % kGemmStages) * kGemmPiece;
    const T* tk = sk + (u % kGemmStages) * kGemmPiece;
#pragma unroll
    for (int ks = 0; ks < kGemmK; ks += 16) {
      uint32_t a[2][4];
#pragma unroll
      for (int m = 0; m < 2; ++m) ldmatrix_x4(a[m], tq + piece_at(wm * 32 + m * 16 + a_row, ks + a_k));
#pragma unroll
      for (int n2 = 0; n2 < 4; ++n2) {
        uint32_t bf[4];  // key groups 16*n2 .. +15: {b0, b1} of n tile 2*n2, then of 2*n2 + 1
        ldmatrix_x4(bf, tk + piece_at(wn * 64 + n2 * 16 + b_row, ks + b_k));
#pragma unroll
        for (int m = 0; m < 2; ++m) {
          mma_16816<T>(acc[m][2 * n2], a[m], bf[0], bf[1]);
          mma_16816<T>(acc[m][2 * n2 + 1], a[m], bf[2], bf[3]);
        }
      }
    }
    const int rem = u % (n_ct * KS);
    if (rem % KS != KS - 1) continue;

    // ---- end of a key tile: fragment (m, n, e) is row 32*wm + 16*m + g + 8*(e/2), key group
    // 64*wn + 8*n + c2 + e%2 of the tile.
    const int pass = u / (n_ct * KS), ct = rem / KS;
    const int64_t r0 = rt * kGemmTile + wm * 32, c0 = static_cast<int64_t>(ct) * kGemmTile + wn * 64;
    // Visible: row < rows_in, key group < cols_in, and key group <= row (only the diagonal
    // tile cuts), in warp-tile coordinates.
    const int rows_in = static_cast<int>((p.groups - r0 < 32 ? p.groups - r0 : 32));
    const int cols_in = static_cast<int>((p.groups - c0 < 64 ? p.groups - c0 : 64));
    const int diag = ct == n_ct - 1 ? wm * 32 - wn * 64 : 1 << 30;  // key col <= row + diag
#pragma unroll
    for (int m = 0; m < 2; ++m)
#pragma unroll
      for (int n = 0; n < 8; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int r = m * 16 + g + (e / 2) * 8, c = n * 8 + c2 + e % 2;
          const bool valid = r < rows_in && c < cols_in && c <= r + diag;
          acc[m][n][e] = valid ? __fmul_rn(p.s, acc[m][n][e]) : neg_inf;  // logit, -inf = not visible
        }
    if (pass == 0) {
#pragma unroll
      for (int m = 0; m < 2; ++m)
#pragma unroll
        for (int hf = 0; hf < 2; ++hf) {
          float v = neg_inf;
#pragma unroll
          for (int n = 0; n < 8; ++n) v = fmaxf(v, fmaxf(acc[m][n][hf * 2], acc[m][n][hf * 2 + 1]));
          v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 1));
          v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 2));
          if (c2 == 0) red_max[wn * kGemmTile + wm * 32 + m * 16 + hf * 8 + g] = v;
        }
      __syncthreads();
#pragma unroll
      for (int m = 0; m < 2; ++m)
#pragma unroll
        for (int hf = 0; hf < 2; ++hf) {
          const int row = wm * 32 + m * 16 + hf * 8 + g;
          const float m_new = fmaxf(rmax[row], fmaxf(red_max[row], red_max[kGemmTile + row]));
          float s = 0.0f;
          if (m_new != neg_inf) {
#pragma unroll
            for (int n = 0; n < 8; ++n)
#pragma unroll
              for (int e = 0; e < 2; ++e) {
                const float v = acc[m][n][hf * 2 + e];
                if (v != neg_inf) s += expf(v - m_new);
              }
          }
          s += __shfl_xor_sync(0xffffffffu, s, 1);
          s += __shfl_xor_sync(0xffffffffu, s, 2);
          if (c2 == 0) red_sum[wn * kGemmTile + row] = s;
        }
      __syncthreads();
      if (tid < kGemmTile) {
        const float m_old = rmax[tid];
        const float m_new = fmaxf(m_old, fmaxf(red_max[tid], red_max[kGemmTile + tid]));
        if (m_new != neg_inf) {
          const float kept = m_old == neg_inf ? 0.0f : rsum[tid] * expf(m_old - m_new);
          rsum[tid] = kept + (red_sum[tid] + red_sum[kGemmTile + tid]);
          rmax[tid] = m_new;
        }
        if (ct == n_ct - 1) rsum[tid] = rsum[tid] > 0.0f ? __fdiv_rn(1.0f, rsum[tid]) : 0.0f;
      }
    } else {
      // Probabilities, then per block pair: thread partials in slot (block row, block column),
      // one warp reduction per tile (the warp tile holds whole blocks).
      constexpr int BR = 32 / PER, BC = 64 / PER, NB = BR * BC;
      float part[NB];
#pragma unroll
      for (int x = 0; x < NB; ++x) part[x] = 0.0f;
#pragma unroll
      for (int m = 0; m < 2; ++m)
#pragma unroll
        for (int hf = 0; hf < 2; ++hf) {
          const int row = wm * 32 + m * 16 + hf * 8 + g;
          const float mr = rmax[row], inv = rsum[row];  // the inverse after pass 0
          const int br = (m * 16 + hf * 8) / PER;
#pragma unroll
          for (int n = 0; n < 8; ++n)
#pragma unroll
            for (int e = 0; e < 2; ++e) {
              const float v = acc[m][n][hf * 2 + e];
              const float pr = v != neg_inf ? __fmul_rn(expf(v - mr), inv) : 0.0f;
              part[br * BC + (n * 8) / PER] += pr;
            }
        }
      const float sum = warp_sum_scatter<NB>(part, lane);
      const int slot = lane >> (NB == 32 ? 0 : (NB == 8 ? 2 : 4));
      if ((lane & ((32 / NB) - 1)) == 0) {
        const int64_t I = (r0 / PER) + slot / BC, J = (c0 / PER) + slot % BC;
        if (I < p.nb && J < p.nb) p.scores[(bh * p.nb + I) * p.nb + J] = sum;
      }
    }
    zero_acc();
  }
  cp_async_wait<0>();
}

template <typename T, int PER>
psa_status launch_scores_gemm(const ScoreParams& p, cudaStream_t stream) {
  PSA_CUDA_TRY(cudaFuncSetAttribute(causal_psa_scores_gemm_kernel<T, PER>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    static_cast<int>(kGemmSmem)),
               "causal_psa_scores_gemm_kernel: cudaFuncSetAttribute");
  const int64_t n_rt = (p.nb * PER + kGemmTile - 1) / kGemmTile;
  const int64_t ctas = n_rt * p.heads_q * p.batch;
  PSA_RETURN_IF(ctas > INT32_MAX, PSA_ERR_UNSUPPORTED, "psa_causal importance: grid of %lld CTAs too large",
                static_cast<long long>(ctas));
  causal_psa_scores_gemm_kernel<T, PER><<<static_cast<unsigned>(ctas), kGemmThreads, kGemmSmem, stream>>>(p);
  return launch_status("causal_psa_scores_gemm_kernel");
}

template <typename T>
psa_status launch_scores_gemm_per(const ScoreParams& p, cudaStream_t stream) {
  switch (p.per) {
    case 8: return launch_scores_gemm<T, 8>(p, stream);
    case 16: return launch_scores_gemm<T, 16>(p, stream);
    default: return launch_scores_gemm<T, 32>(p, stream);
  }
}

size_t score_smem_bytes(int64_t per, int64_t stride, int64_t d) {
  return static_cast<size_t>(2 * per * (stride * d + 1) + per * per + 2 * per) * sizeof(float);
}

int score_threads(int64_t per) {
  const int64_t e = per * per;
  return static_cast<int>(e >= kMaxThreads ? kMaxThreads : ((e + 31) / 32) * 32);
}

template <typename T>
psa_status launch_scores(const ScoreParams& p, int64_t batch, cudaStream_t stream) {
  if (gemm_supported(p.per, p.d) && static_cast<size_t>(smem_optin_limit()) >= kGemmSmem)
    return launch_scores_gemm_per<T>(p, stream);
  const size_t smem = score_smem_bytes(p.per, p.stride, p.d);
  PSA_CUDA_TRY(cudaFuncSetAttribute(causal_psa_scores_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    static_cast<int>(smem)),
               "causal_psa_scores_kernel: cudaFuncSetAttribute");
  const dim3 grid(static_cast<unsigned>(p.nb), static_cast<unsigned>(p.heads_q), static_cast<unsigned>(batch));
  causal_psa_scores_kernel<T><<<grid, score_threads(p.per), smem, stream>>>(p);
  return launch_status("causal_psa_scores_kernel");
}

// Level kernel: one CTA per (row I, head, batch). The n = I + 1 candidates in stable descending
// order (score_before, then lower index) by a bitonic sort of (score, index) pairs over the
// first power of two >= n; energybound: thread 0 sums in rank order in double, as
// causal_psa_slot_levels.
struct LevelParams {
  const float* scores;
  const int8_t* cap;
  int64_t heads_q, group, nb, text_block;
  int energy;
  double end[5];
  int8_t* levels;
};

// Shared bytes of the level kernel for rows of up to nb candidates: scores and indices in rank
// order (sort_length(nb) entries each) and one slot level per rank.
size_t level_smem_bytes(int64_t nb) { return static_cast<size_t>(sort_length(nb)) * 8 + static_cast<size_t>(nb); }

__global__ void __launch_bounds__(kMaxThreads) causal_psa_level_kernel(LevelParams p) {
  extern __shared__ float lsm[];
  const int64_t nb = p.nb, np = sort_length(nb);
  float* sorted = lsm;                                            // [np] scores in rank order
  int32_t* order = reinterpret_cast<int32_t*>(sorted + np);       // [np] key block per rank
  int8_t* by_rank = reinterpret_cast<int8_t*>(order + np);        // [nb] slot level per rank
  const int64_t I = blockIdx.x, h = blockIdx.y, b = blockIdx.z;
  const int64_t bh = b * p.heads_q + h;
  const int64_t bkv = b * (p.heads_q / p.group) + h / p.group;
  const float* s = p.scores + (bh * nb + I) * nb;
  const int8_t* cap = p.cap + bkv * nb;
  int8_t* out = p.levels + (bh * nb + I) * nb;
  const int64_t n = I + 1, m = sort_length(n);
  for (int64_t j = threadIdx.x; j < m; j += blockDim.x) {  // pads: NaN, index past every block
    sorted[j] = j < n ? s[j] : __int_as_float(0x7fc00000);
    order[j] = j < n ? static_cast<int32_t>(j) : INT32_MAX;
  }
  sort_pairs_desc(sorted, order, m);
  __syncthreads();
  if (p.energy) {
    if (threadIdx.x == 0) {
      double total = 0.0;
      for (int64_t r = 0; r < n; ++r) total += static_cast<double>(sorted[r]);
      total = total > 1e-10 ? total : 1e-10;
      double cum = 0.0;
      for (int64_t r = 0; r < n; ++r) {
        cum += static_cast<double>(sorted[r]);
        by_rank[r] = static_cast<int8_t>(causal_psa_energy_level(cum / total, p.end));
      }
    }
  } else {
    for (int64_t r = threadIdx.x; r < n; r += blockDim.x)
      by_rank[r] = static_cast<int8_t>(causal_psa_topk_level(r, n, p.end));
  }
  __syncthreads();
  for (int64_t r = threadIdx.x; r < n; r += blockDim.x) out[order[r]] = by_rank[r];
  __syncthreads();
  for (int64_t j = threadIdx.x; j < nb; j += blockDim.x) {
    const int level = j < n ? out[j] : 0;
    out[j] = static_cast<int8_t>(causal_psa_final_level(level, I, j, p.text_block, cap[j]));
  }
}

}  // namespace

int64_t causal_psa_max_blocks(int64_t block, int64_t stride, int64_t head_dim) {
  const int limit = smem_optin_limit();
  if (limit <= 0 || stride <= 0 || block % stride != 0) return 0;
  // The score kernel's shared memory does not grow with nb; the level kernel's does: the
  // largest power of two P with level_smem_bytes(P) <= limit (any nb <= P fits, P + 1 doubles
  // the sort buffer).
  if (score_smem_bytes(block / stride, stride, head_dim) > static_cast<size_t>(limit)) return 0;
  int64_t pw = 1;
  while (level_smem_bytes(2 * pw) <= static_cast<size_t>(limit)) pw *= 2;
  return pw;
}

psa_status causal_psa_scores_cuda(const CausalPsaScoreArgs& a, cudaStream_t stream) {
  PSA_RETURN_IF(a.dtype != PSA_DTYPE_F16 && a.dtype != PSA_DTYPE_BF16, PSA_ERR_UNSUPPORTED,
                "psa_causal importance: dtype = %d; the CUDA kernel supports f16 and bf16",
                static_cast<int>(a.dtype));
  PSA_RETURN_IF(a.dims.heads_kv <= 0 || a.dims.heads_q % a.dims.heads_kv != 0 || a.dims.head_dim <= 0 || a.dims.head_dim % 8 != 0 ||
                    a.stride <= 0 || a.dims.block_m % a.stride != 0,
                PSA_ERR_INTERNAL, "psa_causal importance: heads %lld/%lld, head_dim %lld, block %lld, stride %lld",
                static_cast<long long>(a.dims.heads_q), static_cast<long long>(a.dims.heads_kv),
                static_cast<long long>(a.dims.head_dim), static_cast<long long>(a.dims.block_m),
                static_cast<long long>(a.stride));
  if (a.dims.batch == 0 || a.dims.heads_q == 0 || a.dims.len_q == 0) return PSA_OK;
  PSA_RETURN_IF(reinterpret_cast<uintptr_t>(a.q) % 16 != 0 || reinterpret_cast<uintptr_t>(a.k) % 16 != 0,
                PSA_ERR_INTERNAL, "psa_causal importance: q/k not 16-byte aligned");
  const int64_t nb = ceil_div(a.dims.len_q, a.dims.block_m);
  PSA_RETURN_IF(nb > INT32_MAX || a.dims.batch > 65535 || a.dims.heads_q > 65535, PSA_ERR_UNSUPPORTED,
                "psa_causal importance: grid of %lld blocks x %lld heads x batch %lld too large",
                static_cast<long long>(nb), static_cast<long long>(a.dims.heads_q), static_cast<long long>(a.dims.batch));
  ScoreParams p{};
  p.q = a.q;
  p.k = a.k;
  p.batch = a.dims.batch;
  p.heads_q = a.dims.heads_q;
  p.group = a.dims.heads_q / a.dims.heads_kv;
  p.len = a.dims.len_q;
  p.d = a.dims.head_dim;
  p.nb = nb;
  p.groups = causal_psa_groups(a.dims.len_q, a.stride);
  p.bs = a.dims.block_m;
  p.stride = a.stride;
  p.per = a.dims.block_m / a.stride;
  p.gstride = a.stride * a.dims.head_dim + 1;
  p.s = a.scale / static_cast<float>(a.stride);
  p.scores = a.scores;
  return a.dtype == PSA_DTYPE_F16 ? launch_scores<__half>(p, a.dims.batch, stream)
                                  : launch_scores<__nv_bfloat16>(p, a.dims.batch, stream);
}

psa_status causal_psa_levels_cuda(const CausalPsaLevelArgs& a, cudaStream_t stream) {
  PSA_RETURN_IF(a.dims.heads_kv <= 0 || a.dims.heads_q % a.dims.heads_kv != 0, PSA_ERR_INTERNAL,
                "psa_causal mask: heads %lld/%lld", static_cast<long long>(a.dims.heads_q),
                static_cast<long long>(a.dims.heads_kv));
  if (a.dims.batch == 0 || a.dims.heads_q == 0 || a.dims.nk == 0) return PSA_OK;
  const size_t smem = level_smem_bytes(a.dims.nk);
  PSA_RETURN_IF(smem > static_cast<size_t>(smem_optin_limit()), PSA_ERR_UNSUPPORTED,
                "psa_causal mask: %lld blocks per row do not fit in shared memory",
                static_cast<long long>(a.dims.nk));
  LevelParams p{};
  p.scores = a.scores;
  p.cap = a.cap;
  p.heads_q = a.dims.heads_q;
  p.group = a.dims.heads_q / a.dims.heads_kv;
  p.nb = a.dims.nk;
  p.text_block = a.text_block;
  p.energy = a.mode == PSA_MASK_MODE_ENERGYBOUND ? 1 : 0;
  for (int s = 0; s < 5; ++s) p.end[s] = a.ratio_end[s];
  p.levels = a.levels;
  PSA_CUDA_TRY(cudaFuncSetAttribute(causal_psa_level_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    static_cast<int>(smem)),
               "causal_psa_level_kernel: cudaFuncSetAttribute");
  const dim3 grid(static_cast<unsigned>(a.dims.nk), static_cast<unsigned>(a.dims.heads_q), static_cast<unsigned>(a.dims.batch));
  causal_psa_level_kernel<<<grid, kMaxThreads, smem, stream>>>(p);
  return launch_status("causal_psa_level_kernel");
}

}  // namespace gpu
}  // namespace psa

// cuda/methods/causal_psa_levels.cu -- importance and mask stages of psa_causal (spec App. A):
// kernels, launchers and entries. Strided antidiagonal logits, fp32 online row softmax,
// block sums; then per row the rank rule. Every rule from src/methods/causal_psa_spec.h.
#include <cstdint>

#include "cuda/core/cuda_status.h"
#include "cuda/core/device.cuh"
#include "cuda/methods/causal_psa_cuda.h"
#include "cuda/methods/row_sort.cuh"
#include "methods/causal_psa_spec.h"

namespace psa {
namespace gpu {
namespace {

constexpr int kMaxThreads = 256;

struct ScoreParams {
  const void* q;  // [B, Hq, L, d] 16-bit
  const void* k;  // [B, Hkv, L, d] 16-bit
  int64_t heads_q, group, len, d, nb, groups, bs, stride, per;  // per = bs / stride
  int64_t gstride;  // floats between strided groups in a tile: stride * d + 1
  float s;          // scale / stride
  float* scores;
};

// Tokens [first, first + bs) of one head as `per` strided groups of `stride` fp32 rows;
// rows past len are zero.
template <typename T>
__device__ __forceinline__ void load_tile(float* tile, const T* x, int64_t first, const ScoreParams& p) {
  const int64_t per_row = p.d / 8;
  for (int64_t c = threadIdx.x; c < p.bs * per_row; c += blockDim.x) {
    const int64_t t = c / per_row, e0 = (c % per_row) * 8;
    float f[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    if (first + t < p.len) unpack8<T>(*reinterpret_cast<const uint4*>(x + (first + t) * p.d + e0), f);
    float* dst = tile + (t / p.stride) * p.gstride + (t % p.stride) * p.d + e0;
#pragma unroll
    for (int i = 0; i < 8; ++i) dst[i] = f[i];
  }
}

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

// One CTA per (query block I, head, batch). Entry x = (rr, cc) of the per x per grid of
// block pair (I, J): strided query row I*per + rr, key group J*per + cc. Pass 0: online row
// max / exp-sum over J = 0..I; pass 1: probabilities, summed per J in row-major order (the
// CPU's order for each block sum).
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

  load_tile<T>(qt, q, I * p.bs, p);
  for (int64_t j = I + 1 + tid; j < p.nb; j += blockDim.x) out[j] = 0.0f;
  for (int64_t x = tid; x < per; x += blockDim.x) {
    rmax[x] = neg_inf;
    rsum[x] = 0.0f;
  }
  for (int pass = 0; pass < 2; ++pass) {
    for (int64_t J = 0; J <= I; ++J) {
      __syncthreads();
      load_tile<T>(kt, k, J * p.bs, p);
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

// ---- tensor-core score kernel (mma.sync m16n8k16, fp32 accumulation) -------------------
// Same grid, passes and validity rule as causal_psa_scores_kernel; the logits of a block
// pair are a [per x per] GEMM over k = stride * d: row rr of the reshaped query block is the
// concatenation over j of token rr*stride + (stride-1-j), column cc the concatenation of key
// token cc*stride + j. The Q and K blocks stay token-major in shared memory (16-bit, pitch d,
// 16-byte chunk c of token t stored at chunk c ^ ((t / stride) & 7), so the 8 rows of one
// ldmatrix phase, which are stride tokens apart, hit 8 distinct bank groups); ldmatrix takes
// one token row address per lane, so the reshape is only addressing.
// Warp w accumulates the j = w (mod kTcWarps) terms; the kTcWarps partials are added in a fixed
// order (deterministic; the order differs from the CPU's sequential fp32 sum, so logits agree
// to fp32 rounding of a 1024..2048-term dot, not bit for bit). per in {8, 16, 32}.
constexpr int kTcWarps = 4;
constexpr int kTcThreads = kTcWarps * 32;

struct TcLayout {
  int64_t pitch;                 // 16-bit elements per token row in shared memory (d)
  int64_t q, k, part, lg, stat;  // byte offsets
  int64_t bytes;
};

__host__ __device__ inline TcLayout tc_layout(int64_t bs, int64_t per, int64_t d) {
  TcLayout t{};
  t.pitch = d;
  t.q = 0;
  t.k = t.q + bs * t.pitch * 2;
  t.part = t.k + bs * t.pitch * 2;                        // [kTcWarps][per * per] fp32
  t.lg = t.part + static_cast<int64_t>(kTcWarps) * per * per * 4;  // [per * per] fp32
  t.stat = t.lg + per * per * 4;                          // rmax[per], rsum[per], red[kTcWarps]
  t.bytes = t.stat + (2 * per + kTcWarps) * 4;
  return t;
}

bool tc_supported(int64_t per, int64_t d) { return (per == 8 || per == 16 || per == 32) && d % 64 == 0; }

// Tokens [first, first + bs) into a [bs][pitch] tile; tokens past len zero-filled.
__device__ __forceinline__ int64_t tc_at(int64_t t, int64_t chunk, int64_t stride, int64_t pitch) {
  return t * pitch + ((chunk ^ ((t / stride) & 7)) * 8);
}

template <typename T>
__device__ __forceinline__ void tc_load(T* tile, const T* x, int64_t first, int64_t bs, int64_t len, int64_t d,
                                        int64_t stride) {
  const int64_t chunks = d / 8;
  for (int64_t c = threadIdx.x; c < bs * chunks; c += blockDim.x) {
    const int64_t t = c / chunks, ch = c % chunks;
    const bool valid = first + t < len;
    cp_async_16(tile + tc_at(t, ch, stride, d), x + (valid ? (first + t) * d + ch * 8 : 0), valid);
  }
  cp_async_commit();
}

template <typename T, int PER>
__global__ void __launch_bounds__(kTcThreads) causal_psa_scores_tc_kernel(ScoreParams p) {
  extern __shared__ __align__(16) unsigned char tsm[];
  constexpr int MT = (PER + 15) / 16, NT = PER / 8, ENTS = PER * PER;
  const TcLayout L = tc_layout(p.bs, PER, p.d);
  T* qs = reinterpret_cast<T*>(tsm + L.q);
  T* ks = reinterpret_cast<T*>(tsm + L.k);
  float* part = reinterpret_cast<float*>(tsm + L.part);
  float* lg = reinterpret_cast<float*>(tsm + L.lg);
  float* rmax = reinterpret_cast<float*>(tsm + L.stat);
  float* rsum = rmax + PER;
  float* red = rsum + PER;

  // Longest rows first (query block I visits I + 1 key blocks): less tail at the end of the grid.
  const int64_t I = p.nb - 1 - static_cast<int64_t>(blockIdx.x), h = blockIdx.y, b = blockIdx.z;
  const int64_t bh = b * p.heads_q + h;
  const int64_t bkv = b * (p.heads_q / p.group) + h / p.group;
  const T* q = static_cast<const T*>(p.q) + bh * p.len * p.d;
  const T* k = static_cast<const T*>(p.k) + bkv * p.len * p.d;
  float* out = p.scores + (bh * p.nb + I) * p.nb;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int g = lane / 4, c2 = (lane % 4) * 2;  // mma fragment row / column pair
  const float neg_inf = __int_as_float(0xff800000);
  const int S = static_cast<int>(p.stride), D = static_cast<int>(p.d);
  const int64_t pitch = L.pitch;

  tc_load<T>(qs, q, I * p.bs, p.bs, p.len, p.d, p.stride);
  for (int64_t j = I + 1 + tid; j < p.nb; j += blockDim.x) out[j] = 0.0f;
  for (int x = tid; x < PER; x += blockDim.x) {
    rmax[x] = neg_inf;
    rsum[x] = 0.0f;
  }
  // ldmatrix row of this lane: A (x4) rows 0..15 at k offset 0 / 8; B (x2) rows 0..7 at 0 / 8.
  const int a_row = lane % 16, a_k = (lane / 16) * 8;
  const int b_row = lane % 8, b_k = ((lane / 8) % 2) * 8;
  for (int pass = 0; pass < 2; ++pass) {
    for (int64_t J = 0; J <= I; ++J) {
      __syncthreads();  // ks / lg / part free
      tc_load<T>(ks, k, J * p.bs, p.bs, p.len, p.d, p.stride);
      cp_async_wait<0>();
      __syncthreads();
      float acc[MT][NT][4];
#pragma unroll
      for (int m = 0; m < MT; ++m)
#pragma unroll
        for (int n = 0; n < NT; ++n)
#pragma unroll
          for (int e = 0; e < 4; ++e) acc[m][n][e] = 0.0f;
      for (int j = warp; j < S; j += kTcWarps) {
        int at[MT], asw[MT], bt[NT], bsw[NT];  // token row and its chunk swizzle
#pragma unroll
        for (int m = 0; m < MT; ++m) {
          const int rr = m * 16 + a_row < PER ? m * 16 + a_row : 0;  // per 8: rows 8..15 unused
          at[m] = rr * S + (S - 1 - j);
          asw[m] = rr & 7;
        }
#pragma unroll
        for (int n = 0; n < NT; ++n) {
          bt[n] = (n * 8 + b_row) * S + j;
          bsw[n] = b_row;
        }
        for (int e = 0; e < D; e += 16) {
          uint32_t a[MT][4], bf[NT][2];
#pragma unroll
          for (int m = 0; m < MT; ++m)
            ldmatrix_x4(a[m], qs + at[m] * pitch + ((((e + a_k) >> 3) ^ asw[m]) << 3));
#pragma unroll
          for (int n = 0; n < NT; ++n) {
            uint32_t r4[4];
            // x4 over the same 8 rows twice: lanes 16..31 repeat lanes 0..15 (valid addresses).
            ldmatrix_x4(r4, ks + bt[n] * pitch + ((((e + b_k) >> 3) ^ bsw[n]) << 3));
            bf[n][0] = r4[0];
            bf[n][1] = r4[1];
          }
#pragma unroll
          for (int m = 0; m < MT; ++m)
#pragma unroll
            for (int n = 0; n < NT; ++n) mma_16816<T>(acc[m][n], a[m], bf[n][0], bf[n][1]);
        }
      }
      // Fragment (m, n, e): row m*16 + g + (e / 2) * 8, column n*8 + c2 + e % 2.
      float* mine = part + warp * ENTS;
#pragma unroll
      for (int m = 0; m < MT; ++m)
#pragma unroll
        for (int n = 0; n < NT; ++n)
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int rr = m * 16 + g + (e / 2) * 8, cc = n * 8 + c2 + e % 2;
            if (rr < PER) mine[rr * PER + cc] = acc[m][n][e];
          }
      __syncthreads();
      float bsum = 0.0f;
      for (int x = tid; x < ENTS; x += kTcThreads) {
        const int rr = x / PER, cc = x % PER;
        const int64_t r = I * PER + rr, c = J * PER + cc;
        const bool valid = r < p.groups && c < p.groups && c <= r;
        float dot = part[x];
#pragma unroll
        for (int w = 1; w < kTcWarps; ++w) dot += part[w * ENTS + x];
        const float logit = __fmul_rn(p.s, dot);
        if (pass == 0) {
          lg[x] = valid ? logit : neg_inf;
        } else {
          const float pr = valid ? __fmul_rn(expf(logit - rmax[rr]), rsum[rr]) : 0.0f;
          bsum += pr;
        }
      }
      if (pass == 0) {
        __syncthreads();
        for (int rr = tid; rr < PER; rr += kTcThreads) online_row_update(lg + rr * PER, PER, rmax[rr], rsum[rr]);
      } else {
        // Block sum: per-thread partials, warp tree, then the warps in order (deterministic).
#pragma unroll
        for (int o = 16; o > 0; o /= 2) bsum += __shfl_xor_sync(0xffffffffu, bsum, o);
        if (lane == 0) red[warp] = bsum;
        __syncthreads();
        if (tid == 0) {
          float a = 0.0f;
          for (int w = 0; w < kTcWarps; ++w) a += red[w];
          out[J] = a;
        }
      }
    }
    __syncthreads();
    if (pass == 0)
      for (int rr = tid; rr < PER; rr += kTcThreads) rsum[rr] = rsum[rr] > 0.0f ? __fdiv_rn(1.0f, rsum[rr]) : 0.0f;
  }
}

template <typename T, int PER>
psa_status launch_scores_tc(const ScoreParams& p, int64_t batch, cudaStream_t stream) {
  const size_t smem = static_cast<size_t>(tc_layout(p.bs, PER, p.d).bytes);
  PSA_CUDA_TRY(cudaFuncSetAttribute(causal_psa_scores_tc_kernel<T, PER>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    static_cast<int>(smem)),
               "causal_psa_scores_tc_kernel: cudaFuncSetAttribute");
  const dim3 grid(static_cast<unsigned>(p.nb), static_cast<unsigned>(p.heads_q), static_cast<unsigned>(batch));
  causal_psa_scores_tc_kernel<T, PER><<<grid, kTcThreads, smem, stream>>>(p);
  return launch_status("causal_psa_scores_tc_kernel");
}

template <typename T>
psa_status launch_scores_tc_per(const ScoreParams& p, int64_t batch, cudaStream_t stream) {
  switch (p.per) {
    case 8: return launch_scores_tc<T, 8>(p, batch, stream);
    case 16: return launch_scores_tc<T, 16>(p, batch, stream);
    default: return launch_scores_tc<T, 32>(p, batch, stream);
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
  if (tc_supported(p.per, p.d) && static_cast<int64_t>(smem_optin_limit()) >= tc_layout(p.bs, p.per, p.d).bytes)
    return launch_scores_tc_per<T>(p, batch, stream);
  const size_t smem = score_smem_bytes(p.per, p.stride, p.d);
  PSA_CUDA_TRY(cudaFuncSetAttribute(causal_psa_scores_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    static_cast<int>(smem)),
               "causal_psa_scores_kernel: cudaFuncSetAttribute");
  const dim3 grid(static_cast<unsigned>(p.nb), static_cast<unsigned>(p.heads_q), static_cast<unsigned>(batch));
  causal_psa_scores_kernel<T><<<grid, score_threads(p.per), smem, stream>>>(p);
  return launch_status("causal_psa_scores_kernel");
}

// Level kernel: one CTA per (row I, head, batch). Rank of candidate j < n = I + 1: the
// candidates before it under (score_before, then lower index). Energybound: thread 0 sums in
// rank order in double, as causal_psa_slot_levels.
struct LevelParams {
  const float* scores;
  const int8_t* cap;
  int64_t heads_q, group, nb, text_block;
  int energy;
  double end[5];
  int8_t* levels;
};

__global__ void __launch_bounds__(kMaxThreads) causal_psa_level_kernel(LevelParams p) {
  extern __shared__ float lsm[];
  const int64_t nb = p.nb;
  float* sorted = lsm;                                            // [nb] scores in rank order
  int32_t* order = reinterpret_cast<int32_t*>(sorted + nb);       // [nb] key block per rank
  int8_t* by_rank = reinterpret_cast<int8_t*>(order + nb);        // [nb] slot level per rank
  const int64_t I = blockIdx.x, h = blockIdx.y, b = blockIdx.z;
  const int64_t bh = b * p.heads_q + h;
  const int64_t bkv = b * (p.heads_q / p.group) + h / p.group;
  const float* s = p.scores + (bh * nb + I) * nb;
  const int8_t* cap = p.cap + bkv * nb;
  int8_t* out = p.levels + (bh * nb + I) * nb;
  const int64_t n = I + 1;
  for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
    const float sj = s[j];
    int64_t rank = 0;
    for (int64_t u = 0; u < n; ++u) {
      const float su = s[u];
      if (score_before(su, sj) || (u < j && !score_before(sj, su))) ++rank;
    }
    sorted[rank] = sj;
    order[rank] = static_cast<int32_t>(j);
  }
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
  // The score kernel's shared memory does not grow with nb; the level kernel's does
  // (9 bytes per block).
  if (score_smem_bytes(block / stride, stride, head_dim) > static_cast<size_t>(limit)) return 0;
  return static_cast<int64_t>(limit) / 9;
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
  const size_t smem = static_cast<size_t>(a.dims.nk) * 9;
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

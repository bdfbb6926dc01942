// cuda/importance/importance.cu -- importance stage, kernel + launcher + entry: offsets via
// sample_offsets; the per-query-block score kernel (fallback: no scratch, or sample counts that
// are not powers of two), sampled dots on tensor cores (fp32 accumulation), then exp and the
// double row sum in importance_cpu's order. The entry picks the GEMM path
// (block_scores_sm80.cu) when it applies. Must not define its own sampling or scoring rule.
#include <cstdint>

#include "cuda/core/cuda_status.h"
#include "cuda/core/device.cuh"
#include "cuda/importance/block_scores_gemm.h"
#include "cuda/importance/importance_cuda.h"
#include "cuda/importance/score_scratch.h"
#include "importance/importance_spec.h"
#include "importance/score_division.h"

namespace psa {
namespace gpu {
namespace {

constexpr int kMaxSampleBlock = 128;

// One warp per (b, h, stream): the lanes compute the stream's draws (sample_draw: 64-bit
// modulo, the costly part) in parallel; lane 0 then applies the swaps in order in shared memory,
// and the lanes write the offsets (position i is final after step i: sample_offsets).
constexpr int kOffsetWarps = 4;
__global__ void __launch_bounds__(32 * kOffsetWarps)
    sample_offsets_kernel(uint64_t seed, int64_t heads_q, int64_t batch_offset, int64_t head_offset, int32_t block_m,
                          int32_t q_count, int32_t block_n, int32_t k_count, int32_t* __restrict__ q_off,
                          int32_t* __restrict__ k_off, int64_t total) {
  __shared__ int32_t perm[kOffsetWarps][kMaxSampleBlock];
  __shared__ int32_t draw[kOffsetWarps][kMaxSampleBlock];
  const int w = static_cast<int>(threadIdx.x >> 5), lane = static_cast<int>(threadIdx.x & 31);
  const int64_t idx = blockIdx.x * static_cast<int64_t>(kOffsetWarps) + w;
  if (idx >= total) return;  // the whole warp
  const int64_t bh = idx / 2;
  const uint32_t stream = static_cast<uint32_t>(idx % 2);
  const int32_t block = stream == kSampleQuery ? block_m : block_n;
  const int32_t count = stream == kSampleQuery ? q_count : k_count;
  int32_t* out = stream == kSampleQuery ? q_off + bh * q_count : k_off + bh * k_count;
  const uint64_t key = sample_key(seed, batch_offset + bh / heads_q, head_offset + bh % heads_q, stream);
  for (int32_t i = lane; i < block; i += 32) perm[w][i] = i;
  for (int32_t i = lane; i < count; i += 32) draw[w][i] = sample_draw(key, i, block);
  __syncwarp();
  if (lane == 0) {
    for (int32_t i = 0; i < count; ++i) {
      const int32_t j = draw[w][i];
      const int32_t t = perm[w][i];
      perm[w][i] = perm[w][j];
      perm[w][j] = t;
    }
  }
  __syncwarp();
  for (int32_t i = lane; i < count; i += 32) out[i] = perm[w][i];
}

constexpr int kThreads = 256;  // 8 warps
constexpr int kKC = 128;       // sampled keys per chunk (whole key blocks)

struct ScoreKernelParams {
  QRowSource q;
  const void* k;
  int64_t k_sb, k_sh, k_sl;  // K's batch, kv-head and row strides (elements)
  int64_t heads_q, group, len_q, len_k, block_m, block_n, mq, nk;
  const int32_t* q_off;
  const int32_t* k_off;
  int32_t q_count, k_count;
  int32_t rows;              // q_count rounded up to 16 (mma row tiles)
  int32_t blocks_per_chunk;  // G: key blocks per chunk; chunk keys = G * k_count <= KC
  int32_t single_pass;       // every block-max logit kept in shared memory: one pass over K
  int32_t ld_a;              // abuf row stride: nk (single pass) or G
  float scale;
  float* scores;
  float* ties;  // tie masses or NULL (ScoreArgs::ties)
};

template <int D, int KC>
size_t score_smem_bytes(int rows, int ld_a, int64_t nk) {
  return sizeof(uint16_t) * (static_cast<size_t>(rows) + 2 * KC) * D +
         sizeof(float) * (static_cast<size_t>(rows) * (KC + 4) + static_cast<size_t>(rows) * ld_a + rows +
                          static_cast<size_t>(nk));
}

// One CTA per (query block i, query head h, batch b). The sampled query rows sit in shared
// memory once; key blocks stream through in chunks of KC sampled keys (two buffers: the next
// chunk's cp.async runs under this chunk's mma.sync, fp32 accumulation). Each sampled row's
// block-max logits a[r][j] go to abuf with the row max m[r]. Single pass (abuf holds the whole
// row, the usual case): then exp(a - m) and the max over rows per key block straight from
// abuf. Otherwise pass 0 finds m and pass 1 recomputes the logits (the original two-pass
// order) and keeps a - m, whose maximum per key block gives P. The row is then normalised by
// its double sum in key order (importance_cpu).
template <typename T, int D, int KC>
__global__ void __launch_bounds__(kThreads) block_scores_kernel(ScoreKernelParams p) {
  constexpr int kLd = KC + 4;  // dots row stride (floats)
  constexpr int kChunks = D / 8;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  T* sq = reinterpret_cast<T*>(smem_raw);                         // [rows][D]
  T* sk = sq + p.rows * D;                                        // [2][KC][D]
  float* dots = reinterpret_cast<float*>(sk + 2 * KC * D);        // [rows][kLd]
  float* abuf = dots + p.rows * kLd;                              // [rows][ld_a]
  float* mrow = abuf + p.rows * p.ld_a;                           // [rows]
  float* prow = mrow + p.rows;                                    // [nk]
  __shared__ double total;

  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int g = lane >> 2, tq = lane & 3;
  const int64_t i = blockIdx.x, h = blockIdx.y, b = blockIdx.z;
  const int64_t bh = b * p.heads_q + h;
  const T* k = static_cast<const T*>(p.k) + b * p.k_sb + (h / p.group) * p.k_sh;
  const int32_t* qo = p.q_off + bh * p.q_count;
  const int32_t* ko = p.k_off + bh * p.k_count;
  const int G = p.blocks_per_chunk;
  const int ldA = p.ld_a;
  const bool single = p.single_pass != 0;
  const float ninf = -INFINITY;
  const int64_t n_chunks = (p.nk + G - 1) / G;

  for (int64_t j = tid; j < p.nk; j += kThreads) prow[j] = 0.0f;
  for (int c = tid; c < p.rows * kChunks; c += kThreads) {
    const int r = c / kChunks, cc = c % kChunks;
    const bool valid = r < p.q_count;
    const int64_t tok = valid ? sampled_token(i, p.block_m, qo[r], p.len_q) : 0;
    cp_async_16(sq + swz<D>(r, cc), p.q.row<T>(b, h, tok) + cc * 8, valid);
  }
  if (tid < p.rows) mrow[tid] = ninf;
  const int row_tiles = p.rows / 16;
  const int items = row_tiles * (KC / 32);

  auto load_chunk = [&](int64_t ci, int buf) {
    const int64_t jb = ci * G;
    const int gc = static_cast<int>(min(static_cast<int64_t>(G), p.nk - jb));
    const int keys = gc * p.k_count;
    T* dst = sk + buf * KC * D;
    for (int c = tid; c < KC * kChunks; c += kThreads) {
      const int r = c / kChunks, cc = c % kChunks;
      const bool valid = r < keys;
      const int64_t tok = valid ? sampled_token(jb + r / p.k_count, p.block_n, ko[r % p.k_count], p.len_k) : 0;
      cp_async_16(dst + swz<D>(r, cc), k + tok * p.k_sl + cc * 8, valid);
    }
  };

  const int passes = single ? 1 : 2;
  for (int pass = 0; pass < passes; ++pass) {
    load_chunk(0, 0);
    cp_async_commit();
    for (int64_t ci = 0; ci < n_chunks; ++ci) {
      const int64_t jb = ci * G;
      const int gc = static_cast<int>(min(static_cast<int64_t>(G), p.nk - jb));
      __syncthreads();  // previous chunk's dots / abuf readers are done
      if (ci + 1 < n_chunks) load_chunk(ci + 1, static_cast<int>((ci + 1) & 1));
      cp_async_commit();
      cp_async_wait<1>();
      __syncthreads();
      const T* tk = sk + (ci & 1) * KC * D;
      // dots[r][c] = q_r . k_c for 16-row x 32-key items, spread over the warps.
      for (int item = warp; item < items; item += kThreads / 32) {
        const int rt = item / (KC / 32), cg = item % (KC / 32);
        float acc[4][4];
#pragma unroll
        for (int n = 0; n < 4; ++n) acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.0f;
#pragma unroll
        for (int kk = 0; kk < D / 16; ++kk) {
          uint32_t a[4];
          ldmatrix_x4(a, sq + swz<D>(rt * 16 + (lane & 7) + ((lane >> 3) & 1) * 8, kk * 2 + (lane >> 4)));
#pragma unroll
          for (int np = 0; np < 2; ++np) {
            uint32_t kf[4];
            ldmatrix_x4(kf, tk + swz<D>(cg * 32 + np * 16 + (lane & 7) + (lane >> 4) * 8, kk * 2 + ((lane >> 3) & 1)));
            mma_16816<T>(acc[2 * np], a, kf[0], kf[1]);
            mma_16816<T>(acc[2 * np + 1], a, kf[2], kf[3]);
          }
        }
#pragma unroll
        for (int n = 0; n < 4; ++n) {
          const int col = cg * 32 + n * 8 + tq * 2;
          float* d0 = dots + (rt * 16 + g) * kLd + col;
          float* d1 = d0 + 8 * kLd;
          d0[0] = acc[n][0];
          d0[1] = acc[n][1];
          d1[0] = acc[n][2];
          d1[1] = acc[n][3];
        }
      }
      __syncthreads();
      const int64_t abase = single ? jb : 0;
      for (int idx = tid; idx < p.q_count * gc; idx += kThreads) {
        const int r = idx / gc, jj = idx % gc;
        float best = ninf;
        for (int c = 0; c < p.k_count; ++c) best = fmaxf(best, dots[r * kLd + jj * p.k_count + c]);
        const float a = __fmul_rn(p.scale, best);  // rounded on its own, as the CPU
        // Pass 1 keeps the difference to the row max: P below is sample_weight of the largest
        // one (the rule, importance_spec.h), the tie masses need every one.
        abuf[r * ldA + abase + jj] = pass == 0 ? a : __fsub_rn(a, mrow[r]);
      }
      __syncthreads();
      if (pass == 0) {
        if (tid < p.q_count) {
          float m = mrow[tid];
          for (int jj = 0; jj < gc; ++jj) m = fmaxf(m, abuf[tid * ldA + abase + jj]);
          mrow[tid] = m;
        }
      } else if (tid < gc) {
        float y = ninf;  // fmaxf skips NaN differences (weight 0); all NaN: exp(-inf) = 0
        for (int r = 0; r < p.q_count; ++r) y = fmaxf(y, abuf[r * ldA + tid]);
        const float best = fmaxf(prow[jb + tid], sample_weight(y));
        prow[jb + tid] = best;
        if (p.ties != nullptr) {  // block jb + tid is final: its tie mass from the chunk's differences
          float t = 0.0f;
          if (best == 1.0f) {
            TieMassSum sum;
            for (int r = 0; r < p.q_count; ++r) sum.add(r, sample_weight(abuf[r * ldA + tid]));
            t = sum.result();
          }
          p.ties[(bh * p.mq + i) * p.nk + jb + tid] = t;
        }
      }
    }
    cp_async_wait<0>();
  }
  __syncthreads();
  if (single) {  // pass 1 from the kept logits: same values, no second sweep over K
    for (int64_t j = tid; j < p.nk; j += kThreads) {
      float y = -INFINITY;  // max_r (a - m), NaN skipped; P = sample_weight(y) (importance_spec.h)
      for (int r = 0; r < p.q_count; ++r) y = fmaxf(y, __fsub_rn(abuf[r * ldA + j], mrow[r]));
      const float best = sample_weight(y);
      prow[j] = best;
      if (p.ties != nullptr) {  // tie mass of a P == 1 block (importance_spec.h), else 0
        float t = 0.0f;
        if (best == 1.0f) {
          TieMassSum sum;
          for (int r = 0; r < p.q_count; ++r) sum.add(r, sample_weight(__fsub_rn(abuf[r * ldA + j], mrow[r])));
          t = sum.result();
        }
        p.ties[(bh * p.mq + i) * p.nk + j] = t;
      }
    }
    __syncthreads();
  }
  if (tid == 0) {  // importance_cpu's row sum: double, sequential in key order
    double s = 0.0;
    for (int64_t j = 0; j < p.nk; ++j) s += prow[j];
    total = s;
  }
  __syncthreads();
  float* out = p.scores + (bh * p.mq + i) * p.nk;
  const double s = total;
  const ScoreDivisor dv = score_divisor(s);
  for (int64_t j = tid; j < p.nk; j += kThreads)
    out[j] = s > 0.0 ? normalised_score(prow[j], s, dv) : prow[j];
}

template <typename T, int D, int KC>
psa_status launch_scores(ScoreKernelParams p, int64_t batch, cudaStream_t stream) {
  int dev = 0, limit = 0;
  PSA_CUDA_TRY(cudaGetDevice(&dev), "block_scores_kernel: cudaGetDevice");
  PSA_CUDA_TRY(cudaDeviceGetAttribute(&limit, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev),
               "block_scores_kernel: cudaDeviceGetAttribute");
  p.single_pass = 1;
  p.ld_a = static_cast<int32_t>(p.nk);
  size_t smem = score_smem_bytes<D, KC>(p.rows, p.ld_a, p.nk);
  if (smem > static_cast<size_t>(limit)) {  // the row's logits do not fit: two passes
    p.single_pass = 0;
    p.ld_a = p.blocks_per_chunk;
    smem = score_smem_bytes<D, KC>(p.rows, p.ld_a, p.nk);
  }
  PSA_RETURN_IF(smem > static_cast<size_t>(limit), PSA_ERR_UNSUPPORTED,
                "importance: %lld key blocks with %d sampled queries need %zu bytes of shared "
                "memory; this device allows %d",
                static_cast<long long>(p.nk), p.q_count, smem, limit);
  PSA_CUDA_TRY(cudaFuncSetAttribute(block_scores_kernel<T, D, KC>,
                                    cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    static_cast<int>(smem)),
               "block_scores_kernel: cudaFuncSetAttribute");
  const dim3 grid(static_cast<unsigned>(p.mq), static_cast<unsigned>(p.heads_q),
                  static_cast<unsigned>(batch));
  block_scores_kernel<T, D, KC><<<grid, kThreads, smem, stream>>>(p);
  return launch_status("block_scores_kernel");
}

template <typename T>
psa_status dispatch_scores(const ScoreKernelParams& p, int64_t d, int kc, int64_t batch,
                           cudaStream_t stream) {
  (void)kc;
  if (d == 64) return launch_scores<T, 64, kKC>(p, batch, stream);
  if (d == 128) return launch_scores<T, 128, kKC>(p, batch, stream);
  return set_error(PSA_ERR_UNSUPPORTED, "q: shape[3] (head_dim) = %lld; supported: 64, 128",
                   static_cast<long long>(d));
}

}  // namespace

psa_status importance_supported(int64_t block_m, int64_t block_n, int64_t q_count, int64_t k_count) {
  PSA_RETURN_IF(block_m > kMaxSampleBlock || block_n > kMaxSampleBlock, PSA_ERR_UNSUPPORTED,
                "block_size (m, n) = (%lld, %lld); the CUDA importance stage samples blocks of at "
                "most %d tokens",
                static_cast<long long>(block_m), static_cast<long long>(block_n), kMaxSampleBlock);
  PSA_RETURN_IF(q_count < 1 || k_count < 1 || q_count > block_m || k_count > block_n,
                PSA_ERR_UNSUPPORTED,
                "sample counts %lld/%lld per block: each must be in [1, block] for blocks %lld/%lld",
                static_cast<long long>(q_count), static_cast<long long>(k_count),
                static_cast<long long>(block_m), static_cast<long long>(block_n));
  return PSA_OK;
}

psa_status sample_offsets_cuda(const OffsetArgs& a, cudaStream_t stream) {
  PSA_TRY(importance_supported(a.dims.block_m, a.dims.block_n, a.q_count, a.k_count));
  const int64_t total = a.dims.batch * a.dims.heads_q * 2;
  if (total == 0) return PSA_OK;
  sample_offsets_kernel<<<static_cast<unsigned>(ceil_div(total, int64_t{kOffsetWarps})), 32 * kOffsetWarps, 0,
                          stream>>>(
      a.seed, a.dims.heads_q, a.batch_offset, a.head_offset, static_cast<int32_t>(a.dims.block_m), a.q_count,
      static_cast<int32_t>(a.dims.block_n), a.k_count, a.q_off, a.k_off, total);
  return launch_status("sample_offsets_kernel");
}

bool score_int8_supported(int64_t q_count, int64_t k_count, int64_t head_dim) {
  return head_dim == 128 && score_gemm_supported(q_count, k_count) && score_sm90_available();
}

psa_status block_scores_cuda(const ScoreArgs& a, cudaStream_t stream) {
  PSA_TRY(importance_supported(a.dims.block_m, a.dims.block_n, a.q_count, a.k_count));
  if (a.k8 != nullptr) {
    PSA_RETURN_IF(!score_int8_supported(a.q_count, a.k_count, a.dims.head_dim) || a.scratch == nullptr ||
                      a.kernel == ScoreKernel::kSm80 || a.k_scale == nullptr ||
                      a.scratch_bytes < score_scratch_slot_bytes(ceil_div(a.dims.len_k, a.dims.block_n)),
                  PSA_ERR_UNSUPPORTED,
                  "importance: the 8-bit rule runs on the sm90 score kernel with a scratch and k_scale, head_dim "
                  "128 and power-of-two sample counts up to 128 (here %d/%d, head_dim %lld)",
                  a.q_count, a.k_count, static_cast<long long>(a.dims.head_dim));
    PSA_RETURN_IF(reinterpret_cast<uintptr_t>(a.k8) % 16 != 0, PSA_ERR_INTERNAL,
                  "importance: k8 %p is not 16-byte aligned", a.k8);
  }
  const QRowSource qs = q_row_source(a);
  const int64_t q_stride[4] = {qs.sb, qs.sh, qs.sl, a.q_stride[3]};
  PSA_RETURN_IF(!rows_16b_aligned(a.q, q_stride), PSA_ERR_INTERNAL,
                "importance: q rows must be 16-byte aligned (pointer %p, strides %lld/%lld/%lld/%lld)", a.q,
                static_cast<long long>(a.q_stride[0]), static_cast<long long>(a.q_stride[1]),
                static_cast<long long>(a.q_stride[2]), static_cast<long long>(a.q_stride[3]));
  PSA_RETURN_IF(a.k8 == nullptr && !rows_16b_aligned(a.k, a.k_stride), PSA_ERR_INTERNAL, "importance: k rows must be 16-byte aligned (pointer %p, strides %lld/%lld/%lld/%lld)",
                a.k, static_cast<long long>(a.k_stride[0]), static_cast<long long>(a.k_stride[1]),
                static_cast<long long>(a.k_stride[2]), static_cast<long long>(a.k_stride[3]));
  if (a.scratch != nullptr && score_gemm_supported(a.q_count, a.k_count) &&
      (a.dims.head_dim == 64 || a.dims.head_dim == 128) && a.dims.block_n > 0 &&
      a.scratch_bytes >= score_scratch_slot_bytes(ceil_div(a.dims.len_k, a.dims.block_n)))
    return block_scores_gemm_cuda(a, stream);
  ScoreKernelParams p{};
  fill_score_params(p, a);
  p.q = qs;
  p.k_count = a.k_count;
  p.rows = (a.q_count + 15) / 16 * 16;
  // A chunk holds whole key blocks: up to kKC sampled keys.
  const int kc = kKC;
  p.blocks_per_chunk = kc / a.k_count;
  if (p.mq == 0 || p.nk == 0 || a.dims.batch == 0 || a.dims.heads_q == 0) return PSA_OK;
  switch (a.dtype) {
    case PSA_DTYPE_F16: return dispatch_scores<__half>(p, a.dims.head_dim, kc, a.dims.batch, stream);
    case PSA_DTYPE_BF16: return dispatch_scores<__nv_bfloat16>(p, a.dims.head_dim, kc, a.dims.batch, stream);
    default:
      return set_error(PSA_ERR_UNSUPPORTED, "importance: dtype = %d; supported: f16, bf16",
                       static_cast<int>(a.dtype));
  }
}

}  // namespace gpu
}  // namespace psa

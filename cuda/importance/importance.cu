// cuda/importance/importance.cu -- importance stage: offset kernel (calls sample_offsets),
// block-score kernel, launchers and entries. Reproduces importance_cpu's arithmetic order
// (sequential fp32 dots without FMA, exp rounded from double, double row sum) so scores
// match the CPU bits in practice; must not define its own sampling rule.
#include <cstdint>

#include "cuda/core/cuda_status.h"
#include "cuda/core/device.cuh"
#include "cuda/importance/importance_cuda.h"
#include "importance/importance_spec.h"

namespace psa {
namespace gpu {
namespace {

constexpr int kMaxSampleBlock = 128;

__global__ void sample_offsets_kernel(uint64_t seed, int64_t heads_q, int32_t block_m,
                                      int32_t q_count, int32_t block_n, int32_t k_count,
                                      int32_t* __restrict__ q_off, int32_t* __restrict__ k_off,
                                      int64_t total) {
  const int64_t idx = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (idx >= total) return;
  const int64_t bh = idx / 2;
  const uint32_t stream = static_cast<uint32_t>(idx % 2);
  int32_t scratch[kMaxSampleBlock];
  if (stream == kSampleQuery)
    sample_offsets(seed, bh / heads_q, bh % heads_q, kSampleQuery, block_m, q_count, scratch,
                   q_off + bh * q_count);
  else
    sample_offsets(seed, bh / heads_q, bh % heads_q, kSampleKey, block_n, k_count, scratch,
                   k_off + bh * k_count);
}

// Query rows per pass, and the thread layout of the dot tile: 8 row groups x 32 key lanes.
constexpr int kRows = 32;
constexpr int kThreads = 256;

struct ScoreKernelParams {
  const void* q;
  const void* k;
  int64_t heads_q, group, len_q, len_k, block_m, block_n, mq, nk;
  const int32_t* q_off;
  const int32_t* k_off;
  int32_t q_count, k_count;
  int32_t blocks_per_chunk;  // G: key blocks per chunk; chunk keys = G * k_count <= 32 * NB
  float scale;
  float* scores;
};

// One CTA per (query block i, query head h, batch b). Per pass of up to kRows sampled
// queries: pass 0 finds each sampled row's max logit over all key blocks, pass 1 turns
// logits into exp(a - max) and keeps the max over rows per key block.
template <typename T, int D, int NB>
__global__ void __launch_bounds__(kThreads) block_scores_kernel(ScoreKernelParams p) {
  constexpr int kChunk = 32 * NB;
  constexpr int kLd = D + 1;
  extern __shared__ float smem[];
  float* qs = smem;                          // [kRows][kLd]
  float* ks = qs + kRows * kLd;              // [kChunk][kLd]
  float* dots = ks + kChunk * kLd;           // [kRows][kChunk]
  float* abuf = dots + kRows * kChunk;       // [kRows][G]
  float* mrow = abuf + kRows * p.blocks_per_chunk;  // [kRows]
  float* prow = mrow + kRows;                // [nk]
  __shared__ double total;

  const int tid = threadIdx.x;
  const int64_t i = blockIdx.x, h = blockIdx.y, b = blockIdx.z;
  const int64_t bh = b * p.heads_q + h;
  const T* q = static_cast<const T*>(p.q) + bh * p.len_q * D;
  const T* k = static_cast<const T*>(p.k) + (b * (p.heads_q / p.group) + h / p.group) * p.len_k * D;
  const int32_t* qo = p.q_off + bh * p.q_count;
  const int32_t* ko = p.k_off + bh * p.k_count;
  const int G = p.blocks_per_chunk;
  const int ry = tid / 32, cx = tid % 32;
  const float ninf = -INFINITY;

  for (int64_t j = tid; j < p.nk; j += kThreads) prow[j] = 0.0f;

  for (int r0 = 0; r0 < p.q_count; r0 += kRows) {
    const int rc = min(kRows, p.q_count - r0);
    __syncthreads();
    for (int idx = tid; idx < rc * D; idx += kThreads) {
      const int r = idx / D, e = idx % D;
      const int64_t tok = sampled_token(i, p.block_m, qo[r0 + r], p.len_q);
      qs[r * kLd + e] = Elem<T>::to_float(q[tok * D + e]);
    }
    if (tid < kRows) mrow[tid] = ninf;
    for (int pass = 0; pass < 2; ++pass) {
      for (int64_t jb = 0; jb < p.nk; jb += G) {
        const int gc = static_cast<int>(min(static_cast<int64_t>(G), p.nk - jb));
        const int keys = gc * p.k_count;
        __syncthreads();
        for (int idx = tid; idx < keys * D; idx += kThreads) {
          const int c = idx / D, e = idx % D;
          const int64_t tok = sampled_token(jb + c / p.k_count, p.block_n, ko[c % p.k_count], p.len_k);
          ks[c * kLd + e] = Elem<T>::to_float(k[tok * D + e]);
        }
        __syncthreads();
        // Sequential fp32 dots in index order, products rounded on their own (as the CPU).
        float acc[4][NB];
#pragma unroll
        for (int a = 0; a < 4; ++a)
#pragma unroll
          for (int n = 0; n < NB; ++n) acc[a][n] = 0.0f;
#pragma unroll 4
        for (int e = 0; e < D; ++e) {
          float qv[4], kv[NB];
#pragma unroll
          for (int a = 0; a < 4; ++a) qv[a] = qs[(ry + 8 * a) * kLd + e];
#pragma unroll
          for (int n = 0; n < NB; ++n) kv[n] = ks[(cx + 32 * n) * kLd + e];
#pragma unroll
          for (int a = 0; a < 4; ++a)
#pragma unroll
            for (int n = 0; n < NB; ++n) acc[a][n] = __fadd_rn(acc[a][n], __fmul_rn(qv[a], kv[n]));
        }
#pragma unroll
        for (int a = 0; a < 4; ++a)
#pragma unroll
          for (int n = 0; n < NB; ++n) dots[(ry + 8 * a) * kChunk + cx + 32 * n] = acc[a][n];
        __syncthreads();
        for (int idx = tid; idx < rc * gc; idx += kThreads) {
          const int r = idx / gc, jj = idx % gc;
          float best = ninf;
          for (int c = 0; c < p.k_count; ++c) best = fmaxf(best, dots[r * kChunk + jj * p.k_count + c]);
          const float a = __fmul_rn(p.scale, best);
          if (pass == 0) {
            abuf[r * G + jj] = a;
          } else {
            const float e = static_cast<float>(exp(static_cast<double>(__fsub_rn(a, mrow[r]))));
            abuf[r * G + jj] = e != e ? 0.0f : e;
          }
        }
        __syncthreads();
        if (pass == 0) {
          if (tid < rc) {
            float m = mrow[tid];
            for (int jj = 0; jj < gc; ++jj) m = fmaxf(m, abuf[tid * G + jj]);
            mrow[tid] = m;
          }
        } else if (tid < gc) {
          float best = prow[jb + tid];
          for (int r = 0; r < rc; ++r) best = fmaxf(best, abuf[r * G + tid]);
          prow[jb + tid] = best;
        }
      }
    }
  }
  __syncthreads();
  if (tid == 0) {  // importance_cpu's row sum: double, sequential in key order
    double s = 0.0;
    for (int64_t j = 0; j < p.nk; ++j) s += prow[j];
    total = s;
  }
  __syncthreads();
  float* out = p.scores + (bh * p.mq + i) * p.nk;
  const double s = total;
  for (int64_t j = tid; j < p.nk; j += kThreads)
    out[j] = s > 0.0 ? static_cast<float>(prow[j] / s) : prow[j];
}

template <typename T, int D, int NB>
psa_status launch_scores(const ScoreKernelParams& p, int64_t batch, cudaStream_t stream) {
  constexpr int kChunk = 32 * NB;
  const size_t smem = sizeof(float) * (static_cast<size_t>(kRows) * (D + 1) +
                                       static_cast<size_t>(kChunk) * (D + 1) +
                                       static_cast<size_t>(kRows) * kChunk +
                                       static_cast<size_t>(kRows) * p.blocks_per_chunk + kRows +
                                       static_cast<size_t>(p.nk));
  int dev = 0, limit = 0;
  PSA_CUDA_TRY(cudaGetDevice(&dev), "block_scores_kernel: cudaGetDevice");
  PSA_CUDA_TRY(cudaDeviceGetAttribute(&limit, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev),
               "block_scores_kernel: cudaDeviceGetAttribute");
  PSA_RETURN_IF(smem > static_cast<size_t>(limit), PSA_ERR_UNSUPPORTED,
                "importance: %lld key blocks need %zu bytes of shared memory; this device "
                "allows %d",
                static_cast<long long>(p.nk), smem, limit);
  PSA_CUDA_TRY(cudaFuncSetAttribute(block_scores_kernel<T, D, NB>,
                                    cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    static_cast<int>(smem)),
               "block_scores_kernel: cudaFuncSetAttribute");
  const dim3 grid(static_cast<unsigned>(p.mq), static_cast<unsigned>(p.heads_q),
                  static_cast<unsigned>(batch));
  block_scores_kernel<T, D, NB><<<grid, kThreads, smem, stream>>>(p);
  return launch_status("block_scores_kernel");
}

template <typename T>
psa_status dispatch_scores(const ScoreKernelParams& p, int64_t d, int nb, int64_t batch,
                           cudaStream_t stream) {
  if (d == 64) return nb == 2 ? launch_scores<T, 64, 2>(p, batch, stream) : launch_scores<T, 64, 4>(p, batch, stream);
  if (d == 128) return nb == 2 ? launch_scores<T, 128, 2>(p, batch, stream) : launch_scores<T, 128, 4>(p, batch, stream);
  return set_error(PSA_ERR_UNSUPPORTED, "q: shape[3] (head_dim) = %lld; supported: 64, 128",
                   static_cast<long long>(d));
}

}  // namespace

psa_status sample_offsets_cuda(const OffsetArgs& a, cudaStream_t stream) {
  PSA_RETURN_IF(a.block_m > kMaxSampleBlock || a.block_n > kMaxSampleBlock || a.q_count < 1 ||
                    a.k_count < 1 || a.q_count > a.block_m || a.k_count > a.block_n,
                PSA_ERR_INTERNAL, "sample offsets: blocks %d/%d with %d/%d samples", a.block_m,
                a.block_n, a.q_count, a.k_count);
  const int64_t total = a.batch * a.heads_q * 2;
  if (total == 0) return PSA_OK;
  const int threads = 64;
  sample_offsets_kernel<<<static_cast<unsigned>(ceil_div(total, threads)), threads, 0, stream>>>(
      a.seed, a.heads_q, a.block_m, a.q_count, a.block_n, a.k_count, a.q_off, a.k_off, total);
  return launch_status("sample_offsets_kernel");
}

psa_status block_scores_cuda(const ScoreArgs& a, cudaStream_t stream) {
  PSA_RETURN_IF(a.k_count < 1 || a.k_count > 128 || a.q_count < 1, PSA_ERR_UNSUPPORTED,
                "importance: %d key samples per block; supported: 1..128", a.k_count);
  ScoreKernelParams p{};
  p.q = a.q;
  p.k = a.k;
  p.heads_q = a.heads_q;
  p.group = a.heads_q / a.heads_kv;
  p.len_q = a.len_q;
  p.len_k = a.len_k;
  p.block_m = a.block_m;
  p.block_n = a.block_n;
  p.mq = ceil_div(a.len_q, a.block_m);
  p.nk = ceil_div(a.len_k, a.block_n);
  p.q_off = a.q_off;
  p.k_off = a.k_off;
  p.q_count = a.q_count;
  p.k_count = a.k_count;
  p.scale = a.scale;
  p.scores = a.scores;
  // A chunk holds whole key blocks: 64 sampled keys, or one block of up to 128.
  const int nb = a.k_count > 64 ? 4 : 2;
  p.blocks_per_chunk = (32 * nb) / a.k_count;
  if (p.mq == 0 || p.nk == 0 || a.batch == 0 || a.heads_q == 0) return PSA_OK;
  switch (a.dtype) {
    case PSA_DTYPE_F16: return dispatch_scores<__half>(p, a.head_dim, nb, a.batch, stream);
    case PSA_DTYPE_BF16: return dispatch_scores<__nv_bfloat16>(p, a.head_dim, nb, a.batch, stream);
    default:
      return set_error(PSA_ERR_UNSUPPORTED, "importance: dtype = %d; supported: f16, bf16",
                       static_cast<int>(a.dtype));
  }
}

}  // namespace gpu
}  // namespace psa

// cuda/methods/rf_v2_levels.cu -- mask stage, rf_v2 (rainfusion-adabsa spec 2.3-2.5): kernels,
// launchers and entry. fp32 block means, logits, per-row K-th largest threshold, forced blocks;
// every rule from methods/rf_v2_spec.h. Must not reorder tokens (the gather did).
#include <cstdint>

#include "cuda/core/cuda_status.h"
#include "cuda/core/device.cuh"
#include "cuda/methods/methods_cuda.h"
#include "cuda/methods/row_sort.cuh"
#include "methods/rf_v2_spec.h"

namespace psa {
namespace gpu {
namespace {

constexpr int kRowThreads = 256;

// Mean of rows [128 i, min(128 i + 128, L)) of one head, per channel. One CTA per (block, head
// of q then of k, batch); thread e sums channel e in token order with IEEE adds (no
// contraction), as the CPU builder does, so the means are bit-identical to it.
template <typename T>
__global__ void rf_v2_means_kernel(const T* __restrict__ q, const T* __restrict__ k, int64_t heads_q,
                                   int64_t heads_kv, int64_t len, int64_t d, int64_t nb,
                                   float* __restrict__ qbar, float* __restrict__ kbar) {
  const int64_t blk = blockIdx.x % nb, head = blockIdx.x / nb, b = blockIdx.y;
  const bool is_q = head < heads_q;
  const int64_t bh = is_q ? b * heads_q + head : b * heads_kv + (head - heads_q);
  const T* x = (is_q ? q : k) + bh * len * d;
  float* out = (is_q ? qbar : kbar) + (bh * nb + blk) * d;
  const int64_t lo = blk * kRfV2Block;
  const int64_t hi = lo + kRfV2Block < len ? lo + kRfV2Block : len;
  const float inv = __fdiv_rn(1.0f, static_cast<float>(hi - lo));
  for (int64_t e = threadIdx.x; e < d; e += blockDim.x) {
    float m = 0.0f;
    for (int64_t t = lo; t < hi; ++t) m = __fadd_rn(m, Elem<T>::to_float(x[t * d + e]));
    out[e] = __fmul_rn(m, inv);
  }
}

struct RfV2RowParams {
  const float* qbar;  // [B*Hq, nb, d]
  const float* kbar;  // [B*Hkv, nb, d]
  int64_t heads_q, group, nb, np, d;
  float scale;
  int64_t keep, sink, text_lo, text_hi;
  int8_t* levels;
};

// One CTA per (query block i, head, batch): logits of row i (sequential fp32 dot products
// without contraction, as the CPU), its sorted copy, the K-th largest as threshold, then
// rf_v2_keep || rf_v2_forced per key block.
__global__ void __launch_bounds__(kRowThreads) rf_v2_rows_kernel(RfV2RowParams p) {
  extern __shared__ float smem[];
  float* qs = smem;           // [d]
  float* row = qs + p.d;      // [nb]
  float* sorted = row + p.nb; // [np]
  const int64_t i = blockIdx.x, h = blockIdx.y, b = blockIdx.z;
  const int64_t bh = b * p.heads_q + h;
  const int64_t bkv = b * (p.heads_q / p.group) + h / p.group;
  const float* qi = p.qbar + (bh * p.nb + i) * p.d;
  const float* kb = p.kbar + bkv * p.nb * p.d;
  for (int64_t e = threadIdx.x; e < p.d; e += blockDim.x) qs[e] = qi[e];
  __syncthreads();
  for (int64_t j = threadIdx.x; j < p.np; j += blockDim.x) {
    if (j < p.nb) {
      const float* kj = kb + j * p.d;
      float s = 0.0f;
      for (int64_t e = 0; e < p.d; ++e) s = __fadd_rn(s, __fmul_rn(qs[e], kj[e]));
      const float logit = __fmul_rn(p.scale, s);
      row[j] = logit;
      sorted[j] = logit;
    } else {
      sorted[j] = __int_as_float(0x7fc00000);  // NaN: sorts after every logit
    }
  }
  sort_scores_desc(sorted, p.np);
  const float threshold = sorted[p.keep - 1];
  int8_t* out = p.levels + (bh * p.nb + i) * p.nb;
  for (int64_t j = threadIdx.x; j < p.nb; j += blockDim.x)
    out[j] = (rf_v2_keep(row[j], threshold) || rf_v2_forced(i, j, p.sink, p.text_lo, p.text_hi))
                 ? int8_t{1}
                 : int8_t{0};
}

size_t rows_smem_bytes(int64_t nb, int64_t d) {
  return static_cast<size_t>(d + nb + sort_length(nb)) * sizeof(float);
}

template <typename T>
void launch_means(const RfV2MaskArgs& a, int64_t nb, float* qbar, float* kbar, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>(nb * (a.dims.heads_q + a.dims.heads_kv)), static_cast<unsigned>(a.dims.batch));
  const unsigned threads = static_cast<unsigned>(a.dims.head_dim < 128 ? a.dims.head_dim : 128);
  rf_v2_means_kernel<T><<<grid, threads, 0, stream>>>(static_cast<const T*>(a.q), static_cast<const T*>(a.k),
                                                      a.dims.heads_q, a.dims.heads_kv, a.dims.len_q, a.dims.head_dim, nb, qbar,
                                                      kbar);
}

}  // namespace

int64_t rf_v2_means_floats(int64_t batch, int64_t heads_q, int64_t heads_kv, int64_t len,
                           int64_t head_dim) {
  const int64_t nb = ceil_div(len, kRfV2Block);
  return (batch * heads_q + batch * heads_kv) * nb * head_dim;
}

int64_t rf_v2_max_blocks(int64_t head_dim) {
  const int limit = smem_optin_limit();
  int64_t lo = 0, hi = int64_t{1} << 22;  // largest nb whose row buffers fit
  while (lo < hi) {
    const int64_t mid = (lo + hi + 1) / 2;
    if (rows_smem_bytes(mid, head_dim) <= static_cast<size_t>(limit)) lo = mid; else hi = mid - 1;
  }
  return lo;
}

psa_status rf_v2_levels_cuda(const RfV2MaskArgs& a, cudaStream_t stream) {
  PSA_RETURN_IF(a.dtype != PSA_DTYPE_F16 && a.dtype != PSA_DTYPE_BF16, PSA_ERR_UNSUPPORTED,
                "rf_v2 mask: dtype = %d; the CUDA builder supports f16 and bf16", static_cast<int>(a.dtype));
  PSA_RETURN_IF(a.dims.heads_kv <= 0 || a.dims.heads_q % a.dims.heads_kv != 0 || a.dims.head_dim <= 0, PSA_ERR_INTERNAL,
                "rf_v2 mask: heads %lld/%lld, head_dim %lld", static_cast<long long>(a.dims.heads_q),
                static_cast<long long>(a.dims.heads_kv), static_cast<long long>(a.dims.head_dim));
  if (a.dims.batch == 0 || a.dims.heads_q == 0 || a.dims.len_q == 0) return PSA_OK;
  const int64_t nb = ceil_div(a.dims.len_q, kRfV2Block);
  const int64_t max_nb = rf_v2_max_blocks(a.dims.head_dim);
  PSA_RETURN_IF(nb > max_nb, PSA_ERR_UNSUPPORTED,
                "rf_v2 mask: %lld blocks of 128 tokens per row; the CUDA builder holds at most %lld "
                "in shared memory", static_cast<long long>(nb), static_cast<long long>(max_nb));
  PSA_RETURN_IF(nb * (a.dims.heads_q + a.dims.heads_kv) > INT32_MAX || a.dims.batch > 65535 || a.dims.heads_q > 65535,
                PSA_ERR_UNSUPPORTED, "rf_v2 mask: grid of %lld blocks x %lld heads x batch %lld too large",
                static_cast<long long>(nb), static_cast<long long>(a.dims.heads_q + a.dims.heads_kv),
                static_cast<long long>(a.dims.batch));

  float* qbar = a.means;
  float* kbar = a.means + a.dims.batch * a.dims.heads_q * nb * a.dims.head_dim;
  if (a.dtype == PSA_DTYPE_F16)
    launch_means<__half>(a, nb, qbar, kbar, stream);
  else
    launch_means<__nv_bfloat16>(a, nb, qbar, kbar, stream);
  PSA_TRY(launch_status("rf_v2_means_kernel"));

  RfV2RowParams p{};
  p.qbar = qbar;
  p.kbar = kbar;
  p.heads_q = a.dims.heads_q;
  p.group = a.dims.heads_q / a.dims.heads_kv;
  p.nb = nb;
  p.np = sort_length(nb);
  p.d = a.dims.head_dim;
  p.scale = a.scale;
  p.keep = rf_v2_keep_count(nb, a.sparsity);
  p.sink = rf_v2_sink_blocks(a.frame_tokens, nb);
  // Every tile holding a text token is forced (methods/rf_v2.cpp, spec 2.5 PROPOSAL).
  const bool has_text = a.text_end > a.text_begin;
  p.text_lo = has_text ? a.text_begin / kRfV2Block : nb;
  p.text_hi = has_text ? ceil_div(a.text_end, kRfV2Block) : nb;
  p.levels = a.levels;
  const size_t smem = rows_smem_bytes(nb, a.dims.head_dim);
  PSA_CUDA_TRY(cudaFuncSetAttribute(rf_v2_rows_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    static_cast<int>(smem)),
               "rf_v2_rows_kernel: cudaFuncSetAttribute");
  const dim3 grid(static_cast<unsigned>(nb), static_cast<unsigned>(a.dims.heads_q), static_cast<unsigned>(a.dims.batch));
  rf_v2_rows_kernel<<<grid, kRowThreads, smem, stream>>>(p);
  return launch_status("rf_v2_rows_kernel");
}

}  // namespace gpu
}  // namespace psa

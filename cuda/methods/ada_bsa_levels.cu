// cuda/methods/ada_bsa_levels.cu -- mask stage, ada_bsa (rainfusion-adabsa spec 3.2-3.9): kernel,
// launcher and entry. Strided anti-diagonal logits, fp32 online row softmax, 128 x 128 block
// sums, per-row sort + CDF / cap; every rule from methods/ada_bsa_spec.h. No token reorder.
#include <cstdint>

#include "cuda/core/cuda_status.h"
#include "cuda/core/device.cuh"
#include "cuda/methods/methods_cuda.h"
#include "cuda/methods/row_sort.cuh"
#include "cuda/methods/strided_tile.cuh"
#include "methods/ada_bsa_spec.h"

namespace psa {
namespace gpu {
namespace {

constexpr int64_t kG = kAdaGroupsPerBlock;               // 16 strided rows / columns per block
constexpr int kAdaThreads = static_cast<int>(kG * kG);  // one (strided row, strided column) each
static_assert(kAdaBlock == kG * kAdaStride, "a block is 16 strided groups of 8 tokens");

struct AdaParams {
  const void* q;  // [B, Hq, L, d] 16-bit
  const void* k;  // [B, Hkv, L, d] 16-bit
  int64_t heads_q, group, len, d, nb, groups;
  // Floats between strided groups in a shared tile: 8 rows of d, plus one so that the 16
  // groups a warp reads at once sit in 16 different banks.
  int64_t gstride;
  // Floats before sb: the two tiles, or the sort buffer that reuses them when it is longer.
  int64_t region;
  float s8;  // scale / 8
  double tau, sparsity;
  int causal, keep_sink, keep_recent;
  int8_t* levels;
};

// One CTA per (query block I, head, batch); thread (rr, cc) owns strided query row 16 I + rr
// and, for the key block J in hand, strided key group 16 J + cc. Pass 0 walks the visible key
// blocks for each row's running max and exp-sum; pass 1 recomputes the same logits and adds
// each block's probabilities into sb[J] in the CPU's order (row by row, group by group). The
// logits come from ada_bsa_group_dot on the zero-padded tiles: a padded row adds 0 * x, as the
// reference's skipped row adds nothing. Then the row's selection (spec 3.3).
template <typename T>
__global__ void __launch_bounds__(kAdaThreads) ada_bsa_levels_kernel(AdaParams p) {
  extern __shared__ float smem[];
  float* qt = smem;                    // [16][gstride] this block's queries
  float* kt = qt + kG * p.gstride;     // [16][gstride] key block J
  float* sb = smem + p.region;         // [nb] block sums of block row I
  float* lg = sb + p.nb;               // [16 x 16] logits, then probabilities, of block J
  float* rmax = lg + kG * kG;          // [16] running row max
  float* rsum = rmax + kG;             // [16] running exp-sum, then its inverse
  float* y = smem;                     // [np] sorted scores, over the tiles once sb is done
  __shared__ float guard;

  const int64_t I = blockIdx.x, h = blockIdx.y, b = blockIdx.z;
  const int64_t bh = b * p.heads_q + h;
  const int64_t bkv = b * (p.heads_q / p.group) + h / p.group;
  const T* q = static_cast<const T*>(p.q) + bh * p.len * p.d;
  const T* k = static_cast<const T*>(p.k) + bkv * p.len * p.d;
  const bool causal = p.causal != 0;
  const int tid = threadIdx.x;
  const int rr = tid / static_cast<int>(kG), cc = tid % static_cast<int>(kG);
  const int64_t r = I * kG + rr;
  const float neg_inf = __int_as_float(0xff800000);

  load_strided_tile<T>(qt, q, I * kAdaBlock, kAdaBlock, kAdaStride, p.len, p.d, p.gstride);  // zero past len: spec 3.8
  for (int64_t j = tid; j < p.nb; j += blockDim.x) sb[j] = 0.0f;
  if (tid < kG) {
    rmax[tid] = neg_inf;
    rsum[tid] = 0.0f;
  }
  // Strided groups never straddle a block, so causal row block I sees key blocks 0..I only.
  const int64_t last = causal ? I : p.nb - 1;

  for (int pass = 0; pass < 2; ++pass) {
    for (int64_t J = 0; J <= last; ++J) {
      __syncthreads();  // kt and lg are free again
      load_strided_tile<T>(kt, k, J * kAdaBlock, kAdaBlock, kAdaStride, p.len, p.d, p.gstride);
      __syncthreads();
      const int64_t c = J * kG + cc;
      const bool valid = r < p.groups && c < p.groups && ada_bsa_group_visible(r, c, causal);
      const float logit =
          valid ? p.s8 * ada_bsa_group_dot(qt + rr * p.gstride, kt + cc * p.gstride, 0, 0, kAdaStride, p.d)
                : 0.0f;
      if (pass == 0)
        lg[tid] = logit;
      else
        lg[tid] = valid ? __fmul_rn(expf(logit - rmax[rr]), rsum[rr]) : 0.0f;
      __syncthreads();
      if (pass == 0 && tid < kG && I * kG + tid < p.groups) {
        const int64_t rt = I * kG + tid;
        float cm = neg_inf;  // NaN logits are skipped by the max, as std::max skips them
        for (int x = 0; x < kG; ++x) {
          const int64_t cx = J * kG + x;
          if (cx < p.groups && ada_bsa_group_visible(rt, cx, causal)) cm = fmaxf(cm, lg[tid * kG + x]);
        }
        const float m_old = rmax[tid], m_new = fmaxf(m_old, cm);
        float s = rsum[tid];
        if (m_new != m_old) s = s * expf(m_old - m_new);
        for (int x = 0; x < kG; ++x) {
          const int64_t cx = J * kG + x;
          if (cx < p.groups && ada_bsa_group_visible(rt, cx, causal))
            s = __fadd_rn(s, expf(lg[tid * kG + x] - m_new));
        }
        rmax[tid] = m_new;
        rsum[tid] = s;
      } else if (pass == 1 && tid == 0) {
        // Invalid entries hold +0, which leaves the sum unchanged, as skipping them does.
        float acc = sb[J];
        for (int x = 0; x < kG * kG; ++x) acc = __fadd_rn(acc, lg[x]);
        sb[J] = acc;
      }
    }
    __syncthreads();
    if (pass == 0 && tid < kG) rsum[tid] = __fdiv_rn(1.0f, rsum[tid]);
  }
  __syncthreads();

  const int64_t n = ada_bsa_candidates(I, p.nb, causal);
  int8_t* out = p.levels + (bh * p.nb + I) * p.nb;
  if (ada_bsa_row_keeps_all(n, causal)) {  // uniform over the CTA
    for (int64_t j = tid; j < p.nb; j += blockDim.x) out[j] = j < n ? int8_t{1} : int8_t{0};
    return;
  }
  const bool sink = p.keep_sink != 0, recent = p.keep_recent != 0;
  const int64_t np = sort_length(n);
  for (int64_t j = tid; j < np; j += blockDim.x)
    y[j] = j >= n ? __int_as_float(0x7fc00000)
                  : (ada_bsa_excluded(j, n, causal, sink, recent) ? 0.0f : sb[j]);
  sort_scores_desc(y, np);
  if (tid == 0) guard = y[ada_bsa_keep_count(y, n, p.tau, p.sparsity) - 1];
  __syncthreads();
  for (int64_t j = tid; j < p.nb; j += blockDim.x) {
    bool keep = false;
    if (j < n) {
      const bool ex = ada_bsa_excluded(j, n, causal, sink, recent);
      keep = ada_bsa_keep(ex ? 0.0f : sb[j], guard, j, ex);
    }
    out[j] = keep ? int8_t{1} : int8_t{0};
  }
}

int64_t group_stride(int64_t d) { return kAdaStride * d + 1; }

// Tiles (or the sort buffer over them), then sb [nb], lg [256], rmax and rsum [16 each].
int64_t region_floats(int64_t nb, int64_t d) {
  const int64_t tiles = 2 * kG * group_stride(d), np = sort_length(nb);
  return tiles > np ? tiles : np;
}
size_t ada_smem_bytes(int64_t nb, int64_t d) {
  return static_cast<size_t>(region_floats(nb, d) + nb + kG * kG + 2 * kG) * sizeof(float);
}

template <typename T>
psa_status launch(const AdaParams& p, int64_t batch, cudaStream_t stream) {
  const size_t smem = ada_smem_bytes(p.nb, p.d);
  PSA_CUDA_TRY(cudaFuncSetAttribute(ada_bsa_levels_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    static_cast<int>(smem)),
               "ada_bsa_levels_kernel: cudaFuncSetAttribute");
  const dim3 grid(static_cast<unsigned>(p.nb), static_cast<unsigned>(p.heads_q), static_cast<unsigned>(batch));
  ada_bsa_levels_kernel<T><<<grid, kAdaThreads, smem, stream>>>(p);
  return launch_status("ada_bsa_levels_kernel");
}

}  // namespace

int64_t ada_bsa_max_blocks(int64_t head_dim) {
  const int limit = smem_optin_limit();
  int64_t lo = 0, hi = int64_t{1} << 22;  // largest nb whose tiles and row buffers fit
  while (lo < hi) {
    const int64_t mid = (lo + hi + 1) / 2;
    if (ada_smem_bytes(mid, head_dim) <= static_cast<size_t>(limit)) lo = mid; else hi = mid - 1;
  }
  return lo;
}

psa_status ada_bsa_levels_cuda(const AdaBsaMaskArgs& a, cudaStream_t stream) {
  PSA_RETURN_IF(a.dtype != PSA_DTYPE_F16 && a.dtype != PSA_DTYPE_BF16, PSA_ERR_UNSUPPORTED,
                "ada_bsa mask: dtype = %d; the CUDA builder supports f16 and bf16", static_cast<int>(a.dtype));
  PSA_RETURN_IF(a.dims.heads_kv <= 0 || a.dims.heads_q % a.dims.heads_kv != 0 || a.dims.head_dim <= 0 || a.dims.head_dim % 8 != 0,
                PSA_ERR_INTERNAL, "ada_bsa mask: heads %lld/%lld, head_dim %lld",
                static_cast<long long>(a.dims.heads_q), static_cast<long long>(a.dims.heads_kv),
                static_cast<long long>(a.dims.head_dim));
  if (a.dims.batch == 0 || a.dims.heads_q == 0 || a.dims.len_q == 0) return PSA_OK;
  PSA_RETURN_IF(reinterpret_cast<uintptr_t>(a.q) % 16 != 0 || reinterpret_cast<uintptr_t>(a.k) % 16 != 0,
                PSA_ERR_INTERNAL, "ada_bsa mask: q/k not 16-byte aligned");
  const int64_t nb = ceil_div(a.dims.len_q, kAdaBlock);
  const int64_t max_nb = ada_bsa_max_blocks(a.dims.head_dim);
  PSA_RETURN_IF(nb > max_nb, PSA_ERR_UNSUPPORTED,
                "ada_bsa mask: %lld blocks of 128 tokens per row; the CUDA builder holds at most %lld "
                "at head_dim %lld in shared memory", static_cast<long long>(nb),
                static_cast<long long>(max_nb), static_cast<long long>(a.dims.head_dim));
  PSA_RETURN_IF(nb > INT32_MAX || a.dims.batch > 65535 || a.dims.heads_q > 65535, PSA_ERR_UNSUPPORTED,
                "ada_bsa mask: grid of %lld blocks x %lld heads x batch %lld too large",
                static_cast<long long>(nb), static_cast<long long>(a.dims.heads_q), static_cast<long long>(a.dims.batch));
  AdaParams p{};
  p.q = a.q;
  p.k = a.k;
  p.heads_q = a.dims.heads_q;
  p.group = a.dims.heads_q / a.dims.heads_kv;
  p.len = a.dims.len_q;
  p.d = a.dims.head_dim;
  p.nb = nb;
  p.groups = ada_bsa_groups(a.dims.len_q);
  p.gstride = group_stride(a.dims.head_dim);
  p.region = region_floats(nb, a.dims.head_dim);
  p.s8 = a.scale / static_cast<float>(kAdaStride);  // as the CPU builder
  p.tau = a.cdf_threshold;
  p.sparsity = a.sparsity;
  p.causal = a.causal ? 1 : 0;
  p.keep_sink = a.keep_sink ? 1 : 0;
  p.keep_recent = a.keep_recent ? 1 : 0;
  p.levels = a.levels;
  return a.dtype == PSA_DTYPE_F16 ? launch<__half>(p, a.dims.batch, stream) : launch<__nv_bfloat16>(p, a.dims.batch, stream);
}

}  // namespace gpu
}  // namespace psa

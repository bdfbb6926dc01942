// cuda/mask/levels.cu -- mask stage (level map), kernel + launcher + entry: per row a bitonic
// sort by ranks_before, then mask_spec.h's rank intervals (sequential cumulative mass, as the
// CPU) and post-processing. Must not hold a count, order or visibility rule of its own.
#include <cstdint>

#include "cuda/core/cuda_status.h"
#include "cuda/mask/mask_cuda.h"
#include "mask/mask_spec.h"

namespace psa {
namespace gpu {
namespace {

constexpr int kThreads = 512;
constexpr int64_t kMaxSortBlocks = 16384;  // 9 bytes each in shared memory: 144 KB

struct LevelKernelParams {
  const float* scores;
  int64_t np_max;  // next power of two >= nk: the sort buffers' length
  int64_t heads_q, group, mq, nk, block_m, block_n, tile_n, len_q, len_k;
  int thresholdbound;
  double ratio_end[kMaskSlots];
  double min_full_ratio;
  int causal, text_suffix, text_rows_dense;
  int64_t text_begin, text_end;
  const int8_t* cap;
  int8_t* levels;
};

__global__ void __launch_bounds__(kThreads) build_levels_kernel(LevelKernelParams p) {
  extern __shared__ unsigned char smem[];
  float* key = reinterpret_cast<float*>(smem);
  int32_t* idx = reinterpret_cast<int32_t*>(key + p.np_max);
  int8_t* lv = reinterpret_cast<int8_t*>(idx + p.np_max);
  __shared__ int64_t ends[kMaskSlots];
  __shared__ unsigned long long counts[kMaskSlots];

  const int tid = threadIdx.x;
  const int64_t i = blockIdx.x, h = blockIdx.y, b = blockIdx.z;
  const int64_t row = (b * p.heads_q + h) * p.mq + i;
  int64_t n = p.causal ? causal_key_blocks(i, p.block_m, p.block_n, p.len_q, p.len_k) : p.nk;
  if (n > p.nk) n = p.nk;
  int64_t np = 1;
  while (np < n) np <<= 1;

  const float* s = p.scores + row * p.nk;
  for (int64_t t = tid; t < np; t += kThreads) {
    key[t] = t < n ? s[t] : __int_as_float(0x7fc00000);  // padding: NaN, after every number
    idx[t] = static_cast<int32_t>(t);
  }
  if (tid < kMaskSlots) counts[tid] = 0;
  __syncthreads();

  // Bitonic sort into rank order (ranks_before is a strict total order).
  for (int64_t k = 2; k <= np; k <<= 1) {
    for (int64_t j = k >> 1; j > 0; j >>= 1) {
      for (int64_t t = tid; t < np; t += kThreads) {
        const int64_t l = t ^ j;
        if (l > t) {
          const float kt = key[t], kl = key[l];
          const int32_t it = idx[t], il = idx[l];
          const bool up = (t & k) == 0;
          const bool swap = up ? ranks_before(kl, il, kt, it) : ranks_before(kt, it, kl, il);
          if (swap) {
            key[t] = kl;
            key[l] = kt;
            idx[t] = il;
            idx[l] = it;
          }
        }
      }
      __syncthreads();
    }
  }

  if (n > 0) {
    if (p.thresholdbound) {
      if (tid == 0) relative_cumulative_mass(key, n, key);  // one sequential sum, as the CPU
      __syncthreads();
      const int64_t per = (n + kThreads - 1) / kThreads;
      const int64_t r0 = tid * per;
      const int64_t len = r0 < n ? (n - r0 < per ? n - r0 : per) : 0;
      for (int sl = 0; sl < kMaskSlots; ++sl) {
        const int64_t c = len > 0 ? mass_count(key + r0, len, p.ratio_end[sl]) : 0;
        if (c > 0) atomicAdd(&counts[sl], static_cast<unsigned long long>(c));
      }
      __syncthreads();
      if (tid == 0) {
        int64_t cnt[kMaskSlots];
        for (int sl = 0; sl < kMaskSlots; ++sl) cnt[sl] = static_cast<int64_t>(counts[sl]);
        thresholdbound_ends_from_counts(cnt, n, p.block_n, p.tile_n, p.min_full_ratio, ends);
      }
    } else if (tid == 0) {
      topk_segment_ends(n, p.ratio_end, p.block_n, p.tile_n, ends);
    }
    __syncthreads();
    for (int64_t r = tid; r < n; r += kThreads) lv[idx[r]] = static_cast<int8_t>(level_of_rank(r, ends));
    __syncthreads();
  }

  const MaskPostRow post = mask_post_row(i, p.nk, p.block_m, p.block_n, p.len_q, p.len_k,
                                         p.causal != 0, p.text_suffix != 0,
                                         p.text_rows_dense != 0, p.text_begin, p.text_end);
  const int8_t* cap = p.cap ? p.cap + (b * (p.heads_q / p.group) + h / p.group) * p.nk : nullptr;
  int8_t* out = p.levels + row * p.nk;
  for (int64_t j = tid; j < p.nk; j += kThreads)
    out[j] = static_cast<int8_t>(post_level(j < n ? lv[j] : 0, j, post, cap ? cap[j] : 8));
}

int64_t next_pow2(int64_t n) {
  int64_t np = 1;
  while (np < n) np <<= 1;
  return np;
}
size_t level_smem_bytes(int64_t nk) { return static_cast<size_t>(next_pow2(nk)) * 9; }

}  // namespace

int64_t max_mask_blocks() {
  int dev = 0, limit = 0;
  if (cudaGetDevice(&dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&limit, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  int64_t n = kMaxSortBlocks;
  while (n > 1 && level_smem_bytes(n) + 1024 > static_cast<size_t>(limit)) n >>= 1;
  return n;
}

psa_status build_levels_cuda(const LevelArgs& a, cudaStream_t stream) {
  if (a.batch == 0 || a.heads_q == 0 || a.mq == 0 || a.nk == 0) return PSA_OK;
  const int64_t max_nk = max_mask_blocks();
  PSA_RETURN_IF(a.nk > max_nk, PSA_ERR_UNSUPPORTED,
                "mask: %lld key blocks per row; the CUDA mask builder sorts at most %lld "
                "(raise block_size.n)",
                static_cast<long long>(a.nk), static_cast<long long>(max_nk));
  // Grid (mq, heads_q, batch): y and z hold at most 65535 (the CUDA backend's prepare()
  // refuses larger shapes first; a wrapped dimension would silently skip rows).
  PSA_RETURN_IF(a.heads_q > 65535 || a.batch > 65535 || a.mq > INT32_MAX, PSA_ERR_UNSUPPORTED,
                "mask: batch = %lld, heads = %lld, %lld query blocks; the CUDA level builder's grid "
                "allows at most 65535, 65535 and 2^31 - 1",
                static_cast<long long>(a.batch), static_cast<long long>(a.heads_q),
                static_cast<long long>(a.mq));
  LevelKernelParams p{};
  p.scores = a.scores;
  p.np_max = next_pow2(a.nk);
  p.heads_q = a.heads_q;
  p.group = a.heads_q / a.heads_kv;
  p.mq = a.mq;
  p.nk = a.nk;
  p.block_m = a.block_m;
  p.block_n = a.block_n;
  p.tile_n = a.tile_n;
  p.len_q = a.len_q;
  p.len_k = a.len_k;
  p.thresholdbound = a.mode == PSA_MASK_MODE_THRESHOLDBOUND;
  for (int s = 0; s < kMaskSlots; ++s) p.ratio_end[s] = a.ratio_end[s];
  p.min_full_ratio = a.min_full_ratio;
  p.causal = a.causal;
  p.text_suffix = a.text_rule == PSA_TEXT_RULE_REFERENCE_SUFFIX;
  p.text_rows_dense = a.text_rows_dense;
  p.text_begin = a.text_begin;
  p.text_end = a.text_end;
  p.cap = a.cap;
  p.levels = a.levels;
  const size_t smem = level_smem_bytes(a.nk);
  PSA_CUDA_TRY(cudaFuncSetAttribute(build_levels_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    static_cast<int>(smem)),
               "build_levels_kernel: cudaFuncSetAttribute");
  const dim3 grid(static_cast<unsigned>(a.mq), static_cast<unsigned>(a.heads_q),
                  static_cast<unsigned>(a.batch));
  build_levels_kernel<<<grid, kThreads, smem, stream>>>(p);
  return launch_status("build_levels_kernel");
}

}  // namespace gpu
}  // namespace psa

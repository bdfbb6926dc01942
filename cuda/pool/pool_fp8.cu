// cuda/pool/pool_fp8.cu -- pool stage of the 8-bit attention path: K and V gathered through the
// rearrangement, pooled (the same fp32 means, each rounded once, as pool_pyramid.cu) and
// quantized by attention/attention_fp8.h's rule in the same pass: int8 K after subtracting K's
// mean, e4m3 V, one scale per (level, key block) (V's a power of two). Formats and the scale
// rule come from attention/fp8_spec.h; this file must not hold a rounding or scale rule of its
// own.
//
// Two launches per call, stream-ordered, no host synchronisation:
//   k_mean_kernel: per (head, 32 channels), K's first token of every key block summed in double,
//     in key-block order (the oracle's order), and the head's s_v,max zeroed;
//   gather_pool_fp8_kernel (once for K, once for V): one CTA per (key block, head), one thread per
//     (level-8 token, 8 channels) of the block. A thread reads its 8 source tokens, writes the
//     16-bit level-1 copy and forms the level-2/4/8 means for the CTA's amax reduction, keeping
//     the 15 values in shared memory (240 bytes per thread); after the reduction it reads them
//     back and writes its 8-bit values. (Holding them in registers instead took 130-180
//     registers and ran 1.5-1.7x the 16-bit pass's time; reading the source again after the
//     barrier, mostly from L2, 1.6-1.7x.) The pass is bound by its instructions, not by memory
//     (ncu at Wan2.1-1.3B: 70% of issue slots busy, DRAM at 24-30% of peak), so the amax is taken
//     from each level's per-channel largest and smallest values (packed 16-bit max / min) and the
//     quantization skips the clamp and the non-finite select, wherever a thread's values allow
//     it; a thread with a non-finite value (or difference from the mean) applies the rule value
//     by value (PERF_NOTES.md, "8-bit pool pass: the amax from each channel's extremes").
#include <cstdint>
#include <type_traits>

#include "attention/fp8_spec.h"
#include "cuda/core/cuda_status.h"
#include "cuda/core/device.cuh"
#include "cuda/core/fp8.cuh"
#include "cuda/pool/pool_cuda.h"
#include "cuda/pool/pyramid8.cuh"
#include "cuda/rearrange/gather_cuda.h"
#include "pool/pool_spec.h"

namespace psa {
namespace gpu {
namespace {

constexpr int kFp8PoolThreads = 256;  // (block_n / 8) * (head_dim / 8) pairs at most
constexpr int kFp8PoolSlots = 15;     // a thread's 8 source tokens and 7 pooled ones, 16 bytes each

struct Fp8Side {  // one tensor's outputs
  uint8_t* x8[4];
  float* scale;  // [heads, 4, nk]
  float* smax;   // V: [heads]
};

// K's mean: CTA (channel group of 32, head). The first tokens of 128 key blocks at a time go to
// one of two shared tiles: every thread issues its 16 row indices, then its 16 loads (8 rows x 32
// channels per warp-row step), all independent, so a step costs about two memory latencies; warp
// 0 adds the other tile in key-block order, one lane per channel, in double (the oracle's order
// and precision) while the next step's loads are in flight.
constexpr int kMeanRows = 128;
constexpr int kMeanPerThread = kMeanRows / 8;
template <typename T>
__global__ void __launch_bounds__(256) k_mean_kernel(const T* __restrict__ src, int64_t sb, int64_t sh, int64_t sl,
                                                     const int64_t* __restrict__ index, int64_t heads, int64_t d,
                                                     int64_t nk, int64_t bn, float* __restrict__ k_mean,
                                                     float* __restrict__ v_smax) {
  __shared__ float tile[2][kMeanRows][32];
  const int tx = static_cast<int>(threadIdx.x % 32), ty = static_cast<int>(threadIdx.x / 32);
  const int64_t bh = blockIdx.y, ch = blockIdx.x * 32 + tx;
  const T* base = src + (bh / heads) * sb + (bh % heads) * sh + ch;
  const int64_t steps = (nk + kMeanRows - 1) / kMeanRows;
  auto rows_of = [&](int64_t st) {
    const int64_t left = nk - st * kMeanRows;
    return static_cast<int>(left < kMeanRows ? left : kMeanRows);
  };
  auto load = [&](int64_t st) {  // rows ty, ty + 8, ... of step st into tile[st & 1]
    const int rows = rows_of(st);
    int64_t at[kMeanPerThread];
#pragma unroll
    for (int u = 0; u < kMeanPerThread; ++u) {
      const int r = ty + 8 * u;
      const int64_t pos = (st * kMeanRows + r) * bn;  // < len: nk = ceil(len / bn)
      at[u] = r < rows ? (index ? __ldg(index + pos) : pos) : -1;
    }
#pragma unroll
    for (int u = 0; u < kMeanPerThread; ++u)
      if (at[u] >= 0 && ch < d) tile[st & 1][ty + 8 * u][tx] = Elem<T>::to_float(base[at[u] * sl]);
  };
  double s = 0.0;
  load(0);
  __syncthreads();
  for (int64_t st = 0; st < steps; ++st) {
    if (st + 1 < steps) load(st + 1);  // the other tile: its last reader passed the barrier below
    if (ty == 0) {
      const int rows = rows_of(st);
      for (int r = 0; r < rows; ++r) s += static_cast<double>(tile[st & 1][r][tx]);
    }
    __syncthreads();
  }
  if (ty == 0 && ch < d) k_mean[bh * d + ch] = static_cast<float>(s / static_cast<double>(nk));
  if (threadIdx.x == 0 && blockIdx.x == 0) v_smax[bh] = 0.0f;
}

// The value quantized at level li: K minus its channel's mean (fp32), V as it is.
template <bool kK>
__device__ __forceinline__ float pre(float x, float mean) {
  return kK ? __fsub_rn(x, mean) : x;
}

// 8 values of one token and 8 channels -> 8 bytes: int8 (K; -128 for a value that is not
// finite) or e4m3 (V; NaN for one), as int8_quantize / fp8_quantize (cuda/core/fp8.cuh).
// kFinite: every value and every value minus its mean is finite and at most the group's amax in
// magnitude (the fast path below): the in-range forms of cuda/core/fp8.cuh, which skip the
// clamp and the non-finite select.
template <typename T, bool kK, bool kFinite>
__device__ __forceinline__ uint2 quantize8(const uint4& v, const float (&mean)[8], float inv) {
  float f[8];
  unpack8<T>(v, f);
  if (kFinite) {
    auto y = [&](int e) { return pre<kK>(f[e], mean[e]); };
    if (kK)
      return make_uint2(int8_quantize_x4_in_range(y(0), y(1), y(2), y(3), inv),
                        int8_quantize_x4_in_range(y(4), y(5), y(6), y(7), inv));
    return make_uint2(fp8_quantize_x2_finite(y(0), y(1), inv) | fp8_quantize_x2_finite(y(2), y(3), inv) << 16,
                      fp8_quantize_x2_finite(y(4), y(5), inv) | fp8_quantize_x2_finite(y(6), y(7), inv) << 16);
  }
  uint32_t w[2] = {0u, 0u};
#pragma unroll
  for (int e = 0; e < 8; e += 2) {
    const uint32_t b = kK ? int8_quantize_code(pre<kK>(f[e], mean[e]), inv) |
                                int8_quantize_code(pre<kK>(f[e + 1], mean[e + 1]), inv) << 8
                          : fp8_quantize_x2(f[e], f[e + 1], inv);
    w[e / 4] |= b << (8 * (e % 4));
  }
  return make_uint2(w[0], w[1]);
}

template <typename T, bool kVec, bool kK>
__global__ void __launch_bounds__(kFp8PoolThreads)
    gather_pool_fp8_kernel(const T* __restrict__ src, int64_t sb, int64_t sh, int64_t sl,
                           const int64_t* __restrict__ index, int64_t heads, int64_t len, int64_t d, int64_t nk,
                           int64_t bn, T* __restrict__ dst, const float* __restrict__ k_mean, Fp8Side o) {
  __shared__ unsigned s_amax[4];  // fp32 bits of non-negative values: ordered as integers
  __shared__ int s_bad[4];
  const int tid = static_cast<int>(threadIdx.x);
  const int chunks = static_cast<int>(d / 8);
  const int pairs = static_cast<int>(bn / 8) * chunks;
  const int64_t j = blockIdx.x, bh = blockIdx.y;
  if (tid < 4) {
    s_amax[tid] = 0u;
    s_bad[tid] = 0;
  }
  const bool active = tid < pairs;
  const int64_t col = (tid % chunks) * 8;
  const int64_t t = j * (bn / 8) + tid / chunks;  // this thread's level-8 token
  const T* sh_base = src + (bh / heads) * sb + (bh % heads) * sh + col;
  // The thread's 15 values (8 source tokens, then levels 2, 4, 8 as pyramid8 forms them) stay
  // in shared memory across the CTA's amax, slot-major ([slot][thread], 16 bytes each), so the
  // quantizing phase reads them back without a second pass over the source.
  extern __shared__ uint4 s_vals[];
  const int nt = static_cast<int>(blockDim.x);
  auto slot = [&](int sl_) -> uint4& { return s_vals[sl_ * nt + tid]; };
  float mean[8];
#pragma unroll
  for (int e = 0; e < 8; ++e) mean[e] = kK && active ? k_mean[bh * d + col + e] : 0.0f;
  float amax[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  bool bad[4] = {false, false, false, false};
  // The exact rule, value by value: largest finite magnitude per level (level 1: the tokens
  // inside the sequence only); K: bad when a value minus its mean is not finite.
  auto take = [&](int li, const uint4& v) {
    float f[8];
    unpack8<T>(v, f);
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      const float y = pre<kK>(f[e], mean[e]);
      amax[li] = fp8_amax(amax[li], y);  // NaN and +-inf do not count
      if (kK) bad[li] = bad[li] || !(fabsf(y) <= 3.402823466e38f);
    }
  };
  // The fast path: per level, each channel's largest and smallest value (packed pairs, exact, a
  // NaN propagating). pre() rounds x - mean once, so it is monotonic in x, and the level's amax is
  // the largest |pre(hi)|, |pre(lo)| over its channels: exactly the rule's whenever that is
  // finite (then every value and every difference is). Otherwise the thread applies the rule to
  // its values in shared memory, and quantizes them with the clamp and the non-finite select.
  bool fast = true;
  if (active) {
    // The thread's 8 source tokens (the level-1 copy written on the way) and their pyramid
    // (pyramid8.cuh, as the 16-bit pass).
    uint4 x[8];
#pragma unroll
    for (int u = 0; u < 8; ++u) {
      const int64_t pos = pooled_source(t * 4 + u / 2, 2, u & 1, len);
      const T* sp = sh_base + (index ? index[pos] : pos) * sl;
      if (kVec) {
        x[u] = __ldg(reinterpret_cast<const uint4*>(sp));
      } else {
        T* e = reinterpret_cast<T*>(&x[u]);
#pragma unroll
        for (int k = 0; k < 8; ++k) e[k] = sp[k];
      }
      if (dst != nullptr && t * 8 + u < len) *reinterpret_cast<uint4*>(dst + (bh * len + t * 8 + u) * d + col) = x[u];
    }
    // A level's amax from its channels' extremes, as soon as the level is complete.
    auto finish = [&](int li, const uint4& hi, const uint4& lo) {
      float a[8], b[8];
      unpack8<T>(hi, a);
      unpack8<T>(lo, b);
      float m = 0.0f;
#pragma unroll
      for (int e = 0; e < 8; ++e)
        m = fmax_nan(m, fmax_nan(fabsf(pre<kK>(a[e], mean[e])), fabsf(pre<kK>(b[e], mean[e]))));
      amax[li] = m;
      fast = fast && m <= 3.402823466e38f;
    };
    uint4 hi = x[0], lo = x[0];
#pragma unroll
    for (int u = 0; u < 8; ++u) {
      slot(u) = x[u];
      if (u > 0 && t * 8 + u < len) {
        hi = max8_nan<T>(hi, x[u]);
        lo = min8_nan<T>(lo, x[u]);
      }
    }
    if (t * 8 < len) finish(0, hi, lo);
    pyramid8<T>(x, [&](int level, int u, const uint4& v) {
      const int li = level == 2 ? 1 : level == 4 ? 2 : 3;
      slot(level == 2 ? 8 + u : level == 4 ? 12 + u : kFp8PoolSlots - 1) = v;
      hi = u == 0 ? v : max8_nan<T>(hi, v);
      lo = u == 0 ? v : min8_nan<T>(lo, v);
      if (u == 8 / level - 1) finish(li, hi, lo);  // the level's last value
    });
    if (!fast) {
#pragma unroll
      for (int li = 0; li < 4; ++li) amax[li] = 0.0f;
#pragma unroll
      for (int u = 0; u < 8; ++u)
        if (t * 8 + u < len) take(0, slot(u));
#pragma unroll
      for (int sl_ = 8; sl_ < kFp8PoolSlots; ++sl_) take(sl_ < 12 ? 1 : sl_ < 14 ? 2 : 3, slot(sl_));
    }
  }
  __syncthreads();  // s_amax / s_bad zeroed before anyone adds to them
#pragma unroll
  for (int li = 0; li < 4; ++li) {
    const unsigned a = __reduce_max_sync(0xffffffffu, __float_as_uint(amax[li]));
    const bool b = __any_sync(0xffffffffu, bad[li]);
    if (tid % 32 == 0) {
      atomicMax(&s_amax[li], a);
      if (b) s_bad[li] = 1;
    }
  }
  __syncthreads();
  Fp8Scale sc[4];
#pragma unroll
  for (int li = 0; li < 4; ++li)  // K: fp8_scale; V: rounded up to a power of two (the rule)
    sc[li] = kK ? fp8_scale(__uint_as_float(s_amax[li]), kInt8Max) : fp8_scale_pow2(__uint_as_float(s_amax[li]));
  if (active) {
    auto put_all = [&](auto finite) {
      auto put = [&](int li, int64_t tok, int sl_) {
        const int64_t len_li = li == 0 ? len : pooled_length(nk, bn, 1 << li);
        *reinterpret_cast<uint2*>(o.x8[li] + (bh * len_li + tok) * d + col) =
            quantize8<T, kK, decltype(finite)::value>(slot(sl_), mean, sc[li].inv);
      };
#pragma unroll
      for (int u = 0; u < 8; ++u)
        if (t * 8 + u < len) put(0, t * 8 + u, u);
#pragma unroll
      for (int u = 0; u < 4; ++u) put(1, t * 4 + u, 8 + u);
      put(2, t * 2, 12);
      put(2, t * 2 + 1, 13);
      put(3, t, 14);
    };
    if (fast) {
      put_all(std::true_type{});
    } else {
      put_all(std::false_type{});
    }
  }
  if (tid < 4) {
    const int li = tid;
    const float amax_li = __uint_as_float(s_amax[li]);
    float* sc_out = o.scale + (bh * 4 + li) * nk + j;
    if (kK) {
      *sc_out = s_bad[li] ? __uint_as_float(0x7fc00000u) : sc[li].s;
    } else {
      *sc_out = amax_li > 0.0f ? sc[li].s : 0.0f;
      if (amax_li > 0.0f) atomicMax(reinterpret_cast<unsigned*>(o.smax + bh), __float_as_uint(sc[li].s));
    }
  }
}

template <typename T, bool kK>
psa_status launch_side(const GatherArgs& g, int64_t nk, int64_t bn, const float* k_mean, const Fp8Side& o,
                       cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>(nk), static_cast<unsigned>(g.batch * g.heads));
  const int pairs = static_cast<int>((bn / 8) * (g.head_dim / 8));
  const unsigned threads = static_cast<unsigned>((pairs + 31) / 32 * 32);
  const auto* src = static_cast<const T*>(g.src);
  T* dst = static_cast<T*>(g.dst);
  const size_t smem = kFp8PoolSlots * sizeof(uint4) * threads;  // up to 60 KB: past the default 48
  const bool vec = rows_16b_aligned(g.src, g.stride);
  const auto kernel = vec ? gather_pool_fp8_kernel<T, true, kK> : gather_pool_fp8_kernel<T, false, kK>;
  PSA_CUDA_TRY(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)),
               "gather_pool_fp8_kernel: cudaFuncSetAttribute");
  kernel<<<grid, threads, smem, stream>>>(src, g.stride[0], g.stride[1], g.stride[2], g.index, g.heads, g.len,
                                          g.head_dim, nk, bn, dst, k_mean, o);
  return launch_status("gather_pool_fp8_kernel");
}

template <typename T>
psa_status launch_fp8(const GatherArgs& gk, const GatherArgs& gv, int64_t nk, int64_t bn, const Fp8KvOut& out,
                      cudaStream_t stream) {
  const dim3 mean_grid(static_cast<unsigned>((gk.head_dim + 31) / 32), static_cast<unsigned>(gk.batch * gk.heads));
  k_mean_kernel<T><<<mean_grid, 256, 0, stream>>>(static_cast<const T*>(gk.src), gk.stride[0], gk.stride[1],
                                                   gk.stride[2], gk.index, gk.heads, gk.head_dim, nk, bn, out.k_mean,
                                                   out.v_smax);
  PSA_TRY(launch_status("k_mean_kernel"));
  Fp8Side k{}, v{};
  for (int li = 0; li < 4; ++li) {
    k.x8[li] = static_cast<uint8_t*>(out.k8[li]);
    v.x8[li] = static_cast<uint8_t*>(out.v8[li]);
  }
  k.scale = out.k_scale;
  v.scale = out.v_scale;
  v.smax = out.v_smax;
  PSA_TRY((launch_side<T, true>(gk, nk, bn, out.k_mean, k, stream)));
  return launch_side<T, false>(gv, nk, bn, nullptr, v, stream);
}

}  // namespace

psa_status pool_fp8_supported(int64_t head_dim, int64_t block_n) {
  PSA_RETURN_IF(head_dim % 8 != 0 || block_n % 8 != 0 || block_n < 8 || head_dim < 8 ||
                    (block_n / 8) * (head_dim / 8) > kFp8PoolThreads,
                PSA_ERR_UNSUPPORTED,
                "head_dim = %lld, block_size.n = %lld; the 8-bit pool stage needs multiples of 8 with "
                "block_size.n * head_dim <= %d",
                static_cast<long long>(head_dim), static_cast<long long>(block_n), 64 * kFp8PoolThreads);
  return PSA_OK;
}

psa_status gather_pool_fp8_cuda(const GatherArgs& gk, const GatherArgs& gv, int64_t n_blocks, int64_t block_n,
                                const Fp8KvOut& out, cudaStream_t stream) {
  PSA_TRY(pool_fp8_supported(gk.head_dim, block_n));
  PSA_RETURN_IF(gk.dtype != gv.dtype || gk.batch != gv.batch || gk.heads != gv.heads || gk.len != gv.len ||
                    gk.head_dim != gv.head_dim,
                PSA_ERR_INTERNAL, "8-bit pool: K and V differ in dtype or shape");
  PSA_RETURN_IF(gk.stride[3] != 1 || gv.stride[3] != 1, PSA_ERR_INTERNAL, "8-bit pool: the column stride must be 1");
  if (gk.batch == 0 || gk.heads == 0 || gk.len == 0) return PSA_OK;
  PSA_RETURN_IF(n_blocks * block_n < gk.len || (n_blocks - 1) * block_n >= gk.len, PSA_ERR_INTERNAL,
                "8-bit pool: %lld blocks of %lld are not ceil(%lld / block)", static_cast<long long>(n_blocks),
                static_cast<long long>(block_n), static_cast<long long>(gk.len));
  PSA_RETURN_IF(gk.batch * gk.heads > 65535 || n_blocks > INT32_MAX, PSA_ERR_UNSUPPORTED,
                "8-bit pool: %lld heads and %lld key blocks; the grid allows at most 65535 and 2^31 - 1",
                static_cast<long long>(gk.batch * gk.heads), static_cast<long long>(n_blocks));
  PSA_RETURN_IF(out.k_mean == nullptr || out.k_scale == nullptr || out.v_scale == nullptr || out.v_smax == nullptr,
                PSA_ERR_INTERNAL, "8-bit pool: a scale output is NULL");
  for (int li = 0; li < 4; ++li)
    PSA_RETURN_IF(out.k8[li] == nullptr || out.v8[li] == nullptr || reinterpret_cast<uintptr_t>(out.k8[li]) % 8 != 0 ||
                      reinterpret_cast<uintptr_t>(out.v8[li]) % 8 != 0,
                  PSA_ERR_INTERNAL, "8-bit pool: level %d output NULL or not 8-byte aligned", li);
  PSA_RETURN_IF(reinterpret_cast<uintptr_t>(gk.dst) % 16 != 0 || reinterpret_cast<uintptr_t>(gv.dst) % 16 != 0,
                PSA_ERR_INTERNAL, "8-bit pool: level-1 copy not 16-byte aligned");
  switch (gk.dtype) {
    case PSA_DTYPE_F16: return launch_fp8<__half>(gk, gv, n_blocks, block_n, out, stream);
    case PSA_DTYPE_BF16: return launch_fp8<__nv_bfloat16>(gk, gv, n_blocks, block_n, out, stream);
    default:
      return set_error(PSA_ERR_UNSUPPORTED, "8-bit pool: dtype = %d; the CUDA backend supports f16 and bf16",
                       static_cast<int>(gk.dtype));
  }
}

}  // namespace gpu
}  // namespace psa

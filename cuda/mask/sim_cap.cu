// cuda/mask/sim_cap.cu -- mask stage (similarity cap, spec 5): kernel, launcher, entry.
// One CTA stages a key block in fp32 (16-byte loads, all of a thread's in flight); its threads
// compute mask_spec.h's pair cosines in parallel and three threads sum them in the CPU's order
// (no FMA), so the cap equals sim_cap_row's bit for bit. No rule of its own.
#include <cstdint>

#include "cuda/core/cuda_status.h"
#include "cuda/core/device.cuh"
#include "cuda/mask/mask_cuda.h"
#include "mask/mask_spec.h"

namespace psa {
namespace gpu {
namespace {

struct SimCapKernelParams {
  const void* k;
  int64_t len_k, d, nk, block_n;
  double threshold[3];
  int8_t* cap;
  bool vec;    // K 16-byte aligned and d % 8 == 0: rows staged in 16-byte chunks
  int64_t ld;  // staged row stride in floats: d + 4 when d % 4 == 0 (16-byte rows), else d + 1
};

// Shared-memory slot of key row r: even rows first, then odd ones, so the rows a warp's pair
// threads read side by side (level 2: rows 2t and 2t + 1) sit in consecutive slots.
__device__ __forceinline__ int64_t row_slot(int64_t r, int64_t block_n) {
  return (r & 1) != 0 ? (block_n + 1) / 2 + (r >> 1) : r >> 1;
}

// 16-byte chunks per thread loaded before any is stored (the staging's loads in flight).
constexpr int kStageBatch = 8;

// Rows u = 0 .. block_n - 1 of key block j (token min(j * block_n + u, len_k - 1): the CPU's
// replicate padding) of one head into block[u * ld + c] as fp32. Vector path: chunk q of the
// block is row q / (d / 8), columns 8 (q % (d / 8)) ..; each thread loads kStageBatch chunks,
// then converts and stores them. Else warp w stages rows w, w + warps, ..., lanes walking a
// row's columns.
template <typename T>
__device__ __forceinline__ void stage_block(const SimCapKernelParams& p, const T* k, int64_t j, float* block,
                                            int64_t ld) {
  if (p.vec) {
    const int row_chunks = static_cast<int>(p.d / 8);
    const int chunks = static_cast<int>(p.block_n) * row_chunks;
    for (int q0 = static_cast<int>(threadIdx.x); q0 < chunks; q0 += kStageBatch * static_cast<int>(blockDim.x)) {
      uint4 v[kStageBatch];
#pragma unroll
      for (int u = 0; u < kStageBatch; ++u) {
        const int q = q0 + u * static_cast<int>(blockDim.x);
        if (q >= chunks) break;
        const int64_t tok = min(j * p.block_n + q / row_chunks, p.len_k - 1);
        v[u] = __ldg(reinterpret_cast<const uint4*>(k + tok * p.d) + q % row_chunks);
      }
#pragma unroll
      for (int u = 0; u < kStageBatch; ++u) {
        const int q = q0 + u * static_cast<int>(blockDim.x);
        if (q >= chunks) break;
        const T* e = reinterpret_cast<const T*>(&v[u]);
        // ld % 4 == 0 here (d % 8 == 0): two 16-byte stores.
        float4* dst = reinterpret_cast<float4*>(block + row_slot(q / row_chunks, p.block_n) * ld + (q % row_chunks) * 8);
        dst[0] = make_float4(Elem<T>::to_float(e[0]), Elem<T>::to_float(e[1]), Elem<T>::to_float(e[2]),
                             Elem<T>::to_float(e[3]));
        dst[1] = make_float4(Elem<T>::to_float(e[4]), Elem<T>::to_float(e[5]), Elem<T>::to_float(e[6]),
                             Elem<T>::to_float(e[7]));
      }
    }
    return;
  }
  const int warps = static_cast<int>(blockDim.x / 32), lane = static_cast<int>(threadIdx.x % 32);
  for (int64_t u = threadIdx.x / 32; u < p.block_n; u += warps) {
    const int64_t tok = min(j * p.block_n + u, p.len_k - 1);
    const T* src = k + tok * p.d;
    float* dst = block + row_slot(u, p.block_n) * ld;
    for (int64_t c = lane; c < p.d; c += 32) dst[c] = Elem<T>::to_float(src[c]);
  }
}

// Grid cap: past it each CTA takes several (head, key block) pairs. Pairs are flattened
// because heads = B*Hkv may exceed the 65535 of a y grid dimension.
constexpr int64_t kMaxGrid = int64_t{1} << 24;

// One CTA per (head, key block j) pair, pair = head * nk + j (grid-stride). Every pair cosine
// of the three levels is one thread's work (row_pair_cosine, the CPU's operations); one thread
// per level then sums them in the CPU's order (mean_pair_cosine), so the cap is bit-identical.
// Rows sit in row_slot order, ld floats apart: with ld = d + 4 (d a multiple of 32) the 16-byte
// loads of eight level-2 threads cover the 32 banks once (level 4: twice, level 8: four times).
template <typename T>
__global__ void sim_cap_kernel(SimCapKernelParams p, int64_t pairs) {
  extern __shared__ float4 smem4[];
  float* smem = reinterpret_cast<float*>(smem4);
  const int64_t ld = p.ld;
  float* block = smem;                        // [block_n][ld] in row_slot order, replicate-padded
  float* cosines = smem + p.block_n * ld;     // level 2, 4, 8 pair cosines, back to back
  __shared__ float sim[3];
  const int64_t n2 = sim_pair_count(2, p.block_n), n4 = sim_pair_count(4, p.block_n),
                n8 = sim_pair_count(8, p.block_n);
  for (int64_t pair = blockIdx.x; pair < pairs; pair += gridDim.x) {
    const int64_t j = pair % p.nk, head = pair / p.nk;
    const T* k = static_cast<const T*>(p.k) + head * p.len_k * p.d;
    // Reuse across pairs is ordered by the barriers: `block` and `cosines` are last read
    // before the third, `sim` is next written after the second.
    stage_block(p, k, j, block, ld);
    __syncthreads();
    for (int64_t t = threadIdx.x; t < n2 + n4 + n8; t += blockDim.x) {
      const int level = t < n2 ? 2 : t < n2 + n4 ? 4 : 8;
      const int64_t local = t < n2 ? t : t < n2 + n4 ? t - n2 : t - n2 - n4;
      const float* a = block + row_slot(sim_pair_first(level, local), p.block_n) * ld;
      const float* b = block + row_slot(sim_pair_second(level, local), p.block_n) * ld;
      cosines[t] = ld % 4 == 0 ? row_pair_cosine(static_cast<const float*>(__builtin_assume_aligned(a, 16)),
                                                 static_cast<const float*>(__builtin_assume_aligned(b, 16)), p.d)
                               : row_pair_cosine(a, b, p.d);
    }
    __syncthreads();
    if (threadIdx.x < 3) {
      const int64_t off = threadIdx.x == 0 ? 0 : threadIdx.x == 1 ? n2 : n2 + n4;
      const int64_t n = threadIdx.x == 0 ? n2 : threadIdx.x == 1 ? n4 : n8;
      sim[threadIdx.x] = mean_pair_cosine(cosines + off, n);
    }
    __syncthreads();
    if (threadIdx.x == 0)
      p.cap[pair] = static_cast<int8_t>(sim_cap_from_means(sim[0], sim[1], sim[2], p.threshold));
  }
}

template <typename T>
psa_status launch_sim_cap(const SimCapKernelParams& p, int64_t heads, cudaStream_t stream) {
  const size_t smem = sizeof(float) * static_cast<size_t>(p.block_n * p.ld + p.block_n);
  PSA_CUDA_TRY(cudaFuncSetAttribute(sim_cap_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    static_cast<int>(smem)),
               "sim_cap_kernel: cudaFuncSetAttribute");
  const int64_t pairs = heads * p.nk;
  const unsigned grid = grid_stride_blocks(pairs, 1, kMaxGrid);
  sim_cap_kernel<T><<<grid, 128, smem, stream>>>(p, pairs);
  return launch_status("sim_cap_kernel");
}

}  // namespace

psa_status sim_cap_cuda(const SimCapArgs& a, cudaStream_t stream) {
  if (a.heads == 0 || a.n_blocks == 0) return PSA_OK;
  SimCapKernelParams p{};
  p.k = a.k;
  p.len_k = a.len_k;
  p.d = a.head_dim;
  p.nk = a.n_blocks;
  p.block_n = a.block_n;
  for (int i = 0; i < 3; ++i) p.threshold[i] = a.threshold[i];
  p.cap = a.cap;
  // The head stride len_k * d keeps every head's rows on 16 bytes when d % 8 == 0.
  p.vec = a.head_dim % 8 == 0 && a.block_n * (a.head_dim / 8) <= INT32_MAX &&
          reinterpret_cast<uintptr_t>(a.k) % 16 == 0;
  p.ld = a.head_dim % 4 == 0 ? a.head_dim + 4 : a.head_dim + 1;
  switch (a.dtype) {
    case PSA_DTYPE_F16: return launch_sim_cap<__half>(p, a.heads, stream);
    case PSA_DTYPE_BF16: return launch_sim_cap<__nv_bfloat16>(p, a.heads, stream);
    default:
      return set_error(PSA_ERR_UNSUPPORTED, "sim cap: dtype = %d; supported: f16, bf16",
                       static_cast<int>(a.dtype));
  }
}

}  // namespace gpu
}  // namespace psa

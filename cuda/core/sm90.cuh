// cuda/core/sm90.cuh -- every Hopper (sm_90a) kernel, kernel + launcher layer: the mbarrier,
// TMA, proxy-fence and wgmma primitives, the 128-byte-swizzle tile layout and matrix
// descriptor, and the host-side tensor-map encoder and availability query. Verified on the H100
// by the attention (cuda/attention/sm90/) and importance (cuda/importance/) kernels. Device
// primitives exist only in the sm_90a pass (PSA_SM90_DEVICE); the sm_80 pass sees the
// declarations it needs to compile empty kernel bodies.
#pragma once
#include <cuda.h>  // CUtensorMap (encoded through the runtime's driver entry point)
#include <cuda_runtime_api.h>

#include <cstdint>

#include "cuda/core/device.cuh"

#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define PSA_SM90_DEVICE 1
#include "cuda/core/wgmma_ops.cuh"
#endif

namespace psa {
namespace gpu {
namespace sm90 {

// The dynamic shared window rounded up to the 1024-byte swizzle atom. Offsetting the array
// itself (no round trip through an integer) keeps the result known to be shared memory, so the
// accesses through it compile to LDS/STS; after a uintptr_t round trip they were generic loads
// and stores (LD.E / ST.E), each also resolving the address space.
template <uint32_t kAlign>
__device__ __forceinline__ unsigned char* align_smem(unsigned char* raw) {
  static_assert((kAlign & (kAlign - 1)) == 0, "a power of two");
  const uint32_t a = static_cast<uint32_t>(__cvta_generic_to_shared(raw));
  return raw + ((kAlign - (a & (kAlign - 1))) & (kAlign - 1));
}

// Element offset of (row, 16-byte chunk) in a swizzled [R][D] tile.
template <int R>
__device__ __forceinline__ int tile_off(int row, int chunk) {
  return (chunk >> 3) * (R * 64) + row * 64 + (((chunk & 7) ^ (row & 7)) << 3);
}

#ifdef PSA_SM90_DEVICE
__device__ __forceinline__ void mbar_init(uint32_t bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count));
}
__device__ __forceinline__ void mbar_arrive(uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
  asm volatile(
      "{\n.reg .pred P1;\nLAB_WAIT:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 P1, [%0], %1;\n"
      "@P1 bra DONE;\nbra LAB_WAIT;\nDONE:\n}\n" ::"r"(bar),
      "r"(parity)
      : "memory");
}
// Adds `bytes` to the transaction count the current phase waits for (no arrival).
__device__ __forceinline__ void mbar_expect_tx(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}
// 4-byte shared-memory access at a shared-window address, for address arithmetic the compiler
// cannot see through a pointer (XORs on the absolute address).
__device__ __forceinline__ uint32_t lds_b32(uint32_t addr) {
  uint32_t v;
  asm volatile("ld.shared.b32 %0, [%1];\n" : "=r"(v) : "r"(addr));
  return v;
}
__device__ __forceinline__ void sts_b32(uint32_t addr, uint32_t v) {
  asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(addr), "r"(v) : "memory");
}
// Four 8 x 8 matrices of 16-bit elements at shared-window addresses (lane 8 j + r gives row r of
// matrix j): ldmatrix transposed (lane l gets column l / 4, rows 2 (l % 4) and + 1 of each) and
// stmatrix (lane l holds row l / 4, columns 2 (l % 4) and + 1 of each).
__device__ __forceinline__ void ldsm_x4_trans(uint32_t addr, uint32_t r[4]) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
__device__ __forceinline__ void stsm_x4(uint32_t addr, const uint32_t r[4]) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1,%2,%3,%4};\n" ::"r"(addr), "r"(r[0]), "r"(r[1]),
               "r"(r[2]), "r"(r[3])
               : "memory");
}
// Adds `bytes` to the transaction count the current phase waits for, and arrives.
__device__ __forceinline__ void mbar_arrive_expect_tx(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}
// TMA: box of `map` at coordinates (c0 innermost .. c3) into shared memory at `dst`;
// completion counted in bytes on `bar`.
__device__ __forceinline__ void tma_load_4d(uint32_t dst, const CUtensorMap* map, uint32_t bar, int c0, int c1,
                                            int c2, int c3) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4, %5}], [%6];\n" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(bar)
      : "memory");
}
// 3-D form of tma_load_4d.
__device__ __forceinline__ void tma_load_3d(uint32_t dst, const CUtensorMap* map, uint32_t bar, int c0, int c1,
                                            int c2) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], [%5];\n" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(bar)
      : "memory");
}
// 5-D form of tma_load_4d.
__device__ __forceinline__ void tma_load_5d(uint32_t dst, const void* map, uint32_t bar, int c0, int c1, int c2,
                                            int c3, int c4) {
  asm volatile(
      "cp.async.bulk.tensor.5d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4, %5, %6}], [%7];\n" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(c4), "r"(bar)
      : "memory");
}
// Makes mbarrier.init visible before other threads use the barriers (then __syncthreads).
__device__ __forceinline__ void mbar_init_fence() {
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}
// Orders this thread's generic-proxy shared writes before async-proxy reads (wgmma) of
// threads that synchronise with it afterwards.
__device__ __forceinline__ void fence_proxy_async() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}
// Zeros the shared bytes [begin, end) after `base` as one warp (begin, end and base 16-byte
// aligned): lane l stores 16 bytes at begin + 16 l, then every 512 bytes. For zeros the
// 128-byte swizzle does not matter, so a swizzled tile's tail is one contiguous run.
__device__ __forceinline__ void warp_zero_bytes(unsigned char* base, int begin, int end, int lane) {
  for (int off = begin + lane * 16; off < end; off += 512)
    *reinterpret_cast<uint4*>(base + off) = make_uint4(0, 0, 0, 0);
}
// Orders this thread's generic-proxy global writes before async-proxy reads (TMA) of threads
// that synchronise with it afterwards.
__device__ __forceinline__ void fence_proxy_async_global() {
  asm volatile("fence.proxy.async.global;\n" ::: "memory");
}
__device__ __forceinline__ void named_bar_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
// Keeps the compiler from moving accesses of an accumulator across wgmma issue/wait.
template <int N>
__device__ __forceinline__ void fence_regs(float (&r)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(r[i])::"memory");
}
template <int N>
__device__ __forceinline__ void fence_regs(int32_t (&r)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+r"(r[i])::"memory");
}
template <int N>
__device__ __forceinline__ void fence_regs(uint32_t (&r)[N][4]) {
#pragma unroll
  for (int i = 0; i < N; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j) asm volatile("" : "+r"(r[i][j])::"memory");
}
// Shared-memory matrix descriptor, 128-byte swizzle (layout type 1). lbo/sbo in bytes.
__device__ __forceinline__ uint64_t sw128_desc(uint32_t addr, uint32_t lbo, uint32_t sbo) {
  return static_cast<uint64_t>((addr & 0x3FFFF) >> 4) | (static_cast<uint64_t>(lbo >> 4) << 16) |
         (static_cast<uint64_t>(sbo >> 4) << 32) | (uint64_t{1} << 62);
}
// The same descriptor kept as two words, so that a kernel's main loop forms the descriptor of
// base + off (a stage, a k-step) with one add to the low word instead of the masks and shifts
// above: the address field (address / 16, bits 0-13) cannot carry into LBO, since every
// shared-window address is below 2^18.
struct Sw128Desc {
  uint32_t lo, hi;
  __device__ __forceinline__ uint64_t at(uint32_t off) const {
    return static_cast<uint64_t>(hi) << 32 | (lo + (off >> 4));
  }
};
__device__ __forceinline__ Sw128Desc sw128_desc_words(uint32_t addr, uint32_t lbo, uint32_t sbo) {
  const uint64_t d = sw128_desc(addr, lbo, sbo);
  return Sw128Desc{static_cast<uint32_t>(d), static_cast<uint32_t>(d >> 32)};
}
#endif  // PSA_SM90_DEVICE

// cuTensorMapEncodeTiled through the runtime (no link against libcuda); NULL if the driver
// lacks it.
using TensorMapEncodeFn = decltype(&cuTensorMapEncodeTiled);
inline TensorMapEncodeFn tensor_map_encoder() {
  static TensorMapEncodeFn fn = [] {
    void* f = nullptr;
    cudaDriverEntryPointQueryResult q{};
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault, &q) != cudaSuccess ||
        q != cudaDriverEntryPointSuccess)
      f = nullptr;
    return reinterpret_cast<TensorMapEncodeFn>(f);
  }();
  return fn;
}

// cuTensorMapEncodeTiled with what every tensor map of this library shares: no interleave,
// element strides 1, zeros (not NaN) for out-of-bounds elements. `dims` and `box` innermost
// first (rank <= 5), `strides` the byte strides of dims 1 .. rank - 1. False when the driver
// lacks the entry point or rejects the map.
inline bool encode_tiled(CUtensorMap* m, CUtensorMapDataType type, int rank, const void* base,
                         const cuuint64_t* dims, const cuuint64_t* strides, const cuuint32_t* box,
                         CUtensorMapSwizzle swizzle, CUtensorMapL2promotion promotion) {
  TensorMapEncodeFn enc = tensor_map_encoder();
  if (enc == nullptr || rank < 1 || rank > 5) return false;
  const cuuint32_t estr[5] = {1, 1, 1, 1, 1};
  return enc(m, type, static_cast<cuuint32_t>(rank), const_cast<void*>(base), dims, strides, box, estr,
             CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle, promotion, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

// SMs of the current device (the persistent grids: one CTA per SM).
inline cudaError_t current_sm_count(int* sms) {
  int dev = 0;
  cudaError_t e = cudaGetDevice(&dev);
  if (e == cudaSuccess) e = cudaDeviceGetAttribute(sms, cudaDevAttrMultiProcessorCount, dev);
  return e;
}

// True when `kernel` (any kernel of this library: all are built for the same architecture
// list) runs its sm_90a image on the current device: compute capability 9.x and the driver
// picked 90 as binaryVersion (a PTX/JIT or sm_80 image would run the empty body). Cached per
// device ordinal.
bool kernel_has_sm90_image(const void* kernel);

}  // namespace sm90
}  // namespace gpu
}  // namespace psa

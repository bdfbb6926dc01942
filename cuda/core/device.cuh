// cuda/core/device.cuh -- every CUDA stage, kernel layer: 16-bit element conversions, vector
// loads, cp.async and mma.sync wrappers shared by the kernels. Device code only; no launch
// logic, no psa.h types.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cstdint>

namespace psa {
namespace gpu {

// ---- element conversions (T is __half or __nv_bfloat16) ---------------------------------
template <typename T>
struct Elem;
template <>
struct Elem<__half> {
  static __device__ __forceinline__ float to_float(__half x) { return __half2float(x); }
  static __device__ __forceinline__ __half from_float(float x) { return __float2half_rn(x); }
  // Two floats -> one 32-bit register holding {lo, hi} (lo in the low half).
  static __device__ __forceinline__ uint32_t pack(float lo, float hi) {
    __half2 h = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<uint32_t*>(&h);
  }
  // Element-wise maximum / minimum of two packed pairs, exact, a NaN in either operand
  // propagating (one HMNMX2 each).
  static __device__ __forceinline__ uint32_t max2_nan(uint32_t a, uint32_t b) {
    const __half2 r = __hmax2_nan(*reinterpret_cast<const __half2*>(&a), *reinterpret_cast<const __half2*>(&b));
    return *reinterpret_cast<const uint32_t*>(&r);
  }
  static __device__ __forceinline__ uint32_t min2_nan(uint32_t a, uint32_t b) {
    const __half2 r = __hmin2_nan(*reinterpret_cast<const __half2*>(&a), *reinterpret_cast<const __half2*>(&b));
    return *reinterpret_cast<const uint32_t*>(&r);
  }
};
template <>
struct Elem<__nv_bfloat16> {
  static __device__ __forceinline__ float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }
  static __device__ __forceinline__ __nv_bfloat16 from_float(float x) { return __float2bfloat16_rn(x); }
  static __device__ __forceinline__ uint32_t pack(float lo, float hi) {
    __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<uint32_t*>(&h);
  }
  static __device__ __forceinline__ uint32_t max2_nan(uint32_t a, uint32_t b) {
    const __nv_bfloat162 r =
        __hmax2_nan(*reinterpret_cast<const __nv_bfloat162*>(&a), *reinterpret_cast<const __nv_bfloat162*>(&b));
    return *reinterpret_cast<const uint32_t*>(&r);
  }
  static __device__ __forceinline__ uint32_t min2_nan(uint32_t a, uint32_t b) {
    const __nv_bfloat162 r =
        __hmin2_nan(*reinterpret_cast<const __nv_bfloat162*>(&a), *reinterpret_cast<const __nv_bfloat162*>(&b));
    return *reinterpret_cast<const uint32_t*>(&r);
  }
};

// max.NaN.f32: the larger of a and b, NaN when either is (fmaxf returns the other operand).
__device__ __forceinline__ float fmax_nan(float a, float b) {
  float r;
  asm("max.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
  return r;
}

// Eight 16-bit elements held in a uint4 -> floats, and back.
template <typename T>
__device__ __forceinline__ void unpack8(const uint4& v, float* f) {
  const T* e = reinterpret_cast<const T*>(&v);
#pragma unroll
  for (int i = 0; i < 8; ++i) f[i] = Elem<T>::to_float(e[i]);
}
// Element-wise maximum / minimum of eight packed elements (Elem<T>::max2_nan / min2_nan).
template <typename T>
__device__ __forceinline__ uint4 max8_nan(const uint4& a, const uint4& b) {
  return make_uint4(Elem<T>::max2_nan(a.x, b.x), Elem<T>::max2_nan(a.y, b.y), Elem<T>::max2_nan(a.z, b.z),
                    Elem<T>::max2_nan(a.w, b.w));
}
template <typename T>
__device__ __forceinline__ uint4 min8_nan(const uint4& a, const uint4& b) {
  return make_uint4(Elem<T>::min2_nan(a.x, b.x), Elem<T>::min2_nan(a.y, b.y), Elem<T>::min2_nan(a.z, b.z),
                    Elem<T>::min2_nan(a.w, b.w));
}
template <typename T>
__device__ __forceinline__ uint4 pack8(const float* f) {
  uint4 v;
  v.x = Elem<T>::pack(f[0], f[1]);
  v.y = Elem<T>::pack(f[2], f[3]);
  v.z = Elem<T>::pack(f[4], f[5]);
  v.w = Elem<T>::pack(f[6], f[7]);
  return v;
}

// ---- shared-memory tiles ------------------------------------------------------------------
// Element offset of (row, 16-byte chunk) in a [rows][D] 16-bit tile, chunks XOR-swizzled by
// row so that ldmatrix reads of 8 rows at one column hit 8 different bank groups (the sm80
// attention and importance kernels).
template <int D>
__device__ __forceinline__ int swz(int row, int chunk) {
  return row * D + ((chunk ^ (row & 7)) << 3);
}

// ---- cp.async (sm80+) -------------------------------------------------------------------
__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
// Copies 16 bytes, or zero-fills the destination when !valid (src is then not read).
__device__ __forceinline__ void cp_async_16(void* smem, const void* gmem, bool valid) {
  const int bytes = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(smem)),
               "l"(gmem), "r"(bytes));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

// ---- ldmatrix / mma.sync m16n8k16 (sm80+) ---------------------------------------------
__device__ __forceinline__ void ldmatrix_x4(uint32_t r[4], const void* smem) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(smem)));
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t r[4], const void* smem) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(smem)));
}

template <typename T>
__device__ __forceinline__ void mma_16816(float c[4], const uint32_t a[4], const uint32_t b0,
                                          const uint32_t b1);
template <>
__device__ __forceinline__ void mma_16816<__half>(float c[4], const uint32_t a[4],
                                                  const uint32_t b0, const uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
template <>
__device__ __forceinline__ void mma_16816<__nv_bfloat16>(float c[4], const uint32_t a[4],
                                                         const uint32_t b0, const uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// 2^x on the special-function unit (ex2.approx, ~2 ulp); -inf -> 0.
__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

}  // namespace gpu
}  // namespace psa

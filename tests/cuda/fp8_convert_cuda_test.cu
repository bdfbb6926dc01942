// tests/cuda/fp8_convert_cuda_test.cu -- cuda/core/fp8.cuh against attention/fp8_spec.h over
// every fp32 bit pattern (2^32 values, one kernel, a fraction of a second): the hardware e4m3
// conversion (cvt.rn.satfinite) gives float_to_e4m3's code for every value (NaN inputs: a NaN
// code), fp8_quantize_x2 gives the code of fp8_quantize, int8_quantize_code the byte of
// int8_quantize; the in-range forms (int8_quantize_x4_in_range for |x| < 127.5 in each of its
// four byte positions, fp8_quantize_x2_finite for finite x) the codes of the general ones; and
// e4m3_value decodes every code as e4m3_to_float. The library's 8-bit kernels rely on these being
// the CPU oracle's values.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>

#include "attention/fp8_spec.h"
#include "cuda/core/fp8.cuh"
#include "cuda/cuda_test_util.h"

namespace {

using psa::test::DevBuf;

// Mismatches per check and the first input of each (0xffffffff: none).
struct Sweep {
  unsigned long long bad[6];
  unsigned first[6];
};

__device__ void note(Sweep* s, int k, uint32_t u) {
  atomicAdd(&s->bad[k], 1ull);
  atomicMin(&s->first[k], u);
}

__global__ void sweep_kernel(Sweep* s) {
  const uint64_t stride = static_cast<uint64_t>(gridDim.x) * blockDim.x;
  for (uint64_t i = blockIdx.x * static_cast<uint64_t>(blockDim.x) + threadIdx.x; i < (1ull << 32); i += stride) {
    const uint32_t u = static_cast<uint32_t>(i);
    const float x = __uint_as_float(u);
    const bool nan = x != x;
    // 1. The raw conversion (inf saturates to +-448 in both; a NaN must give a NaN code).
    const uint32_t hw = psa::gpu::e4m3x2(x, 0.0f) & 0xffu, def = psa::float_to_e4m3(x);
    if (nan ? (hw & 0x7fu) != 0x7fu : hw != def) note(s, 0, u);
    // 2. fp8_quantize (scale 1: the product is x itself; non-finite -> NaN).
    const uint32_t q = psa::gpu::fp8_quantize_x2(0.0f, x, 1.0f) >> 8;
    if (q != psa::float_to_e4m3(psa::fp8_quantize(x, 1.0f))) note(s, 1, u);
    // 3. int8_quantize.
    const float r = psa::int8_quantize(x, 1.0f);
    const uint32_t want = r != r ? 0x80u : static_cast<uint32_t>(static_cast<int>(r)) & 0xffu;
    if (psa::gpu::int8_quantize_code(x, 1.0f) != want) note(s, 2, u);
    // 4. e4m3_value of every code (the low byte of u): e4m3_to_float, NaN for NaN.
    if (u < 256u) {
      const float got = psa::gpu::e4m3_value(u), ref = psa::e4m3_to_float(static_cast<uint8_t>(u));
      if (ref != ref ? got == got : __float_as_uint(got) != __float_as_uint(ref)) note(s, 3, u);
    }
    // 5. int8_quantize_x4_in_range where it applies, x in each byte position.
    if (fabsf(x) < 127.5f) {
      const float h = 0.25f;  // a neighbour value whose byte is 0
      const uint32_t w = psa::gpu::int8_quantize_code(x, 1.0f);
      if (psa::gpu::int8_quantize_x4_in_range(x, h, h, h, 1.0f) != w ||
          psa::gpu::int8_quantize_x4_in_range(h, x, h, h, 1.0f) != w << 8 ||
          psa::gpu::int8_quantize_x4_in_range(h, h, x, h, 1.0f) != w << 16 ||
          psa::gpu::int8_quantize_x4_in_range(h, h, h, x, 1.0f) != w << 24)
        note(s, 4, u);
    }
    // 6. fp8_quantize_x2_finite for finite x, in both halves.
    if (fabsf(x) <= 3.402823466e38f && (psa::gpu::fp8_quantize_x2_finite(x, 0.5f, 1.0f) !=
                                            psa::gpu::fp8_quantize_x2(x, 0.5f, 1.0f) ||
                                        psa::gpu::fp8_quantize_x2_finite(0.5f, x, 1.0f) !=
                                            psa::gpu::fp8_quantize_x2(0.5f, x, 1.0f)))
      note(s, 5, u);
  }
}

TEST(CudaFp8Convert, EveryFloatGivesTheSpecCode) {
  PSA_REQUIRE_GPU();
  DevBuf<Sweep> d(1);
  d.fill_bytes(0);
  Sweep init{};
  for (unsigned& f : init.first) f = 0xffffffffu;
  d.upload(std::vector<Sweep>{init});
  sweep_kernel<<<1024, 256>>>(d.get());
  ASSERT_EQ(cudaSuccess, cudaDeviceSynchronize());
  const Sweep s = d.download()[0];
  const char* what[6] = {"e4m3 conversion", "fp8_quantize", "int8_quantize", "e4m3 decoding",
                         "int8_quantize_x4_in_range", "fp8_quantize_x2_finite"};
  for (int k = 0; k < 6; ++k)
    EXPECT_EQ(0ull, s.bad[k]) << what[k] << ": first differing input 0x" << std::hex << s.first[k];
  std::printf("[fp8 convert] 2^32 inputs: mismatches %llu / %llu / %llu, in-range forms %llu / %llu; 256 codes "
              "decoded: %llu\n",
              s.bad[0], s.bad[1], s.bad[2], s.bad[4], s.bad[5], s.bad[3]);
}

}  // namespace

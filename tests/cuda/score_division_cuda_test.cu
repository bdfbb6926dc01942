// tests/cuda/score_division_cuda_test.cu -- the score rule's fp32 parts on the GPU, where the
// score kernels run them: sample_weight gives the host's bits for every fp32 argument (2^32,
// compared per chunk of 2^20), and normalised_score (importance/score_division.h) equals the
// rule's (float)(v / s) in double on the same GPU on 2^26 fresh random (v, s) pairs plus 2^24
// pairs built next to a rounding boundary, with the fp32 path deciding nearly all of the
// ordinary ones (it keeps the score kernel's finisher warps off the double pipe).
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <random>
#include <thread>
#include <vector>

#include "core/bits.h"
#include "cuda/cuda_test_util.h"
#include "importance/importance_spec.h"
#include "importance/score_division.h"

namespace {

using psa::test::DevBuf;

struct Counts {
  unsigned long long wrong, decided, ordinary, built, built_decided;
};

// sample_weight's bits over every fp32 argument, folded per chunk of 2^20 consecutive bit
// patterns (a sum of the bits times a per-index odd multiplier, so a swap within a chunk shows).
constexpr int kChunkBits = 20, kChunks = 1 << (32 - kChunkBits);
__host__ __device__ inline uint64_t fold_weight(uint32_t u, float w) {
  return static_cast<uint64_t>(psa::float_bits(w)) * (2ull * u + 1ull);
}
__global__ void every_weight(unsigned long long* chunk) {
  for (int c = blockIdx.x; c < kChunks; c += gridDim.x) {
    unsigned long long acc = 0;
    for (uint32_t i = threadIdx.x; i < (1u << kChunkBits); i += blockDim.x) {
      const uint32_t u = (static_cast<uint32_t>(c) << kChunkBits) | i;
      acc += fold_weight(u, psa::sample_weight(__uint_as_float(u)));
    }
    atomicAdd(chunk + c, acc);
  }
}

__device__ double unit(uint64_t key) { return static_cast<double>(psa::mix64(key) >> 11) * 0x1p-53; }

// normalised_score against the rule's division in double on this GPU; whether fp32 decided.
__device__ bool differs(float v, double s, bool& decided) {
  const psa::ScoreDivisor d = psa::score_divisor(s);
  float q;
  decided = psa::div_rn_f32(v, d, q);
  return psa::float_bits(psa::normalised_score(v, s, d)) != psa::float_bits(static_cast<float>(v / s));
}

__global__ void random_quotients(Counts* c, uint64_t seed, int n) {
  unsigned long long wrong = 0, decided = 0, ordinary = 0, built = 0, built_decided = 0;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    const uint64_t k = seed + 8ull * static_cast<uint64_t>(i);
    // A row sum 1 <= s < 2^25 and a weight of any magnitude down to 2^-70.
    const double s = 1.0 + ldexp(unit(k), static_cast<int>(unit(k + 1) * 25));
    const float v = static_cast<float>(ldexp(unit(k + 2), -static_cast<int>(unit(k + 3) * 70)));
    bool fast;
    wrong += differs(v, s, fast);
    if (v >= 0x1p-40f) {
      ++ordinary;
      decided += fast;
    }
    if ((i & 3) == 0) {  // s = v / m for a midpoint m between fp32 neighbours: a double rounding case
      const float cq = static_cast<float>(ldexp(1.0 + unit(k + 4), -1 - static_cast<int>(unit(k + 5) * 30)));
      const float nb = unit(k + 6) < 0.5 ? nextafterf(cq, 2.0f) : nextafterf(cq, 0.0f);
      const float v2 = static_cast<float>(0.5 + 0.5 * unit(k + 7));
      const double s2 = v2 / ((static_cast<double>(cq) + nb) / 2);
      if (s2 >= 1.0) {
        ++built;
        wrong += differs(v2, s2, fast);
        built_decided += fast;
      }
    }
  }
  atomicAdd(&c->wrong, wrong);
  atomicAdd(&c->decided, decided);
  atomicAdd(&c->ordinary, ordinary);
  atomicAdd(&c->built, built);
  atomicAdd(&c->built_decided, built_decided);
}

TEST(CudaScoreDivision, SampleWeightEveryArgumentAsOnTheHost) {
  PSA_REQUIRE_GPU();
  DevBuf<unsigned long long> d(kChunks);
  d.fill_bytes(0);
  every_weight<<<2048, 256>>>(d.get());
  ASSERT_EQ(cudaSuccess, cudaDeviceSynchronize());
  const std::vector<unsigned long long> gpu = d.download();
  std::vector<unsigned long long> host(kChunks, 0);
  std::vector<std::thread> pool;
  const int nt = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  for (int t = 0; t < nt; ++t)
    pool.emplace_back([&, t] {
      for (int c = t; c < kChunks; c += nt)
        for (uint32_t i = 0; i < (1u << kChunkBits); ++i) {
          const uint32_t u = (static_cast<uint32_t>(c) << kChunkBits) | i;
          host[c] += fold_weight(u, psa::sample_weight(psa::bits_float(u)));
        }
    });
  for (std::thread& th : pool) th.join();
  int differ = 0, first = -1;
  for (int c = 0; c < kChunks; ++c)
    if (gpu[c] != host[c] && differ++ == 0) first = c;
  EXPECT_EQ(0, differ) << "first differing chunk: arguments 0x" << std::hex << (static_cast<uint32_t>(first) << kChunkBits);
  std::printf("[sample weight] 2^32 arguments in %d chunks: %d differ from the host\n", kChunks, differ);
}

TEST(CudaScoreDivision, NormalisedScoreRandomAndBoundaryPairs) {
  PSA_REQUIRE_GPU();
  const uint64_t seed = (static_cast<uint64_t>(std::random_device{}()) << 32) ^ std::random_device{}();  // fresh
  DevBuf<Counts> d(1);
  d.fill_bytes(0);
  random_quotients<<<1024, 256>>>(d.get(), seed, 1 << 26);
  ASSERT_EQ(cudaSuccess, cudaDeviceSynchronize());
  const Counts c = d.download()[0];
  EXPECT_EQ(0ull, c.wrong) << "seed " << seed;
  EXPECT_GT(c.decided, c.ordinary * 999 / 1000) << "seed " << seed;
  EXPECT_GT(c.built, 1000ull);
  EXPECT_EQ(0ull, c.built_decided) << "a quotient within 2^-53 of a midpoint was decided in fp32; seed " << seed;
  std::printf("[score division] %llu quotients: %llu differ, fp32 decides %llu of %llu; %llu next to a boundary\n",
              c.ordinary, c.wrong, c.decided, c.ordinary, c.built);
}

}  // namespace

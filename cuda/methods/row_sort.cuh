// cuda/methods/row_sort.cuh -- mask stage (rf_v2, ada_bsa, psa_causal), kernel layer: one CTA
// sorts a row of fp32 scores in shared memory into the CPU builders' order (larger first, NaN
// after every number): values alone, or (value, index) pairs with ties by lower index.
// Device code only.
#pragma once
#include <cstdint>

namespace psa {
namespace gpu {

// The CPU builders' `larger_first` (methods/rf_v2.cpp, ada_bsa.cpp): a strict weak order in
// which every NaN ranks after every number. Sorting under it yields the same sequence of
// values as std::sort / std::nth_element up to the sign of zeros and NaN payloads, which no
// later comparison or sum can tell apart.
__device__ __forceinline__ bool score_before(float a, float b) {
  const bool an = a != a, bn = b != b;
  if (an != bn) return bn;
  return !an && a > b;
}

// Power of two >= n (n >= 1): the length of a bitonic sort buffer.
__host__ __device__ __forceinline__ int64_t sort_length(int64_t n) {
  int64_t np = 1;
  while (np < n) np <<= 1;
  return np;
}

// Bitonic sort of the positions [0, np) (np a power of two) of a CTA's shared arrays:
// before(t, l) says whether the element at t belongs before the one at l, swap(t, l) exchanges
// them; equal elements are never swapped. Every thread of the CTA must call it; it
// synchronises before and after.
template <typename Before, typename Swap>
__device__ __forceinline__ void bitonic_sort(int64_t np, Before before, Swap swap) {
  __syncthreads();
  for (int64_t k = 2; k <= np; k <<= 1) {
    for (int64_t j = k >> 1; j > 0; j >>= 1) {
      for (int64_t t = threadIdx.x; t < np; t += blockDim.x) {
        const int64_t l = t ^ j;
        if (l > t && ((t & k) == 0 ? before(l, t) : before(t, l))) swap(t, l);
      }
      __syncthreads();
    }
  }
}

// key[0, np) into score_before order (pad with NaN past the real values).
__device__ __forceinline__ void sort_scores_desc(float* key, int64_t np) {
  bitonic_sort(
      np, [&](int64_t a, int64_t b) { return score_before(key[a], key[b]); },
      [&](int64_t a, int64_t b) {
        const float x = key[a];
        key[a] = key[b];
        key[b] = x;
      });
}

// The pairs (key[t], idx[t]), t < np (pad with NaN and INT32_MAX), into score_before order
// with ties by lower index first: a total order, so the result is the unique stable
// descending order of the real pairs (the rank-by-counting order of the CPU builders).
__device__ __forceinline__ void sort_pairs_desc(float* key, int32_t* idx, int64_t np) {
  bitonic_sort(
      np,
      [&](int64_t a, int64_t b) {
        return score_before(key[a], key[b]) || (!score_before(key[b], key[a]) && idx[a] < idx[b]);
      },
      [&](int64_t a, int64_t b) {
        const float x = key[a];
        key[a] = key[b];
        key[b] = x;
        const int32_t i = idx[a];
        idx[a] = idx[b];
        idx[b] = i;
      });
}

}  // namespace gpu
}  // namespace psa

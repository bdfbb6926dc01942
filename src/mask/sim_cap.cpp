// mask/sim_cap.cpp -- similarity cap stage (spec 5), CPU reference: per key block, mean
// cosine of paired tokens at pooling 2/4/8 -> cap in {1,2,4,8}. The formulas live in
// mask_spec.h; this file only loops over blocks. fp32, no CUDA, no I/O.
#include <algorithm>
#include <cstring>

#include "mask/mask.h"
#include "mask/mask_spec.h"

namespace psa {

void sim_cap_row(const float* keys, int64_t n_blocks, int64_t block_n, int64_t d,
                 const double threshold[3], int8_t* cap) {
  for (int64_t j = 0; j < n_blocks; ++j) {
    const float* block = keys + j * block_n * d;
    cap[j] = static_cast<int8_t>(sim_cap_from_means(
        block_similarity(block, block_n, d, 2), block_similarity(block, block_n, d, 4),
        block_similarity(block, block_n, d, 8), threshold));
  }
}

void sim_cap_head_cpu(const float* k, int64_t lk, int64_t d, int64_t n_blocks, int64_t block_n,
                      const double threshold[3], float* kpad, int8_t* cap) {
  for (int64_t t = 0; t < n_blocks * block_n; ++t)
    std::memcpy(kpad + t * d, k + std::min(t, lk - 1) * d, sizeof(float) * static_cast<size_t>(d));
  sim_cap_row(kpad, n_blocks, block_n, d, threshold, cap);
}

}  // namespace psa

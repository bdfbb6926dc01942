// pool/pool.h -- K/V pyramid pooling on the host (CPU reference, fp32). Meaning in
// pool/pool_spec.h. Works on one head at a time; no allocation.
#pragma once
#include <cstdint>

namespace psa {

// x: [len, d] fp32 contiguous (one head). Writes the level-2, -4 and -8 pooled sequences
// [n_blocks*block_n/p, d] of the replicate-padded sequence (length n_blocks*block_n).
// Means are hierarchical (level 4 = mean of two level-2 tokens), as in the reference.
void pool_pyramid_cpu(const float* x, int64_t len, int64_t d, int64_t n_blocks, int64_t block_n,
                      float* out2, float* out4, float* out8);

// Pool stage of one key/value head: the level-2/4/8 pyramids of k and v ([lk, d] fp32) into
// k_out[0..3) and v_out[0..3).
void pool_kv_cpu(const float* k, const float* v, int64_t lk, int64_t d, int64_t n_blocks,
                 int64_t block_n, float* const k_out[3], float* const v_out[3]);

}  // namespace psa

// pool/pool_cpu.cpp -- K/V pyramid on the host (CPU reference, fp32, scalar).
#include <cstdint>

#include "pool/pool.h"
#include "pool/pool_spec.h"

namespace psa {

void pool_pyramid_cpu(const float* x, int64_t len, int64_t d, int64_t n_blocks, int64_t block_n,
                      float* out2, float* out4, float* out8) {
  // Level 2 from the replicate-padded tokens, then 4 from 2 and 8 from 4 (hierarchical).
  const int64_t n2 = pooled_length(n_blocks, block_n, 2);
  for (int64_t t = 0; t < n2; ++t) {
    const float* a = x + pooled_source(t, 2, 0, len) * d;
    const float* b = x + pooled_source(t, 2, 1, len) * d;
    for (int64_t c = 0; c < d; ++c) out2[t * d + c] = 0.5f * (a[c] + b[c]);
  }
  float* const dst[2] = {out4, out8};
  const float* src = out2;
  for (int lvl = 0; lvl < 2; ++lvl) {
    const int64_t n = pooled_length(n_blocks, block_n, 4 << lvl);
    for (int64_t t = 0; t < n; ++t)
      for (int64_t c = 0; c < d; ++c)
        dst[lvl][t * d + c] = 0.5f * (src[(2 * t) * d + c] + src[(2 * t + 1) * d + c]);
    src = dst[lvl];
  }
}

void pool_kv_cpu(const float* k, const float* v, int64_t lk, int64_t d, int64_t n_blocks,
                 int64_t block_n, float* const k_out[3], float* const v_out[3]) {
  pool_pyramid_cpu(k, lk, d, n_blocks, block_n, k_out[0], k_out[1], k_out[2]);
  pool_pyramid_cpu(v, lk, d, n_blocks, block_n, v_out[0], v_out[1], v_out[2]);
}

}  // namespace psa

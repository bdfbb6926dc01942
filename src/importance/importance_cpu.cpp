// importance/importance_cpu.cpp -- sampled max-logit block importance on the host (CPU
// reference, fp32 accumulation). Meaning in importance_spec.h; no allocation.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "importance/importance.h"
#include "importance/importance_spec.h"

namespace psa {

void importance_cpu(const float* q, int64_t lq, const float* k, int64_t lk, int64_t d,
                    int64_t block_m, int64_t block_n, const int32_t* q_offsets, int32_t q_count,
                    const int32_t* k_offsets, int32_t k_count, float scale, float* scores) {
  const int64_t mq = (lq + block_m - 1) / block_m;
  const int64_t nk = (lk + block_n - 1) / block_n;
  const float ninf = -std::numeric_limits<float>::infinity();
  for (int64_t i = 0; i < mq; ++i) {
    float* row = scores + i * nk;
    std::fill(row, row + nk, 0.0f);
    for (int32_t s = 0; s < q_count; ++s) {
      const float* qr = q + sampled_token(i, block_m, q_offsets[s], lq) * d;
      // a[j] = scale * max over the sampled keys of block j; then exp(a - max a).
      float row_max = ninf;
      // Two passes over key blocks keep memory O(1): first the row max, then the exps.
      for (int pass = 0; pass < 2; ++pass) {
        for (int64_t j = 0; j < nk; ++j) {
          float best = ninf;
          for (int32_t c = 0; c < k_count; ++c) {
            const float* kc = k + sampled_token(j, block_n, k_offsets[c], lk) * d;
            float dot = 0.0f;
            for (int64_t e = 0; e < d; ++e) dot += qr[e] * kc[e];
            best = std::max(best, dot);
          }
          const float a = scale * best;
          if (pass == 0) {
            row_max = std::max(row_max, a);
          } else {
            const float e = std::exp(a - row_max);
            row[j] = std::max(row[j], std::isnan(e) ? 0.0f : e);
          }
        }
      }
    }
    double sum = 0.0;
    for (int64_t j = 0; j < nk; ++j) sum += row[j];
    if (sum > 0.0)
      for (int64_t j = 0; j < nk; ++j) row[j] = static_cast<float>(row[j] / sum);
  }
}

void importance_head_cpu(const float* q, int64_t lq, const float* k, int64_t lk, int64_t d,
                         int64_t block_m, int64_t block_n, float scale,
                         const ImportanceSampling& s, int32_t* shuffle, int32_t* q_off,
                         int32_t* k_off, float* scores) {
  if (s.q_injected != nullptr) {
    std::copy(s.q_injected, s.q_injected + s.q_count, q_off);
    std::copy(s.k_injected, s.k_injected + s.k_count, k_off);
  } else {
    sample_offsets(s.seed, s.batch, s.head, kSampleQuery, static_cast<int32_t>(block_m), s.q_count,
                   shuffle, q_off);
    sample_offsets(s.seed, s.batch, s.head, kSampleKey, static_cast<int32_t>(block_n), s.k_count,
                   shuffle, k_off);
  }
  importance_cpu(q, lq, k, lk, d, block_m, block_n, q_off, s.q_count, k_off, s.k_count, scale,
                 scores);
}

}  // namespace psa

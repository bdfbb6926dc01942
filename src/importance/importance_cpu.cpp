// importance/importance_cpu.cpp -- sampled max-logit block importance on the host (CPU
// reference, fp32 accumulation) and the tie masses of the top blocks. Meaning in
// importance_spec.h; no allocation beyond two per-row buffers of the sample count.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <cstdint>
#include <limits>
#include <vector>

#include "importance/importance.h"
#include "importance/importance_spec.h"

namespace psa {
namespace {

// a = scale * max over the sampled keys of block j of q_r . k_c (fp32, index order).
float block_logit(const float* qr, const float* k, int64_t lk, int64_t d, int64_t j, int64_t block_n,
                  const int32_t* k_offsets, int32_t k_count, float scale) {
  float best = -std::numeric_limits<float>::infinity();
  for (int32_t c = 0; c < k_count; ++c) {
    const float* kc = k + sampled_token(j, block_n, k_offsets[c], lk) * d;
    float dot = 0.0f;
    for (int64_t e = 0; e < d; ++e) dot += qr[e] * kc[e];
    best = std::max(best, dot);
  }
  return scale * best;
}

}  // namespace

void importance_cpu(const float* q, int64_t lq, const float* k, int64_t lk, int64_t d,
                    int64_t block_m, int64_t block_n, const int32_t* q_offsets, int32_t q_count,
                    const int32_t* k_offsets, int32_t k_count, float scale, float* scores,
                    float* ties) {
  const int64_t mq = (lq + block_m - 1) / block_m;
  const int64_t nk = (lk + block_n - 1) / block_n;
  const float ninf = -std::numeric_limits<float>::infinity();
  std::vector<float> row_max(ties != nullptr ? static_cast<size_t>(q_count) : 0);
  std::vector<float> weight(row_max.size());
  for (int64_t i = 0; i < mq; ++i) {
    float* row = scores + i * nk;
    std::fill(row, row + nk, ninf);  // max_r (a - m) first (NaN skipped), then P = sample_weight
    for (int32_t s = 0; s < q_count; ++s) {
      const float* qr = q + sampled_token(i, block_m, q_offsets[s], lq) * d;
      // Two passes over key blocks keep memory O(1): first the row max, then the weights.
      float m = ninf;
      for (int64_t j = 0; j < nk; ++j)
        m = std::max(m, block_logit(qr, k, lk, d, j, block_n, k_offsets, k_count, scale));
      for (int64_t j = 0; j < nk; ++j) {
        const float a = block_logit(qr, k, lk, d, j, block_n, k_offsets, k_count, scale);
        row[j] = std::fmax(row[j], a - m);
      }
      if (ties != nullptr) row_max[static_cast<size_t>(s)] = m;
    }
    for (int64_t j = 0; j < nk; ++j) row[j] = sample_weight(row[j]);
    if (ties != nullptr) {  // tie masses of the P == 1 blocks (the others are 0)
      float* t = ties + i * nk;
      for (int64_t j = 0; j < nk; ++j) {
        t[j] = 0.0f;
        if (row[j] != 1.0f) continue;
        for (int32_t s = 0; s < q_count; ++s) {
          const float* qr = q + sampled_token(i, block_m, q_offsets[s], lq) * d;
          const float a = block_logit(qr, k, lk, d, j, block_n, k_offsets, k_count, scale);
          weight[static_cast<size_t>(s)] = sample_weight(a - row_max[static_cast<size_t>(s)]);
        }
        t[j] = tie_mass(weight.data(), q_count, 1);
      }
    }
    double sum = 0.0;
    for (int64_t j = 0; j < nk; ++j) sum += row[j];
    if (sum > 0.0)
      for (int64_t j = 0; j < nk; ++j) row[j] = static_cast<float>(row[j] / sum);
  }
}

bool tie_mass_ranking_enabled() {
  static const bool enabled = [] {
    const char* v = std::getenv("PSA_EXPERIMENTAL_TIE_RULE");
    return v == nullptr || std::strcmp(v, "index") != 0;
  }();
  return enabled;
}

void importance_head_cpu(const float* q, int64_t lq, const float* k, int64_t lk, int64_t d,
                         int64_t block_m, int64_t block_n, float scale,
                         const ImportanceSampling& s, int32_t* shuffle, int32_t* q_off,
                         int32_t* k_off, float* scores, float* ties) {
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
                 scores, ties);
}

}  // namespace psa

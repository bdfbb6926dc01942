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

#include "attention/fp8_spec.h"
#include "importance/importance.h"
#include "importance/importance_spec.h"

namespace psa {
namespace {

// a = scale * max over the sampled keys of block j of q_r . k_c (fp32, index order), for the
// row set by row().
struct FloatLogits {
  const float *q, *k;
  int64_t lq, lk, d, block_m, block_n;
  const int32_t *q_offsets, *k_offsets;
  int32_t k_count;
  float scale;
  const float* qr = nullptr;
  void row(int64_t i, int32_t s) { qr = q + sampled_token(i, block_m, q_offsets[s], lq) * d; }
  float operator()(int64_t j) const {
    float best = -std::numeric_limits<float>::infinity();
    for (int32_t c = 0; c < k_count; ++c) {
      const float* kc = k + sampled_token(j, block_n, k_offsets[c], lk) * d;
      float dot = 0.0f;
      for (int64_t e = 0; e < d; ++e) dot += qr[e] * kc[e];
      best = std::max(best, dot);
    }
    return scale * best;
  }
};

// The 8-bit rule's logits (importance_spec.h): the row's int8 codes and its query block's
// (scale * s_q) are made by row(); each block's s_k is NaN when any of its codes is.
struct Int8Logits {
  const float* q;
  Int8Keys k;
  int64_t lq, lk, d, block_m, block_n;
  const int32_t *q_offsets, *k_offsets;
  int32_t q_count, k_count;
  float scale;
  std::vector<float> ks, q8;
  int64_t block = -1;
  Fp8Scale sc{1.0f, 1.0f};
  float c = 0.0f;
  bool bad = false;
  void init(int64_t nk) {
    ks.assign(k.k_scale, k.k_scale + nk);
    for (int64_t t = 0; t < lk * d; ++t)
      if (std::isnan(k.k8[t])) ks[static_cast<size_t>(t / d / block_n)] = std::numeric_limits<float>::quiet_NaN();
    q8.resize(static_cast<size_t>(d));
  }
  void row(int64_t i, int32_t s) {
    if (i != block) {  // s_q over the block's sampled rows
      block = i;
      float amax = 0.0f;
      for (int32_t r = 0; r < q_count; ++r) {
        const float* x = q + sampled_token(i, block_m, q_offsets[r], lq) * d;
        for (int64_t e = 0; e < d; ++e) amax = fp8_amax(amax, x[e]);
      }
      sc = fp8_scale(amax, kInt8Max);
      c = scale * sc.s;
    }
    const float* x = q + sampled_token(i, block_m, q_offsets[s], lq) * d;
    bad = false;
    for (int64_t e = 0; e < d; ++e) {
      q8[static_cast<size_t>(e)] = int8_quantize(x[e], sc.inv);
      bad = bad || std::isnan(q8[static_cast<size_t>(e)]);
    }
  }
  float operator()(int64_t j) const {
    // NaN either way; returned before a NaN code is converted to an integer
    if (bad || std::isnan(ks[static_cast<size_t>(j)])) return std::numeric_limits<float>::quiet_NaN();
    int64_t best = std::numeric_limits<int64_t>::min();
    for (int32_t cc = 0; cc < k_count; ++cc) {
      const float* kc = k.k8 + sampled_token(j, block_n, k_offsets[cc], lk) * d;
      int64_t dot = 0;
      for (int64_t e = 0; e < d; ++e)
        dot += static_cast<int64_t>(q8[static_cast<size_t>(e)]) * static_cast<int64_t>(kc[e]);
      best = std::max(best, dot);
    }
    return (c * ks[static_cast<size_t>(j)]) * static_cast<float>(best);
  }
};

// The rule of importance_spec.h on the logits of `logit` (row(i, s), then logit(j)).
template <class Logits>
void score_blocks(Logits& logit, int64_t mq, int64_t nk, int32_t q_count, float* scores, float* ties) {
  const float ninf = -std::numeric_limits<float>::infinity();
  std::vector<float> row_max(ties != nullptr ? static_cast<size_t>(q_count) : 0);
  std::vector<float> weight(row_max.size());
  for (int64_t i = 0; i < mq; ++i) {
    float* row = scores + i * nk;
    std::fill(row, row + nk, ninf);  // max_r (a - m) first (NaN skipped), then P = sample_weight
    for (int32_t s = 0; s < q_count; ++s) {
      logit.row(i, s);
      // Two passes over key blocks keep memory O(1): first the row max, then the weights.
      float m = ninf;
      for (int64_t j = 0; j < nk; ++j) m = std::max(m, logit(j));
      for (int64_t j = 0; j < nk; ++j) row[j] = std::fmax(row[j], logit(j) - m);
      if (ties != nullptr) row_max[static_cast<size_t>(s)] = m;
    }
    for (int64_t j = 0; j < nk; ++j) row[j] = sample_weight(row[j]);
    if (ties != nullptr) {  // tie masses of the P == 1 blocks (the others are 0)
      float* t = ties + i * nk;
      for (int64_t j = 0; j < nk; ++j) {
        t[j] = 0.0f;
        if (row[j] != 1.0f) continue;
        for (int32_t s = 0; s < q_count; ++s) {
          logit.row(i, s);
          weight[static_cast<size_t>(s)] = sample_weight(logit(j) - row_max[static_cast<size_t>(s)]);
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

}  // namespace

void importance_cpu(const float* q, int64_t lq, const float* k, int64_t lk, int64_t d,
                    int64_t block_m, int64_t block_n, const int32_t* q_offsets, int32_t q_count,
                    const int32_t* k_offsets, int32_t k_count, float scale, float* scores,
                    float* ties) {
  FloatLogits logit{q, k, lq, lk, d, block_m, block_n, q_offsets, k_offsets, k_count, scale};
  score_blocks(logit, (lq + block_m - 1) / block_m, (lk + block_n - 1) / block_n, q_count, scores, ties);
}

void importance_int8_cpu(const float* q, int64_t lq, const Int8Keys& k, int64_t lk, int64_t d,
                         int64_t block_m, int64_t block_n, const int32_t* q_offsets, int32_t q_count,
                         const int32_t* k_offsets, int32_t k_count, float scale, float* scores,
                         float* ties) {
  const int64_t nk = (lk + block_n - 1) / block_n;
  Int8Logits logit{q, k, lq, lk, d, block_m, block_n, q_offsets, k_offsets, q_count, k_count, scale, {}, {}};
  logit.init(nk);
  score_blocks(logit, (lq + block_m - 1) / block_m, nk, q_count, scores, ties);
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
                         int32_t* k_off, float* scores, float* ties, const Int8Keys* k8) {
  if (s.q_injected != nullptr) {
    std::copy(s.q_injected, s.q_injected + s.q_count, q_off);
    std::copy(s.k_injected, s.k_injected + s.k_count, k_off);
  } else {
    sample_offsets(s.seed, s.batch, s.head, kSampleQuery, static_cast<int32_t>(block_m), s.q_count,
                   shuffle, q_off);
    sample_offsets(s.seed, s.batch, s.head, kSampleKey, static_cast<int32_t>(block_n), s.k_count,
                   shuffle, k_off);
  }
  if (k8 != nullptr)
    importance_int8_cpu(q, lq, *k8, lk, d, block_m, block_n, q_off, s.q_count, k_off, s.k_count, scale,
                        scores, ties);
  else
    importance_cpu(q, lq, k, lk, d, block_m, block_n, q_off, s.q_count, k_off, s.k_count, scale,
                   scores, ties);
}

}  // namespace psa

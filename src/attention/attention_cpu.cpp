// attention/attention_cpu.cpp -- mixed-level sparse attention and dense attention on the
// host (CPU reference: scalar, fp32, guarded online softmax). Meaning in attention_spec.h.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "attention/attention.h"
#include "attention/attention_spec.h"
#include "pool/pool_spec.h"

namespace psa {
namespace {

// Accumulates one visible token into a row's online-softmax state.
inline void accumulate(SoftmaxState& st, float* acc, const float* vrow, float z, int64_t d) {
  if (z == neg_inf()) return;
  if (z > st.m) {
    const float alpha = rescale_factor(st.m, z);
    st.l *= alpha;
    for (int64_t c = 0; c < d; ++c) acc[c] *= alpha;
    st.m = z;
  }
  const float p = std::exp(z - st.m);
  st.l += p;
  for (int64_t c = 0; c < d; ++c) acc[c] += p * vrow[c];
}

inline void finish(const SoftmaxState& st, const float* acc, int64_t d, float* out, float* lse) {
  // l == 0 only when no token was visible; a NaN l (NaN/Inf inputs) must reach out and lse.
  const bool empty = st.l == 0.0f;
  for (int64_t c = 0; c < d; ++c) out[c] = empty ? 0.0f : acc[c] / st.l;
  if (lse) *lse = empty ? neg_inf() : st.m + std::log(st.l);
}

inline float dot(const float* a, const float* b, int64_t d) {
  float s = 0.0f;
  for (int64_t c = 0; c < d; ++c) s += a[c] * b[c];
  return s;
}

}  // namespace

void sparse_attention_cpu(const float* q, int64_t lq, const Pyramid& k, const Pyramid& v,
                          int64_t lk, int64_t d, int64_t block_m, int64_t block_n,
                          const int8_t* levels, float scale, bool causal, float* out, float* lse) {
  const int64_t nk = (lk + block_n - 1) / block_n;
  const int64_t offset = lk - lq;
  std::vector<float> acc(static_cast<size_t>(d));
  for (int64_t x = 0; x < lq; ++x) {
    const int64_t i = x / block_m;
    const float* qx = q + x * d;
    SoftmaxState st{neg_inf(), 0.0f};
    std::fill(acc.begin(), acc.end(), 0.0f);
    for (int64_t j = 0; j < nk; ++j) {
      const int level = levels[i * nk + j];
      if (level == 0) continue;
      const int li = pyramid_slot(level);
      const int64_t per_block = block_n / level;
      const float bias = level_log_bias(level);
      for (int64_t u = 0; u < per_block; ++u) {
        const int64_t t = j * per_block + u;
        if (!token_visible(x, t, level, lk, causal, offset)) continue;
        const float z = scale * dot(qx, k.level[li] + t * d, d) + bias;
        accumulate(st, acc.data(), v.level[li] + t * d, z, d);
      }
    }
    finish(st, acc.data(), d, out + x * d, lse ? lse + x : nullptr);
  }
}

void dense_attention_cpu(const float* q, int64_t lq, const float* k, const float* v, int64_t lk,
                         int64_t d, float scale, bool causal, float* out, float* lse) {
  const int64_t offset = lk - lq;
  std::vector<float> acc(static_cast<size_t>(d));
  for (int64_t x = 0; x < lq; ++x) {
    const float* qx = q + x * d;
    SoftmaxState st{neg_inf(), 0.0f};
    std::fill(acc.begin(), acc.end(), 0.0f);
    for (int64_t t = 0; t < lk; ++t) {
      if (!token_visible(x, t, 1, lk, causal, offset)) continue;
      accumulate(st, acc.data(), v + t * d, scale * dot(qx, k + t * d, d), d);
    }
    finish(st, acc.data(), d, out + x * d, lse ? lse + x : nullptr);
  }
}

}  // namespace psa

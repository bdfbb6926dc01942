// attention/attention.h -- sparse (mixed-level) and dense attention on the host (CPU
// reference: scalar, fp32 accumulation). Meaning in attention/attention_spec.h.
// One (batch, query head) at a time; no allocation.
#pragma once
#include <cstdint>

namespace psa {

// K or V of one head at every level: level[0] = full resolution [lk, d];
// level[1..3] = pooled by 2, 4, 8 ([nk*block_n/p, d], from pool_pyramid_cpu).
struct Pyramid {
  const float* level[4] = {nullptr, nullptr, nullptr, nullptr};
};

// out[x] = sum over selected tokens of softmax(scale * q_x . K_t + ln p) V_t, where key
// block j contributes its level-p tokens for p = levels[i*nk + j] (0 = skipped).
// q: [lq, d]; out: [lq, d]; lse (optional): [lq], natural log; a row with no visible token
// gets out = 0 and lse = -inf. causal: bottom-right aligned (see attention_spec.h).
void sparse_attention_cpu(const float* q, int64_t lq, const Pyramid& k, const Pyramid& v,
                          int64_t lk, int64_t d, int64_t block_m, int64_t block_n,
                          const int8_t* levels, float scale, bool causal, float* out, float* lse);

// Plain attention over all keys (same conventions).
void dense_attention_cpu(const float* q, int64_t lq, const float* k, const float* v, int64_t lk,
                         int64_t d, float scale, bool causal, float* out, float* lse);

}  // namespace psa

// attention/merge_spec.h -- the meaning of psa_merge_attention, shared by the CPU loop and
// the CUDA kernel: weights of partial results from their fp32 log-sum-exps (FlashAttention
// convention), in a fixed order of fp32 operations so both backends agree to the ulp of
// expf/logf.
#pragma once
#include <cmath>

#include "core/hd.h"

namespace psa {

// lse = m + log(sum_i exp(lse_i - m)), m = max_i lse_i; w_i = exp(lse_i - lse). Returns false
// (w untouched, *lse = -inf) when every part is -inf: the row attended to nothing.
PSA_HD bool merge_weights(int count, const float* part_lse, float* w, float* lse) {
  float m = -INFINITY;
  for (int i = 0; i < count; ++i) m = part_lse[i] > m ? part_lse[i] : m;
  if (m == -INFINITY) {
    *lse = -INFINITY;
    return false;
  }
  float s = 0.0f;
  for (int i = 0; i < count; ++i) s = s + expf(part_lse[i] - m);
  const float total = m + logf(s);
  for (int i = 0; i < count; ++i) w[i] = expf(part_lse[i] - total);
  *lse = total;
  return true;
}

}  // namespace psa

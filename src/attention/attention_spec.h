// attention/attention_spec.h -- meaning of the sparse attention stage (spec 6.2, 6.5),
// shared by both backends: the +ln(p) bias of a pooled key, causal visibility of a pooled
// token, and the guarded online-softmax update (no NaN when a tile is fully masked).
#pragma once
#include <cmath>
#include <cstdint>

#include "core/hd.h"

namespace psa {

// ln(p) for p in {1, 2, 4, 8}: a level-p token stands for p identical keys.
PSA_HD float level_log_bias(int level) {
  return level == 1 ? 0.0f : (level == 2 ? 0.69314718f : (level == 4 ? 1.38629436f : 2.07944154f));
}

// Causal visibility (bottom-right aligned, offset = lk - lq): query row x sees key t iff
// t <= x + offset. A level-p token t covers keys [t*p, (t+1)*p - 1] and is visible only
// when all of them are (spec 6.5). For level 1 also t < lk.
PSA_HD bool token_visible(int64_t x, int64_t t, int level, int64_t lk, bool causal,
                          int64_t offset) {
  if (level == 1 && t >= lk) return false;
  if (!causal) return true;
  return (t + 1) * level - 1 <= x + offset;
}

// Online softmax state of one query row.
struct SoftmaxState {
  float m;  // running max of logits (-inf until a visible token arrived)
  float l;  // running sum of exp(z - m)
};

PSA_HD float neg_inf() { return -INFINITY; }

// Rescale factor when the running max moves from m_old to m_new; 0 when nothing was seen
// before (m_old = -inf), never NaN.
PSA_HD float rescale_factor(float m_old, float m_new) {
  return m_old == neg_inf() ? 0.0f : expf(m_old - m_new);
}

}  // namespace psa

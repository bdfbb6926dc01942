// methods/causal_psa.cpp -- importance and mask stages of the causal PSA variant (spec App.
// A) on the host: antidiagonal block scores, the topk / energybound slot rule, forced text,
// diagonal and column 0, the similarity cap. Plain CPU reference; no allocation.
#include "methods/causal_psa.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/error.h"
#include "mask/mask.h"
#include "methods/builders.h"
#include "methods/causal_psa_spec.h"

namespace psa {

void causal_psa_importance_cpu(const float* q, const float* k, int64_t len, int64_t d,
                               int64_t bs, int64_t stride, int64_t chunk, float scale,
                               float* logits, float* scores) {
  const int64_t groups = causal_psa_groups(len, stride);
  const int64_t per_block = bs / stride;
  const int64_t nb = (len + bs - 1) / bs;
  const int64_t chunk_groups = std::max<int64_t>(1, chunk / stride);
  const float s = scale / static_cast<float>(stride);
  std::fill(scores, scores + nb * nb, 0.0f);
  for (int64_t c0 = 0; c0 < groups; c0 += chunk_groups) {
    const int64_t c1 = std::min(groups, c0 + chunk_groups);
    for (int64_t r = c0; r < c1; ++r) {
      float mx = -INFINITY;
      for (int64_t t = 0; t <= r; ++t) {
        logits[t] = s * causal_psa_group_dot(q, k, r, t, stride, len, d);
        mx = std::max(mx, logits[t]);
      }
      float sum = 0.0f;
      for (int64_t t = 0; t <= r; ++t) {
        logits[t] = std::exp(logits[t] - mx);
        sum += logits[t];
      }
      const float inv = 1.0f / sum;
      float* out = scores + (r / per_block) * nb;
      for (int64_t t = 0; t <= r; ++t) out[t / per_block] += logits[t] * inv;
    }
  }
}

void causal_psa_slot_levels(const float* sorted, const int32_t* order, int64_t valid,
                            psa_mask_mode mode, const double ratio_end[kNumSlots],
                            int8_t* levels) {
  if (mode == PSA_MASK_MODE_ENERGYBOUND) {
    double total = 0.0;
    for (int64_t r = 0; r < valid; ++r) total += static_cast<double>(sorted[r]);
    total = std::max(total, 1e-10);
    double cum = 0.0;
    for (int64_t r = 0; r < valid; ++r) {
      cum += static_cast<double>(sorted[r]);
      levels[order[r]] = static_cast<int8_t>(causal_psa_energy_level(cum / total, ratio_end));
    }
    return;
  }
  for (int64_t r = 0; r < valid; ++r)
    levels[order[r]] = static_cast<int8_t>(causal_psa_topk_level(r, valid, ratio_end));
}

void causal_psa_levels_cpu(const float* scores, int64_t nb, psa_mask_mode mode,
                           const double ratio_end[kNumSlots], int64_t text_block,
                           const int8_t* cap, float* row, int32_t* order, int8_t* levels) {
  for (int64_t i = 0; i < nb; ++i) {
    int8_t* out = levels + i * nb;
    std::fill(out, out + nb, int8_t{0});
    const int64_t valid = i + 1;
    for (int64_t j = 0; j < valid; ++j) order[j] = static_cast<int32_t>(j);
    const float* sc = scores + i * nb;
    // Equal scores keep the index order (stable sort).
    std::stable_sort(order, order + valid,
                     [sc](int32_t a, int32_t b) { return larger_first(sc[a], sc[b]); });
    for (int64_t r = 0; r < valid; ++r) row[r] = sc[order[r]];
    causal_psa_slot_levels(row, order, valid, mode, ratio_end, out);
    for (int64_t j = 0; j < nb; ++j)
      out[j] = static_cast<int8_t>(causal_psa_final_level(out[j], i, j, text_block, cap[j]));
  }
}

// Logits [G], scores [nb*nb], a sorted row [nb], the order [nb] (int32 in float slots),
// replicate-padded keys [nb*bs*d], the cap [nb] (int8 in float slots).
int64_t causal_psa_scratch_floats(const Plan& plan) {
  const int64_t len = plan.problem.len_k, nb = plan.k_blocks, d = plan.problem.head_dim;
  return causal_psa_groups(len, 2) + nb * nb + 2 * nb + nb * plan.block_n * d + nb;
}

psa_status build_causal_psa_levels(const Plan& plan, const float* q,
                                   const float* k, float* scratch, int8_t* levels) {
  const int64_t len = plan.problem.len_k, d = plan.problem.head_dim, nb = plan.k_blocks;
  const int64_t bs = plan.block_n;
  PSA_RETURN_IF(plan.problem.len_q != len || plan.block_m != bs || plan.q_blocks != nb,
                PSA_ERR_INVALID_SHAPE,
                "q: seq_len = %lld, k: seq_len = %lld; type psa_causal needs equal lengths and "
                "square blocks",
                static_cast<long long>(plan.problem.len_q), static_cast<long long>(len));
  float* logits = scratch;
  float* scores = logits + causal_psa_groups(len, 2);
  float* row = scores + nb * nb;
  int32_t* order = reinterpret_cast<int32_t*>(row + nb);
  float* kpad = row + 2 * nb;
  int8_t* cap = reinterpret_cast<int8_t*>(kpad + nb * bs * d);
  const RoutePlan& r = plan.route;
  causal_psa_importance_cpu(q, k, len, d, bs, r.xattn_stride, r.xattn_chunk_size,
                            plan.scale, logits, scores);
  for (int64_t t = 0; t < nb * bs; ++t)
    std::memcpy(kpad + t * d, k + std::min(t, len - 1) * d, sizeof(float) * d);
  sim_cap_row(kpad, nb, bs, d, r.sim_threshold, cap);
  causal_psa_levels_cpu(scores, nb, r.mask_row.mode, r.mask_row.ratio_end,
                        causal_psa_text_block(len, r.text_length, bs), cap, row, order,
                        levels);
  return PSA_OK;
}

}  // namespace psa

// methods/ada_bsa.cpp -- mask stage, adaptive block-sparse attention (rainfusion-adabsa spec 3,
// canonical [PROPOSAL] choices): stride-8 anti-diagonal scores, fp32 row softmax and 128x128
// block sums, per-row CDF rule with the sparsity cap. CPU reference: plain, no allocation.
#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "methods/ada_bsa_spec.h"
#include "methods/builders.h"

namespace psa {
namespace {

// Block sums Sb [nb, nb] (fp32): for every strided query group r, the row softmax of
// (scale / 8) * anti-diagonal sums over the visible strided key groups, added into the
// block pair (r / 16, c / 16). `logits` holds one strided row.
void block_scores(const float* q, const float* k, int64_t len, int64_t d, float scale,
                  bool causal, int64_t nb, float* logits, float* sb) {
  const int64_t groups = ada_bsa_groups(len);
  const float s8 = scale / static_cast<float>(kAdaStride);
  std::fill(sb, sb + nb * nb, 0.0f);
  for (int64_t r = 0; r < groups; ++r) {
    int64_t visible = 0;
    float mx = -INFINITY;
    for (int64_t c = 0; c < groups && ada_bsa_group_visible(r, c, causal); ++c, ++visible) {
      logits[c] = s8 * ada_bsa_group_dot(q, k, r, c, len, d);
      mx = std::max(mx, logits[c]);
    }
    float sum = 0.0f;
    for (int64_t c = 0; c < visible; ++c) {
      logits[c] = std::exp(logits[c] - mx);
      sum += logits[c];
    }
    const float inv = 1.0f / sum;
    float* out = sb + (r / kAdaGroupsPerBlock) * nb;
    for (int64_t c = 0; c < visible; ++c) out[c / kAdaGroupsPerBlock] += logits[c] * inv;
  }
}

}  // namespace

// One strided row of logits [ceil(L/8)], block sums [nb, nb], a row's scores and their
// sorted copy [nb] each.
int64_t ada_bsa_scratch_floats(const Plan& plan) {
  const int64_t nb = plan.k_blocks;
  return ada_bsa_groups(plan.problem.len_k) + nb * nb + 2 * nb;
}

psa_status build_ada_bsa_levels(const Plan& plan, const float* q, const float* k, float* scratch, int8_t* levels) {
  PSA_TRY(check_block_sparse_problem(plan));
  const int64_t len = plan.problem.len_k, d = plan.problem.head_dim, nb = plan.k_blocks;
  const bool causal = plan.route.causal;
  float* logits = scratch;
  float* sb = logits + ada_bsa_groups(len);
  float* x = sb + nb * nb;
  float* y = x + nb;
  block_scores(q, k, len, d, plan.scale, causal, nb, logits, sb);

  for (int64_t i = 0; i < nb; ++i) {
    int8_t* out = levels + i * nb;
    std::fill(out, out + nb, int8_t{0});
    const int64_t n = ada_bsa_candidates(i, nb, causal);
    if (ada_bsa_row_keeps_all(n, causal)) {
      std::fill(out, out + n, int8_t{1});
      continue;
    }
    for (int64_t j = 0; j < n; ++j)
      x[j] = ada_bsa_excluded(j, n, causal, plan.route.keep_sink, plan.route.keep_recent) ? 0.0f
                                                                                   : sb[i * nb + j];
    std::copy(x, x + n, y);
    std::sort(y, y + n, larger_first);
    const int64_t keep = ada_bsa_keep_count(y, n, plan.route.cdf_threshold, plan.route.sparsity);
    const float guard = y[keep - 1];
    for (int64_t j = 0; j < n; ++j)
      out[j] = ada_bsa_keep(x[j], guard, j,
                            ada_bsa_excluded(j, n, causal, plan.route.keep_sink, plan.route.keep_recent))
                   ? int8_t{1}
                   : int8_t{0};
  }
  return PSA_OK;
}

}  // namespace psa

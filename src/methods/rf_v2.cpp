// methods/rf_v2.cpp -- mask stage, RainFusion2.0 (rainfusion-adabsa spec 2.3-2.5, 2.9): fp32
// block means over 128-token tiles of the reordered sequence, top-K per row with ties kept,
// forced first-frame and text blocks. CPU reference: plain, scalar, no allocation.
#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "methods/builders.h"
#include "methods/rf_v2_spec.h"

namespace psa {
namespace {

// Mean of rows [b*128, min(b*128+128, len)) of x [len, d] in fp32, for every block b.
void block_means(const float* x, int64_t len, int64_t d, int64_t nb, float* means) {
  for (int64_t b = 0; b < nb; ++b) {
    const int64_t lo = b * kRfV2Block, hi = std::min(lo + kRfV2Block, len);
    float* m = means + b * d;
    std::fill(m, m + d, 0.0f);
    for (int64_t t = lo; t < hi; ++t)
      for (int64_t e = 0; e < d; ++e) m[e] += x[t * d + e];
    const float inv = 1.0f / static_cast<float>(hi - lo);
    for (int64_t e = 0; e < d; ++e) m[e] *= inv;
  }
}

}  // namespace

// qbar, kbar [nb, d], one row of logits [nb] and its sorted copy [nb].
int64_t rf_v2_scratch_floats(const Plan& plan) {
  const int64_t nb = plan.k_blocks;
  return 2 * nb * plan.problem.head_dim + 2 * nb;
}

psa_status build_rf_v2_levels(const Plan& plan, const float* q, const float* k, float* scratch, int8_t* levels) {
  PSA_TRY(check_block_sparse_problem(plan));
  PSA_RETURN_IF(plan.k_seq.frame_tokens <= 0 || plan.k_seq.src.empty(), PSA_ERR_INVALID_STATE,
                "type = rf_v2 needs the video grid (latent t, h, w): call "
                "psa_context_set_video_grid before planning the shape");
  const int64_t len = plan.problem.len_k, d = plan.problem.head_dim, nb = plan.k_blocks;
  float* qbar = scratch;
  float* kbar = qbar + nb * d;
  float* row = kbar + nb * d;
  float* sorted = row + nb;
  block_means(q, len, d, nb, qbar);
  block_means(k, len, d, nb, kbar);

  const int64_t keep = rf_v2_keep_count(nb, plan.route.sparsity);
  const int64_t sink = rf_v2_sink_blocks(plan.k_seq.frame_tokens, nb);
  const bool has_text = plan.text_end > plan.text_begin;
  const int64_t text_lo = has_text ? plan.text_begin / kRfV2Block : nb;
  const int64_t text_hi = has_text ? (plan.text_end + kRfV2Block - 1) / kRfV2Block : nb;

  for (int64_t i = 0; i < nb; ++i) {
    for (int64_t j = 0; j < nb; ++j) {
      float s = 0.0f;
      for (int64_t e = 0; e < d; ++e) s += qbar[i * d + e] * kbar[j * d + e];
      row[j] = plan.scale * s;
    }
    std::copy(row, row + nb, sorted);
    std::nth_element(sorted, sorted + (keep - 1), sorted + nb, larger_first);
    const float threshold = sorted[keep - 1];
    int8_t* out = levels + i * nb;
    for (int64_t j = 0; j < nb; ++j)
      out[j] = (rf_v2_keep(row[j], threshold) || rf_v2_forced(i, j, sink, text_lo, text_hi))
                   ? int8_t{1}
                   : int8_t{0};
  }
  return PSA_OK;
}

}  // namespace psa

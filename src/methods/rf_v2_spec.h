// methods/rf_v2_spec.h -- meaning of the RainFusion2.0 (`rf_v2`) mask builder
// (rainfusion-adabsa spec 2), shared by the CPU builder (rf_v2.cpp) and the CUDA kernel; its
// token order (rf_v2_newpos) lives with the other orders in rearrange/rf_v2_order_spec.h.
// Header-only: no containers, no CUDA.
#pragma once
#include <cmath>
#include <cstdint>

#include "core/hd.h"
#include "rearrange/rf_v2_order_spec.h"

namespace psa {

// rf_v2 works on 128-token tiles of the reordered sequence (spec 2.3, canonical partition).
constexpr int64_t kRfV2Block = 128;
// Key blocks every row keeps by score (spec 2.4): K = ceil(nb * (1 - sparsity)), clamped to
// [1, nb]. Computed in double exactly as the upstream Python does, so K matches it bit for
// bit, including products that land one ulp above an integer: nb = 10, sparsity = 0.7 gives
// 10 * 0.30000000000000004 -> K = 4, as upstream.
PSA_HD int64_t rf_v2_keep_count(int64_t nb, double sparsity) {
  int64_t k = static_cast<int64_t>(ceil(static_cast<double>(nb) * (1.0 - sparsity)));
  if (k < 1) k = 1;
  if (k > nb) k = nb;
  return k;
}

// Blocks forced dense by the first-frame sink (spec 2.5): F = ceil(h*w / 128), at most nb.
// The first frame occupies reordered positions [0, h*w) in both the aligned and the
// unaligned case, so the sink is a prefix of blocks.
PSA_HD int64_t rf_v2_sink_blocks(int64_t frame_tokens, int64_t nb) {
  const int64_t f = (frame_tokens + kRfV2Block - 1) / kRfV2Block;
  return f < nb ? f : nb;
}

// Whether block pair (i, j) is forced dense: a first-frame block (row or column < sink) or
// a tile holding at least one text token (row or column in [text_lo, text_hi)) -- every
// such tile, including a tile shared by the video tail and the text head (spec 2.5
// PROPOSAL). text_lo = text_hi when there is no text.
PSA_HD bool rf_v2_forced(int64_t i, int64_t j, int64_t sink, int64_t text_lo, int64_t text_hi) {
  return i < sink || j < sink || (i >= text_lo && i < text_hi) || (j >= text_lo && j < text_hi);
}

// Score selection (spec 2.4 PROPOSAL): block j of a row is kept when its fp32 logit is >=
// the row's K-th largest logit, so every tie at the threshold is kept (a row may keep more
// than K). The softmax of the upstream code is monotonic and is not evaluated.
PSA_HD bool rf_v2_keep(float logit, float threshold) { return logit >= threshold; }

}  // namespace psa

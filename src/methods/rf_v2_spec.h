// methods/rf_v2_spec.h -- meaning of the RainFusion2.0 (`rf_v2`) mask builder
// (rainfusion-adabsa spec 2), shared by the CPU builder (rf_v2.cpp), the sequence plan
// (rearrange/sequence_plan.cpp) and a later CUDA kernel. Header-only: no containers, no CUDA.
#pragma once
#include <cmath>
#include <cstdint>

#include "core/hd.h"

namespace psa {

// rf_v2 works on 128-token tiles of the reordered sequence (spec 2.3, canonical partition).
constexpr int64_t kRfV2Block = 128;
// Spatial tile edge of the token reorder (spec 2.2): 1 x 8 x 8 windows inside one frame.
constexpr int64_t kRfV2Tile = 8;

// Position, inside the reordered video part, of video token (f, y, x) of a t x h x w grid
// (spec 2.2). Frames stay outermost: newpos is in [f*h*w, (f+1)*h*w).
//  aligned (h % 8 == 0 and w % 8 == 0): every frame is cut into 8x8 tiles, tiles in
//    row-major tile order, tokens row-major inside a tile.
//  unaligned: frame 0 stays in raster order; every later frame lists its tiled core
//    [0, H8) x [0, W8) as above, then the bottom strip rows [H8, h) (full width, raster),
//    then the right strip [0, H8) x [W8, w) (raster), with H8 = 8*floor(h/8), W8 likewise.
PSA_HD int64_t rf_v2_newpos(int64_t f, int64_t y, int64_t x, int64_t h, int64_t w) {
  const int64_t hw = h * w;
  const int64_t h8 = h / kRfV2Tile * kRfV2Tile, w8 = w / kRfV2Tile * kRfV2Tile;
  const int64_t rh = h - h8, rw = w - w8, wn = w / kRfV2Tile;
  const bool aligned = rh == 0 && rw == 0;
  if (!aligned && f == 0) return y * w + x;
  int64_t p;
  if (y < h8 && x < w8) {
    p = ((y / kRfV2Tile) * wn + (x / kRfV2Tile)) * (kRfV2Tile * kRfV2Tile) +
        (y % kRfV2Tile) * kRfV2Tile + (x % kRfV2Tile);
  } else if (y >= h8) {
    p = h8 * w8 + (y - h8) * w + x;
  } else {
    p = h8 * w8 + rh * w + y * rw + (x - w8);
  }
  return f * hw + p;
}

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

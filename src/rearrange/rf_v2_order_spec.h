// rearrange/rf_v2_order_spec.h -- meaning of the RainFusion2.0 (`rf_v2`) token order
// (rainfusion-adabsa spec 2.2), read by the sequence plan (sequence_plan.cpp) and, through
// methods/rf_v2_spec.h, by the rf_v2 mask builders. Header-only: no containers, no CUDA.
#pragma once
#include <cstdint>

#include "core/hd.h"

namespace psa {

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

}  // namespace psa

// cuda/attention/row_stream.cuh -- attention stage, kernel layer: the packed key stream of one
// query block, shared by the sm80 and the Hopper kernel. The stream is the block's level-1
// work-list entries (block_n tokens each), then level 2, 4, 8 (block_n / p pooled tokens each);
// the dense path is one level-1 run of every visible key. Tiles of `kt` keys never mix levels.
#pragma once
#include <cstdint>

#include "cuda/attention/attention_params.h"

namespace psa {
namespace gpu {

// The packed key stream of one query block: tokens, tiles and work-list offsets per level,
// and the total tile count.
struct RowPlan {
  int32_t ntok[4], tiles[4], woff[4];
  int32_t total;
};

// The plan of query block x0 / bm in row `row_id`. Run by one thread.
__device__ __forceinline__ void plan_row_stream(const AttnKernelParams& p, int64_t row_id, int64_t x0, int bm, int kt,
                                                RowPlan* plan) {
  int32_t* ntok = plan->ntok;
  int32_t* tiles = plan->tiles;
  int32_t* woff = plan->woff;
  if (p.dense) {
    int64_t lim = p.len_k;
    if (p.causal) {  // keys past the block's last row are invisible to every row of it
      const int64_t offset = p.len_k - p.len_q;
      const int64_t xl = (x0 + bm < p.len_q ? x0 + bm : p.len_q) - 1;
      lim = xl + offset + 1 < lim ? xl + offset + 1 : lim;
      if (lim < 0) lim = 0;
    }
    ntok[0] = static_cast<int32_t>(lim);
    ntok[1] = ntok[2] = ntok[3] = 0;
    woff[0] = woff[1] = woff[2] = woff[3] = 0;
  } else {
    int32_t acc = 0;
    for (int li = 0; li < 4; ++li) {
      const int32_t c = p.wl_count[row_id * 4 + li];
      woff[li] = acc;
      acc += c;
      ntok[li] = c * static_cast<int32_t>(p.block_n >> li);
    }
  }
  int32_t sum = 0;
  for (int li = 0; li < 4; ++li) {
    tiles[li] = (ntok[li] + kt - 1) / kt;
    sum += tiles[li];
  }
  plan->total = sum;
}

// Level index of tile t and the stream position w0 of its first key within that level.
__device__ __forceinline__ int level_of_tile(int32_t t, const int32_t* tiles, int kt, int32_t& w0) {
  int li = 0;
  while (li < 3 && t >= tiles[li]) {
    t -= tiles[li];
    ++li;
  }
  w0 = t * kt;
  return li;
}

}  // namespace gpu
}  // namespace psa

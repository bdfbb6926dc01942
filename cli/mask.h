// cli/mask.h -- `psa mask` and `psa run --mask-png FILE`: pictures of the last forward's level
// map, drawn by the library (psa_context_write_mask_png).
#pragma once
#include <cstdint>
#include <string>

#include "psa.h"

namespace psa_cli {

struct MaskOptions {
  std::string png;  // empty: no picture
  psa_mask_view view = PSA_MASK_VIEW_BLOCKS;
  int64_t batch_index = 0;
  int64_t head = -1;         // -1: every head (blocks), head 0 (video)
  int64_t query_block = -1;  // -1: the block of `query` (or the grid's centre)
  bool query_given = false;
  int64_t query[3] = {0, 0, 0};
  int32_t cell = 0;
};

// Writes the picture `m` asks for from `ctx`'s last forward; throws Failure on a library error.
void write_mask_picture(psa_context* ctx, const MaskOptions& m);

}  // namespace psa_cli

// pool/pool_spec.h -- meaning of the K/V pyramid (spec 6.1), shared by both backends:
// level p token t of a key block is the mean of p consecutive tokens of the
// replicate-padded sequence (indices past the end read the last token).
#pragma once
#include <cstdint>

#include "core/hd.h"

namespace psa {

// Levels that have a pooled tensor: 2, 4, 8 (level 1 reads K/V directly).
constexpr int kNumPooledLevels = 3;
PSA_HD int pooled_level(int idx) { return 2 << idx; }  // 0 -> 2, 1 -> 4, 2 -> 8
PSA_HD int pooled_index(int level) { return level == 2 ? 0 : (level == 4 ? 1 : 2); }
// Slot of a level in a whole pyramid (attention.h Pyramid: 0 = full resolution, then 2, 4, 8),
// and back.
PSA_HD int pyramid_slot(int level) { return level == 1 ? 0 : pooled_index(level) + 1; }
PSA_HD int pyramid_level(int slot) { return 1 << slot; }

// Length of the level-p pooled sequence for `n_blocks` key blocks of `block_n` tokens.
PSA_HD int64_t pooled_length(int64_t n_blocks, int64_t block_n, int level) {
  return n_blocks * block_n / level;
}

// Source token of position u (0 <= u < p) of pooled token t at level p, replicate-padded.
PSA_HD int64_t pooled_source(int64_t t, int level, int u, int64_t len) {
  int64_t idx = t * level + u;
  return idx < len ? idx : len - 1;
}

}  // namespace psa

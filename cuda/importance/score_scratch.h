// cuda/importance/score_scratch.h -- importance stage, plan layer: when the GEMM-shaped score
// kernel applies and how much workspace its per-CTA scratch (block-max logits) takes. Host-only,
// no CUDA includes, so the CUDA workspace layout can size it; the kernel uses the same numbers.
#pragma once
#include <algorithm>
#include <cstdint>

namespace psa {
namespace gpu {

// Sampled query rows per CTA tile (8 warps x 32 rows). A tile holds whole query blocks, so
// q_count must divide it: the GEMM path takes power-of-two sample counts up to 128.
constexpr int64_t kScoreTileRows = 256;

inline bool score_gemm_count_ok(int64_t n) { return n >= 1 && n <= 128 && (n & (n - 1)) == 0; }

inline bool score_gemm_supported(int64_t q_count, int64_t k_count) {
  return score_gemm_count_ok(q_count) && score_gemm_count_ok(k_count);
}

// CTA tiles of the whole problem: every (b, h) has ceil(mq * q_count / 256) of them.
inline int64_t score_gemm_tiles(int64_t batch_heads, int64_t mq, int64_t q_count) {
  return batch_heads * ((mq * q_count + kScoreTileRows - 1) / kScoreTileRows);
}

// One scratch slot per resident CTA: fp32 [nk][256] block-max logits of the tile's rows.
inline uint64_t score_scratch_slot_bytes(int64_t nk) {
  return static_cast<uint64_t>(nk) * static_cast<uint64_t>(kScoreTileRows) * sizeof(float);
}

// Workspace bytes for `slots` resident CTAs (never more than there are tiles); 0 when the
// counts are not supported by the GEMM path (the entry then uses the per-block kernel).
inline uint64_t score_scratch_bytes(int64_t batch_heads, int64_t mq, int64_t nk, int64_t q_count,
                                    int64_t k_count, int64_t slots) {
  if (!score_gemm_supported(q_count, k_count) || slots < 1 || nk < 1) return 0;
  const int64_t used = std::min(slots, score_gemm_tiles(batch_heads, mq, q_count));
  return used < 1 ? 0 : static_cast<uint64_t>(used) * score_scratch_slot_bytes(nk);
}

}  // namespace gpu
}  // namespace psa

// importance/importance.h -- block-importance estimation on the host (CPU reference,
// fp32). Meaning in importance/importance_spec.h. One (batch, head) at a time.
#pragma once
#include <cstdint>

namespace psa {

// q: [lq, d], k: [lk, d] fp32 contiguous. q_offsets[0..q_count) are the sampled in-block
// offsets of every query block (< block_m), k_offsets likewise for key blocks.
// Writes scores [mq, nk] (mq = ceil(lq/block_m), nk = ceil(lk/block_n)), each row
// normalised to sum 1 over its nk entries. `scale` is the softmax scale (1/sqrt(d)).
void importance_cpu(const float* q, int64_t lq, const float* k, int64_t lk, int64_t d,
                    int64_t block_m, int64_t block_n, const int32_t* q_offsets, int32_t q_count,
                    const int32_t* k_offsets, int32_t k_count, float scale, float* scores);

}  // namespace psa

// importance/importance.h -- block-importance estimation on the host (CPU reference,
// fp32). Meaning in importance/importance_spec.h. One (batch, head) at a time.
#pragma once
#include <cstdint>

namespace psa {

// q: [lq, d], k: [lk, d] fp32 contiguous. q_offsets[0..q_count) are the sampled in-block
// offsets of every query block (< block_m), k_offsets likewise for key blocks.
// Writes scores [mq, nk] (mq = ceil(lq/block_m), nk = ceil(lk/block_n)), each row
// normalised to sum 1 over its nk entries. `scale` is the softmax scale (1/sqrt(d)).
// When `ties` is non-NULL also writes the tie masses [mq, nk] (importance_spec.h tie_mass:
// non-zero only where the unnormalised score is 1), the secondary rank criterion of the mask.
void importance_cpu(const float* q, int64_t lq, const float* k, int64_t lk, int64_t d,
                    int64_t block_m, int64_t block_n, const int32_t* q_offsets, int32_t q_count,
                    const int32_t* k_offsets, int32_t k_count, float scale, float* scores,
                    float* ties = nullptr);

// Whether a forward ranks tied key blocks by tie mass (the default) or, with the environment
// variable PSA_EXPERIMENTAL_TIE_RULE=index (read once per process; an experimental switch for
// comparisons, not part of the API), by key index alone as the reference does.
bool tie_mass_ranking_enabled();

}  // namespace psa

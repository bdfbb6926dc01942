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

// Keys of the 8-bit rule (importance_spec.h, precision fp8): K's int8 codes after the smoothing
// mean, [lk, d] (exact in float; NaN where K is not finite, fp8_quantize_kv_cpu's level 0), and
// the level-1 scale of each key block, [nk].
struct Int8Keys {
  const float* k8 = nullptr;
  const float* k_scale = nullptr;
};

// importance_cpu by the 8-bit rule: q [lq, d] as importance_cpu's (quantized here, one scale per
// query block over its sampled rows), K as `k`.
void importance_int8_cpu(const float* q, int64_t lq, const Int8Keys& k, int64_t lk, int64_t d,
                         int64_t block_m, int64_t block_n, const int32_t* q_offsets, int32_t q_count,
                         const int32_t* k_offsets, int32_t k_count, float scale, float* scores,
                         float* ties = nullptr);

// Whether a forward ranks tied key blocks by tie mass (the default) or, with the environment
// variable PSA_EXPERIMENTAL_TIE_RULE=index (read once per process; an experimental switch for
// comparisons, not part of the API), by key index alone as the reference does.
bool tie_mass_ranking_enabled();

// Where one (batch, head)'s in-block sample offsets come from: the injected offsets when
// q_injected is non-NULL (q_count / k_count each), else the seeded sampler of
// importance_spec.h at the global (batch, head).
struct ImportanceSampling {
  uint64_t seed = 0;
  int64_t batch = 0, head = 0;
  int32_t q_count = 0, k_count = 0;
  const int32_t* q_injected = nullptr;
  const int32_t* k_injected = nullptr;
};

// Importance stage of one (batch, head): draws (or copies) the sample offsets into q_off /
// k_off (`shuffle` holds max(block_m, block_n) ints), then importance_cpu into scores (and
// the tie masses into `ties` when it is non-NULL); with k8 (precision fp8),
// importance_int8_cpu on those keys instead of k.
void importance_head_cpu(const float* q, int64_t lq, const float* k, int64_t lk, int64_t d,
                         int64_t block_m, int64_t block_n, float scale,
                         const ImportanceSampling& sampling, int32_t* shuffle, int32_t* q_off,
                         int32_t* k_off, float* scores, float* ties, const Int8Keys* k8 = nullptr);

}  // namespace psa

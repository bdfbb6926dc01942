// importance/importance_spec.h -- meaning of the importance stage (spec 3), shared by the
// CPU reference and the CUDA kernels: which in-block offsets are sampled, and how sampled
// logits become a block score. Deterministic: offsets depend only on (seed, batch, head,
// which tensor), never on call order, so a forward is reproducible and graph-replayable.
#pragma once
#include <cstdint>

#include "core/hd.h"

namespace psa {

// Counter-based 64-bit mixer (splitmix64 finaliser): a pure function of its input.
PSA_HD uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Which tensor a sample stream belongs to (q and k draw independently).
enum SampleStream : uint32_t { kSampleQuery = 0, kSampleKey = 1 };

// Draws `count` distinct offsets in [0, block) for (seed, batch, head, stream) by a partial
// Fisher-Yates shuffle of 0..block-1 driven by mix64; writes them to out[0..count) in draw
// order. `scratch` holds `block` ints. Requires 1 <= count <= block <= 1024.
PSA_HD void sample_offsets(uint64_t seed, int64_t batch, int64_t head, uint32_t stream,
                           int32_t block, int32_t count, int32_t* scratch, int32_t* out) {
  for (int32_t i = 0; i < block; ++i) scratch[i] = i;
  uint64_t key = mix64(seed ^ mix64(static_cast<uint64_t>(batch) * 0x100000001b3ull +
                                    static_cast<uint64_t>(head) * 0x9e3779b1ull + stream));
  for (int32_t i = 0; i < count; ++i) {
    uint64_t r = mix64(key + static_cast<uint64_t>(i));
    int32_t j = i + static_cast<int32_t>(r % static_cast<uint64_t>(block - i));
    int32_t t = scratch[i];
    scratch[i] = scratch[j];
    scratch[j] = t;
    out[i] = scratch[i];
  }
}

// Token index of sample `t` of block `blk` (replicate padding: indices past the end
// clamp to the last token, spec 3.1).
PSA_HD int64_t sampled_token(int64_t blk, int64_t block, int32_t offset, int64_t len) {
  int64_t idx = blk * block + offset;
  return idx < len ? idx : len - 1;
}

// Block score (spec 3.4 without the 16-bit roundings): for query block i and key block j,
//   a[r, j] = scale * max_{c in samples of j} q_r . k_c
//   e[r, j] = exp(a[r, j] - max_j' a[r, j'])
//   P[i, j] = max_{r in samples of i} e[r, j],  S[i, j] = P[i, j] / sum_j P[i, j].
// The row normalisation runs over the real key blocks only (the reference also counts
// alignment-padding columns; it cancels in thresholdbound and is irrelevant to topk).

}  // namespace psa

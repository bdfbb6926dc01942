// cli/synthetic.h -- video-like synthetic q/k/v for `psa run` and `psa bench`: smooth
// fields over the (t, h, w) token grid plus a little noise, so attention is local as in
// video diffusion transformers. Deterministic for a seed on every platform (own RNG, no <random> draws).
#pragma once
#include <cstdint>

#include "host_tensor.h"

namespace psa_cli {

// Token grid of one sequence: t*h*w video tokens in raster order (t slowest, w fastest)
// and `text` tokens before (PSA_TEXT_FIRST) or after (PSA_TEXT_LAST) them.
struct VideoGrid {
  int64_t t = 0, h = 0, w = 0;
  int64_t text = 0;
  psa_text_position position = PSA_TEXT_NONE;
  int64_t video_tokens() const { return t * h * w; }
  int64_t tokens() const { return video_tokens() + text; }
};

// kExact: the reference values (psa run; tests compare them). kFast: the same fields by
// angle-addition tables and cheaper noise of the same mean and variance, for large shapes
// (psa bench); not bit-identical to kExact.
enum class SyntheticFill { kExact, kFast };

// Fills q [B, Hq, L, D], k and v [B, Hkv, L, D] (L = grid.tokens(), Hq % Hkv == 0) and
// rounds them to their dtype. Query head h shares the key field of KV head h / (Hq / Hkv).
// Heads fill in parallel on `threads` threads (0: one per hardware thread); the values do
// not depend on the thread count.
void fill_synthetic(HostTensor& q, HostTensor& k, HostTensor& v, const VideoGrid& grid,
                    uint64_t seed, SyntheticFill mode = SyntheticFill::kExact, int threads = 0);

}  // namespace psa_cli

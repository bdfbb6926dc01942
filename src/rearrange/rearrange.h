// rearrange/rearrange.h -- token rearrangement stage: meaning (curve orders, sequence
// permutations) on the host. Used by the CPU backend and to build the CUDA plan's tables.
// No CUDA, no I/O.
#pragma once
#include <cstdint>
#include <vector>

#include "config/config.h"

namespace psa {

// Video grid of one sequence: t latent frames (slowest), h rows, w columns (fastest);
// raster index r = x + w*(y + h*z). Text tokens sit before or after the video tokens.
struct VideoGeometry {
  bool set = false;
  int64_t t = 0, h = 0, w = 0;
  int64_t text_length = 0;
  psa_text_position text_position = PSA_TEXT_NONE;
  int64_t video_tokens() const { return t * h * w; }
  int64_t total_tokens() const { return t * h * w + text_length; }
};

// Generalised Hilbert ("Gilbert") curve over a W x H x D grid (W = width, fastest):
// returns F with F[i] = raster index x + W*(y + H*z) of the i-th curve point (spec 7.1,
// floor division in half()). Length W*H*D. Requires W, H, D >= 1.
std::vector<int64_t> gilbert3d_order(int64_t W, int64_t H, int64_t D);

// STA tile-major order (spec 7.3): F[i] = raster index of the i-th token in tile-major
// order. Requires D % tT == H % tH == W % tW == 0 (checked by the caller).
std::vector<int64_t> sta_order(int64_t W, int64_t H, int64_t D, int64_t tT, int64_t tH,
                               int64_t tW);

// Rearrange stage on the host (rearrange_cpu.cpp): head (b, h) of a strided [B, H, L, D]
// tensor `base` into dense fp32 dst [len, d], row i <- caller row src[i] (identity when src is
// empty). The inverse stage writes `out` [len, d] back to caller rows src[i] and, when lse_bh
// is non-NULL, lse[i] to lse_bh[src[i]].
void rearrange_head_cpu(const void* base, psa_dtype dtype, const int64_t* stride, int64_t b,
                        int64_t h, int64_t len, int64_t d, const std::vector<int64_t>& src,
                        float* dst);
void inverse_rearrange_head_cpu(void* base, psa_dtype dtype, const int64_t* stride, int64_t b,
                                int64_t h, int64_t len, int64_t d,
                                const std::vector<int64_t>& src, const float* out,
                                const float* lse, float* lse_bh);

// Sequence permutation used by one forward: src[i] = index, in the caller's sequence, of
// the token at position i of the rearranged sequence (so x_r[i] = x[src[i]] and
// out[src[i]] = out_r[i]). Also reports the text span [text_begin, text_end) in the
// rearranged sequence (empty when there is no text).
struct SequencePlan {
  std::vector<int64_t> src;  // empty = identity (no rearrangement)
  int64_t length = 0;
  int64_t text_begin = 0, text_end = 0;
  int64_t frame_tokens = 0;  // h*w of the video grid (rf_v2's first-frame sink); 0 = no grid
};

// Longest sequence whose token order is built on the host: 2^31 - 1 tokens (a 16 GiB order;
// the CUDA kernels address rows with 32-bit coordinates). Longer sequences are refused before
// anything is allocated, so a hostile grid cannot make the library touch terabytes.
constexpr int64_t kMaxOrderTokens = (int64_t{1} << 31) - 1;

// Builds the plan for a sequence of `seq_len` tokens under `config` and `geometry`.
//  - geometry not set: identity, no text.
//  - geometry set, use_rearrange false: identity; text span where the caller put it.
//  - Gilbert: [video in curve order, text] (text moves to the end).
//  - STA: text stays where it is, video in tile-major order.
//  - method rf_v2 (whatever use_rearrange says): [video in rf_v2 8x8-tile order, text]
//    (methods/rf_v2_spec.h). Method ada_bsa: identity, text span where the caller put it.
//  - SemanticAware / Hybrid: PSA_ERR_UNSUPPORTED.
// Errors: seq_len != geometry.total_tokens() (PSA_ERR_INVALID_SHAPE, message names both),
// a permutation (with_src) of more than kMaxOrderTokens tokens (PSA_ERR_INVALID_SHAPE),
// STA grid not divisible by the tile (PSA_ERR_INVALID_CONFIG). with_src false: the same checks
// and text span, src left empty (no memory in the sequence length: a caller that wants only
// the span, e.g. psa_context_sequence_order without an order buffer).
psa_status build_sequence_plan(const Config& config, const VideoGeometry& geometry,
                               int64_t seq_len, SequencePlan* plan, bool with_src = true);

}  // namespace psa

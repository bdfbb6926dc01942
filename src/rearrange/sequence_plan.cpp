// rearrange/sequence_plan.cpp -- rearrange stage, host planning: config + video geometry ->
// sequence permutation and text span of one forward (spec 7.2, 7.3, 8.2; rf_v2 order:
// rainfusion-adabsa 2.2). Once per shape; no CUDA, no I/O; leaves *plan untouched on error.
#include <cinttypes>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

#include "core/error.h"
#include "rearrange/rf_v2_order_spec.h"
#include "rearrange/rearrange.h"

namespace psa {
namespace {

const char* rearrange_name(psa_rearrange m) {
  switch (m) {
    case PSA_REARRANGE_GILBERT: return "Gilbert";
    case PSA_REARRANGE_STA: return "STA";
    case PSA_REARRANGE_SEMANTIC_AWARE: return "SemanticAware";
    case PSA_REARRANGE_HYBRID: return "Hybrid";
  }
  return "unknown";
}

psa_status check_geometry(const VideoGeometry& g) {
  PSA_RETURN_IF(g.t < 1 || g.h < 1 || g.w < 1, PSA_ERR_INVALID_ARGUMENT,
                "video grid t*h*w = %" PRId64 "*%" PRId64 "*%" PRId64
                ": every extent must be >= 1",
                g.t, g.h, g.w);
  PSA_RETURN_IF(g.text_length < 0, PSA_ERR_INVALID_ARGUMENT,
                "text_length = %" PRId64 ": expected >= 0", g.text_length);
  PSA_RETURN_IF(g.text_position != PSA_TEXT_NONE && g.text_position != PSA_TEXT_FIRST &&
                    g.text_position != PSA_TEXT_LAST,
                PSA_ERR_INVALID_ARGUMENT,
                "text_position = %d: expected %d (none), %d (first) or %d (last)",
                static_cast<int>(g.text_position), PSA_TEXT_NONE, PSA_TEXT_FIRST, PSA_TEXT_LAST);
  PSA_RETURN_IF(g.text_length > 0 && g.text_position == PSA_TEXT_NONE, PSA_ERR_INVALID_ARGUMENT,
                "text_length = %" PRId64 " with text_position = PSA_TEXT_NONE: text tokens need "
                "PSA_TEXT_FIRST or PSA_TEXT_LAST",
                g.text_length);
  // total_tokens() must not overflow: the permutation is indexed with int64_t.
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  PSA_RETURN_IF(g.t > kMax / g.h || g.t * g.h > kMax / g.w ||
                    g.t * g.h * g.w > kMax - g.text_length,
                PSA_ERR_INVALID_SHAPE,
                "video grid t*h*w + text_length = %" PRId64 "*%" PRId64 "*%" PRId64 " + %" PRId64
                " overflows int64",
                g.t, g.h, g.w, g.text_length);
  return PSA_OK;
}

// rf_v2 order (rainfusion-adabsa spec 2.2): [video in 8x8-tile order per frame, text in the
// caller's order], whatever the caller's text position. src[newpos(f, y, x)] = raster index.
void build_rf_v2_src(const VideoGeometry& g, int64_t caller_video, int64_t caller_text,
                     SequencePlan* out) {
  const int64_t N = g.video_tokens(), T = g.text_length;
  out->src.resize(static_cast<size_t>(N + T));
  int64_t r = 0;
  for (int64_t f = 0; f < g.t; ++f)
    for (int64_t y = 0; y < g.h; ++y)
      for (int64_t x = 0; x < g.w; ++x, ++r)
        out->src[static_cast<size_t>(rf_v2_newpos(f, y, x, g.h, g.w))] = caller_video + r;
  for (int64_t j = 0; j < T; ++j) out->src[static_cast<size_t>(N + j)] = caller_text + j;
}

}  // namespace

psa_status build_sequence_plan(const Config& config, const VideoGeometry& geometry,
                               int64_t seq_len, SequencePlan* plan, bool with_src) {
  PSA_RETURN_IF(plan == nullptr, PSA_ERR_NULL_POINTER, "plan is NULL");
  PSA_RETURN_IF(seq_len < 0, PSA_ERR_INVALID_SHAPE, "seq_len = %" PRId64 ": expected >= 0",
                seq_len);

  SequencePlan out;
  out.length = seq_len;
  if (!geometry.set) {
    *plan = std::move(out);
    return PSA_OK;
  }

  PSA_TRY(check_geometry(geometry));
  const int64_t N = geometry.video_tokens();
  const int64_t T = geometry.text_length;
  PSA_RETURN_IF(seq_len != N + T, PSA_ERR_INVALID_SHAPE,
                "seq_len = %" PRId64 ": expected t*h*w + text_length = %" PRId64 "*%" PRId64
                "*%" PRId64 " + %" PRId64 " = %" PRId64,
                seq_len, geometry.t, geometry.h, geometry.w, T, N + T);

  PSA_RETURN_IF(with_src && seq_len > kMaxOrderTokens, PSA_ERR_INVALID_SHAPE,
                "seq_len = %" PRId64 " (video grid %" PRId64 "*%" PRId64 "*%" PRId64 " + %" PRId64
                " text tokens): token orders of more than 2^31 - 1 tokens are not supported",
                seq_len, geometry.t, geometry.h, geometry.w, T);

  // Where text and video sit in the caller's sequence. Without text the span is [0, 0).
  const bool text_first = geometry.text_position == PSA_TEXT_FIRST;
  const int64_t caller_video = text_first ? T : 0;
  const int64_t caller_text = (text_first || T == 0) ? 0 : N;

  out.text_begin = caller_text;
  out.text_end = caller_text + T;
  out.frame_tokens = geometry.h * geometry.w;
  // The block-sparse methods fix their own token order; use_rearrange does not apply.
  if (config.method == PSA_METHOD_RF_V2) {
    if (with_src) build_rf_v2_src(geometry, caller_video, caller_text, &out);
    out.text_begin = T > 0 ? N : 0;  // text last
    out.text_end = T > 0 ? N + T : 0;
    *plan = std::move(out);
    return PSA_OK;
  }
  if (!config.use_rearrange || route_of(config.method) == Route::kBlockMethod) {
    *plan = std::move(out);
    return PSA_OK;
  }

  const psa_rearrange method = config.rearrange_method;
  switch (method) {
    case PSA_REARRANGE_GILBERT: {
      // [video in curve order, text]: text moves to the end whatever its caller position, the
      // layout the reference's old-format text rule assumes (spec 4.7, 7.2).
      if (with_src) {
        const std::vector<int64_t> f = gilbert3d_order(geometry.w, geometry.h, geometry.t);
        out.src.resize(static_cast<size_t>(N + T));
        for (int64_t i = 0; i < N; ++i) {
          out.src[static_cast<size_t>(i)] = caller_video + f[static_cast<size_t>(i)];
        }
        for (int64_t j = 0; j < T; ++j) out.src[static_cast<size_t>(N + j)] = caller_text + j;
      }
      out.text_begin = T > 0 ? N : 0;
      out.text_end = T > 0 ? N + T : 0;
      break;
    }
    case PSA_REARRANGE_STA: {
      const int64_t tT = config.sta_tile[0], tH = config.sta_tile[1], tW = config.sta_tile[2];
      PSA_RETURN_IF(tT < 1 || tH < 1 || tW < 1, PSA_ERR_INVALID_CONFIG,
                    "sta_tile (t, h, w) = [%" PRId64 ", %" PRId64 ", %" PRId64
                    "]: every entry must be >= 1",
                    tT, tH, tW);
      // The reference asserts here; e.g. CogVideoX's 13 frames with the YAML tile [2, 8, 8].
      PSA_RETURN_IF(geometry.t % tT != 0 || geometry.h % tH != 0 || geometry.w % tW != 0,
                    PSA_ERR_INVALID_CONFIG,
                    "sta_tile (t, h, w) = [%" PRId64 ", %" PRId64 ", %" PRId64
                    "] does not divide the video grid t*h*w = %" PRId64 "*%" PRId64 "*%" PRId64
                    " (remainders %" PRId64 ", %" PRId64 ", %" PRId64 ")",
                    tT, tH, tW, geometry.t, geometry.h, geometry.w, geometry.t % tT,
                    geometry.h % tH, geometry.w % tW);
      // Text stays where the caller put it; only the video part is tiled.
      if (!with_src) break;
      const std::vector<int64_t> f = sta_order(geometry.w, geometry.h, geometry.t, tT, tH, tW);
      out.src.resize(static_cast<size_t>(N + T));
      for (int64_t j = 0; j < T; ++j) {
        out.src[static_cast<size_t>(caller_text + j)] = caller_text + j;
      }
      for (int64_t i = 0; i < N; ++i) {
        out.src[static_cast<size_t>(caller_video + i)] = caller_video + f[static_cast<size_t>(i)];
      }
      break;
    }
    case PSA_REARRANGE_SEMANTIC_AWARE:
    case PSA_REARRANGE_HYBRID:
      return set_error(PSA_ERR_UNSUPPORTED,
                       "rearrange_method = %s: not supported (its k-means clustering is not "
                       "implemented); supported: Gilbert, STA",
                       rearrange_name(method));
    default:
      return set_error(PSA_ERR_INVALID_CONFIG,
                       "rearrange_method = %d: expected %d (Gilbert), %d (STA), %d (SemanticAware) "
                       "or %d (Hybrid)",
                       static_cast<int>(method), PSA_REARRANGE_GILBERT, PSA_REARRANGE_STA,
                       PSA_REARRANGE_SEMANTIC_AWARE, PSA_REARRANGE_HYBRID);
  }
  *plan = std::move(out);
  return PSA_OK;
}

}  // namespace psa

// api/diagnostics_api.cpp -- extern "C" entry points that show a forward's decision: the
// level map, the token order of the blocks and the mask pictures (picture/).
#include <algorithm>
#include <string>
#include <vector>

#include "api/guard.h"
#include "backend/backend.h"
#include "context/context.h"
#include "picture/mask_picture.h"

namespace {

psa_status check_last_forward(const psa_context* ctx) {
  PSA_RETURN_IF(ctx == nullptr, PSA_ERR_NULL_POINTER, "context: must not be NULL");
  PSA_RETURN_IF(!ctx->has_stats || ctx->last_plan == nullptr, PSA_ERR_INVALID_STATE,
                "context: no forward has run yet, so there is no level map");
  return PSA_OK;
}

int64_t map_elements(const psa::Plan& p) {
  return p.problem.batch * p.problem.heads_q * p.q_blocks * p.k_blocks;
}

// PSA_ERR_OUT_OF_MEMORY, naming the bound, when the level map is larger than a plan keeps
// (then there is nothing to read, and nothing is allocated to read it into).
psa_status check_map_kept(const psa::Plan& p) {
  const uint64_t bytes = static_cast<uint64_t>(map_elements(p));
  PSA_RETURN_IF(bytes > psa::kMaxKeptLevelMapBytes, PSA_ERR_OUT_OF_MEMORY,
                "the level map [%lld, %lld, %lld, %lld] has %llu bytes; a plan keeps at most "
                "%llu", static_cast<long long>(p.problem.batch),
                static_cast<long long>(p.problem.heads_q), static_cast<long long>(p.q_blocks),
                static_cast<long long>(p.k_blocks), static_cast<unsigned long long>(bytes),
                static_cast<unsigned long long>(psa::kMaxKeptLevelMapBytes));
  return PSA_OK;
}

// The whole level map of the last forward into `dst` (host, map_elements bytes).
psa_status read_map(psa_context* ctx, int8_t* dst) {
  const psa::Plan& plan = *ctx->last_plan;
  if (ctx->last_dense) {
    std::fill(dst, dst + map_elements(plan), int8_t{1});
    return PSA_OK;
  }
  return ctx->backend->read_levels(plan, dst);
}

const psa::SequencePlan& sequence_of(const psa::Plan& p, int32_t sequence) {
  return sequence == 0 ? p.q_seq : p.k_seq;
}

// Text span of a rearranged sequence: the key plan carries it; a query sequence of the same
// length shares the key's plan (psa::make_plan), any other query sequence has no text.
void text_span(const psa::Plan& p, int32_t sequence, int64_t* begin, int64_t* end) {
  const psa::SequencePlan& s = sequence_of(p, sequence);
  *begin = s.text_begin;
  *end = s.text_end;
}

// The picture arguments both writers take: head -1 (all) or one of `heads`, cell 0 (auto)
// or 1..64 pixels per block.
psa_status check_head_and_cell(int64_t head, int64_t heads, int32_t cell) {
  PSA_RETURN_IF(head < -1 || head >= heads, PSA_ERR_INVALID_ARGUMENT,
                "head = %lld; allowed -1 (all heads) or [0, %lld)", static_cast<long long>(head),
                static_cast<long long>(heads));
  PSA_RETURN_IF(cell < 0 || cell > 64, PSA_ERR_INVALID_ARGUMENT,
                "cell = %d; allowed [1, 64], or 0 for automatic", cell);
  return PSA_OK;
}

}  // namespace

extern "C" {

PSA_API psa_status psa_context_level_map_shape(const psa_context* context, int64_t* batch,
                                               int64_t* heads, int64_t* q_blocks,
                                               int64_t* k_blocks) {
  PSA_API_BEGIN
  PSA_TRY(check_last_forward(context));
  const psa::Plan& p = *context->last_plan;
  if (batch) *batch = p.problem.batch;
  if (heads) *heads = p.problem.heads_q;
  if (q_blocks) *q_blocks = p.q_blocks;
  if (k_blocks) *k_blocks = p.k_blocks;
  return PSA_OK;
  PSA_API_END
}

PSA_API psa_status psa_context_get_level_map(psa_context* context, int8_t* levels,
                                             uint64_t capacity) {
  PSA_API_BEGIN
  PSA_TRY(check_last_forward(context));
  PSA_RETURN_IF(levels == nullptr, PSA_ERR_NULL_POINTER, "levels: must not be NULL");
  const uint64_t need = static_cast<uint64_t>(map_elements(*context->last_plan));
  PSA_RETURN_IF(capacity < need, PSA_ERR_BUFFER_TOO_SMALL,
                "capacity = %llu bytes; the level map [%lld, %lld, %lld, %lld] needs %llu",
                static_cast<unsigned long long>(capacity),
                static_cast<long long>(context->last_plan->problem.batch),
                static_cast<long long>(context->last_plan->problem.heads_q),
                static_cast<long long>(context->last_plan->q_blocks),
                static_cast<long long>(context->last_plan->k_blocks),
                static_cast<unsigned long long>(need));
  PSA_TRY(check_map_kept(*context->last_plan));
  // Read into a temporary first: a failing call leaves `levels` unchanged.
  std::vector<int8_t> map(static_cast<size_t>(need));
  PSA_TRY(read_map(context, map.data()));
  std::copy(map.begin(), map.end(), levels);
  return PSA_OK;
  PSA_API_END
}

PSA_API psa_status psa_context_get_token_order(const psa_context* context, int32_t sequence,
                                               int64_t* order, int64_t capacity,
                                               int64_t* length, int64_t* text_begin,
                                               int64_t* text_end) {
  PSA_API_BEGIN
  PSA_TRY(check_last_forward(context));
  PSA_RETURN_IF(sequence != 0 && sequence != 1, PSA_ERR_INVALID_ARGUMENT,
                "sequence = %d; allowed: 0 (queries), 1 (keys)", sequence);
  const psa::Plan& p = *context->last_plan;
  const psa::SequencePlan& s = sequence_of(p, sequence);
  const int64_t len = sequence == 0 ? p.problem.len_q : p.problem.len_k;
  if (order != nullptr) {
    PSA_RETURN_IF(capacity < len, PSA_ERR_BUFFER_TOO_SMALL,
                  "capacity = %lld; the %s sequence has %lld tokens", static_cast<long long>(capacity),
                  sequence == 0 ? "query" : "key", static_cast<long long>(len));
    for (int64_t i = 0; i < len; ++i) order[i] = s.src.empty() ? i : s.src[static_cast<size_t>(i)];
  }
  int64_t b = 0, e = 0;
  text_span(p, sequence, &b, &e);
  if (length) *length = len;
  if (text_begin) *text_begin = b;
  if (text_end) *text_end = e;
  return PSA_OK;
  PSA_API_END
}

PSA_API psa_status psa_context_write_mask_png(psa_context* context, const char* path,
                                              psa_mask_view view, int64_t batch, int64_t head,
                                              int64_t query_block,
                                              const int64_t* query_position, int32_t cell) {
  PSA_API_BEGIN
  PSA_TRY(check_last_forward(context));
  PSA_RETURN_IF(path == nullptr, PSA_ERR_NULL_POINTER, "path: must not be NULL");
  PSA_RETURN_IF(view != PSA_MASK_VIEW_BLOCKS && view != PSA_MASK_VIEW_VIDEO, PSA_ERR_INVALID_ARGUMENT,
                "view = %d; allowed: PSA_MASK_VIEW_BLOCKS (0), PSA_MASK_VIEW_VIDEO (1)",
                static_cast<int>(view));
  const psa::Plan& p = *context->last_plan;
  const int64_t B = p.problem.batch, H = p.problem.heads_q, mq = p.q_blocks, nk = p.k_blocks;
  PSA_RETURN_IF(batch < 0 || batch >= B, PSA_ERR_INVALID_ARGUMENT,
                "batch = %lld; the last forward has batch %lld", static_cast<long long>(batch),
                static_cast<long long>(B));
  PSA_TRY(check_head_and_cell(head, H, cell));
  const psa::VideoGeometry& g = context->geometry;
  const psa::SequencePlan& qs = p.q_seq;
  if (view == PSA_MASK_VIEW_VIDEO) {
    PSA_RETURN_IF(head < 0, PSA_ERR_INVALID_ARGUMENT, "head = -1: the video view shows one head");
    PSA_RETURN_IF(!g.set, PSA_ERR_INVALID_STATE,
                  "view = PSA_MASK_VIEW_VIDEO needs the video grid: call psa_context_set_video_grid");
    PSA_RETURN_IF(p.geometry_version != context->geometry_version, PSA_ERR_INVALID_STATE,
                  "the video grid changed after the last forward; run a forward first");
    PSA_RETURN_IF(p.problem.len_q != g.total_tokens() || p.problem.len_k != g.total_tokens(),
                  PSA_ERR_INVALID_STATE,
                  "view = PSA_MASK_VIEW_VIDEO: q and k must both follow the video grid (%lld tokens); "
                  "the last forward had %lld and %lld",
                  static_cast<long long>(g.total_tokens()), static_cast<long long>(p.problem.len_q),
                  static_cast<long long>(p.problem.len_k));
    if (query_block < 0) {
      PSA_RETURN_IF(query_block != -1, PSA_ERR_INVALID_ARGUMENT,
                    "query_block = %lld; allowed -1 or [0, %lld)", static_cast<long long>(query_block),
                    static_cast<long long>(mq));
      int64_t pos[3] = {g.t / 2, g.h / 2, g.w / 2};
      if (query_position != nullptr) std::copy(query_position, query_position + 3, pos);
      PSA_RETURN_IF(pos[0] < 0 || pos[0] >= g.t || pos[1] < 0 || pos[1] >= g.h || pos[2] < 0 || pos[2] >= g.w,
                    PSA_ERR_INVALID_ARGUMENT,
                    "query_position = {%lld, %lld, %lld}; outside the video grid %lldx%lldx%lld",
                    static_cast<long long>(pos[0]), static_cast<long long>(pos[1]),
                    static_cast<long long>(pos[2]), static_cast<long long>(g.t),
                    static_cast<long long>(g.h), static_cast<long long>(g.w));
      int64_t token = (pos[0] * g.h + pos[1]) * g.w + pos[2];
      if (g.text_position == PSA_TEXT_FIRST) token += g.text_length;
      int64_t at = token;
      if (!qs.src.empty()) at = std::find(qs.src.begin(), qs.src.end(), token) - qs.src.begin();
      query_block = at / p.block_m;
    }
    PSA_RETURN_IF(query_block >= mq, PSA_ERR_INVALID_ARGUMENT,
                  "query_block = %lld; the last forward has %lld query blocks",
                  static_cast<long long>(query_block), static_cast<long long>(mq));
  }
  PSA_TRY(check_map_kept(p));
  std::vector<int8_t> map(static_cast<size_t>(map_elements(p)));
  PSA_TRY(read_map(context, map.data()));
  const int8_t* item = map.data() + batch * H * mq * nk;
  if (view == PSA_MASK_VIEW_BLOCKS) {
    const psa::BlocksPicture pic = psa::render_blocks(item, H, mq, nk, head, cell);
    PSA_TRY(psa::check_picture(pic.image, cell));
    return psa::write_png(pic.image, path);
  }
  psa::VideoPictureInput in;
  in.row = item + (head * mq + query_block) * nk;
  in.nk = nk;
  in.block_m = p.block_m;
  in.block_n = p.block_n;
  in.query_block = query_block;
  in.head = head;
  in.batch = batch;
  // A dense forward does not rearrange: its blocks hold the caller's order.
  static const std::vector<int64_t> identity;
  in.q_order = context->last_dense ? &identity : &qs.src;
  in.k_order = context->last_dense ? &identity : &p.k_seq.src;
  in.len_q = p.problem.len_q;
  in.len_k = p.problem.len_k;
  in.grid = g;
  const psa::VideoPicture pic = psa::render_video(in, cell);
  PSA_TRY(psa::check_picture(pic.image, cell));
  return psa::write_png(pic.image, path);
  PSA_API_END
}

PSA_API psa_status psa_mask_write_png(const char* path, const int8_t* levels, int64_t heads,
                                      int64_t q_blocks, int64_t k_blocks, int64_t head,
                                      int32_t cell) {
  PSA_API_BEGIN
  PSA_RETURN_IF(path == nullptr, PSA_ERR_NULL_POINTER, "path: must not be NULL");
  PSA_RETURN_IF(levels == nullptr, PSA_ERR_NULL_POINTER, "levels: must not be NULL");
  PSA_RETURN_IF(heads < 1 || q_blocks < 1 || k_blocks < 1 || heads > (int64_t{1} << 20) ||
                    q_blocks > (int64_t{1} << 24) || k_blocks > (int64_t{1} << 24),
                PSA_ERR_INVALID_ARGUMENT,
                "heads, q_blocks, k_blocks = %lld, %lld, %lld; each must be >= 1 (heads <= 2^20, "
                "blocks <= 2^24)",
                static_cast<long long>(heads), static_cast<long long>(q_blocks),
                static_cast<long long>(k_blocks));
  // The map is read whole (each head's fractions): at most as large as a map a context keeps.
  const int64_t per_head = q_blocks * k_blocks;  // <= 2^48
  PSA_RETURN_IF(per_head > static_cast<int64_t>(psa::kMaxKeptLevelMapBytes) / heads,
                PSA_ERR_INVALID_ARGUMENT,
                "heads * q_blocks * k_blocks = %lld * %lld * %lld entries; at most %llu (1 GiB)",
                static_cast<long long>(heads), static_cast<long long>(q_blocks),
                static_cast<long long>(k_blocks),
                static_cast<unsigned long long>(psa::kMaxKeptLevelMapBytes));
  PSA_TRY(check_head_and_cell(head, heads, cell));
  const psa::BlocksPicture pic = psa::render_blocks(levels, heads, q_blocks, k_blocks, head, cell);
  PSA_TRY(psa::check_picture(pic.image, cell));
  return psa::write_png(pic.image, path);
  PSA_API_END
}

}  // extern "C"

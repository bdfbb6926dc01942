// picture/mask_picture.h -- the pictures of a level map (psa_context_write_mask_png,
// psa_mask_write_png): the blocks view (query blocks x key blocks per head) and the video
// view (one query block's key levels painted on the latent frames). Pure functions of their
// inputs, host-only; the layout constants are here so that tests can find cells.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "picture/image.h"
#include "rearrange/rearrange.h"

namespace psa {

// Colours of the levels (documented in psa.h).
Rgb level_colour(int level);
constexpr Rgb kBlack{0, 0, 0};
constexpr Rgb kWhite{255, 255, 255};

// Layout, in pixels.
constexpr int64_t kMargin = 8;         // around everything
constexpr int64_t kLineHeight = 12;    // one line of text (7 px glyphs + 5 px gap)
constexpr int64_t kPanelGap = 16;      // between panels / frames
constexpr int64_t kMaxBlocksShown = 1024;  // larger maps are downsampled (blocks view)
// Pictures above this many pixels are not drawn: render_* return an image with its size
// and no pixels, and check_picture names the size (instead of asking for any allocation).
constexpr int64_t kMaxPicturePixels = int64_t{1} << 28;

// Where one panel (head) of a blocks picture lies.
struct PanelPlace {
  int64_t head = 0;
  int64_t x = 0, y = 0;  // top-left pixel of the cell area (query block 0, key block 0)
};
struct BlocksPicture {
  Image image;
  int64_t cell = 1;    // pixels per shown cell
  int64_t stride = 1;  // blocks per shown cell (downsampling of maps over kMaxBlocksShown)
  std::vector<PanelPlace> panels;
};

// Blocks view of one batch item: `levels` is [heads, mq, nk]; `head` = -1 draws every head.
// `cell` = 0 picks min(16, max(1, 256 / max(mq, nk))). Validated by the caller.
BlocksPicture render_blocks(const int8_t* levels, int64_t heads, int64_t mq, int64_t nk,
                            int64_t head, int64_t cell);

// Inputs of the video view for one (batch, head, query block).
struct VideoPictureInput {
  const int8_t* row = nullptr;  // levels of the query block: [nk]
  int64_t nk = 0, block_m = 0, block_n = 0;
  int64_t query_block = 0, head = 0, batch = 0;
  const std::vector<int64_t>* q_order = nullptr;  // rearranged position -> caller token; empty = identity
  const std::vector<int64_t>* k_order = nullptr;
  int64_t len_q = 0, len_k = 0;
  VideoGeometry grid;
};
struct VideoPicture {
  Image image;
  int64_t cell = 1;
  std::vector<int64_t> frame_x, frame_y;  // top-left pixel of each frame's token (0, 0)
  int64_t text_x = 0, text_y = 0, text_per_row = 0;  // text strip (when there is text)
};
// `cell` = 0 picks min(16, max(2, 256 / max(h, w))). Requires len_k == len_q == the grid's
// total tokens (checked by the caller).
VideoPicture render_video(const VideoPictureInput& in, int64_t cell);

// Caller token index -> its video coordinates; false for a text token.
// PSA_ERR_INVALID_ARGUMENT naming `cell` and the size when render_* declined to draw.
psa_status check_picture(const Image& img, int64_t cell);

bool token_to_video(const VideoGeometry& g, int64_t token, int64_t* t, int64_t* y, int64_t* x);

}  // namespace psa

// picture/mask_picture.cpp -- drawing of the blocks and video views of a level map.
#include "picture/mask_picture.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "core/error.h"
#include "mask/mask_spec.h"

namespace psa {
namespace {

int level_slot(int level) { return slot_of_level(level); }

std::string percent(int64_t count, int64_t total) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f%%", total > 0 ? 100.0 * static_cast<double>(count) / total : 0.0);
  return buf;
}

// Counts per slot (L1, L2, L4, L8, skip) of n levels.
void count(const int8_t* levels, int64_t n, int64_t c[5]) {
  for (int64_t e = 0; e < n; ++e) {
    const int s = level_slot(levels[e]);
    if (s >= 0) ++c[s];
  }
}

// "1:19.8% 2:3.6% 4:4.0% 8:7.1% 0:65.6%"
std::string fractions(const int64_t c[5], int64_t total) {
  static const char* names[5] = {"1:", "2:", "4:", "8:", "0:"};
  std::string s;
  for (int i = 0; i < 5; ++i) s += std::string(i ? "  " : "") + names[i] + percent(c[i], total);
  return s;
}

// The legend: a swatch and a label per level, with the fractions when `c` is given.
// Returns its width.
int64_t draw_legend(Image* img, int64_t x, int64_t y, const int64_t* c, int64_t total) {
  static const int levels[5] = {1, 2, 4, 8, 0};
  static const char* labels[5] = {"LEVEL 1", "2", "4", "8", "SKIP"};
  int64_t at = x;
  for (int i = 0; i < 5; ++i) {
    if (img) {
      img->fill(at, y, 7, 7, level_colour(levels[i]));
      img->frame(at, y, 7, 7, kBlack);
    }
    at += 11;
    std::string label = labels[i];
    if (c) label += " " + percent(c[i], total);
    if (img) draw_text(img, at, y, label, kBlack);
    at += text_width(label) + 14;
  }
  return at - x - 14;
}

bool too_large(int64_t width, int64_t height) {
  return width > kMaxPicturePixels || height > kMaxPicturePixels / std::max<int64_t>(width, 1);
}

}  // namespace

psa_status check_picture(const Image& img, int64_t cell) {
  PSA_RETURN_IF(img.rgb.empty(), PSA_ERR_INVALID_ARGUMENT,
                "cell = %lld: the picture would be %lld x %lld pixels, above the %lld a "
                "picture may have; pass a smaller cell (0 = automatic) or one head",
                static_cast<long long>(cell), static_cast<long long>(img.width),
                static_cast<long long>(img.height), static_cast<long long>(kMaxPicturePixels));
  return PSA_OK;
}

Rgb level_colour(int level) {
  switch (level) {
    case 1: return {200, 30, 30};
    case 2: return {240, 140, 40};
    case 4: return {240, 220, 60};
    case 8: return {110, 170, 230};
    case 0: return {225, 225, 225};
    default: return {255, 0, 255};
  }
}

BlocksPicture render_blocks(const int8_t* levels, int64_t heads, int64_t mq, int64_t nk,
                            int64_t head, int64_t cell) {
  BlocksPicture pic;
  const int64_t longest = std::max(mq, nk);
  pic.stride = longest > kMaxBlocksShown ? (longest + kMaxBlocksShown - 1) / kMaxBlocksShown : 1;
  const int64_t rows = (mq + pic.stride - 1) / pic.stride, cols = (nk + pic.stride - 1) / pic.stride;
  pic.cell = cell > 0 ? cell : std::min<int64_t>(16, std::max<int64_t>(1, 256 / std::max(rows, cols)));
  const int64_t first = head < 0 ? 0 : head, count_heads = head < 0 ? heads : 1;
  const int64_t per_head = mq * nk;

  // Captions and the overall fractions.
  std::vector<std::string> captions;
  int64_t all[5] = {0, 0, 0, 0, 0};
  for (int64_t h = first; h < first + count_heads; ++h) {
    int64_t c[5] = {0, 0, 0, 0, 0};
    count(levels + h * per_head, per_head, c);
    for (int i = 0; i < 5; ++i) all[i] += c[i];
    char name[32];
    std::snprintf(name, sizeof(name), "H%lld  ", static_cast<long long>(h));
    captions.push_back(name + fractions(c, per_head));
  }
  const int64_t pw = cols * pic.cell, ph = rows * pic.cell;
  int64_t slot_w = pw;
  for (const std::string& s : captions) slot_w = std::max(slot_w, text_width(s));
  const int64_t slot_h = kLineHeight + ph;
  const int64_t grid_cols = std::max<int64_t>(1, static_cast<int64_t>(std::ceil(std::sqrt(static_cast<double>(count_heads)))));
  const int64_t grid_rows = (count_heads + grid_cols - 1) / grid_cols;

  char title[160];
  std::snprintf(title, sizeof(title), "PSA LEVEL MAP  %lld QUERY BLOCKS x %lld KEY BLOCKS%s",
                static_cast<long long>(mq), static_cast<long long>(nk),
                pic.stride > 1 ? "  (1 PIXEL = MOST COMPUTED OF N x N)" : "");
  std::string title_s = title;
  if (pic.stride > 1) title_s.replace(title_s.find("N x N"), 5, std::to_string(pic.stride) + " x " + std::to_string(pic.stride));
  const int64_t header = 2 * kLineHeight + 4;
  const int64_t width = 2 * kMargin + std::max({grid_cols * slot_w + (grid_cols - 1) * kPanelGap,
                                                 text_width(title_s),
                                                 draw_legend(nullptr, 0, 0, all, per_head * count_heads)});
  const int64_t height = 2 * kMargin + header + grid_rows * slot_h + (grid_rows - 1) * kPanelGap;
  if (too_large(width, height)) {
    pic.image.width = width;
    pic.image.height = height;
    return pic;
  }
  pic.image = Image(width, height);
  Image& img = pic.image;
  draw_text(&img, kMargin, kMargin, title_s, kBlack);
  draw_legend(&img, kMargin, kMargin + kLineHeight, all, per_head * count_heads);

  for (int64_t n = 0; n < count_heads; ++n) {
    const int64_t h = first + n;
    const int64_t sx = kMargin + (n % grid_cols) * (slot_w + kPanelGap);
    const int64_t sy = kMargin + header + (n / grid_cols) * (slot_h + kPanelGap);
    draw_text(&img, sx, sy, captions[static_cast<size_t>(n)], kBlack);
    PanelPlace place{h, sx, sy + kLineHeight};
    pic.panels.push_back(place);
    const int8_t* map = levels + h * per_head;
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t c = 0; c < cols; ++c) {
        // Most computed level among the covered blocks: the smallest positive level; 0 when
        // all are skipped; an invalid value wins (so that it shows).
        int shown = 0;
        for (int64_t i = r * pic.stride; i < std::min(mq, (r + 1) * pic.stride); ++i)
          for (int64_t j = c * pic.stride; j < std::min(nk, (c + 1) * pic.stride); ++j) {
            const int l = map[i * nk + j];
            if (level_slot(l) < 0) {
              shown = l;
              i = mq;
              break;
            }
            if (l > 0 && (shown == 0 || l < shown)) shown = l;
          }
        img.fill(place.x + c * pic.cell, place.y + r * pic.cell, pic.cell, pic.cell, level_colour(shown));
      }
    }
    img.frame(place.x, place.y, pw, ph, kBlack);
  }
  return pic;
}

bool token_to_video(const VideoGeometry& g, int64_t token, int64_t* t, int64_t* y, int64_t* x) {
  int64_t v = token;
  if (g.text_position == PSA_TEXT_FIRST) v -= g.text_length;
  if (v < 0 || v >= g.video_tokens()) return false;
  *t = v / (g.h * g.w);
  *y = (v / g.w) % g.h;
  *x = v % g.w;
  return true;
}

VideoPicture render_video(const VideoPictureInput& in, int64_t cell) {
  VideoPicture pic;
  const VideoGeometry& g = in.grid;
  pic.cell = cell > 0 ? cell : std::min<int64_t>(16, std::max<int64_t>(2, 256 / std::max(g.h, g.w)));
  const int64_t fw = g.w * pic.cell, fh = g.h * pic.cell;
  const int64_t cols = std::min<int64_t>(g.t, std::max<int64_t>(1, 1100 / (fw + kPanelGap)));
  const int64_t rows = (g.t + cols - 1) / cols;
  int64_t c[5] = {0, 0, 0, 0, 0};
  count(in.row, in.nk, c);

  char title[200];
  std::snprintf(title, sizeof(title), "B%lld H%lld  QUERY BLOCK %lld  GRID %lldx%lldx%lld  BLOCKS %lld/%lld",
                static_cast<long long>(in.batch), static_cast<long long>(in.head),
                static_cast<long long>(in.query_block), static_cast<long long>(g.t),
                static_cast<long long>(g.h), static_cast<long long>(g.w),
                static_cast<long long>(in.block_m), static_cast<long long>(in.block_n));
  const std::string title_s = title;
  const std::string note = "BLACK DOT: A TOKEN OF THE QUERY BLOCK";
  const int64_t header = 3 * kLineHeight + 4;
  const int64_t frames_w = cols * fw + (cols - 1) * kPanelGap;
  const int64_t frames_h = rows * (kLineHeight + fh) + (rows - 1) * kPanelGap;
  const int64_t content_w = std::max({frames_w, text_width(title_s), text_width(note),
                                      draw_legend(nullptr, 0, 0, c, in.nk)});
  const int64_t text_tokens = g.text_length;
  pic.text_per_row = std::max<int64_t>(1, content_w / pic.cell);
  const int64_t text_rows = (text_tokens + pic.text_per_row - 1) / pic.text_per_row;
  const int64_t text_h = text_tokens > 0 ? kPanelGap + kLineHeight + text_rows * pic.cell : 0;
  if (too_large(2 * kMargin + content_w, 2 * kMargin + header + frames_h + text_h)) {
    pic.image.width = 2 * kMargin + content_w;
    pic.image.height = 2 * kMargin + header + frames_h + text_h;
    return pic;
  }
  pic.image = Image(2 * kMargin + content_w, 2 * kMargin + header + frames_h + text_h);
  Image& img = pic.image;
  draw_text(&img, kMargin, kMargin, title_s, kBlack);
  draw_legend(&img, kMargin, kMargin + kLineHeight, c, in.nk);
  draw_text(&img, kMargin, kMargin + 2 * kLineHeight, note, kBlack);

  for (int64_t f = 0; f < g.t; ++f) {
    const int64_t sx = kMargin + (f % cols) * (fw + kPanelGap);
    const int64_t sy = kMargin + header + (f / cols) * (kLineHeight + fh + kPanelGap);
    draw_text(&img, sx, sy, "T=" + std::to_string(f), kBlack);
    pic.frame_x.push_back(sx);
    pic.frame_y.push_back(sy + kLineHeight);
  }
  if (text_tokens > 0) {
    pic.text_x = kMargin;
    const int64_t ty = kMargin + header + frames_h + kPanelGap;
    draw_text(&img, kMargin, ty, "TEXT (" + std::to_string(text_tokens) + " TOKENS)", kBlack);
    pic.text_y = ty + kLineHeight;
  }
  // Where a caller token is drawn.
  auto place = [&](int64_t token, int64_t* px, int64_t* py) {
    int64_t t = 0, y = 0, x = 0;
    if (token_to_video(g, token, &t, &y, &x)) {
      *px = pic.frame_x[static_cast<size_t>(t)] + x * pic.cell;
      *py = pic.frame_y[static_cast<size_t>(t)] + y * pic.cell;
      return;
    }
    const int64_t k = g.text_position == PSA_TEXT_FIRST ? token : token - g.video_tokens();
    *px = pic.text_x + (k % pic.text_per_row) * pic.cell;
    *py = pic.text_y + (k / pic.text_per_row) * pic.cell;
  };
  for (int64_t p = 0; p < in.len_k; ++p) {
    const int64_t token = in.k_order->empty() ? p : (*in.k_order)[static_cast<size_t>(p)];
    int64_t px = 0, py = 0;
    place(token, &px, &py);
    img.fill(px, py, pic.cell, pic.cell, level_colour(in.row[p / in.block_n]));
  }
  // The query block's tokens: a black dot in the middle third of their cells (the whole cell
  // below 3 pixels).
  const int64_t inset = pic.cell >= 3 ? pic.cell / 3 : 0;
  for (int64_t p = in.query_block * in.block_m; p < std::min(in.len_q, (in.query_block + 1) * in.block_m); ++p) {
    const int64_t token = in.q_order->empty() ? p : (*in.q_order)[static_cast<size_t>(p)];
    int64_t px = 0, py = 0;
    place(token, &px, &py);
    img.fill(px + inset, py + inset, pic.cell - 2 * inset, pic.cell - 2 * inset, kBlack);
  }
  for (size_t f = 0; f < pic.frame_x.size(); ++f) img.frame(pic.frame_x[f], pic.frame_y[f], fw, fh, kBlack);
  return pic;
}

}  // namespace psa

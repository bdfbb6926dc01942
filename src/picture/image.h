// picture/image.h -- a small RGB raster, a 5x7 bitmap font and a PNG writer (zlib), for the
// mask pictures of the diagnostics API. Host-only; nothing here is in the public interface.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "psa.h"

namespace psa {

struct Rgb {
  uint8_t r = 255, g = 255, b = 255;
  bool operator==(const Rgb& o) const { return r == o.r && g == o.g && b == o.b; }
  bool operator!=(const Rgb& o) const { return !(*this == o); }
};

// 8-bit RGB image, row-major, white when created.
struct Image {
  int64_t width = 0, height = 0;
  std::vector<uint8_t> rgb;  // [height][width][3]
  Image() = default;
  Image(int64_t w, int64_t h) : width(w), height(h), rgb(static_cast<size_t>(w * h * 3), 255) {}
  Rgb at(int64_t x, int64_t y) const {
    const uint8_t* p = &rgb[static_cast<size_t>((y * width + x) * 3)];
    return {p[0], p[1], p[2]};
  }
  void set(int64_t x, int64_t y, Rgb c) {
    if (x < 0 || y < 0 || x >= width || y >= height) return;
    uint8_t* p = &rgb[static_cast<size_t>((y * width + x) * 3)];
    p[0] = c.r;
    p[1] = c.g;
    p[2] = c.b;
  }
  // Fills [x, x + w) x [y, y + h), clipped to the image.
  void fill(int64_t x, int64_t y, int64_t w, int64_t h, Rgb c);
  // A 1-pixel rectangle outline around [x, x + w) x [y, y + h) (drawn outside it).
  void frame(int64_t x, int64_t y, int64_t w, int64_t h, Rgb c);
};

// 5x7 font: glyph cells are kGlyphAdvance pixels wide (5 + 1 spacing) and 7 high. Digits,
// A-Z (lower case is drawn as upper case, except 'x'), space and : . % = , ( ) - / + #;
// any other character is drawn as '?'.
constexpr int64_t kGlyphAdvance = 6;
constexpr int64_t kGlyphHeight = 7;
int64_t text_width(const std::string& text);
void draw_text(Image* img, int64_t x, int64_t y, const std::string& text, Rgb c);

// Writes `img` as an 8-bit RGB PNG (zlib-compressed IDAT, filter 0). PSA_ERR_IO when the file
// cannot be written (the message names the path and the reason).
// A new file or an existing regular file is written to a temporary file in the same
// directory and renamed over `path` once complete, so a failed write (a full disk, a file
// size limit) leaves `path` as it was and no partial file behind. An existing target that is
// not a regular file (/dev/stdout, a FIFO, a device) is written in place.
psa_status write_png(const Image& img, const std::string& path);
// The PNG bytes of `img` (the same bytes write_png writes).
std::vector<uint8_t> encode_png(const Image& img);

}  // namespace psa

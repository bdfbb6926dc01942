// picture/image.cpp -- raster helpers, the 5x7 font and the PNG encoder (zlib deflate + crc32).
#include "picture/image.h"

#include <zlib.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <new>

#include "core/error.h"

namespace psa {

void Image::fill(int64_t x, int64_t y, int64_t w, int64_t h, Rgb c) {
  const int64_t x0 = x < 0 ? 0 : x, y0 = y < 0 ? 0 : y;
  const int64_t x1 = x + w > width ? width : x + w, y1 = y + h > height ? height : y + h;
  for (int64_t yy = y0; yy < y1; ++yy)
    for (int64_t xx = x0; xx < x1; ++xx) set(xx, yy, c);
}

void Image::frame(int64_t x, int64_t y, int64_t w, int64_t h, Rgb c) {
  fill(x - 1, y - 1, w + 2, 1, c);
  fill(x - 1, y + h, w + 2, 1, c);
  fill(x - 1, y, 1, h, c);
  fill(x + w, y, 1, h, c);
}

namespace {

// Rows top to bottom; bit 4 is the leftmost pixel.
struct Glyph {
  char ch;
  uint8_t rows[7];
};
constexpr Glyph kFont[] = {
    {'0', {0b01110, 0b10001, 0b10011, 0b10101, 0b11001, 0b10001, 0b01110}},
    {'1', {0b00100, 0b01100, 0b00100, 0b00100, 0b00100, 0b00100, 0b01110}},
    {'2', {0b01110, 0b10001, 0b00001, 0b00010, 0b00100, 0b01000, 0b11111}},
    {'3', {0b11111, 0b00010, 0b00100, 0b00010, 0b00001, 0b10001, 0b01110}},
    {'4', {0b00010, 0b00110, 0b01010, 0b10010, 0b11111, 0b00010, 0b00010}},
    {'5', {0b11111, 0b10000, 0b11110, 0b00001, 0b00001, 0b10001, 0b01110}},
    {'6', {0b00110, 0b01000, 0b10000, 0b11110, 0b10001, 0b10001, 0b01110}},
    {'7', {0b11111, 0b00001, 0b00010, 0b00100, 0b01000, 0b01000, 0b01000}},
    {'8', {0b01110, 0b10001, 0b10001, 0b01110, 0b10001, 0b10001, 0b01110}},
    {'9', {0b01110, 0b10001, 0b10001, 0b01111, 0b00001, 0b00010, 0b01100}},
    {'A', {0b01110, 0b10001, 0b10001, 0b11111, 0b10001, 0b10001, 0b10001}},
    {'B', {0b11110, 0b10001, 0b10001, 0b11110, 0b10001, 0b10001, 0b11110}},
    {'C', {0b01110, 0b10001, 0b10000, 0b10000, 0b10000, 0b10001, 0b01110}},
    {'D', {0b11100, 0b10010, 0b10001, 0b10001, 0b10001, 0b10010, 0b11100}},
    {'E', {0b11111, 0b10000, 0b10000, 0b11110, 0b10000, 0b10000, 0b11111}},
    {'F', {0b11111, 0b10000, 0b10000, 0b11110, 0b10000, 0b10000, 0b10000}},
    {'G', {0b01110, 0b10001, 0b10000, 0b10111, 0b10001, 0b10001, 0b01111}},
    {'H', {0b10001, 0b10001, 0b10001, 0b11111, 0b10001, 0b10001, 0b10001}},
    {'I', {0b01110, 0b00100, 0b00100, 0b00100, 0b00100, 0b00100, 0b01110}},
    {'J', {0b00111, 0b00010, 0b00010, 0b00010, 0b00010, 0b10010, 0b01100}},
    {'K', {0b10001, 0b10010, 0b10100, 0b11000, 0b10100, 0b10010, 0b10001}},
    {'L', {0b10000, 0b10000, 0b10000, 0b10000, 0b10000, 0b10000, 0b11111}},
    {'M', {0b10001, 0b11011, 0b10101, 0b10101, 0b10001, 0b10001, 0b10001}},
    {'N', {0b10001, 0b10001, 0b11001, 0b10101, 0b10011, 0b10001, 0b10001}},
    {'O', {0b01110, 0b10001, 0b10001, 0b10001, 0b10001, 0b10001, 0b01110}},
    {'P', {0b11110, 0b10001, 0b10001, 0b11110, 0b10000, 0b10000, 0b10000}},
    {'Q', {0b01110, 0b10001, 0b10001, 0b10001, 0b10101, 0b10010, 0b01101}},
    {'R', {0b11110, 0b10001, 0b10001, 0b11110, 0b10100, 0b10010, 0b10001}},
    {'S', {0b01111, 0b10000, 0b10000, 0b01110, 0b00001, 0b00001, 0b11110}},
    {'T', {0b11111, 0b00100, 0b00100, 0b00100, 0b00100, 0b00100, 0b00100}},
    {'U', {0b10001, 0b10001, 0b10001, 0b10001, 0b10001, 0b10001, 0b01110}},
    {'V', {0b10001, 0b10001, 0b10001, 0b10001, 0b10001, 0b01010, 0b00100}},
    {'W', {0b10001, 0b10001, 0b10001, 0b10101, 0b10101, 0b10101, 0b01010}},
    {'X', {0b10001, 0b10001, 0b01010, 0b00100, 0b01010, 0b10001, 0b10001}},
    {'Y', {0b10001, 0b10001, 0b10001, 0b01010, 0b00100, 0b00100, 0b00100}},
    {'Z', {0b11111, 0b00001, 0b00010, 0b00100, 0b01000, 0b10000, 0b11111}},
    {'x', {0b00000, 0b00000, 0b10001, 0b01010, 0b00100, 0b01010, 0b10001}},
    {' ', {0, 0, 0, 0, 0, 0, 0}},
    {':', {0b00000, 0b01100, 0b01100, 0b00000, 0b01100, 0b01100, 0b00000}},
    {'.', {0b00000, 0b00000, 0b00000, 0b00000, 0b00000, 0b01100, 0b01100}},
    {'%', {0b11000, 0b11001, 0b00010, 0b00100, 0b01000, 0b10011, 0b00011}},
    {'=', {0b00000, 0b00000, 0b11111, 0b00000, 0b11111, 0b00000, 0b00000}},
    {',', {0b00000, 0b00000, 0b00000, 0b00000, 0b01100, 0b00100, 0b01000}},
    {'(', {0b00010, 0b00100, 0b01000, 0b01000, 0b01000, 0b00100, 0b00010}},
    {')', {0b01000, 0b00100, 0b00010, 0b00010, 0b00010, 0b00100, 0b01000}},
    {'-', {0b00000, 0b00000, 0b00000, 0b11111, 0b00000, 0b00000, 0b00000}},
    {'/', {0b00000, 0b00001, 0b00010, 0b00100, 0b01000, 0b10000, 0b00000}},
    {'+', {0b00000, 0b00100, 0b00100, 0b11111, 0b00100, 0b00100, 0b00000}},
    {'#', {0b01010, 0b01010, 0b11111, 0b01010, 0b11111, 0b01010, 0b01010}},
    {'?', {0b01110, 0b10001, 0b00001, 0b00010, 0b00100, 0b00000, 0b00100}},
};

const Glyph& glyph_of(char c) {
  if (c >= 'a' && c <= 'z' && c != 'x') c = static_cast<char>(c - 'a' + 'A');
  for (const Glyph& g : kFont)
    if (g.ch == c) return g;
  return kFont[sizeof(kFont) / sizeof(kFont[0]) - 1];
}

void put_u32(std::vector<uint8_t>* out, uint32_t v) {
  out->push_back(static_cast<uint8_t>(v >> 24));
  out->push_back(static_cast<uint8_t>(v >> 16));
  out->push_back(static_cast<uint8_t>(v >> 8));
  out->push_back(static_cast<uint8_t>(v));
}

void put_chunk(std::vector<uint8_t>* out, const char type[4], const uint8_t* data, size_t n) {
  put_u32(out, static_cast<uint32_t>(n));
  const size_t start = out->size();
  out->insert(out->end(), type, type + 4);
  if (n > 0) out->insert(out->end(), data, data + n);
  uLong crc = crc32(0L, Z_NULL, 0);
  crc = crc32(crc, out->data() + start, static_cast<uInt>(n + 4));
  put_u32(out, static_cast<uint32_t>(crc));
}

}  // namespace

int64_t text_width(const std::string& text) {
  return text.empty() ? 0 : static_cast<int64_t>(text.size()) * kGlyphAdvance - 1;
}

void draw_text(Image* img, int64_t x, int64_t y, const std::string& text, Rgb c) {
  for (size_t i = 0; i < text.size(); ++i) {
    const Glyph& g = glyph_of(text[i]);
    for (int r = 0; r < 7; ++r)
      for (int b = 0; b < 5; ++b)
        if (g.rows[r] & (0x10 >> b)) img->set(x + static_cast<int64_t>(i) * kGlyphAdvance + b, y + r, c);
  }
}

std::vector<uint8_t> encode_png(const Image& img) {
  std::vector<uint8_t> out = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  uint8_t ihdr[13];
  const uint32_t w = static_cast<uint32_t>(img.width), h = static_cast<uint32_t>(img.height);
  const uint8_t head[13] = {uint8_t(w >> 24), uint8_t(w >> 16), uint8_t(w >> 8), uint8_t(w),
                            uint8_t(h >> 24), uint8_t(h >> 16), uint8_t(h >> 8), uint8_t(h),
                            8, 2, 0, 0, 0};  // 8-bit RGB, deflate, filter method 0, no interlace
  std::memcpy(ihdr, head, sizeof(ihdr));
  put_chunk(&out, "IHDR", ihdr, sizeof(ihdr));
  // Scanlines: filter type 0 (None) + the row's bytes.
  const size_t row = static_cast<size_t>(img.width) * 3;
  std::vector<uint8_t> raw(static_cast<size_t>(img.height) * (row + 1));
  for (int64_t y = 0; y < img.height; ++y) {
    raw[static_cast<size_t>(y) * (row + 1)] = 0;
    std::memcpy(&raw[static_cast<size_t>(y) * (row + 1) + 1], &img.rgb[static_cast<size_t>(y) * row], row);
  }
  uLongf packed_size = compressBound(static_cast<uLong>(raw.size()));
  std::vector<uint8_t> packed(packed_size);
  if (compress2(packed.data(), &packed_size, raw.data(), static_cast<uLong>(raw.size()), 9) != Z_OK)
    throw std::bad_alloc();
  put_chunk(&out, "IDAT", packed.data(), packed_size);
  put_chunk(&out, "IEND", nullptr, 0);
  return out;
}

psa_status write_png(const Image& img, const std::string& path) {
  const std::vector<uint8_t> bytes = encode_png(img);
  std::FILE* f = std::fopen(path.c_str(), "wb");
  PSA_RETURN_IF(f == nullptr, PSA_ERR_IO, "path: cannot create '%s' (%s)", path.c_str(), std::strerror(errno));
  const size_t n = std::fwrite(bytes.data(), 1, bytes.size(), f);
  const bool closed = std::fclose(f) == 0;
  PSA_RETURN_IF(n != bytes.size() || !closed, PSA_ERR_IO, "path: writing '%s' failed (%s)", path.c_str(),
                std::strerror(errno));
  return PSA_OK;
}

}  // namespace psa

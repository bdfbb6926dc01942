// tests/common/png_decode.h -- an independent PNG reader for the picture tests: chunk
// parsing with CRC checks (zlib's crc32), zlib inflate of the IDAT stream and every PNG
// filter type, for 8-bit RGB images (the only kind libpsa writes). Test-only.
#pragma once
#include <zlib.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace psa {
namespace test {

struct DecodedPng {
  bool ok = false;
  std::string error;
  uint32_t width = 0, height = 0;
  std::vector<uint8_t> rgb;  // [height][width][3]
  std::vector<std::string> chunks;  // chunk types in file order
  const uint8_t* px(uint32_t x, uint32_t y) const { return &rgb[(static_cast<size_t>(y) * width + x) * 3]; }
};

inline std::vector<uint8_t> read_file_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

inline DecodedPng decode_png(const std::vector<uint8_t>& b) {
  DecodedPng out;
  auto fail = [&](const std::string& e) {
    out.ok = false;
    out.error = e;
    return out;
  };
  static const uint8_t sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  if (b.size() < 8 || !std::equal(sig, sig + 8, b.begin())) return fail("bad signature");
  auto u32 = [&](size_t at) {
    return (uint32_t(b[at]) << 24) | (uint32_t(b[at + 1]) << 16) | (uint32_t(b[at + 2]) << 8) | uint32_t(b[at + 3]);
  };
  std::vector<uint8_t> idat;
  size_t at = 8;
  bool ended = false;
  int bit_depth = 0, colour_type = -1, interlace = -1;
  while (at + 12 <= b.size()) {
    const uint32_t n = u32(at);
    if (at + 12 + n > b.size()) return fail("truncated chunk");
    const std::string type(b.begin() + static_cast<long>(at + 4), b.begin() + static_cast<long>(at + 8));
    const uLong crc = crc32(crc32(0L, Z_NULL, 0), &b[at + 4], n + 4);
    if (crc != u32(at + 8 + n)) return fail("CRC mismatch in " + type);
    out.chunks.push_back(type);
    const uint8_t* d = &b[at + 8];
    if (type == "IHDR") {
      out.width = u32(at + 8);
      out.height = u32(at + 12);
      bit_depth = d[8];
      colour_type = d[9];
      interlace = d[12];
    } else if (type == "IDAT") {
      idat.insert(idat.end(), d, d + n);
    } else if (type == "IEND") {
      ended = true;
      break;
    }
    at += 12 + n;
  }
  if (!ended) return fail("no IEND");
  if (bit_depth != 8 || colour_type != 2 || interlace != 0) return fail("not 8-bit RGB, non-interlaced");
  const size_t stride = static_cast<size_t>(out.width) * 3;
  std::vector<uint8_t> raw(static_cast<size_t>(out.height) * (stride + 1));
  uLongf raw_size = static_cast<uLongf>(raw.size());
  if (uncompress(raw.data(), &raw_size, idat.data(), static_cast<uLong>(idat.size())) != Z_OK ||
      raw_size != raw.size())
    return fail("IDAT does not inflate to height * (1 + 3 * width) bytes");
  out.rgb.assign(static_cast<size_t>(out.height) * stride, 0);
  for (uint32_t y = 0; y < out.height; ++y) {
    const uint8_t f = raw[y * (stride + 1)];
    const uint8_t* in = &raw[y * (stride + 1) + 1];
    uint8_t* row = &out.rgb[y * stride];
    const uint8_t* prev = y > 0 ? &out.rgb[(y - 1) * stride] : nullptr;
    for (size_t i = 0; i < stride; ++i) {
      const int a = i >= 3 ? row[i - 3] : 0, up = prev ? prev[i] : 0, c = (prev && i >= 3) ? prev[i - 3] : 0;
      int pred = 0;
      switch (f) {
        case 0: pred = 0; break;
        case 1: pred = a; break;
        case 2: pred = up; break;
        case 3: pred = (a + up) / 2; break;
        case 4: {
          const int p = a + up - c, pa = std::abs(p - a), pb = std::abs(p - up), pc = std::abs(p - c);
          pred = (pa <= pb && pa <= pc) ? a : (pb <= pc ? up : c);
          break;
        }
        default: return fail("bad filter type");
      }
      row[i] = static_cast<uint8_t>(in[i] + pred);
    }
  }
  out.ok = true;
  return out;
}

}  // namespace test
}  // namespace psa

// cli/npy.cpp -- .npy reader/writer (NEP 1 format). Parses only the three header keys
// NumPy writes; no pickles, no Fortran order, no big-endian data.
#include "npy.h"

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>

#include "cli.h"

namespace psa_cli {
namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicLen = 6;

[[noreturn]] void fail(const std::string& path, const std::string& what) {
  throw Failure(path + ": " + what);
}

// Position just after `key` and the ':' that follows it, or npos.
size_t find_value(const std::string& h, const char* key) {
  for (const char quote : {'\'', '"'}) {
    const std::string k = std::string(1, quote) + key + quote;
    size_t p = h.find(k);
    if (p == std::string::npos) continue;
    p = h.find(':', p + k.size());
    if (p != std::string::npos) return p + 1;
  }
  return std::string::npos;
}

size_t skip_space(const std::string& h, size_t p) {
  while (p < h.size() && std::isspace(static_cast<unsigned char>(h[p]))) ++p;
  return p;
}

void parse_header(const std::string& path, const std::string& h, NpyArray& a) {
  size_t p = find_value(h, "descr");
  if (p == std::string::npos) fail(path, "header has no 'descr'");
  p = skip_space(h, p);
  if (p >= h.size() || (h[p] != '\'' && h[p] != '"')) {
    fail(path, "structured dtypes are not supported (descr must be a string such as '<f4')");
  }
  const size_t end = h.find(h[p], p + 1);
  if (end == std::string::npos) fail(path, "unterminated 'descr' in the header");
  a.descr = h.substr(p + 1, end - p - 1);

  p = find_value(h, "fortran_order");
  if (p == std::string::npos) fail(path, "header has no 'fortran_order'");
  p = skip_space(h, p);
  if (h.compare(p, 4, "True") == 0) fail(path, "fortran_order arrays are not supported");
  if (h.compare(p, 5, "False") != 0) fail(path, "unreadable 'fortran_order' in the header");

  p = find_value(h, "shape");
  if (p == std::string::npos) fail(path, "header has no 'shape'");
  p = skip_space(h, p);
  if (p >= h.size() || h[p] != '(') fail(path, "unreadable 'shape' in the header");
  ++p;
  while (true) {
    p = skip_space(h, p);
    if (p < h.size() && h[p] == ')') break;
    if (p >= h.size() || !std::isdigit(static_cast<unsigned char>(h[p]))) {
      fail(path, "unreadable 'shape' in the header");
    }
    int64_t v = 0;
    while (p < h.size() && std::isdigit(static_cast<unsigned char>(h[p]))) {
      v = v * 10 + (h[p] - '0');
      if (v > (int64_t{1} << 48)) fail(path, "shape dimension too large");
      ++p;
    }
    a.shape.push_back(v);
    p = skip_space(h, p);
    if (p < h.size() && h[p] == ',') ++p;
  }
}

std::string shape_literal(const std::vector<int64_t>& shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  if (shape.size() == 1) s += ",";
  return s + ")";
}

bool host_is_little_endian() {
  const uint16_t one = 1;
  uint8_t first = 0;
  std::memcpy(&first, &one, 1);
  return first == 1;
}

}  // namespace

int npy_item_size(const std::string& descr) {
  if (descr.size() < 3) return 0;
  if (descr[0] != '<' && descr[0] != '|' && descr[0] != '=' && descr[0] != '>') return 0;
  if (!std::isalpha(static_cast<unsigned char>(descr[1]))) return 0;
  int size = 0;
  for (size_t i = 2; i < descr.size(); ++i) {
    if (!std::isdigit(static_cast<unsigned char>(descr[i]))) return 0;
    size = size * 10 + (descr[i] - '0');
    if (size > 64) return 0;
  }
  return size;
}

NpyArray read_npy(const std::string& path) {
  if (!host_is_little_endian()) fail(path, ".npy support needs a little-endian host");
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(path, std::string("cannot open: ") + std::strerror(errno));
  const std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)),
                                   std::istreambuf_iterator<char>());
  if (bytes.size() < 10 || std::memcmp(bytes.data(), kMagic, kMagicLen) != 0) {
    fail(path, "not a .npy file (bad magic)");
  }
  const int major = bytes[6];
  size_t header_len = 0, prefix = 0;
  if (major == 1) {
    header_len = bytes[8] | (size_t{bytes[9]} << 8);
    prefix = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12) fail(path, "truncated header");
    header_len = bytes[8] | (size_t{bytes[9]} << 8) | (size_t{bytes[10]} << 16) |
                 (size_t{bytes[11]} << 24);
    prefix = 12;
  } else {
    fail(path, "unsupported .npy format version " + std::to_string(major));
  }
  if (bytes.size() < prefix + header_len) fail(path, "truncated header");
  NpyArray a;
  parse_header(path, std::string(bytes.begin() + prefix, bytes.begin() + prefix + header_len), a);
  if (a.descr.size() >= 1 && a.descr[0] == '=') a.descr[0] = '<';
  const int item = npy_item_size(a.descr);
  if (item == 0) fail(path, "unsupported dtype '" + a.descr + "'");
  if (a.descr[0] == '>' && item > 1) fail(path, "big-endian data ('" + a.descr + "') is not supported");
  uint64_t count = 1;
  for (int64_t d : a.shape) count *= static_cast<uint64_t>(d);
  const uint64_t want = count * static_cast<uint64_t>(item);
  const uint64_t have = bytes.size() - prefix - header_len;
  if (have != want) {
    fail(path, "holds " + std::to_string(have) + " data bytes; header " + a.descr + " " +
                   shape_literal(a.shape) + " promises " + std::to_string(want));
  }
  a.data.assign(bytes.begin() + static_cast<std::ptrdiff_t>(prefix + header_len), bytes.end());
  return a;
}

void write_npy(const std::string& path, const std::string& descr,
               const std::vector<int64_t>& shape, const void* data, uint64_t bytes) {
  if (!host_is_little_endian()) fail(path, ".npy support needs a little-endian host");
  std::string header = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " +
                       shape_literal(shape) + ", }";
  // NumPy pads with spaces and ends with '\n' so that the data starts 64-byte aligned.
  const size_t prefix = 10;
  const size_t total = (prefix + header.size() + 1 + 63) / 64 * 64;
  header.append(total - prefix - header.size() - 1, ' ');
  header += '\n';
  if (header.size() > 0xffff) fail(path, "header too long for .npy version 1.0");

  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) fail(path, std::string("cannot create: ") + std::strerror(errno));
  const uint8_t head[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0,
                            static_cast<uint8_t>(header.size() & 0xff),
                            static_cast<uint8_t>(header.size() >> 8)};
  out.write(reinterpret_cast<const char*>(head), sizeof head);
  out.write(header.data(), static_cast<std::streamsize>(header.size()));
  out.write(static_cast<const char*>(data), static_cast<std::streamsize>(bytes));
  out.close();
  if (!out) fail(path, "write failed");
}

}  // namespace psa_cli

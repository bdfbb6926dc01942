// picture/image.cpp -- raster helpers, the 5x7 font and the PNG encoder (zlib deflate + crc32).
#include "picture/image.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
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

namespace {

// Writes every byte of `bytes`; 0, or the errno of the write that failed.
int write_all(int fd, const std::vector<uint8_t>& bytes) {
  const uint8_t* p = bytes.data();
  size_t left = bytes.size();
  while (left > 0) {
    const ssize_t n = ::write(fd, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno;
    if (n == 0) return EIO;  // no progress and no error: never loop forever
    p += n;
    left -= static_cast<size_t>(n);
  }
  return 0;
}

// A device, a FIFO or /dev/stdout: written through, as a shell's '>' would (opening a FIFO
// waits for its reader). Renaming a file over it would replace the node itself.
psa_status write_in_place(const std::vector<uint8_t>& bytes, const std::string& path) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  PSA_RETURN_IF(fd < 0, PSA_ERR_IO, "path: cannot create '%s' (%s)", path.c_str(), std::strerror(errno));
  int err = write_all(fd, bytes);
  if (::close(fd) != 0 && err == 0) err = errno;
  PSA_RETURN_IF(err != 0, PSA_ERR_IO, "path: writing '%s' failed (%s)", path.c_str(), std::strerror(err));
  return PSA_OK;
}

// A new or regular file: written to a temporary file next to it, then renamed over it, so
// that a failure midway (a full disk, a file size limit) leaves the old file, or none, and
// no partial one. `target` is `path` with any symbolic link resolved, so that the link
// survives and the file it names is replaced; messages name `path`, as the caller gave it.
// The same rule as cli/npy.cpp (the psa command's .npy writer): the psa command uses
// only psa.h, so the two cannot share code.
psa_status write_replacing(const std::vector<uint8_t>& bytes, const std::string& path,
                           const std::string& target, const struct stat* old) {
  // A read-only file is not overwritten, as it was not when files were written in place;
  // rename() itself needs only the directory to be writable.
  PSA_RETURN_IF(old != nullptr && ::faccessat(AT_FDCWD, target.c_str(), W_OK, AT_EACCESS) != 0,
                PSA_ERR_IO, "path: cannot write '%s' (%s)", path.c_str(), std::strerror(errno));
  const size_t slash = target.find_last_of('/');
  const std::string dir = slash == std::string::npos ? "" : target.substr(0, slash + 1);
  // Hidden, and kept short enough for NAME_MAX whatever the length of the file's own name.
  const std::string stem = "." + target.substr(slash + 1, 64) + "." + std::to_string(::getpid());
  static std::atomic<unsigned> counter{0};  // distinct names for threads writing at once
  std::string temp;
  int fd = -1;
  while (fd < 0) {
    temp = dir + stem + "." + std::to_string(counter++) + ".tmp";
    fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    PSA_RETURN_IF(fd < 0 && errno != EEXIST, PSA_ERR_IO,
                  "path: cannot create '%s' (a temporary file in its directory: %s)", path.c_str(),
                  std::strerror(errno));
  }
  int err = 0;
  // The replaced file keeps its permission bits (the temporary one has the umask's).
  if (old != nullptr && ::fchmod(fd, old->st_mode & 07777) != 0) err = errno;
  if (err == 0) err = write_all(fd, bytes);
  // fsync and close report the errors a file system may defer (ENOSPC, EDQUOT, EIO on NFS);
  // after fsync, a crash cannot leave the renamed file without its data.
  if (err == 0 && ::fsync(fd) != 0) err = errno;
  if (::close(fd) != 0 && err == 0) err = errno;
  if (err == 0 && ::rename(temp.c_str(), target.c_str()) != 0) err = errno;
  if (err != 0) ::unlink(temp.c_str());
  PSA_RETURN_IF(err != 0, PSA_ERR_IO, "path: writing '%s' failed (%s)", path.c_str(), std::strerror(err));
  return PSA_OK;
}

}  // namespace

psa_status write_png(const Image& img, const std::string& path) {
  const std::vector<uint8_t> bytes = encode_png(img);
  std::string target = path;
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0 && S_ISLNK(st.st_mode)) {
    // A dangling link stays as it is: then written in place, which creates the file it names.
    if (char* real = ::realpath(path.c_str(), nullptr)) {
      target = real;
      std::free(real);
    }
  }
  if (::lstat(target.c_str(), &st) != 0) return write_replacing(bytes, path, target, nullptr);
  if (S_ISREG(st.st_mode)) return write_replacing(bytes, path, target, &st);
  PSA_RETURN_IF(S_ISDIR(st.st_mode), PSA_ERR_IO, "path: cannot write '%s' (it is a directory)",
                path.c_str());
  return write_in_place(bytes, path);
}

}  // namespace psa

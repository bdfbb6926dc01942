// cli/npy.cpp -- .npy reader/writer (NEP 1 format). Parses only the three header keys
// NumPy writes; no pickles, no Fortran order, no big-endian data.
#include "npy.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <new>

#include "cli.h"

namespace psa_cli {
namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicLen = 6;
// NumPy's own headers are a few hundred bytes; any header this reader accepts fits a
// version 1.0 file. The bound keeps a lying version 2.0/3.0 length (up to 4 GiB) from
// being allocated.
constexpr size_t kMaxHeaderBytes = 0xffff;
// NumPy 2's NPY_MAXDIMS.
constexpr size_t kMaxDims = 64;
// Reads and writes move at most this much a call (Linux moves at most 0x7ffff000).
constexpr uint64_t kMaxChunk = uint64_t{1} << 30;

[[noreturn]] void fail(const std::string& path, const std::string& what) {
  throw Failure(path + ": " + what);
}

std::string errno_text(int err) { return std::strerror(err); }

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

struct FdCloser {
  int fd;
  ~FdCloser() {
    if (fd >= 0) ::close(fd);
  }
};

const char* file_kind(mode_t mode) {
  return S_ISDIR(mode)    ? "a directory"
         : S_ISFIFO(mode) ? "a FIFO"
         : S_ISCHR(mode)  ? "a character device"
         : S_ISBLK(mode)  ? "a block device"
         : S_ISSOCK(mode) ? "a socket"
                          : "a special file";
}

// --- reading ---------------------------------------------------------------------------

// Reads exactly `n` bytes. The caller has checked `n` against the file's size, so an early
// end of file means the file shrank under us.
void read_exact(const std::string& path, int fd, void* dst, uint64_t n) {
  char* p = static_cast<char*>(dst);
  while (n > 0) {
    const ssize_t got = ::read(fd, p, static_cast<size_t>(std::min(n, kMaxChunk)));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) fail(path, "cannot read: " + errno_text(errno));
    if (got == 0) fail(path, "the file shrank while it was read");
    p += got;
    n -= static_cast<uint64_t>(got);
  }
}

// The header is a Python dict literal that NumPy reads with ast.literal_eval and then
// requires to hold exactly the keys descr, fortran_order and shape. This parser takes the
// subset of that grammar NumPy writes -- quoted strings, True/False, tuples of decimal
// integers, whitespace between tokens, an optional trailing comma -- and refuses the rest
// rather than guessing: a key given twice (literal_eval would silently keep the last), an
// unknown key, a tuple without commas, anything after the closing brace but whitespace.
class HeaderParser {
 public:
  HeaderParser(const std::string& path, const std::string& text) : path_(path), h_(text) {}

  void parse(NpyArray& a) {
    bool seen_descr = false, seen_order = false, seen_shape = false;
    skip_space();
    expect('{', "the header must be a dict starting with '{'");
    while (true) {
      skip_space();
      if (take('}')) break;
      const std::string key = string_literal("a quoted key");
      skip_space();
      expect(':', "expected ':' after '" + key + "'");
      skip_space();
      if (key == "descr") {
        once(seen_descr, key);
        if (peek() == '[') fail(path_, "structured dtypes are not supported (descr must be a string such as '<f4')");
        a.descr = string_literal("a quoted dtype such as '<f4' for 'descr'");
      } else if (key == "fortran_order") {
        once(seen_order, key);
        if (keyword("True")) fail(path_, "fortran_order arrays are not supported");
        if (!keyword("False")) bad("'fortran_order' must be True or False");
      } else if (key == "shape") {
        once(seen_shape, key);
        a.shape = shape_tuple();
      } else {
        bad("unknown key '" + key + "' (NumPy writes only 'descr', 'fortran_order' and 'shape')");
      }
      skip_space();
      if (take('}')) break;
      expect(',', "expected ',' or '}' after the value of '" + key + "'");
    }
    skip_space();
    if (p_ != h_.size()) bad("unexpected characters after the closing '}'");
    if (!seen_descr) bad("no 'descr'");
    if (!seen_order) bad("no 'fortran_order'");
    if (!seen_shape) bad("no 'shape'");
  }

 private:
  [[noreturn]] void bad(const std::string& what) const { fail(path_, "bad .npy header: " + what); }

  char peek() const { return p_ < h_.size() ? h_[p_] : '\0'; }
  bool take(char c) {
    if (peek() != c) return false;
    ++p_;
    return true;
  }
  void expect(char c, const std::string& what) {
    if (!take(c)) bad(what);
  }
  // Python's whitespace between tokens (newlines included: the dict is inside braces).
  void skip_space() {
    while (p_ < h_.size() && (h_[p_] == ' ' || h_[p_] == '\t' || h_[p_] == '\n' ||
                              h_[p_] == '\r' || h_[p_] == '\f'))
      ++p_;
  }
  void once(bool& seen, const std::string& key) const {
    if (seen) bad("'" + key + "' appears twice");
    seen = true;
  }
  // `word` as a whole token (not the start of a longer name such as "Falsey").
  bool keyword(const char* word) {
    const size_t n = std::strlen(word);
    if (h_.compare(p_, n, word) != 0) return false;
    const size_t end = p_ + n;
    if (end < h_.size() && (std::isalnum(static_cast<unsigned char>(h_[end])) || h_[end] == '_'))
      return false;
    p_ = end;
    return true;
  }
  // '...' or "..." without escapes (no NumPy key or dtype string has one).
  std::string string_literal(const std::string& what) {
    const char quote = peek();
    if (quote != '\'' && quote != '"') bad("expected " + what);
    const size_t start = ++p_;
    while (p_ < h_.size() && h_[p_] != quote) {
      if (h_[p_] == '\\' || h_[p_] == '\n') bad("unsupported character in a string");
      ++p_;
    }
    if (p_ >= h_.size()) bad("unterminated string");
    return h_.substr(start, p_++ - start);
  }
  // () | (n,) | (n, m[, ...][,]). A single dimension needs its comma: "(5)" is the integer 5
  // in Python, and NumPy refuses it.
  std::vector<int64_t> shape_tuple() {
    expect('(', "'shape' must be a tuple such as (1, 2, 1920, 64)");
    std::vector<int64_t> dims;
    bool comma_after_last = false;
    while (true) {
      skip_space();
      if (take(')')) break;
      if (dims.size() == kMaxDims) bad("'shape' has more than " + std::to_string(kMaxDims) + " dimensions");
      dims.push_back(dimension());
      skip_space();
      comma_after_last = take(',');
      if (!comma_after_last) {
        skip_space();
        expect(')', "expected ',' or ')' after a dimension of 'shape'");
        break;
      }
    }
    if (dims.size() == 1 && !comma_after_last) bad("'shape' (n) is not a tuple; NumPy writes (n,)");
    return dims;
  }
  // A non-negative decimal integer as Python 3 writes it (no sign, no leading zeros),
  // optionally followed by the 'L' of a Python 2 long, which NumPy still accepts in old files.
  int64_t dimension() {
    if (!std::isdigit(static_cast<unsigned char>(peek()))) bad("a dimension of 'shape' is not a non-negative integer");
    const size_t start = p_;
    int64_t v = 0;
    while (std::isdigit(static_cast<unsigned char>(peek()))) {
      const int digit = h_[p_++] - '0';
      if (v > (std::numeric_limits<int64_t>::max() - digit) / 10) bad("a dimension of 'shape' does not fit in 64 bits");
      v = v * 10 + digit;
    }
    if (p_ - start > 1 && h_[start] == '0') bad("a dimension of 'shape' has a leading zero");
    take('L');
    return v;
  }

  const std::string& path_;
  const std::string& h_;
  size_t p_ = 0;
};

// --- writing ---------------------------------------------------------------------------

struct Bytes {
  const void* data;
  uint64_t size;
};

// Writes every byte of `parts`; 0, or the errno of the write that failed.
int write_all(int fd, std::initializer_list<Bytes> parts) {
  for (const Bytes& part : parts) {
    const char* p = static_cast<const char*>(part.data);
    uint64_t left = part.size;
    while (left > 0) {
      const ssize_t n = ::write(fd, p, static_cast<size_t>(std::min(left, kMaxChunk)));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return errno;
      if (n == 0) return EIO;  // no progress and no error: never loop forever
      p += n;
      left -= static_cast<uint64_t>(n);
    }
  }
  return 0;
}

// A device, a FIFO or /dev/stdout: written through, as a shell's '>' would (opening a FIFO
// waits for its reader). Renaming a file over it would replace the node itself.
void write_in_place(const std::string& path, std::initializer_list<Bytes> parts) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  if (fd < 0) fail(path, "cannot open for writing: " + errno_text(errno));
  int err = write_all(fd, parts);
  if (::close(fd) != 0 && err == 0) err = errno;
  if (err != 0) fail(path, "cannot write: " + errno_text(err));
}

// A new or regular file: written to a temporary file next to it, then renamed over it, so
// that a failure midway (a full disk, a file size limit) leaves the old file, or none, and
// no partial one. `target` is `path` with any symbolic link resolved, so that the link
// survives and the file it names is replaced; messages name `path`, as the user wrote it.
// The same rule as src/picture/image.cpp (the library's PNG writer): the psa command
// uses only psa.h, so the two cannot share code.
void write_replacing(const std::string& path, const std::string& target, const struct stat* old,
                     std::initializer_list<Bytes> parts) {
  // A read-only file is not overwritten, as it was not when files were written in place;
  // rename() itself needs only the directory to be writable.
  if (old != nullptr && ::faccessat(AT_FDCWD, target.c_str(), W_OK, AT_EACCESS) != 0)
    fail(path, "cannot write: " + errno_text(errno));
  const size_t slash = target.find_last_of('/');
  const std::string dir = slash == std::string::npos ? "" : target.substr(0, slash + 1);
  // Hidden, and kept short enough for NAME_MAX whatever the length of the file's own name.
  const std::string stem = "." + target.substr(slash + 1, 64) + "." + std::to_string(::getpid());
  static std::atomic<unsigned> counter{0};
  std::string temp;
  int fd = -1;
  while (fd < 0) {
    temp = dir + stem + "." + std::to_string(counter++) + ".tmp";
    fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0 && errno != EEXIST)
      fail(path, "cannot create a temporary file in its directory: " + errno_text(errno));
  }
  int err = 0;
  // The replaced file keeps its permission bits (the temporary one has the umask's).
  if (old != nullptr && ::fchmod(fd, old->st_mode & 07777) != 0) err = errno;
  if (err == 0) err = write_all(fd, parts);
  // fsync and close report the errors a file system may defer (ENOSPC, EDQUOT, EIO on NFS);
  // after fsync, a crash cannot leave the renamed file without its data.
  if (err == 0 && ::fsync(fd) != 0) err = errno;
  if (::close(fd) != 0 && err == 0) err = errno;
  if (err == 0 && ::rename(temp.c_str(), target.c_str()) != 0) err = errno;
  if (err != 0) {
    ::unlink(temp.c_str());
    fail(path, "cannot write: " + errno_text(err));
  }
}

void write_file(const std::string& path, std::initializer_list<Bytes> parts) {
  std::string target = path;
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0 && S_ISLNK(st.st_mode)) {
    // A dangling link stays as it is: then written in place, which creates the file it names.
    if (char* real = ::realpath(path.c_str(), nullptr)) {
      target = real;
      std::free(real);
    }
  }
  if (::lstat(target.c_str(), &st) != 0) {
    write_replacing(path, target, nullptr, parts);  // a new file (or an error naming why not)
  } else if (S_ISREG(st.st_mode)) {
    write_replacing(path, target, &st, parts);
  } else if (S_ISDIR(st.st_mode)) {
    fail(path, "cannot write: is a directory");
  } else {
    write_in_place(path, parts);
  }
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
  // O_NONBLOCK: opening a FIFO with no writer returns at once instead of blocking forever;
  // fstat then refuses everything that is not a regular file (FIFOs, /dev/zero, sockets,
  // directories), so no read waits on a device or grows without bound from one, and the
  // file's size bounds every read below.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) fail(path, "cannot open: " + errno_text(errno));
  const FdCloser closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) fail(path, "cannot stat: " + errno_text(errno));
  if (!S_ISREG(st.st_mode)) {
    fail(path, std::string("is ") + file_kind(st.st_mode) + "; .npy inputs must be regular files");
  }
  const uint64_t size = static_cast<uint64_t>(st.st_size);

  // Magic, version, header length: 10 bytes (version 1.0) or 12 (2.0 and 3.0).
  uint8_t prefix[12] = {};
  if (size < 10) fail(path, "not a .npy file (" + std::to_string(size) + " bytes)");
  read_exact(path, fd, prefix, 10);
  if (std::memcmp(prefix, kMagic, kMagicLen) != 0) fail(path, "not a .npy file (bad magic)");
  const int major = prefix[6];
  uint64_t header_len = 0, prefix_len = 0;
  if (major == 1) {
    header_len = prefix[8] | (uint64_t{prefix[9]} << 8);
    prefix_len = 10;
  } else if (major == 2 || major == 3) {
    if (size < 12) fail(path, "truncated header");
    read_exact(path, fd, prefix + 10, 2);
    header_len = prefix[8] | (uint64_t{prefix[9]} << 8) | (uint64_t{prefix[10]} << 16) |
                 (uint64_t{prefix[11]} << 24);
    prefix_len = 12;
  } else {
    fail(path, "unsupported .npy format version " + std::to_string(major));
  }
  if (header_len > kMaxHeaderBytes) {
    fail(path, "header of " + std::to_string(header_len) + " bytes; a .npy header psa reads is at most " +
                   std::to_string(kMaxHeaderBytes));
  }
  if (size < prefix_len + header_len) fail(path, "truncated header");
  std::string header(header_len, '\0');
  read_exact(path, fd, &header[0], header_len);

  NpyArray a;
  HeaderParser(path, header).parse(a);
  if (a.descr.size() >= 1 && a.descr[0] == '=') a.descr[0] = '<';
  const int item = npy_item_size(a.descr);
  if (item == 0) fail(path, "unsupported dtype '" + a.descr + "'");
  if (a.descr[0] == '>' && item > 1) fail(path, "big-endian data ('" + a.descr + "') is not supported");
  for (int64_t d : a.shape) {
    if (d == 0) fail(path, "shape " + shape_literal(a.shape) + " is empty; every dimension must be >= 1");
  }
  // Checked: dimensions of up to 2^63 each multiply past 64 bits long before they could
  // match a file's size, and a wrapped product could match a short file.
  uint64_t want = static_cast<uint64_t>(item);
  for (int64_t d : a.shape) {
    if (__builtin_mul_overflow(want, static_cast<uint64_t>(d), &want)) {
      fail(path, "header " + a.descr + " " + shape_literal(a.shape) +
                     " promises more than 2^64 data bytes");
    }
  }
  const uint64_t have = size - prefix_len - header_len;
  if (have != want) {
    fail(path, "holds " + std::to_string(have) + " data bytes; header " + a.descr + " " +
                   shape_literal(a.shape) + " promises " + std::to_string(want));
  }
  try {
    a.data.resize(static_cast<size_t>(want));
  } catch (const std::bad_alloc&) {
    fail(path, "its " + std::to_string(want) + " data bytes do not fit in host memory");
  }
  read_exact(path, fd, a.data.data(), want);
  char extra = 0;
  ssize_t more = 0;
  do {
    more = ::read(fd, &extra, 1);
  } while (more < 0 && errno == EINTR);
  if (more > 0) fail(path, "the file grew while it was read");
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
  const uint8_t head[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0,
                            static_cast<uint8_t>(header.size() & 0xff),
                            static_cast<uint8_t>(header.size() >> 8)};
  write_file(path, {{head, sizeof head}, {header.data(), header.size()}, {data, bytes}});
}

}  // namespace psa_cli

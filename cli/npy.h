// cli/npy.h -- a small reader/writer for NumPy .npy files (format versions 1.0-3.0,
// C order, little-endian). Bytes and shapes only: dtype meaning is the caller's.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace psa_cli {

struct NpyArray {
  std::string descr;           // e.g. "<f4", "<f2", "<u2", "|V2" as written in the header
  std::vector<int64_t> shape;  // () is a scalar
  std::vector<uint8_t> data;   // product(shape) * item size bytes, C order
};

// Reads a whole .npy file. Throws Failure naming the path and what is wrong ("is a FIFO",
// "not a .npy file", "'shape' appears twice in the header", "fortran_order arrays are not
// supported", "holds 10 data bytes; header <f4 (2, 2) promises 16").
//
// Only regular files are read: a FIFO, a device such as /dev/zero or a directory is refused
// before a byte is read. The header must be the dict NumPy writes -- exactly the keys
// 'descr' (a string), 'fortran_order' (False) and 'shape' (a tuple of integers), each once,
// and nothing after the closing brace but padding. Every dimension must be >= 1 (psa reads
// tensors; an empty array is refused here, where the file can still be named), and the
// byte count the header promises must equal the data in the file; the data is allocated
// only once the header has passed these checks.
NpyArray read_npy(const std::string& path);

// Writes `bytes` bytes of C-order data with header {'descr', 'fortran_order': False,
// 'shape'} (version 1.0; the header is padded to a multiple of 64 bytes as NumPy does).
// Throws Failure naming the path and the reason (strerror) when the file cannot be written.
//
// A new file or an existing regular file is written to a temporary file in the same
// directory and renamed over `path` once complete, so a failed write (a full disk, a file
// size limit) leaves `path` as it was and no partial file behind. An existing target that
// is not a regular file (/dev/stdout, a FIFO, a device) is written in place.
void write_npy(const std::string& path, const std::string& descr,
               const std::vector<int64_t>& shape, const void* data, uint64_t bytes);

// Bytes per element of a descr ("<f4" -> 4); 0 when the descr is not of the form
// [<|=>]<letter><size>.
int npy_item_size(const std::string& descr);

}  // namespace psa_cli

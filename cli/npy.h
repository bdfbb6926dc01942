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

// Reads a whole .npy file. Throws Failure naming the path and what is wrong ("not a .npy
// file", "fortran_order arrays are not supported", "holds 10 bytes, header promises 16").
NpyArray read_npy(const std::string& path);

// Writes `bytes` bytes of C-order data with header {'descr', 'fortran_order': False,
// 'shape'} (version 1.0; the header is padded to a multiple of 64 bytes as NumPy does).
// Throws Failure when the file cannot be written.
void write_npy(const std::string& path, const std::string& descr,
               const std::vector<int64_t>& shape, const void* data, uint64_t bytes);

// Bytes per element of a descr ("<f4" -> 4); 0 when the descr is not of the form
// [<|=]<letter><size>.
int npy_item_size(const std::string& descr);

}  // namespace psa_cli

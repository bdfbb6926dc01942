// cli/host_tensor.h -- one attention tensor on the host as the CLI handles it: a
// psa_tensor_desc plus its values as float in storage order, with the dtype conversions
// and .npy mapping. No attention math here.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "psa.h"

namespace psa_cli {

struct HostTensor {
  psa_tensor_desc desc{};     // logical [B, H, L, D]; contiguous BNSD or BSND strides
  psa_layout layout = PSA_LAYOUT_BNSD;
  std::vector<float> values;  // storage order, already rounded to desc.dtype

  int64_t batch() const { return desc.shape[0]; }
  int64_t heads() const { return desc.shape[1]; }
  int64_t seq_len() const { return desc.shape[2]; }
  int64_t head_dim() const { return desc.shape[3]; }
  // Storage offset of logical element (b, h, l, d).
  int64_t offset(int64_t b, int64_t h, int64_t l, int64_t d) const {
    return b * desc.strides[0] + h * desc.strides[1] + l * desc.strides[2] + d * desc.strides[3];
  }
  // The .npy shape of this tensor: [B, H, L, D] for BNSD, [B, L, H, D] for BSND.
  std::vector<int64_t> file_shape() const;
};

// A zero-filled tensor; throws Failure when psa_tensor_desc_init rejects the values or when
// its host copy alone would not fit in this machine's memory (check_host_memory).
HostTensor make_tensor(psa_layout layout, psa_dtype dtype, int64_t batch, int64_t heads,
                       int64_t seq_len, int64_t head_dim);

// Throws Failure naming `what` when `bytes` of host memory exceed the machine's physical
// memory, before anything is allocated: on a machine that overcommits, an allocation that
// size succeeds and the process is killed while it fills it. No check where the physical
// memory is unknown (non-POSIX hosts).
void check_host_memory(double bytes, const std::string& what);

// Rounds every value to what `dtype` can hold (identity for F32).
void round_to_dtype(std::vector<float>& values, psa_dtype dtype);
// The same for one value.
float round_to_dtype(float value, psa_dtype dtype);

// Values -> the dtype's bytes, and back.
std::vector<uint8_t> encode(const std::vector<float>& values, psa_dtype dtype);
std::vector<float> decode(const void* bytes, uint64_t count, psa_dtype dtype);

const char* dtype_name(psa_dtype dtype);  // "f32", "f16", "bf16"

// Reads q/k/v from a .npy file in `layout` ('<f4', '<f2', or raw 16-bit '<u2'/'<V2' read as
// bfloat16, which needs dtype == BF16). `dtype` is the run's dtype, or -1 to take the
// file's. Throws Failure naming the file and the problem.
HostTensor load_npy_tensor(const std::string& path, psa_layout layout, int dtype);

// Writes a tensor's values as '<f4', or in its own dtype ('<f4', '<f2', '<u2' for bf16
// bits) when `native` is true. Shape as file_shape().
void save_npy_tensor(const std::string& path, const HostTensor& t, bool native);

}  // namespace psa_cli

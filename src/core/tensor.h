// core/tensor.h -- tensor descriptor validation: public psa_tensor_desc -> internal Problem
// plus strides. Every failure names the tensor, the dimension and the values.
#pragma once
#include <cstdint>

#include "core/problem.h"
#include "psa.h"

namespace psa {

int32_t dtype_size(psa_dtype dtype);
const char* dtype_name(psa_dtype dtype);

psa_status tensor_desc_init(psa_tensor_desc* desc, psa_layout layout, psa_dtype dtype,
                            int64_t batch, int64_t heads, int64_t seq_len, int64_t head_dim);

// Validates q, k, v and (optional) out descriptors of one forward and fills `problem`.
// Checks: struct_size, dtype known and equal, shapes >= 1, element counts and byte extents
// fit int64, B equal, Hq % Hkv == 0, k and v shapes equal, D equal, out == q's shape,
// strides >= 0 with strides[3] == 1.
// Checks one descriptor alone (dtype, shape, strides, no aliasing); the message names it.
psa_status validate_descriptor(const char* name, const psa_tensor_desc* d);
psa_status validate_descriptors(const psa_tensor_desc* q, const psa_tensor_desc* k,
                                const psa_tensor_desc* v, const psa_tensor_desc* out,
                                Problem* problem);

// Largest element offset + 1 addressed by a descriptor (its extent in elements).
int64_t tensor_extent(const psa_tensor_desc& d);

// Byte range [begin, end) of memory, for the aliasing checks of the entry points.
struct ByteRange {
  uintptr_t begin = 0, end = 0;
};
inline ByteRange byte_range(const void* p, uint64_t bytes) {
  const uintptr_t b = reinterpret_cast<uintptr_t>(p);
  return {b, b + static_cast<uintptr_t>(bytes)};
}
// The bytes a tensor with descriptor `d` at `p` addresses (tensor_extent elements).
inline ByteRange byte_range(const psa_tensor_desc& d, const void* p) {
  return byte_range(p, static_cast<uint64_t>(tensor_extent(d)) *
                           static_cast<uint64_t>(dtype_size(d.dtype)));
}
inline bool overlaps(ByteRange a, ByteRange b) { return a.begin < b.end && b.begin < a.end; }

}  // namespace psa

// cuda/rearrange/gather_cuda.h -- rearrange stage, entry layer: copies a strided [B, H, L, D]
// 16-bit tensor into a contiguous one, rearranged (row i <- source row index[i]). The inverse
// (output row i -> caller row index[i]) is fused into the attention epilogue. No math here.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "psa.h"

namespace psa {
namespace gpu {

struct GatherArgs {
  psa_dtype dtype = PSA_DTYPE_BF16;         // F16 or BF16 (copied bit for bit)
  const void* src = nullptr;                // device, strides in elements, stride[3] == 1
  int64_t stride[4] = {0, 0, 0, 1};
  void* dst = nullptr;                      // device, contiguous [batch, heads, len, head_dim]
  int64_t batch = 0, heads = 0, len = 0, head_dim = 0;  // head_dim % 8 == 0
  const int64_t* index = nullptr;           // device [len] or NULL (identity)
};

psa_status gather_rows_cuda(const GatherArgs& args, cudaStream_t stream);

}  // namespace gpu
}  // namespace psa

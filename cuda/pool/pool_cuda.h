// cuda/pool/pool_cuda.h -- pool stage, entry layer: K/V pyramid (levels 2, 4, 8 of the
// replicate-padded sequence, hierarchical means, spec 6.1) in one pass over the input.
// Meaning in src/pool/pool_spec.h; this header only declares the entry.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "psa.h"

namespace psa {
namespace gpu {

struct PoolArgs {
  psa_dtype dtype = PSA_DTYPE_BF16;  // F16 or BF16
  const void* x = nullptr;           // device, contiguous [heads, len, head_dim] (heads = B*Hkv)
  int64_t heads = 0, len = 0, head_dim = 0;
  int64_t n_blocks = 0, block_n = 0;  // padded length n_blocks * block_n, block_n % 8 == 0
  void* out[3] = {nullptr, nullptr, nullptr};  // levels 2, 4, 8: [heads, n_blocks*block_n/p, head_dim]
};

psa_status pool_pyramid_cuda(const PoolArgs& args, cudaStream_t stream);

// Whether the pool entries (pool_pyramid_cuda, gather_pool_pyramid_cuda) run this head dim and
// block: PSA_OK, else PSA_ERR_UNSUPPORTED naming the values (both multiples of 8: the kernels
// move 8 elements at a time and pool to 1/8). Both entries ask it; so does the CUDA backend's
// prepare().
psa_status pool_supported(int64_t head_dim, int64_t block_n);

struct GatherArgs;  // cuda/rearrange/gather_cuda.h

// gather_rows_cuda(g) and then the pyramid of g.dst (as pool_pyramid_cuda with x = g.dst,
// heads = g.batch * g.heads, len = g.len) into out (levels 2, 4, 8), in one pass that reads
// the source once. Same bits as the two calls.
psa_status gather_pool_pyramid_cuda(const GatherArgs& g, int64_t n_blocks, int64_t block_n, void* const out[3],
                                    cudaStream_t stream);

}  // namespace gpu
}  // namespace psa

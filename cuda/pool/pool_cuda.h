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
  // Levels 2, 4, 8: [heads, n_blocks*block_n/p, head_dim]; a NULL level is not written.
  void* out[3] = {nullptr, nullptr, nullptr};
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
// the source once. Same bits as the two calls. out[l] may be NULL: that level is not written
// (the others keep their bits; the CUDA backend passes NULL for a level its plan's level map
// cannot hold, Plan::pooled_levels). g.dst may be NULL: the pyramid alone, from the gathered
// rows (the CUDA backend then reads level 1 from the caller's tensor).
psa_status gather_pool_pyramid_cuda(const GatherArgs& g, int64_t n_blocks, int64_t block_n, void* const out[3],
                                    cudaStream_t stream);

// ---- 8-bit K and V (attention/attention_fp8.h's rule; cuda/pool/pool_fp8.cu) -----------------
// Outputs of gather_pool_fp8_cuda for heads = batch * heads (the K/V heads) and nk key blocks.
// Level index li = 0, 1, 2, 3 is level 1, 2, 4, 8 (pyramid_slot); level li has len_li tokens:
// len_0 = the sequence length, len_li = nk * block_n / 2^li.
struct Fp8KvOut {
  float* k_mean = nullptr;  // [heads, d]: per channel, the mean of K's first token of each key block
  // int8 K - k_mean per level, [heads, len_li, d]; -128 (never a rounded value) stands for a
  // value that is not finite (the oracle's NaN).
  void* k8[4] = {nullptr, nullptr, nullptr, nullptr};
  float* k_scale = nullptr;  // [heads, 4, nk]: s_k per (level, key block); NaN when the block holds a -128
  void* v8[4] = {nullptr, nullptr, nullptr, nullptr};  // e4m3 V per level, [heads, len_li, d]
  // [heads, 4, nk]: s_v per (level, key block), 0 for a block without a non-zero finite value.
  float* v_scale = nullptr;
  // [heads]: the largest s_v of a block with a non-zero finite value, 0 if there is none (the
  // oracle's s_v,max is then 1). The share of a block is f = s_v / s_v,max (1 when s_v is 0).
  float* v_smax = nullptr;
};

// Whether gather_pool_fp8_cuda runs this head dim and block (one CTA of at most 256 threads holds
// a key block: block_n * head_dim <= 16384, both multiples of 8).
psa_status pool_fp8_supported(int64_t head_dim, int64_t block_n);

// The gathered K and V (gk, gv as gather_rows_cuda; same batch, heads, len, head_dim; dst may be
// NULL: no 16-bit level-1 copy) pooled as gather_pool_pyramid_cuda does, and every level of both
// quantized by attention_fp8.h's rule into `out`: K's mean (a pass over the first token of each
// key block), then one CTA per (head, key block) computing its 4 levels of K or V, their largest
// magnitudes and the 8-bit values. The 16-bit pyramid is not written. Same values as
// fp8_quantize_head_cpu on the gathered, pooled (and rounded) tokens.
psa_status gather_pool_fp8_cuda(const GatherArgs& gk, const GatherArgs& gv, int64_t n_blocks, int64_t block_n,
                                const Fp8KvOut& out, cudaStream_t stream);

}  // namespace gpu
}  // namespace psa

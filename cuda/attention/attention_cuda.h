// cuda/attention/attention_cuda.h -- attention stage, entry layer: mixed-level sparse
// attention over a row work list (cuda/mask/mask_cuda.h), or dense attention (every key at
// level 1) over the caller's strided tensors. Meaning in src/attention/attention_spec.h.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "cuda/core/problem_dims.h"
#include "psa.h"

namespace psa {
namespace gpu {

enum class AttentionKernel { kAuto, kSm80, kSm90 };

struct AttentionArgs {
  psa_dtype dtype = PSA_DTYPE_BF16;  // F16 or BF16; out has the same type
  ProblemDims dims;  // block_m: 64 or 128; block_n: any multiple of 8 (mq, nk unused)
  float scale = 0.0f;
  bool causal = false;
  bool dense = false;  // all keys at level 1; wl_* and the pooled levels are ignored
  // Level-1 tensors [B, H, L, D] with element strides (rows 16-byte aligned: see
  // attention_rows_aligned).
  const void* q = nullptr;
  int64_t q_stride[4] = {0, 0, 0, 1};
  const int64_t* q_rows = nullptr;   // [Lq] row x of the problem reads q row q_rows[x]; NULL = x
  const void* k = nullptr;
  int64_t k_stride[4] = {0, 0, 0, 1};
  const void* v = nullptr;
  int64_t v_stride[4] = {0, 0, 0, 1};
  // Pooled levels 2, 4, 8: contiguous [B, Hkv, nk*block_n/p, D] (pool_pyramid_cuda).
  const void* k_pooled[3] = {nullptr, nullptr, nullptr};
  const void* v_pooled[3] = {nullptr, nullptr, nullptr};
  // Work list (build_worklist_cuda) of the level map [B*Hq*Mq, nk].
  const int32_t* wl_blocks = nullptr;
  const int32_t* wl_count = nullptr;
  void* out = nullptr;
  int64_t o_stride[4] = {0, 0, 0, 1};
  float* lse = nullptr;              // [B, Hq, Lq] fp32 or NULL
  const int64_t* out_rows = nullptr; // row x of the (rearranged) problem -> out row; NULL = x
  // Which kernel: AUTO picks the Hopper kernel (sm90/) on compute capability 9.x when the
  // binary holds sm_90a code and block_m is 128, else the sm80 kernel. Tests and the benchmark
  // force one to compare them.
  AttentionKernel kernel = AttentionKernel::kAuto;
  // Hopper kernel only: at most this many persistent CTAs (0: one per SM). Tests cap it so
  // that every CTA runs many query blocks.
  int max_ctas = 0;
};

// True when every row of a tensor starts on 16 bytes (pointer and strides), so the kernel
// can copy it with cp.async; otherwise the caller gathers it into a contiguous buffer first.
bool attention_rows_aligned(const void* ptr, const int64_t stride[4]);

// Whether attention_cuda runs a problem of this shape: PSA_OK, else PSA_ERR_UNSUPPORTED with a
// message naming the value (dtype f16/bf16; head_dim 64/128; block_m 64/128; block_n a
// multiple of 8 unless dense; lengths below 2^30 for 32-bit token indices; batch and heads at
// most 65535 for the grid). attention_cuda asks it first; the CUDA backend's prepare() asks it
// when a shape is planned.
psa_status attention_supported(psa_dtype dtype, int64_t batch, int64_t heads_q, int64_t len_q,
                               int64_t len_k, int64_t head_dim, int64_t block_m, int64_t block_n,
                               bool dense);

psa_status attention_cuda(const AttentionArgs& args, cudaStream_t stream);

// The kernel attention_cuda would run for `args` on the current device (never kAuto).
AttentionKernel attention_kernel_for(const AttentionArgs& args);

}  // namespace gpu
}  // namespace psa

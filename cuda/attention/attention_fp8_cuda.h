// cuda/attention/attention_fp8_cuda.h -- attention stage, entry layer of the 8-bit path:
// mixed-level sparse attention by attention/attention_fp8.h's rule on Hopper, over the 8-bit K / V
// pyramid of gather_pool_fp8_cuda (cuda/pool/pool_cuda.h) and a row work list
// (cuda/mask/mask_cuda.h). Q and out stay 16-bit; Q is quantized inside the kernel.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "cuda/core/problem_dims.h"
#include "cuda/pool/pool_cuda.h"
#include "psa.h"

namespace psa {
namespace gpu {

struct AttentionFp8Args {
  psa_dtype dtype = PSA_DTYPE_BF16;  // q and out: F16 or BF16
  ProblemDims dims;                  // head_dim 128, block_m 128, block_n a power of two 8..128
  float scale = 0.0f;
  const void* q = nullptr;           // [B, Hq, Lq, 128] with element strides, rows 16-byte aligned
  int64_t q_stride[4] = {0, 0, 0, 1};
  const int64_t* q_rows = nullptr;   // [Lq] row x of the problem reads q row q_rows[x]; NULL = x
  // gather_pool_fp8_cuda's outputs, read only: 8-bit K / V per level index (contiguous
  // [B*Hkv, len_li, 128]) and the scales.
  Fp8KvOut kv;
  const int32_t* wl_blocks = nullptr;  // work list of the level map
  const int32_t* wl_count = nullptr;
  void* out = nullptr;
  int64_t o_stride[4] = {0, 0, 0, 1};
  float* lse = nullptr;                // [B, Hq, Lq] or NULL
  const int64_t* out_rows = nullptr;   // row x -> out row, or NULL
  int max_ctas = 0;                    // at most this many persistent CTAs (0: one per SM)
};

// Whether attention_fp8_cuda runs on this device and shape: PSA_OK, else PSA_ERR_UNSUPPORTED
// naming what is missing (compute capability 9.x with an sm_90a build; head_dim 128; block_m
// 128; block_n a power of two from 8 to 128; non-causal).
psa_status attention_fp8_supported(const AttentionFp8Args& args, bool causal);

psa_status attention_fp8_cuda(const AttentionFp8Args& args, cudaStream_t stream);

}  // namespace gpu
}  // namespace psa

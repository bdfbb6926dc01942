// cuda/attention/merge_cuda.h -- merge of partial attention results through their fp32
// log-sum-exps (psa_merge_attention on the CUDA backend). Math in src/attention/merge_spec.h.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "psa.h"

namespace psa {
namespace gpu {

constexpr int kMaxMergeParts = 64;

// out[b,h,l,:] = sum_i w_i out_i[b,h,l,:], lse[b,h,l] = merged lse (merge_weights). Parts
// and out share shape and strides (elements); lses and lse are [B, H, L] contiguous. out may
// be one of outs and lse one of lses. One warp per row; no allocation.
struct MergeArgs {
  int32_t count = 0;
  psa_dtype dtype = PSA_DTYPE_F32;
  int64_t shape[4] = {0, 0, 0, 0};
  int64_t stride[4] = {0, 0, 0, 1};
  const void* outs[kMaxMergeParts] = {};
  const float* lses[kMaxMergeParts] = {};
  void* out = nullptr;
  float* lse = nullptr;  // optional
};
psa_status merge_attention_cuda(const MergeArgs& args, cudaStream_t stream);

}  // namespace gpu
}  // namespace psa

// cuda/attention/attention_launch.h -- attention stage, launcher layer: the instantiated
// launchers (one per dtype x head dim, query blocks of 64 or 128 rows), defined in
// attention_<dtype>_d<D>.cu, and the Hopper ones (sm90/attention_sm90.cu). Used by the entry only.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "cuda/attention/attention_params.h"

namespace psa {
namespace gpu {

cudaError_t launch_attention_f16_d64(const AttnKernelParams& p, int block_m, int64_t batch, cudaStream_t s);
cudaError_t launch_attention_f16_d128(const AttnKernelParams& p, int block_m, int64_t batch, cudaStream_t s);
cudaError_t launch_attention_bf16_d64(const AttnKernelParams& p, int block_m, int64_t batch, cudaStream_t s);
cudaError_t launch_attention_bf16_d128(const AttnKernelParams& p, int block_m, int64_t batch, cudaStream_t s);

// Hopper kernel (cuda/attention/sm90/): query blocks of 128 rows, head dim 64 or 128, f16
// (f16 = true) or bf16. Launch only when attention_sm90_available().
cudaError_t launch_attention_sm90(const AttnKernelParams& p, bool f16, int head_dim, int64_t batch,
                                  cudaStream_t s);
bool attention_sm90_available();

}  // namespace gpu
}  // namespace psa

// cuda/attention/attention_f16_d64.cu -- attention stage, launcher instantiation for
// f16 inputs at head dim 64 (query blocks of 64 and 128 rows). One small file per
// combination so the two CI cores compile them in parallel; no logic here.
#include "cuda/attention/attention_kernel_sm80.cuh"
#include "cuda/attention/attention_launch.h"

namespace psa {
namespace gpu {

cudaError_t launch_attention_f16_d64(const AttnKernelParams& p, int block_m, int64_t batch,
                                  cudaStream_t s) {
  return block_m == 64 ? launch_sparse_attention<__half, 64, 64>(p, batch, s)
                       : launch_sparse_attention<__half, 64, 128>(p, batch, s);
}

}  // namespace gpu
}  // namespace psa

// cuda/importance/block_scores_bf16_d64.cu -- importance stage, launcher instantiation of the
// GEMM score path for bf16 inputs at head dim 64 (every power-of-two key sample count). One small
// file per combination so the cores compile them in parallel; no logic here.
#include "cuda/importance/block_scores_kernel_sm80.cuh"

namespace psa {
namespace gpu {
namespace score_gemm {

psa_status launch_scores_bf16_d64(const GemmScoreParams& p, int32_t k_count, int64_t slots, cudaStream_t s) {
  return dispatch_kc<__nv_bfloat16, 64>(p, k_count, slots, s);
}

}  // namespace score_gemm
}  // namespace gpu
}  // namespace psa

// cuda/importance/block_scores_sm80.cu -- importance stage, entry of the GEMM-shaped score path:
// converts ScoreArgs once into GemmScoreParams, picks the Hopper kernel (block_scores_sm90.cu)
// where it runs, else dispatches the sm80 kernel (block_scores_kernel_sm80.cuh) on dtype and head
// dim. Must not define its own sampling or scoring rule.
#include <cstdint>

#include "cuda/core/cuda_status.h"
#include "cuda/importance/block_scores_gemm.h"
#include "cuda/importance/score_scratch.h"

namespace psa {
namespace gpu {

psa_status block_scores_gemm_cuda(const ScoreArgs& a, cudaStream_t stream) {
  using score_gemm::GemmScoreParams;
  PSA_RETURN_IF(!score_gemm_supported(a.q_count, a.k_count), PSA_ERR_INTERNAL,
                "importance: GEMM path with %d/%d samples per block", a.q_count, a.k_count);
  GemmScoreParams p{};
  fill_score_params(p, a);
  p.tie_run_min = a.tie_run_min;
  p.q = q_row_source(a);
  p.row_tiles = ceil_div(p.mq * a.q_count, kScoreTileRows);
  p.tiles = score_gemm_tiles(a.dims.batch * a.dims.heads_q, p.mq, a.q_count);
  p.q_shift = 0;
  while ((1 << p.q_shift) < a.q_count) ++p.q_shift;
  p.scratch = static_cast<float*>(a.scratch);
  if (p.tiles == 0 || p.nk == 0) return PSA_OK;
  const int64_t slots = static_cast<int64_t>(a.scratch_bytes / score_scratch_slot_bytes(p.nk));
  PSA_RETURN_IF(slots < 1 || a.scratch == nullptr || reinterpret_cast<uintptr_t>(a.scratch) % 16 != 0,
                PSA_ERR_INTERNAL, "importance: scratch %p of %llu bytes; one slot needs %llu, 16-byte aligned",
                a.scratch, static_cast<unsigned long long>(a.scratch_bytes),
                static_cast<unsigned long long>(score_scratch_slot_bytes(p.nk)));
  const bool bf16 = a.dtype == PSA_DTYPE_BF16;
  PSA_RETURN_IF(!bf16 && a.dtype != PSA_DTYPE_F16, PSA_ERR_UNSUPPORTED,
                "importance: dtype = %d; supported: f16, bf16", static_cast<int>(a.dtype));
  PSA_RETURN_IF(a.dims.head_dim != 64 && a.dims.head_dim != 128, PSA_ERR_UNSUPPORTED,
                "q: shape[3] (head_dim) = %lld; supported: 64, 128", static_cast<long long>(a.dims.head_dim));
  const bool sm90 = a.kernel != ScoreKernel::kSm80 && score_sm90_available();
  PSA_RETURN_IF(a.k8 != nullptr && !sm90, PSA_ERR_UNSUPPORTED,
                "importance: the 8-bit rule (k8) runs on the sm90 score kernel only");
  PSA_RETURN_IF(a.kernel == ScoreKernel::kSm90 && !sm90, PSA_ERR_UNSUPPORTED,
                "importance: the sm90 score kernel needs compute capability 9.x and an sm_90a build");
  if (sm90) {
    const cudaError_t e = score_gemm::launch_scores_sm90(p, a, slots, stream);
    if (e == cudaSuccess) return PSA_OK;
    if (e != cudaErrorNotSupported || a.kernel == ScoreKernel::kSm90 || a.k8 != nullptr)
      return set_error(PSA_ERR_CUDA, "block_scores_sm90_kernel<d=%lld>: %s", static_cast<long long>(a.dims.head_dim),
                       cudaGetErrorString(e));
    (void)cudaGetLastError();
  }
  if (a.dims.head_dim == 64)
    return bf16 ? score_gemm::launch_scores_bf16_d64(p, a.k_count, slots, stream)
                : score_gemm::launch_scores_f16_d64(p, a.k_count, slots, stream);
  return bf16 ? score_gemm::launch_scores_bf16_d128(p, a.k_count, slots, stream)
              : score_gemm::launch_scores_f16_d128(p, a.k_count, slots, stream);
}

psa_status score_scratch_slots(int64_t* slots) {
  int dev = 0, sms = 0;
  PSA_CUDA_TRY(cudaGetDevice(&dev), "score_scratch_slots: cudaGetDevice");
  PSA_CUDA_TRY(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev),
               "score_scratch_slots: cudaDeviceGetAttribute");
  // sm80 kernel: one slot per resident CTA (2 per SM at d64, 1 at d128); sm90 kernel: one CTA per
  // SM with two slots (it finishes one tile while it sweeps the next). Two per SM covers both.
  *slots = static_cast<int64_t>(sms) * 2;
  return PSA_OK;
}

}  // namespace gpu
}  // namespace psa

// backend/cuda/cuda_causal_psa.cpp -- CUDA backend, psa_causal stages of its own: unpacks the
// plan into the cuda/methods entries. Enqueues only; compiled to nothing without PSA_WITH_CUDA.
#if defined(PSA_WITH_CUDA)
#include "backend/cuda/cuda_causal_psa.h"

#include <algorithm>

#include "backend/cuda/cuda_dims.h"
#include "core/error.h"
#include "cuda/methods/causal_psa_cuda.h"
#include "methods/causal_psa_spec.h"

namespace psa {

psa_status check_causal_psa_limits(const Plan& plan) {
  if (!plan.route.causal_psa()) return PSA_OK;
  const int64_t stride = plan.route.xattn_stride;
  const int64_t max_nb = gpu::causal_psa_max_blocks(plan.block_m, stride, plan.problem.head_dim);
  PSA_RETURN_IF(plan.k_blocks > max_nb, PSA_ERR_UNSUPPORTED,
                "type = psa_causal: %lld blocks of %lld tokens (xattn_stride %lld, head_dim %lld); "
                "the CUDA kernels hold at most %lld on this device",
                static_cast<long long>(plan.k_blocks), static_cast<long long>(plan.block_m),
                static_cast<long long>(stride), static_cast<long long>(plan.problem.head_dim),
                static_cast<long long>(max_nb));
  return PSA_OK;
}

psa_status enqueue_causal_psa_scores(const Plan& plan, char* ws, const CudaWorkspaceLayout& w,
                                     void* stream) {
  const Problem& pb = plan.problem;
  gpu::CausalPsaScoreArgs sa;
  sa.dtype = pb.dtype;
  sa.q = ws + w.q;
  sa.k = ws + w.k;
  sa.dims = problem_dims(plan);
  sa.stride = plan.route.xattn_stride;
  sa.scale = plan.scale;
  sa.scores = reinterpret_cast<float*>(ws + w.scores);
  return gpu::causal_psa_scores_cuda(sa, static_cast<cudaStream_t>(stream));
}

psa_status enqueue_causal_psa_levels(const Plan& plan, char* ws, const CudaWorkspaceLayout& w,
                                     void* stream) {
  const Problem& pb = plan.problem;
  gpu::CausalPsaLevelArgs la;
  la.scores = reinterpret_cast<const float*>(ws + w.scores);
  la.cap = reinterpret_cast<const int8_t*>(ws + w.cap);
  la.dims = problem_dims(plan);
  la.text_block = causal_psa_text_block(pb.len_k, plan.route.text_length, plan.block_n);
  la.mode = plan.route.mask_row.mode;
  std::copy(plan.route.mask_row.ratio_end, plan.route.mask_row.ratio_end + kNumSlots, la.ratio_end);
  la.levels = reinterpret_cast<int8_t*>(ws + w.levels);
  return gpu::causal_psa_levels_cuda(la, static_cast<cudaStream_t>(stream));
}

}  // namespace psa
#endif  // PSA_WITH_CUDA

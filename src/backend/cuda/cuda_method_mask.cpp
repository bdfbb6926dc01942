// backend/cuda/cuda_method_mask.cpp -- CUDA backend, mask stage of rf_v2 / ada_bsa: unpacks the
// plan (its route and shape) into the cuda/methods/ entries. Enqueues only; compiled to nothing
// without PSA_WITH_CUDA.
#if defined(PSA_WITH_CUDA)
#include "backend/cuda/cuda_method_mask.h"

#include <cuda_runtime_api.h>

#include "backend/cuda/cuda_dims.h"
#include "core/error.h"
#include "cuda/methods/methods_cuda.h"

namespace psa {

psa_status check_method_mask_limits(const Plan& plan) {
  if (!plan.route.block_method()) return PSA_OK;
  const bool rf = plan.route.method == PSA_METHOD_RF_V2;
  const int64_t d = plan.problem.head_dim;
  const int64_t max_nb = rf ? gpu::rf_v2_max_blocks(d) : gpu::ada_bsa_max_blocks(d);
  PSA_RETURN_IF(plan.k_blocks > max_nb, PSA_ERR_UNSUPPORTED,
                "k: seq_len = %lld gives %lld key blocks of 128; the CUDA %s mask builder holds at "
                "most %lld per row on this device (head_dim %lld)",
                static_cast<long long>(plan.problem.len_k), static_cast<long long>(plan.k_blocks),
                rf ? "rf_v2" : "ada_bsa", static_cast<long long>(max_nb), static_cast<long long>(d));
  return PSA_OK;
}

psa_status enqueue_method_levels(const Plan& plan, char* ws, const CudaWorkspaceLayout& w,
                                 void* stream) {
  const RoutePlan& cfg = plan.route;
  const Problem& pb = plan.problem;
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  int8_t* levels = reinterpret_cast<int8_t*>(ws + w.levels);
  if (cfg.method == PSA_METHOD_RF_V2) {
    gpu::RfV2MaskArgs a;
    a.dtype = pb.dtype;
    a.q = ws + w.q;
    a.k = ws + w.k;
    a.dims = problem_dims(plan);
    a.scale = plan.scale;
    a.sparsity = cfg.sparsity;
    a.frame_tokens = plan.k_seq.frame_tokens;
    a.text_begin = plan.text_begin;
    a.text_end = plan.text_end;
    a.means = reinterpret_cast<float*>(ws + w.means);
    a.levels = levels;
    PSA_RETURN_IF(a.frame_tokens <= 0 || plan.k_seq.src.empty(), PSA_ERR_INVALID_STATE,
                  "type = rf_v2 needs the video grid (latent t, h, w): call "
                  "psa_context_set_video_grid before planning the shape");
    return gpu::rf_v2_levels_cuda(a, s);
  }
  if (cfg.method == PSA_METHOD_ADA_BSA) {
    gpu::AdaBsaMaskArgs a;
    a.dtype = pb.dtype;
    a.q = ws + w.q;
    a.k = ws + w.k;
    a.dims = problem_dims(plan);
    a.scale = plan.scale;
    a.cdf_threshold = cfg.cdf_threshold;
    a.sparsity = cfg.sparsity;
    a.causal = cfg.causal;
    a.keep_sink = cfg.keep_sink;
    a.keep_recent = cfg.keep_recent;
    a.levels = levels;
    return gpu::ada_bsa_levels_cuda(a, s);
  }
  return set_error(PSA_ERR_INTERNAL, "enqueue_method_levels: type = %d is not rf_v2 or ada_bsa",
                   static_cast<int>(cfg.method));
}

}  // namespace psa
#endif  // PSA_WITH_CUDA

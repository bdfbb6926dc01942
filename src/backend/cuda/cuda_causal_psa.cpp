// backend/cuda/cuda_causal_psa.cpp -- CUDA backend, psa_causal stages up to the level map:
// unpacks the config and the plan into the cuda/ entries. Enqueues only; compiled to nothing
// without PSA_WITH_CUDA.
#if defined(PSA_WITH_CUDA)
#include "backend/cuda/cuda_causal_psa.h"

#include <cuda_runtime_api.h>

#include <algorithm>

#include "core/error.h"
#include "cuda/mask/mask_cuda.h"
#include "cuda/methods/causal_psa_cuda.h"
#include "cuda/pool/pool_cuda.h"
#include "cuda/rearrange/gather_cuda.h"
#include "methods/causal_psa_spec.h"

namespace psa {

psa_status check_causal_psa_limits(const Config& cfg, const Plan& plan) {
  if (cfg.method != PSA_METHOD_PSA_CAUSAL) return PSA_OK;
  const int64_t max_nb = gpu::causal_psa_max_blocks(plan.block_m, cfg.xattn_stride, plan.problem.head_dim);
  PSA_RETURN_IF(plan.k_blocks > max_nb, PSA_ERR_UNSUPPORTED,
                "type = psa_causal: %lld blocks of %lld tokens (xattn_stride %lld, head_dim %lld); "
                "the CUDA kernels hold at most %lld on this device",
                static_cast<long long>(plan.k_blocks), static_cast<long long>(plan.block_m),
                static_cast<long long>(cfg.xattn_stride), static_cast<long long>(plan.problem.head_dim),
                static_cast<long long>(max_nb));
  return PSA_OK;
}

psa_status enqueue_causal_psa_levels(const Config& cfg, const Plan& plan, const ForwardArgs& a,
                                     const int64_t* k_src, char* ws, const CudaWorkspaceLayout& w,
                                     void* stream_ptr) {
  cudaStream_t stream = static_cast<cudaStream_t>(stream_ptr);
  const Problem& pb = plan.problem;
  // K and V: contiguous copies and their pyramids in one pass over each.
  gpu::GatherArgs g;
  g.dtype = pb.dtype;
  g.batch = pb.batch;
  g.head_dim = pb.head_dim;
  g.heads = pb.heads_kv;
  g.len = pb.len_k;
  g.index = k_src;
  const void* src[2] = {a.k, a.v};
  const int64_t* str[2] = {a.k_stride, a.v_stride};
  const uint64_t dst[2] = {w.k, w.v};
  const uint64_t* pooled[2] = {w.k_pooled, w.v_pooled};
  for (int t = 0; t < 2; ++t) {
    g.src = src[t];
    std::copy(str[t], str[t] + 4, g.stride);
    g.dst = ws + dst[t];
    void* out[3];
    for (int l = 0; l < 3; ++l) out[l] = ws + pooled[t][l];
    PSA_TRY(gpu::gather_pool_pyramid_cuda(g, plan.k_blocks, plan.block_n, out, stream));
  }
  // Similarity cap, always on for this method (spec App. A step 2).
  gpu::SimCapArgs ca;
  ca.dtype = pb.dtype;
  ca.k = ws + w.k;
  ca.heads = pb.batch * pb.heads_kv;
  ca.len_k = pb.len_k;
  ca.head_dim = pb.head_dim;
  ca.n_blocks = plan.k_blocks;
  ca.block_n = plan.block_n;
  std::copy(cfg.sim_threshold, cfg.sim_threshold + 3, ca.threshold);
  ca.cap = reinterpret_cast<int8_t*>(ws + w.cap);
  PSA_TRY(gpu::sim_cap_cuda(ca, stream));
  // Antidiagonal importance.
  gpu::CausalPsaScoreArgs sa;
  sa.dtype = pb.dtype;
  sa.q = ws + w.q;
  sa.k = ws + w.k;
  sa.batch = pb.batch;
  sa.heads_q = pb.heads_q;
  sa.heads_kv = pb.heads_kv;
  sa.len = pb.len_k;
  sa.head_dim = pb.head_dim;
  sa.block = plan.block_m;
  sa.stride = cfg.xattn_stride;
  sa.scale = plan.scale;
  sa.scores = reinterpret_cast<float*>(ws + w.scores);
  PSA_TRY(gpu::causal_psa_scores_cuda(sa, stream));
  // Levels.
  gpu::CausalPsaLevelArgs la;
  la.scores = sa.scores;
  la.cap = ca.cap;
  la.batch = pb.batch;
  la.heads_q = pb.heads_q;
  la.heads_kv = pb.heads_kv;
  la.nb = plan.k_blocks;
  la.text_block = causal_psa_text_block(pb.len_k, cfg.text_length, plan.block_n);
  la.mode = cfg.mask_mode;
  std::copy(cfg.ratio_end, cfg.ratio_end + kNumSlots, la.ratio_end);
  la.levels = reinterpret_cast<int8_t*>(ws + w.levels);
  return gpu::causal_psa_levels_cuda(la, stream);
}

}  // namespace psa
#endif  // PSA_WITH_CUDA

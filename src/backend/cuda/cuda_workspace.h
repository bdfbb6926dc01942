// backend/cuda/cuda_workspace.h -- CUDA backend, plan layer: where each intermediate of a
// forward lives in the caller's workspace (byte offsets, 256-byte aligned). Host-only, no
// CUDA includes; computed once per plan by CudaBackend::prepare.
#pragma once
#include <cstdint>

#include "context/plan.h"
#include "cuda/importance/score_scratch.h"

namespace psa {

struct CudaWorkspaceLayout {
  // Rearranged contiguous copies [B, H, L, D] in the input dtype (also the fallback for
  // dense inputs whose rows are not 16-byte aligned).
  uint64_t q = 0, k = 0, v = 0;
  // Sparse forward only (0 = absent when `sparse` is false or the method does not use it).
  uint64_t k_pooled[3] = {0, 0, 0}, v_pooled[3] = {0, 0, 0};  // levels 2, 4, 8
  uint64_t q_off = 0, k_off = 0;  // int32 [B*Hq, samples]
  uint64_t scores = 0;            // fp32 [B*Hq, Mq, Nk]
  uint64_t ties = 0;              // fp32 [B*Hq, Mq, Nk] tie masses (importance_spec.h)
  uint64_t score_scratch = 0;     // fp32 [slots, Nk, 256] (importance GEMM path; 0 bytes: absent)
  uint64_t score_scratch_bytes = 0;
  uint64_t cap = 0;               // int8 [B*Hkv, Nk] (use_sim_mask)
  uint64_t means = 0;             // fp32 [B*Hq + B*Hkv, Nk, D] (rf_v2 block means)
  // precision = fp8 (the plan's route after prepare): gather_pool_fp8_cuda's outputs in place of
  // the 16-bit pyramids (cuda/pool/pool_cuda.h Fp8KvOut; K keeps its 16-bit level-1 copy for
  // the importance stage).
  uint64_t k8[4] = {0, 0, 0, 0}, v8[4] = {0, 0, 0, 0};  // 8-bit [B*Hkv, len_li, D] per level index
  uint64_t k_mean = 0;            // fp32 [B*Hkv, D]
  uint64_t k_scale = 0, v_scale = 0;  // fp32 [B*Hkv, 4, Nk]
  uint64_t v_smax = 0;            // fp32 [B*Hkv]
  uint64_t levels = 0;            // int8 [B*Hq, Mq, Nk]
  uint64_t wl_blocks = 0;         // int32 [B*Hq*Mq, Nk]
  uint64_t wl_count = 0;          // int32 [B*Hq*Mq, 4]
  uint64_t total = 0;
  bool sparse = false;
};

// `score_slots`: resident CTAs of the importance GEMM path on the plan's device
// (gpu::score_scratch_slots); 0 leaves its scratch out (the per-block kernel runs instead).
inline CudaWorkspaceLayout cuda_workspace_layout(const Plan& plan, int64_t score_slots) {
  CudaWorkspaceLayout w;
  const Problem& pb = plan.problem;
  const uint64_t es = 2, d = static_cast<uint64_t>(pb.head_dim);
  uint64_t used = 0;
  auto take = [&used](uint64_t bytes) {
    const uint64_t at = (used + 255) & ~uint64_t{255};
    used = at + bytes;
    return at;
  };
  const uint64_t bq = static_cast<uint64_t>(pb.batch * pb.heads_q);
  const uint64_t bkv = static_cast<uint64_t>(pb.batch * pb.heads_kv);
  w.q = take(bq * static_cast<uint64_t>(pb.len_q) * d * es);
  w.k = take(bkv * static_cast<uint64_t>(pb.len_k) * d * es);
  w.v = take(bkv * static_cast<uint64_t>(pb.len_k) * d * es);
  w.sparse = plan.route.sparse();
  if (w.sparse) {
    const uint64_t mq = static_cast<uint64_t>(plan.q_blocks), nk = static_cast<uint64_t>(plan.k_blocks);
    const uint64_t padded = nk * static_cast<uint64_t>(plan.block_n);
    // rf_v2 and ada_bsa keep whole blocks at full resolution from their own scores: no
    // pyramid, no sampled importance, no similarity cap.
    if (plan.route.pyramid() && plan.route.precision == PSA_PRECISION_FP8) {
      for (int li = 0; li < 4; ++li) {
        const uint64_t len = li == 0 ? static_cast<uint64_t>(pb.len_k) : padded >> li;
        w.k8[li] = take(bkv * len * d);
        w.v8[li] = take(bkv * len * d);
      }
      w.k_mean = take(bkv * d * 4);
      w.k_scale = take(bkv * 4 * nk * 4);
      w.v_scale = take(bkv * 4 * nk * 4);
      w.v_smax = take(bkv * 4);
    } else if (plan.route.pyramid()) {
      for (int l = 0; l < 3; ++l) {
        w.k_pooled[l] = take(bkv * (padded >> (l + 1)) * d * es);
        w.v_pooled[l] = take(bkv * (padded >> (l + 1)) * d * es);
      }
    }
    if (plan.route.pyramid()) {
      w.q_off = take(bq * static_cast<uint64_t>(plan.q_samples) * 4);
      w.k_off = take(bq * static_cast<uint64_t>(plan.k_samples) * 4);
      w.scores = take(bq * mq * nk * 4);
      w.ties = take(bq * mq * nk * 4);
      w.score_scratch_bytes = gpu::score_scratch_bytes(static_cast<int64_t>(bq), plan.q_blocks, plan.k_blocks,
                                                       plan.q_samples, plan.k_samples, score_slots);
      if (w.score_scratch_bytes > 0) w.score_scratch = take(w.score_scratch_bytes);
      if (plan.route.use_sim_mask || plan.route.causal_psa()) w.cap = take(bkv * nk);
    }
    if (plan.route.method == PSA_METHOD_RF_V2) w.means = take((bq + bkv) * nk * d * 4);
    w.levels = take(bq * mq * nk);
    w.wl_blocks = take(bq * mq * nk * 4);
    w.wl_count = take(bq * mq * 4 * 4);
  }
  w.total = (used + 255) & ~uint64_t{255};
  return w;
}

}  // namespace psa

// cuda/methods/causal_psa_cuda.h -- importance and mask stages of the causal PSA variant
// (psa_causal, spec App. A) on the GPU, entry layer. Rules from src/methods/causal_psa_spec.h;
// declarations only. Stream-ordered: no allocation, no synchronisation.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "cuda/core/problem_dims.h"
#include "psa.h"

namespace psa {
namespace gpu {

// Block scores [B*Hq, nb, nb] fp32 (entries J > I written 0) from 16-bit q [B, Hq, L, D] and
// k [B, Hkv, L, D], contiguous; query head h reads key head h / (Hq / Hkv). Strided
// antidiagonal logits (scale / stride), fp32 row softmax over the visible strided key groups,
// probabilities summed per block pair. With per = block / stride in {8, 16, 32} and head_dim a
// multiple of 64 the logits are one tensor-core GEMM per head (mma.sync, fp32 accumulation; a
// CTA owns 128 strided query rows and streams the key groups up to its diagonal twice: row
// statistics, then block sums, both in a fixed order: deterministic run to run); otherwise one
// CTA per (query block, head, batch) with scalar dots in the CPU's order
// (causal_psa_importance_cpu). Either way not bit for bit the CPU (accumulation order, exp):
// scores agree to fp32 rounding (the GPU test allows 2e-4 relative).
struct CausalPsaScoreArgs {
  psa_dtype dtype = PSA_DTYPE_BF16;  // F16 or BF16
  const void* q = nullptr;
  const void* k = nullptr;
  ProblemDims dims;  // len_q (== len_k), block_m (== block_n)
  int64_t stride = 8;
  float scale = 0.0f;
  float* scores = nullptr;
};
psa_status causal_psa_scores_cuda(const CausalPsaScoreArgs& args, cudaStream_t stream);
// Largest nb the score kernel holds on the current device (0 when it cannot be queried).
int64_t causal_psa_max_blocks(int64_t block, int64_t stride, int64_t head_dim);

// Levels [B*Hq, nb, nb] from the scores: per row the stable descending rank of each causal
// candidate, the topk / energybound slot rule, forced text / diagonal / column 0 and the
// similarity cap cap [B*Hkv, nb]; bit for bit causal_psa_levels_cpu. One CTA per row: a bitonic
// sort of (score, index) pairs in shared memory (8 bytes per entry of the next power of two).
struct CausalPsaLevelArgs {
  const float* scores = nullptr;
  const int8_t* cap = nullptr;
  ProblemDims dims;  // batch, heads_q, heads_kv, nk (== mq)
  int64_t text_block = 0;
  psa_mask_mode mode = PSA_MASK_MODE_ENERGYBOUND;
  double ratio_end[5] = {0.7, 0.8, 0.9, 0.9, 1.0};
  int8_t* levels = nullptr;
};
psa_status causal_psa_levels_cuda(const CausalPsaLevelArgs& args, cudaStream_t stream);

}  // namespace gpu
}  // namespace psa

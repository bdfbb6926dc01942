// cuda/methods/methods_cuda.h -- mask stage of the block-sparse methods rf_v2 and ada_bsa,
// entry layer: the level map (1 = keep, 0 = skip per 128 x 128 block pair) built on the GPU
// from the gathered q/k. Rules come from src/methods/{rf_v2,ada_bsa}_spec.h; declarations only.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "cuda/core/problem_dims.h"
#include "psa.h"

namespace psa {
namespace gpu {

// Both builders read 16-bit q [B, Hq, L, D] and k [B, Hkv, L, D], contiguous, already in the
// method's token order (the gather stage's output), and write levels [B*Hq, nb, nb] int8 with
// nb = ceil(L / 128); query head h reads key head h / (Hq / Hkv). Stream-ordered: no
// allocation, no synchronisation.

// rf_v2 (methods/rf_v2.cpp, bit for bit): fp32 block means of q and k, logits
// scale * qbar_i . kbar_j, per row the K-th largest logit as threshold (ties kept), then the
// forced first-frame and text blocks.
struct RfV2MaskArgs {
  psa_dtype dtype = PSA_DTYPE_BF16;  // F16 or BF16
  const void* q = nullptr;
  const void* k = nullptr;
  ProblemDims dims;  // len_q (== len_k), blocks of 128
  float scale = 0.0f;
  double sparsity = 0.0;
  int64_t frame_tokens = 0;              // h*w of the video grid (first-frame sink)
  int64_t text_begin = 0, text_end = 0;  // text span in rf_v2 order; empty = no text
  float* means = nullptr;  // scratch, rf_v2_means_floats() floats
  int8_t* levels = nullptr;
};
// fp32 block means of every q and k head: (B*Hq + B*Hkv) * nb * D.
int64_t rf_v2_means_floats(int64_t batch, int64_t heads_q, int64_t heads_kv, int64_t len,
                           int64_t head_dim);
psa_status rf_v2_levels_cuda(const RfV2MaskArgs& args, cudaStream_t stream);

// ada_bsa (methods/ada_bsa.cpp): stride-8 anti-diagonal logits (scale / 8), fp32 row softmax
// over every visible strided key group, fp32 128 x 128 block sums, then per row the CDF rule
// with the sparsity cap and the forced columns. Block sums are accumulated in the CPU's order,
// but exp and the fused multiply-adds of the device round differently, so a score within an
// ulp or two of a row's guard may fall on the other side (tests/cuda/methods_cuda_test.cpp
// measures how often).
struct AdaBsaMaskArgs {
  psa_dtype dtype = PSA_DTYPE_BF16;  // F16 or BF16
  const void* q = nullptr;
  const void* k = nullptr;
  ProblemDims dims;  // len_q (== len_k), blocks of 128
  float scale = 0.0f;
  double cdf_threshold = 1.0, sparsity = 0.0;
  bool causal = false, keep_sink = true, keep_recent = true;
  int8_t* levels = nullptr;
};
psa_status ada_bsa_levels_cuda(const AdaBsaMaskArgs& args, cudaStream_t stream);

// Largest nb each builder handles on the current device (its per-row shared memory: the
// row, its sorted copy and, for ada_bsa, the q/k tiles); 0 when the device cannot be queried.
int64_t rf_v2_max_blocks(int64_t head_dim);
int64_t ada_bsa_max_blocks(int64_t head_dim);

}  // namespace gpu
}  // namespace psa

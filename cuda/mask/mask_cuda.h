// cuda/mask/mask_cuda.h -- mask stage, entry layer: similarity cap per key block, the level
// map per (b, h, query block, key block), and the compact per-row work list the attention
// kernel walks. Every rule comes from src/mask/mask_spec.h; this header only declares entries.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "cuda/core/problem_dims.h"
#include "psa.h"

namespace psa {
namespace gpu {

// cap [B*Hkv, nk] in {1,2,4,8} from k [B*Hkv, len_k, D] contiguous, replicate-padded to
// nk*block_n tokens (sim_cap_row, bit for bit).
struct SimCapArgs {
  psa_dtype dtype = PSA_DTYPE_BF16;
  const void* k = nullptr;
  int64_t heads = 0, len_k = 0, head_dim = 0, n_blocks = 0, block_n = 0;
  double threshold[3] = {0.0, 0.0, -1.0};
  int8_t* cap = nullptr;
};
psa_status sim_cap_cuda(const SimCapArgs& args, cudaStream_t stream);

// levels [B*Hq, mq, nk] from scores [B*Hq, mq, nk]: build_mask_row over the candidate blocks
// (nk, or the causally visible prefix) then postprocess_levels, as the CPU backend does.
struct LevelArgs {
  const float* scores = nullptr;
  // [B*Hq, mq, nk] tie masses (ScoreArgs::ties) or NULL (equal scores: key index). Non-zero only
  // on blocks of their row's top score, as importance writes them (mask_spec.h ranks_before).
  const float* ties = nullptr;
  ProblemDims dims;  // head_dim unused
  int64_t tile_n = 0;
  psa_mask_mode mode = PSA_MASK_MODE_TOPK;
  double ratio_end[5] = {0.1, 0.15, 0.15, 0.35, 1.0};
  double min_full_ratio = 0.06;
  bool causal = false;
  psa_text_rule text_rule = PSA_TEXT_RULE_SPAN;
  bool text_rows_dense = false;
  int64_t text_begin = 0, text_end = 0;
  const int8_t* cap = nullptr;  // [B*Hkv, nk] or NULL
  int8_t* levels = nullptr;
};
psa_status build_levels_cuda(const LevelArgs& args, cudaStream_t stream);

// Whether build_levels_cuda runs this many rows and key blocks: PSA_OK, else
// PSA_ERR_UNSUPPORTED naming the values (nk at most max_mask_blocks() on the current device;
// batch and heads at most 65535, mq below 2^31 for the grid). The entry asks it; so does the
// CUDA backend's prepare().
psa_status levels_supported(int64_t batch, int64_t heads_q, int64_t mq, int64_t nk, int64_t block_n);
// Largest nk the level builder sorts in shared memory on the current device.
int64_t max_mask_blocks();

// Work list of each row r of levels [rows, nk]: blocks [rows, nk] holds the key blocks of
// level 1, then 2, 4, 8, each in ascending order; count [rows, 4] their numbers. Entries past
// a row's total count (its skipped blocks) are left unwritten. When `stats` is non-NULL,
// adds the pairs per slot (L1, L2, L4, L8, skip) to stats[0..5).
struct WorklistArgs {
  const int8_t* levels = nullptr;
  int64_t rows = 0, nk = 0;
  int32_t* blocks = nullptr;
  int32_t* count = nullptr;
  unsigned long long* stats = nullptr;
};
psa_status build_worklist_cuda(const WorklistArgs& args, cudaStream_t stream);

}  // namespace gpu
}  // namespace psa

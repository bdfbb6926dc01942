// cuda/importance/importance_cuda.h -- importance stage, entry layer: sampled in-block
// offsets per (batch, query head) and the row-normalised block scores [B, Hq, Mq, Nk] (spec
// 3). Meaning in src/importance/importance_spec.h; this header only declares the entries.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "cuda/core/problem_dims.h"
#include "psa.h"

namespace psa {
namespace gpu {

// Offsets of every (b, h): q_off [B*Hq, q_count] from (seed, b0 + b, h0 + h, kSampleQuery,
// block_m), k_off [B*Hq, k_count] from (seed, b0 + b, h0 + h, kSampleKey, block_n), with
// (b0, h0) = (batch_offset, head_offset). Blocks <= 128.
struct OffsetArgs {
  uint64_t seed = 0;
  ProblemDims dims;  // batch, heads_q, block_m, block_n
  int64_t batch_offset = 0, head_offset = 0;  // global index of (b, h) = (0, 0) (shards)
  int32_t q_count = 0, k_count = 0;
  int32_t* q_off = nullptr;
  int32_t* k_off = nullptr;
};
psa_status sample_offsets_cuda(const OffsetArgs& args, cudaStream_t stream);

// Whether the importance stage (sample_offsets_cuda + block_scores_cuda) runs these blocks and
// per-block sample counts: PSA_OK, else PSA_ERR_UNSUPPORTED naming the values (blocks at most
// 128 tokens; 1 <= samples <= block). Both entries ask it; so does the CUDA backend's prepare().
psa_status importance_supported(int64_t block_m, int64_t block_n, int64_t q_count, int64_t k_count);

// Which kernel of the GEMM-shaped path runs: kAuto takes the Hopper one (wgmma + TMA) when this
// binary holds it for the device (sm_90a build, compute capability 9.x) and TMA can describe K,
// else the sm80 one (mma.sync). kSm80 / kSm90 force one (tests, benchmarks); kSm90 where it
// cannot run is PSA_ERR_UNSUPPORTED.
enum class ScoreKernel { kAuto, kSm80, kSm90 };

// Scores of importance_cpu for every (b, h): k [B, Hkv, Lk, D] contiguous (rearranged); query
// head h reads kv head h / (Hq / Hkv). q is [B, Hq, Lq, D] with element strides q_stride (rows
// 16-byte aligned), and row x of the problem is q row q_rows[x] (NULL: x), so a rearranged
// problem can read the caller's Q in place.
// With a scratch of at least one slot (score_scratch.h) and power-of-two sample counts the
// GEMM-shaped path runs (256 sampled rows per CTA); otherwise the per-query-block kernel.
// All give importance_cpu's values up to the fp32 dot order of the tensor cores (mma.sync or
// wgmma; the row sum's double order may differ in the last bit). The scratch is overwritten;
// it must not alias any argument.
struct ScoreArgs {
  psa_dtype dtype = PSA_DTYPE_BF16;
  const void* q = nullptr;
  const void* k = nullptr;
  int64_t q_stride[4] = {0, 0, 0, 1};  // (batch, head, row, 1); {0, 0, 0, 1}: contiguous
  const int64_t* q_rows = nullptr;     // [Lq] problem row -> q row; NULL = identity
  int64_t k_stride[4] = {0, 0, 0, 1};  // K's (batch, kv head, row, 1), rows 16-byte aligned; {0, 0, 0, 1}: contiguous
  ProblemDims dims;  // mq, nk unused
  const int32_t* q_off = nullptr;  // [B*Hq, q_count]
  const int32_t* k_off = nullptr;  // [B*Hq, k_count]
  int32_t q_count = 0, k_count = 0;
  float scale = 0.0f;
  float* scores = nullptr;  // [B*Hq, Mq, Nk]
  // [B*Hq, Mq, Nk] tie masses (importance_spec.h tie_mass, importance_cpu's `ties`) or NULL:
  // not computed. Evaluated for the P == 1 blocks only (a few per row), 0 elsewhere.
  float* ties = nullptr;
  // > 0: the GEMM paths may leave 0 as every tie mass of a row whose top run (its blocks with
  // the row's highest score) holds at most this many blocks. The level builder reads a row's
  // tie masses only where an interval end falls inside its top run, and for a topk row the first
  // end is known before the scores (the PSA backend passes it). 0: every row's tie masses.
  int32_t tie_run_min = 0;
  void* scratch = nullptr;   // [slots][Nk][256] fp32, 16-byte aligned; NULL: per-block kernel
  uint64_t scratch_bytes = 0;
  ScoreKernel kernel = ScoreKernel::kAuto;
  // sm90 kernel: -1 picks by shape and sample counts; 1 finishes each tile on separate warps
  // during the next tile's sweep; 0 finishes it after the sweep (tests and benchmarks compare
  // them).
  int finish_overlap = -1;
  // precision fp8: the 8-bit rule's keys (importance_spec.h) instead of k: the 8-bit pool pass's
  // int8 level-1 K (Fp8KvOut::k8[0], [B*Hkv, Lk, 128], 16-byte aligned) and its scales
  // (Fp8KvOut::k_scale, [B*Hkv, 4, Nk], level 1 first). Runs on the sm90 kernel only
  // (score_int8_supported); k and k_stride are then not read.
  const void* k8 = nullptr;
  const float* k_scale = nullptr;
};
psa_status block_scores_cuda(const ScoreArgs& args, cudaStream_t stream);

// Scratch slots worth giving block_scores_cuda on the current device (two per SM, any head dim:
// one per resident CTA of the sm80 GEMM kernel, two per CTA of the sm90 one); size them with
// score_scratch_bytes (score_scratch.h). With fewer, the sm90 kernel runs fewer CTAs.
psa_status score_scratch_slots(int64_t* slots);

// True when this binary holds the Hopper score kernel for the current device; cached per device.
bool score_sm90_available();

// Whether block_scores_cuda runs the 8-bit rule (ScoreArgs::k8) for these sample counts and head
// dim on the current device: the sm90 kernel (score_sm90_available), head_dim 128, power-of-two
// counts up to 128 (score_gemm_supported), and a scratch.
bool score_int8_supported(int64_t q_count, int64_t k_count, int64_t head_dim);

}  // namespace gpu
}  // namespace psa

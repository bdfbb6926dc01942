// cuda/attention/attention_params.h -- attention stage, kernel layer: the one parameter block
// the attention kernels read (raw pointers, 64-bit element strides, flags as ints). No psa.h
// types; filled by the entry (attention.cu) only.
#pragma once
#include <cstdint>

namespace psa {
namespace gpu {

struct AttnKernelParams {
  const void* q;
  int64_t q_sb, q_sh, q_sl;
  const int64_t* q_rows;     // problem row x reads q row q_rows[x], or NULL (identity)
  // K/V per level index 0..3 (levels 1, 2, 4, 8); strides in elements, rows 16-byte aligned.
  const void* k[4];
  const void* v[4];
  int64_t k_sb[4], k_sh[4], k_sl[4];
  int64_t v_sb[4], v_sh[4], v_sl[4];
  void* out;
  int64_t o_sb, o_sh, o_sl;
  int out_vec;               // output rows 16-byte aligned: store 8 elements at once
  float* lse;                // [B, Hq, Lq] or NULL
  const int64_t* out_rows;   // rearranged row x -> caller row, or NULL (identity)
  const int32_t* wl_blocks;  // [B*Hq*Mq, nk] key blocks by level (NULL when dense)
  const int32_t* wl_count;   // [B*Hq*Mq, 4]
  int64_t heads_q, group, len_q, len_k, nk, mq, block_n;
  float scale;
  int causal;
  int dense;                 // every key at level 1, no work list
  int max_ctas;              // Hopper kernel: cap on the persistent grid (0: one CTA per SM)
};

}  // namespace gpu
}  // namespace psa

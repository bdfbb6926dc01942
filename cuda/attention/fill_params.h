// cuda/attention/fill_params.h -- attention stage, entry layer: the part of the kernel parameter
// block that the 16-bit entry (attention.cu) and the 8-bit one (sm90/attention_fp8_sm90.cu) fill
// alike from their argument structs (same member names): q and out with their strides, lse, the
// row orders (q_rows, out_rows), the work list, the problem's sizes and the scale.
#pragma once
#include <cstdint>

#include "cuda/attention/attention_params.h"
#include "cuda/core/cuda_status.h"

namespace psa {
namespace gpu {

template <typename Args>
void fill_row_params(const Args& a, AttnKernelParams* p) {
  p->q = a.q;
  p->q_sb = a.q_stride[0];
  p->q_sh = a.q_stride[1];
  p->q_sl = a.q_stride[2];
  p->q_rows = a.q_rows;
  p->out = a.out;
  p->o_sb = a.o_stride[0];
  p->o_sh = a.o_stride[1];
  p->o_sl = a.o_stride[2];
  p->out_vec = rows_16b_aligned(a.out, a.o_stride) ? 1 : 0;
  p->lse = a.lse;
  p->out_rows = a.out_rows;
  p->wl_blocks = a.wl_blocks;
  p->wl_count = a.wl_count;
  p->heads_q = a.dims.heads_q;
  p->group = a.dims.heads_q / a.dims.heads_kv;
  p->len_q = a.dims.len_q;
  p->len_k = a.dims.len_k;
  p->nk = ceil_div(a.dims.len_k, a.dims.block_n);
  p->mq = ceil_div(a.dims.len_q, a.dims.block_m);
  p->block_n = a.dims.block_n;
  p->scale = a.scale;
}

}  // namespace gpu
}  // namespace psa

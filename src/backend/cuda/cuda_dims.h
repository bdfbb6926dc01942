// backend/cuda/cuda_dims.h -- the plan's geometry as the cuda/ stage entries take it: one
// gpu::ProblemDims per plan, copied whole into each stage's argument struct.
#pragma once
#include "context/plan.h"
#include "cuda/core/problem_dims.h"

namespace psa {

inline gpu::ProblemDims problem_dims(const Plan& plan) {
  const Problem& pb = plan.problem;
  gpu::ProblemDims d;
  d.batch = pb.batch;
  d.heads_q = pb.heads_q;
  d.heads_kv = pb.heads_kv;
  d.len_q = pb.len_q;
  d.len_k = pb.len_k;
  d.head_dim = pb.head_dim;
  d.block_m = plan.block_m;
  d.block_n = plan.block_n;
  d.mq = plan.q_blocks;
  d.nk = plan.k_blocks;
  return d;
}

}  // namespace psa

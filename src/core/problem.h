// core/problem.h -- the validated shape of one forward (Problem, with its dtype) and its
// plain geometry (ProblemDims: sizes and block counts only, no psa.h type), which every CUDA
// kernel argument struct carries. Plain data; no CUDA, no allocation.
#pragma once
#include <cstdint>

#include "psa.h"

namespace psa {

// Validated shapes of one forward. Logical order [B, H, L, D]; strides in elements.
struct Problem {
  int64_t batch = 0, heads_q = 0, heads_kv = 0, len_q = 0, len_k = 0, head_dim = 0;
  psa_dtype dtype = PSA_DTYPE_BF16;
  bool same(const Problem& o) const {
    return batch == o.batch && heads_q == o.heads_q && heads_kv == o.heads_kv &&
           len_q == o.len_q && len_k == o.len_k && head_dim == o.head_dim && dtype == o.dtype;
  }
};

}  // namespace psa

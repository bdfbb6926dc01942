// cuda/core/problem_dims.h -- the geometry of one attention problem as every cuda/ stage entry
// receives it: one struct, filled once by the caller (the CUDA backend fills it from its
// plan), carried by each stage's argument struct as `dims`. Plain integers; no psa.h types,
// no CUDA types, usable from host and device code.
#pragma once
#include <cstdint>

namespace psa {
namespace gpu {

struct ProblemDims {
  int64_t batch = 0;
  int64_t heads_q = 0, heads_kv = 0;  // query heads; key/value heads (GQA: heads_q % heads_kv == 0)
  int64_t len_q = 0, len_k = 0;       // tokens of q and of k/v
  int64_t head_dim = 0;
  int64_t block_m = 128, block_n = 64;  // tokens per query / key block
  int64_t mq = 0, nk = 0;               // query blocks ceil(len_q / block_m), key blocks ceil(len_k / block_n)
};

}  // namespace gpu
}  // namespace psa

// tests/cuda/fp8_kv_buffers.h -- the 8-bit GPU tests' device buffers for gather_pool_fp8_cuda's
// outputs (cuda/pool/pool_cuda.h Fp8KvOut): 8-bit K and V per level index and the fp32 scales,
// sized for `heads` K/V heads of `len` tokens in `nk` key blocks of `block_n`. Test-only.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "cuda/pool/pool_cuda.h"
#include "cuda_test_util.h"
#include "pool/pool_spec.h"

namespace psa {
namespace test {

struct Fp8KvBuffers {
  // `canary` extra bytes after each 8-bit level (a test that checks nothing is written past it
  // fills them first).
  Fp8KvBuffers(int64_t heads, int64_t len, int64_t d, int64_t nk, int64_t block_n, size_t canary = 0)
      : k_mean(static_cast<size_t>(heads * d)),
        k_scale(static_cast<size_t>(heads * 4 * nk)),
        v_scale(static_cast<size_t>(heads * 4 * nk)),
        v_smax(static_cast<size_t>(heads)) {
    for (int li = 0; li < 4; ++li) {
      len_li[li] = li == 0 ? len : pooled_length(nk, block_n, 1 << li);
      const size_t n = static_cast<size_t>(heads * len_li[li] * d) + canary;
      k8.push_back(std::make_unique<DevBuf<uint8_t>>(n));
      v8.push_back(std::make_unique<DevBuf<uint8_t>>(n));
      out.k8[li] = k8.back()->get();
      out.v8[li] = v8.back()->get();
    }
    out.k_mean = k_mean.get();
    out.k_scale = k_scale.get();
    out.v_scale = v_scale.get();
    out.v_smax = v_smax.get();
  }
  int64_t len_li[4] = {0, 0, 0, 0};  // tokens per level index
  std::vector<std::unique_ptr<DevBuf<uint8_t>>> k8, v8;
  DevBuf<float> k_mean, k_scale, v_scale, v_smax;
  gpu::Fp8KvOut out;  // points into the buffers above
};

}  // namespace test
}  // namespace psa

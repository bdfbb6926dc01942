// cuda/attention/row_epilogue.cuh -- attention stage, kernel layer: the epilogue every attention
// kernel shares (the sm80 one and both Hopper ones), so that the empty-row, lse and row-order
// rules live in one place: row sums and lse, the accumulator staged in shared memory, and the
// staged rows stored in the caller's row order. The staged tile's layout is the kernel's: a
// functor off(row, chunk) gives the element offset of a row's 16-byte chunk.
#pragma once
#include <cstdint>

#include "attention/attention_spec.h"
#include "cuda/attention/attention_params.h"
#include "cuda/core/device.cuh"

namespace psa {
namespace gpu {

// Row sums and lse, per thread of an mma-layout accumulator (rows wrow + g and + 8; each lane of
// a quad holds 2 of every 8 columns): l summed over the quad; inv = num / l (0 for an empty row;
// NaN propagates); lse = m ln 2 + ln l + extra(row in the tile) for the rows inside len_q (-inf
// for an empty row), written by the quad's first lane in the caller's row order (extra
// returning -0.0f adds nothing, in every rounding).
template <typename Extra>
__device__ __forceinline__ void finish_row_sums(const AttnKernelParams& p, float l_run[2], const float m_run[2],
                                                float num, float inv[2], int64_t b, int64_t h, int64_t x0, int wrow,
                                                int g, int tq, Extra&& extra) {
#pragma unroll
  for (int rr = 0; rr < 2; ++rr) {
    l_run[rr] += __shfl_xor_sync(0xffffffffu, l_run[rr], 1);
    l_run[rr] += __shfl_xor_sync(0xffffffffu, l_run[rr], 2);
    inv[rr] = l_run[rr] != 0.0f ? num / l_run[rr] : 0.0f;
  }
  if (p.lse != nullptr && tq == 0) {
#pragma unroll
    for (int rr = 0; rr < 2; ++rr) {
      const int rw = wrow + g + rr * 8;
      const int64_t x = x0 + rw;
      if (x < p.len_q) {
        const int64_t orow = p.out_rows ? p.out_rows[x] : x;
        p.lse[(b * p.heads_q + h) * p.len_q + orow] =
            l_run[rr] != 0.0f ? m_run[rr] * 0.6931471805599453f + logf(l_run[rr]) + extra(rw) : neg_inf();
      }
    }
  }
}

// Staging: the thread's accumulator, acc(n, i) for 8-column group n (i = 0, 1: row wrow + g,
// columns 2 tq and 2 tq + 1; i = 2, 3: row wrow + g + 8), times inv[row], packed into the staged
// tile `stage` at off(row, n).
template <typename T, int D, typename Acc, typename Off>
__device__ __forceinline__ void stage_rows(T* stage, Acc&& acc, const float inv[2], int wrow, int g, int tq,
                                           Off&& off) {
#pragma unroll
  for (int n = 0; n < D / 8; ++n) {
    const int r0 = wrow + g;
    *reinterpret_cast<uint32_t*>(stage + off(r0, n) + tq * 2) = Elem<T>::pack(acc(n, 0) * inv[0], acc(n, 1) * inv[0]);
    *reinterpret_cast<uint32_t*>(stage + off(r0 + 8, n) + tq * 2) =
        Elem<T>::pack(acc(n, 2) * inv[1], acc(n, 3) * inv[1]);
  }
}

// Stores: staged rows [r0, r0 + rows) of query block x0 / (block rows) to out, 16 bytes at a
// time by `nthreads` threads (thread `tid` of them), rows back in the caller's order through
// out_rows; rows past len_q skipped.
template <typename T, int D, typename Off>
__device__ __forceinline__ void store_rows(const AttnKernelParams& p, const T* stage, int64_t b, int64_t h,
                                           int64_t x0, int r0, int rows, int tid, int nthreads, Off&& off) {
  constexpr int NC = D / 8;
  T* ob = static_cast<T*>(p.out) + b * p.o_sb + h * p.o_sh;
  for (int c = tid; c < rows * NC; c += nthreads) {
    const int rw = r0 + c / NC, cc = c % NC;
    const int64_t x = x0 + rw;
    if (x >= p.len_q) continue;
    const int64_t orow = p.out_rows ? p.out_rows[x] : x;
    const uint4 val = *reinterpret_cast<const uint4*>(stage + off(rw, cc));
    T* dst = ob + orow * p.o_sl + cc * 8;
    if (p.out_vec) {
      *reinterpret_cast<uint4*>(dst) = val;
    } else {
      const T* e = reinterpret_cast<const T*>(&val);
#pragma unroll
      for (int u = 0; u < 8; ++u) dst[u] = e[u];
    }
  }
}

}  // namespace gpu
}  // namespace psa

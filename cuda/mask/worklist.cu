// cuda/mask/worklist.cu -- mask stage (work list): kernel, launcher, entry. Compacts each
// row of the level map into key-block lists per level (1, 2, 4, 8, ascending) and counts
// the pairs per slot for psa_context_get_stats. Must not change any level.
#include <cstdint>

#include "cuda/core/cuda_status.h"
#include "cuda/mask/mask_cuda.h"

namespace psa {
namespace gpu {
namespace {

constexpr int kWarps = 8;

// Grid cap: past it each warp takes several rows (rows = B*Hq*Mq may exceed what one grid
// dimension holds; real shapes stay far below it).
constexpr int64_t kMaxGrid = int64_t{1} << 24;

// One warp per row (grid-stride), two passes over the row: per-lane level counts (reduced to
// each level's total, hence its base), then every block's position by ballots over 32 blocks
// at a time, which keeps ascending key order inside each level.
__global__ void __launch_bounds__(kWarps * 32)
    worklist_kernel(const int8_t* __restrict__ levels, int64_t rows, int64_t nk,
                    int32_t* __restrict__ blocks, int32_t* __restrict__ count,
                    unsigned long long* __restrict__ stats) {
  __shared__ unsigned long long block_stats[5];
  if (threadIdx.x < 5) block_stats[threadIdx.x] = 0;
  __syncthreads();
  const int lane = threadIdx.x % 32;
  const unsigned below = (1u << lane) - 1u;
  const int n = static_cast<int>(nk);  // <= INT32_MAX (entry)
  for (int64_t row = blockIdx.x * static_cast<int64_t>(kWarps) + threadIdx.x / 32; row < rows;
       row += static_cast<int64_t>(gridDim.x) * kWarps) {
    const int8_t* lv = levels + row * nk;
    int32_t* out = blocks + row * nk;
    int c[4] = {0, 0, 0, 0};
    for (int j = lane; j < n; j += 32) {
      const int v = lv[j];
#pragma unroll
      for (int li = 0; li < 4; ++li) c[li] += v == (1 << li) ? 1 : 0;
    }
    int base[4];
    int total = 0;
#pragma unroll
    for (int li = 0; li < 4; ++li) {
      c[li] = __reduce_add_sync(0xffffffffu, c[li]);
      base[li] = total;
      total += c[li];
    }
    for (int j0 = 0; j0 < n; j0 += 32) {
      const int j = j0 + lane;
      const int v = j < n ? lv[j] : 0;
      int pos = -1;
#pragma unroll
      for (int li = 0; li < 4; ++li) {
        const unsigned mask = __ballot_sync(0xffffffffu, v == (1 << li));
        if (v == (1 << li)) pos = base[li] + __popc(mask & below);
        base[li] += __popc(mask);
      }
      if (pos >= 0) out[pos] = j;
    }
    if (lane < 4) {
      count[row * 4 + lane] = c[lane];
      if (stats) atomicAdd(&block_stats[lane], static_cast<unsigned long long>(c[lane]));
    }
    if (lane == 0 && stats) atomicAdd(&block_stats[4], static_cast<unsigned long long>(n - total));
  }
  __syncthreads();
  if (stats && threadIdx.x < 5 && block_stats[threadIdx.x] > 0)
    atomicAdd(&stats[threadIdx.x], block_stats[threadIdx.x]);
}

}  // namespace

psa_status build_worklist_cuda(const WorklistArgs& a, cudaStream_t stream) {
  if (a.rows == 0 || a.nk == 0) return PSA_OK;
  PSA_RETURN_IF(a.nk > INT32_MAX, PSA_ERR_UNSUPPORTED, "work list: %lld key blocks",
                static_cast<long long>(a.nk));
  const unsigned grid = grid_stride_blocks(a.rows, kWarps, kMaxGrid);
  worklist_kernel<<<grid, kWarps * 32, 0, stream>>>(a.levels, a.rows, a.nk, a.blocks, a.count, a.stats);
  return launch_status("worklist_kernel");
}

}  // namespace gpu
}  // namespace psa

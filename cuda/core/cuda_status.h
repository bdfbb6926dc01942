// cuda/core/cuda_status.h -- every CUDA stage, launcher/entry layer: turns a failed CUDA call
// or kernel launch into PSA_ERR_CUDA naming the kernel and cudaGetErrorString, plus the small
// launch-time queries the stages share (grid size, shared-memory limit, row alignment). Host-only;
// kernels never include this (they see no psa.h type).
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "core/error.h"

namespace psa {
namespace gpu {

// Status of the launch just issued (cudaGetLastError also clears a sticky launch error).
inline psa_status launch_status(const char* kernel) {
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess)
    return set_error(PSA_ERR_CUDA, "%s: launch failed: %s (%s)", kernel, cudaGetErrorString(e),
                     cudaGetErrorName(e));
  return PSA_OK;
}

// Status of a CUDA runtime call; `what` names the call and its purpose.
inline psa_status cuda_status(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return PSA_OK;
  (void)cudaGetLastError();
  if (e == cudaErrorMemoryAllocation)
    return set_error(PSA_ERR_OUT_OF_MEMORY, "%s: %s", what, cudaGetErrorString(e));
  return set_error(PSA_ERR_CUDA, "%s: %s (%s)", what, cudaGetErrorString(e), cudaGetErrorName(e));
}

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// True when every row of a [B, H, L, D] tensor of 16-bit elements with element strides `stride`
// starts on 16 bytes and its elements are contiguous: the kernels can then move rows in 16-byte
// chunks (cp.async, uint4 loads, TMA).
inline bool rows_16b_aligned(const void* ptr, const int64_t stride[4]) {
  return reinterpret_cast<uintptr_t>(ptr) % 16 == 0 && stride[0] % 8 == 0 && stride[1] % 8 == 0 &&
         stride[2] % 8 == 0 && stride[3] == 1;
}

// The current device's opt-in shared memory per block in bytes, or 0 (error cleared) when it
// cannot be queried.
inline int smem_optin_limit() {
  int dev = 0, limit = 0;
  if (cudaGetDevice(&dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&limit, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return limit;
}

// Blocks of a grid-stride loop over `items` with `per_block` items per block per sweep: enough to
// cover them in one sweep, at most `cap` (the loop takes the rest).
inline unsigned grid_stride_blocks(int64_t items, int64_t per_block, int64_t cap) {
  const int64_t want = ceil_div(items, per_block);
  return static_cast<unsigned>(want < cap ? want : cap);
}

}  // namespace gpu
}  // namespace psa

#define PSA_CUDA_TRY(call, what) PSA_TRY(::psa::gpu::cuda_status((call), (what)))

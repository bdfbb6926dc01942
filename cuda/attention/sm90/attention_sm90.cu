// cuda/attention/sm90/attention_sm90.cu -- attention stage, launcher layer for Hopper: the
// sm_90a launchers (one per dtype x head dim) and the availability query. The kernel bodies
// exist only in the sm_90a pass of this file; the sm_80 pass compiles empty kernels that
// sm90_available() keeps from ever being launched.
#include <atomic>

#include "cuda/attention/attention_launch.h"
#include "cuda/attention/sm90/attention_kernel_sm90.cuh"

namespace psa {
namespace gpu {
namespace sm90 {

bool sm90_available() {
  // 0 = not asked yet, 1 = no, 2 = yes; per device ordinal (up to 64 devices).
  static std::atomic<int> cache[64];
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess || dev < 0) return false;
  if (dev < 64) {
    const int c = cache[dev].load(std::memory_order_relaxed);
    if (c != 0) return c == 2;
  }
  int major = 0;
  bool ok = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) == cudaSuccess &&
            major == 9;
  if (ok) {
    // binaryVersion is the SASS the driver picked for this device: 90 only when the sm_90a
    // image is in the binary (a PTX/JIT or sm_80 image would run the empty body).
    cudaFuncAttributes attr{};
    ok = cudaFuncGetAttributes(&attr, sparse_attention_sm90_kernel<__nv_bfloat16, 128>) == cudaSuccess &&
         attr.binaryVersion == 90;
  }
  if (dev < 64) cache[dev].store(ok ? 2 : 1, std::memory_order_relaxed);
  return ok;
}

}  // namespace sm90

cudaError_t launch_attention_sm90(const AttnKernelParams& p, bool f16, int head_dim, int64_t batch,
                                  cudaStream_t s) {
  if (f16)
    return head_dim == 64 ? sm90::launch_sparse_attention_sm90<__half, 64>(p, batch, s)
                          : sm90::launch_sparse_attention_sm90<__half, 128>(p, batch, s);
  return head_dim == 64 ? sm90::launch_sparse_attention_sm90<__nv_bfloat16, 64>(p, batch, s)
                        : sm90::launch_sparse_attention_sm90<__nv_bfloat16, 128>(p, batch, s);
}

bool attention_sm90_available() { return sm90::sm90_available(); }

}  // namespace gpu
}  // namespace psa

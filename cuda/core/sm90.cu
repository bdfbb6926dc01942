// cuda/core/sm90.cu -- every Hopper kernel, launcher layer: the availability query declared in
// cuda/core/sm90.cuh.
#include <atomic>

#include "cuda/core/sm90.cuh"

namespace psa {
namespace gpu {
namespace sm90 {

bool kernel_has_sm90_image(const void* kernel) {
  // 0 = not asked yet, 1 = no, 2 = yes; per device ordinal (up to 64 devices).
  static std::atomic<int> cache[64];
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess || dev < 0) {
    (void)cudaGetLastError();
    return false;
  }
  if (dev < 64) {
    const int c = cache[dev].load(std::memory_order_relaxed);
    if (c != 0) return c == 2;
  }
  int major = 0;
  bool ok = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) == cudaSuccess && major == 9;
  if (ok) {
    cudaFuncAttributes attr{};
    ok = cudaFuncGetAttributes(&attr, kernel) == cudaSuccess && attr.binaryVersion == 90;
  }
  (void)cudaGetLastError();
  if (dev < 64) cache[dev].store(ok ? 2 : 1, std::memory_order_relaxed);
  return ok;
}

}  // namespace sm90
}  // namespace gpu
}  // namespace psa

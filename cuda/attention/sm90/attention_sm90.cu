// cuda/attention/sm90/attention_sm90.cu -- attention stage, launcher layer for Hopper: the
// sm_90a launchers (one per dtype x head dim) and the availability query. The kernel bodies
// exist only in the sm_90a pass of this file; the sm_80 pass compiles empty kernels that
// attention_sm90_available() keeps from ever being launched.
#include "cuda/attention/attention_launch.h"
#include "cuda/attention/sm90/attention_launch_sm90.cuh"

namespace psa {
namespace gpu {

cudaError_t launch_attention_sm90(const AttnKernelParams& p, bool f16, int head_dim, int64_t batch,
                                  cudaStream_t s) {
  if (f16)
    return head_dim == 64 ? sm90::launch_sparse_attention_sm90<__half, 64>(p, batch, s)
                          : sm90::launch_sparse_attention_sm90<__half, 128>(p, batch, s);
  return head_dim == 64 ? sm90::launch_sparse_attention_sm90<__nv_bfloat16, 64>(p, batch, s)
                        : sm90::launch_sparse_attention_sm90<__nv_bfloat16, 128>(p, batch, s);
}

bool attention_sm90_available() {
  return sm90::kernel_has_sm90_image(
      reinterpret_cast<const void*>(sm90::sparse_attention_sm90_kernel<__nv_bfloat16, 128>));
}

}  // namespace gpu
}  // namespace psa

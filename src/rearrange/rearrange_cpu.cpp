// rearrange/rearrange_cpu.cpp -- rearrange and inverse-rearrange stages on the host (CPU
// reference): one (batch, head) of a strided [B, H, L, D] tensor to and from a dense fp32
// copy in the plan's token order. Element conversion only; no allocation.
#include "core/half.h"
#include "rearrange/rearrange.h"

namespace psa {

void rearrange_head_cpu(const void* base, psa_dtype dtype, const int64_t* stride, int64_t b,
                        int64_t h, int64_t len, int64_t d, const std::vector<int64_t>& src,
                        float* dst) {
  for (int64_t i = 0; i < len; ++i) {
    const int64_t row = src.empty() ? i : src[static_cast<size_t>(i)];
    const int64_t off = b * stride[0] + h * stride[1] + row * stride[2];
    for (int64_t c = 0; c < d; ++c) dst[i * d + c] = load_as_float(base, off + c, dtype);
  }
}

void inverse_rearrange_head_cpu(void* base, psa_dtype dtype, const int64_t* stride, int64_t b,
                                int64_t h, int64_t len, int64_t d,
                                const std::vector<int64_t>& src, const float* out,
                                const float* lse, float* lse_bh) {
  for (int64_t i = 0; i < len; ++i) {
    const int64_t row = src.empty() ? i : src[static_cast<size_t>(i)];
    const int64_t off = b * stride[0] + h * stride[1] + row * stride[2];
    for (int64_t c = 0; c < d; ++c) store_from_float(base, off + c, dtype, out[i * d + c]);
  }
  if (lse_bh == nullptr) return;
  for (int64_t i = 0; i < len; ++i) lse_bh[src.empty() ? i : src[static_cast<size_t>(i)]] = lse[i];
}

}  // namespace psa

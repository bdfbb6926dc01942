// tests/common/tensor16.h -- host helpers shared by the tests of both backends: 16-bit host
// tensors (bf16 / f16 bits plus the exact floats they hold), random and video-like inputs,
// strided packing by a tensor descriptor, and error metrics. Test-only.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "core/half.h"
#include "psa.h"

namespace psa {
namespace test {

inline uint16_t to16(float f, psa_dtype dt) { return dt == PSA_DTYPE_F16 ? float_to_half(f) : float_to_bf16(f); }
inline float from16(uint16_t h, psa_dtype dt) { return dt == PSA_DTYPE_F16 ? half_to_float(h) : bf16_to_float(h); }
inline float round16(float f, psa_dtype dt) { return from16(to16(f, dt), dt); }

// Logical [B, H, L, D] values -> a zeroed buffer of T laid out by `desc` (strides in
// elements, head dim contiguous), converting each value with from_float; and back.
template <typename T, typename F>
std::vector<T> pack(const std::vector<float>& v, const psa_tensor_desc& desc, F from_float) {
  std::vector<T> buf(static_cast<size_t>(desc.shape[0] * desc.strides[0]));
  size_t i = 0;
  for (int64_t a = 0; a < desc.shape[0]; ++a)
    for (int64_t b = 0; b < desc.shape[1]; ++b)
      for (int64_t c = 0; c < desc.shape[2]; ++c)
        for (int64_t e = 0; e < desc.shape[3]; ++e)
          buf[static_cast<size_t>(a * desc.strides[0] + b * desc.strides[1] + c * desc.strides[2] + e)] =
              from_float(v[i++]);
  return buf;
}
template <typename T, typename F>
std::vector<float> unpack(const std::vector<T>& buf, const psa_tensor_desc& desc, F to_float) {
  std::vector<float> v;
  v.reserve(static_cast<size_t>(desc.shape[0] * desc.shape[1] * desc.shape[2] * desc.shape[3]));
  for (int64_t a = 0; a < desc.shape[0]; ++a)
    for (int64_t b = 0; b < desc.shape[1]; ++b)
      for (int64_t c = 0; c < desc.shape[2]; ++c)
        for (int64_t e = 0; e < desc.shape[3]; ++e)
          v.push_back(
              to_float(buf[static_cast<size_t>(a * desc.strides[0] + b * desc.strides[1] + c * desc.strides[2] + e)]));
  return v;
}

// 16-bit tensor plus the exact fp32 values it holds.
struct Tensor16 {
  std::vector<uint16_t> bits;
  std::vector<float> f;
};

inline Tensor16 make_random(size_t n, psa_dtype dt, uint32_t seed, float scale = 1.0f) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> nd(0.0f, scale);
  Tensor16 t;
  t.bits.resize(n);
  t.f.resize(n);
  for (size_t i = 0; i < n; ++i) {
    t.bits[i] = to16(nd(gen), dt);
    t.f[i] = from16(t.bits[i], dt);
  }
  return t;
}

// Video-like [heads, len, d]: a smooth function of the token position (neighbouring tokens
// are similar, as latent video patches are) plus a little noise.
inline Tensor16 make_video_like(int64_t heads, int64_t len, int64_t d, psa_dtype dt, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> ud(0.0f, 6.2831853f);
  std::normal_distribution<float> nd(0.0f, 0.15f);
  std::vector<float> freq(static_cast<size_t>(heads * d)), phase(static_cast<size_t>(heads * d));
  for (size_t i = 0; i < freq.size(); ++i) {
    freq[i] = 0.002f + 0.05f * ud(gen) / 6.2831853f;
    phase[i] = ud(gen);
  }
  Tensor16 t;
  t.bits.resize(static_cast<size_t>(heads * len * d));
  t.f.resize(t.bits.size());
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t x = 0; x < len; ++x)
      for (int64_t c = 0; c < d; ++c) {
        const size_t i = static_cast<size_t>((h * len + x) * d + c);
        const float v = 1.5f * std::sin(freq[h * d + c] * static_cast<float>(x) + phase[h * d + c]) + nd(gen);
        t.bits[i] = to16(v, dt);
        t.f[i] = from16(t.bits[i], dt);
      }
  return t;
}

inline double rel_l2(const float* a, const float* ref, size_t n) {
  double num = 0, den = 0;
  for (size_t i = 0; i < n; ++i) {
    const double d = static_cast<double>(a[i]) - ref[i];
    num += d * d;
    den += static_cast<double>(ref[i]) * ref[i];
  }
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}
inline double rel_l2(const std::vector<float>& a, const std::vector<float>& ref) {
  return rel_l2(a.data(), ref.data(), a.size());
}

inline double max_abs_diff(const std::vector<float>& a, const std::vector<float>& ref) {
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double d = std::fabs(static_cast<double>(a[i]) - ref[i]);
    if (!(d <= m)) m = d;  // NaN propagates as a failure
  }
  return m;
}

inline bool all_finite(const std::vector<float>& a) {
  for (float x : a)
    if (!std::isfinite(x)) return false;
  return true;
}

}  // namespace test
}  // namespace psa

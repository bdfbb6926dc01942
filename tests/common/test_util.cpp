// tests/common/test_util.cpp -- implementations of the shared test helpers.
#include "common/test_util.h"

#include <cstdlib>

namespace psa_test {

uint64_t fresh_seed() {
  if (const char* s = std::getenv("PSA_TEST_SEED")) return std::strtoull(s, nullptr, 10);
  std::random_device rd;
  return (uint64_t(rd()) << 32) ^ rd();
}

std::vector<float> random_vec(std::mt19937_64& rng, size_t n, float scale) {
  std::normal_distribution<float> nd(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = nd(rng);
  return v;
}

std::vector<float> video_like(std::mt19937_64& rng, int64_t t, int64_t h, int64_t w, int64_t d,
                              float noise) {
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  std::normal_distribution<float> nd(0.0f, noise);
  const int kWaves = 3;
  std::vector<float> f(static_cast<size_t>(d * kWaves * 4));
  for (auto& x : f) x = u(rng);
  std::vector<float> out(static_cast<size_t>(t * h * w * d));
  for (int64_t z = 0; z < t; ++z)
    for (int64_t y = 0; y < h; ++y)
      for (int64_t x = 0; x < w; ++x) {
        const int64_t r = x + w * (y + h * z);
        for (int64_t c = 0; c < d; ++c) {
          float s = 0.0f;
          for (int k = 0; k < kWaves; ++k) {
            const float* p = &f[static_cast<size_t>((c * kWaves + k) * 4)];
            s += std::sin(6.2831853f * (p[0] * x / w + p[1] * y / h + p[2] * z / std::max<int64_t>(t, 1)) + 6.2831853f * p[3]);
          }
          out[r * d + c] = 1.5f * s + nd(rng);
        }
      }
  return out;
}

double rel_l2(const std::vector<float>& got, const std::vector<double>& want) {
  double num = 0, den = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    num += (got[i] - want[i]) * (got[i] - want[i]);
    den += want[i] * want[i];
  }
  return std::sqrt(num / std::max(den, 1e-300));
}

double rel_l2(const std::vector<float>& got, const std::vector<float>& want) {
  std::vector<double> w(want.begin(), want.end());
  return rel_l2(got, w);
}

double cosine(const std::vector<float>& a, const std::vector<float>& b) {
  double ab = 0, aa = 0, bb = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    ab += double(a[i]) * b[i];
    aa += double(a[i]) * a[i];
    bb += double(b[i]) * b[i];
  }
  return ab / std::sqrt(std::max(aa * bb, 1e-300));
}

}  // namespace psa_test

// tests/common/test_util.h -- shared test helpers: fresh random inputs (seed printed via
// SCOPED_TRACE so a failure can be replayed), video-like fields, and an independent
// double-precision attention reference written from the math, not from src/.
#pragma once
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace psa_test {

// A fresh seed per call unless PSA_TEST_SEED is set in the environment.
uint64_t fresh_seed();

std::vector<float> random_vec(std::mt19937_64& rng, size_t n, float scale = 1.0f);

// Video-like tokens over a t x h x w grid (raster order, x fastest): a few smooth random
// sinusoids per channel plus small noise, so nearby tokens are similar.
std::vector<float> video_like(std::mt19937_64& rng, int64_t t, int64_t h, int64_t w, int64_t d,
                              float noise = 0.05f);

// Reference attention in double over one head: q [lq, d], k/v [lk, d]; keep(x, t) says
// whether query x attends key t; weight(x, t) multiplies exp (>= 1, for pooled-token
// equivalents). Rows that keep nothing give zeros.
template <typename Keep>
std::vector<double> ref_attention(const std::vector<float>& q, int64_t lq, const std::vector<float>& k,
                                  const std::vector<float>& v, int64_t lk, int64_t d, double scale,
                                  Keep keep) {
  std::vector<double> out(static_cast<size_t>(lq * d), 0.0);
  std::vector<double> logits(static_cast<size_t>(lk));
  for (int64_t x = 0; x < lq; ++x) {
    double mx = -INFINITY;
    for (int64_t t = 0; t < lk; ++t) {
      if (!keep(x, t)) {
        logits[t] = -INFINITY;
        continue;
      }
      double s = 0;
      for (int64_t c = 0; c < d; ++c) s += double(q[x * d + c]) * k[t * d + c];
      logits[t] = s * scale;
      mx = std::max(mx, logits[t]);
    }
    if (mx == -INFINITY) continue;
    double sum = 0;
    for (int64_t t = 0; t < lk; ++t) {
      if (logits[t] == -INFINITY) continue;
      const double p = std::exp(logits[t] - mx);
      sum += p;
      for (int64_t c = 0; c < d; ++c) out[x * d + c] += p * v[t * d + c];
    }
    for (int64_t c = 0; c < d; ++c) out[x * d + c] /= sum;
  }
  return out;
}

double rel_l2(const std::vector<float>& got, const std::vector<double>& want);
double rel_l2(const std::vector<float>& got, const std::vector<float>& want);
double cosine(const std::vector<float>& a, const std::vector<float>& b);

}  // namespace psa_test

/* examples/c/video_input.h -- the small video-like input every example uses (C, C++, Python,
 * C#, Rust compute the same numbers): per head and channel a plane wave over the (t, h, w)
 * token grid, scaled to unit variance; q and k share it (plus a little noise), so q.k
 * behaves like a kernel of the token distance and attention is local as in a video DiT; v is
 * another wave. The random numbers come from a counter-based splitmix64, so any
 * language reproduces them element by element. Header-only, plain C11. */
#ifndef PSA_EXAMPLE_VIDEO_INPUT_H
#define PSA_EXAMPLE_VIDEO_INPUT_H

#include <math.h>
#include <stdint.h>

/* Uniform [0, 1) draw number `i` of the stream with seed 42. */
static double example_uniform(uint64_t i) {
  uint64_t z = 42u + (i + 1u) * 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  return (double)(z >> 11) * (1.0 / 9007199254740992.0);
}

/* Fills q, k, v: [1, heads, t*h*w, dim] contiguous (BNSD), float32. */
static void example_video_qkv(int64_t heads, int64_t t, int64_t h, int64_t w, int64_t dim,
                              float* q, float* k, float* v) {
  const double two_pi = 6.283185307179586;
  const int64_t len = t * h * w;
  /* draws 0 .. heads*2*dim*4-1 are the waves, then two noise draws per element */
  const uint64_t noise_base = (uint64_t)(heads * 2 * dim * 4);
  for (int64_t hd = 0; hd < heads; ++hd) {
    for (int64_t l = 0; l < len; ++l) {
      const double tt = (double)(l / (h * w)) / (double)t;
      const double hh = (double)((l / w) % h) / (double)h;
      const double ww = (double)(l % w) / (double)w;
      for (int64_t d = 0; d < dim; ++d) {
        double wave[2];
        for (int c = 0; c < 2; ++c) { /* c = 0: the q/k wave, 1: the v wave */
          const uint64_t base = (uint64_t)(((hd * 2 + c) * dim + d) * 4);
          const double ft = 3.0 * example_uniform(base) - 1.5;
          const double fh = 3.0 * example_uniform(base + 1) - 1.5;
          const double fw = 3.0 * example_uniform(base + 2) - 1.5;
          const double phase = two_pi * example_uniform(base + 3);
          wave[c] = cos(two_pi * (ft * tt + fh * hh + fw * ww) + phase);
        }
        const int64_t at = (hd * len + l) * dim + d;
        const uint64_t n = noise_base + (uint64_t)at * 2u;
        q[at] = (float)(1.4142135623730951 * wave[0] + 0.2 * (example_uniform(n) - 0.5));
        k[at] = (float)(1.4142135623730951 * wave[0] + 0.2 * (example_uniform(n + 1) - 0.5));
        v[at] = (float)wave[1];
      }
    }
  }
}

/* ||a - b|| / ||b|| in double. */
static double example_rel_l2(const float* a, const float* b, int64_t n) {
  double num = 0.0, den = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    const double d = (double)a[i] - (double)b[i];
    num += d * d;
    den += (double)b[i] * (double)b[i];
  }
  return sqrt(num / den);
}

#endif /* PSA_EXAMPLE_VIDEO_INPUT_H */

// cli/synthetic.cpp -- synthetic video attention inputs. Each channel of a field is a sum
// of a few random low-frequency plane waves over (t, h, w); q and k of one head read the
// same field, so q_i . k_j behaves like a stationary kernel of the distance between
// tokens i and j (random Fourier features) and the attention mass stays local.
#include "synthetic.h"

#include <cmath>
#include <vector>

namespace psa_cli {
namespace {

// Frequencies are per token, not per grid extent, so that locality is the same on every
// grid size: wavelengths of at least 10 latent frames and 20 rows/columns keep a query's
// strongest keys within a few blocks. The gain sets the logit range (peak logit
// ~ gain^2 * sqrt(head_dim)). Measured on the demo (Wan2.1_1.3b psa_balanced, 5x16x24):
// these values give density ~0.25 at rel-L2 ~3e-2 from dense; three times higher
// spatial frequencies make attention less local and the error ~3x larger.
constexpr int kWaves = 3;                 // plane waves per channel
constexpr double kMaxCyclesT = 0.10;      // per latent frame
constexpr double kMaxCyclesHW = 0.05;     // per row / column
constexpr double kQkGain = 1.5;           // field amplitude in q and k
constexpr double kNoise = 0.1;            // i.i.d. Gaussian noise on every video value
constexpr double kTwoPi = 6.283185307179586;

// splitmix64: tiny, seedable, identical on every platform.
struct Rng {
  uint64_t s;
  uint64_t next() {
    uint64_t z = (s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  double uniform() { return (next() >> 11) * (1.0 / 9007199254740992.0); }  // [0, 1)
  double normal() {  // Box-Muller
    const double u1 = 1.0 - uniform(), u2 = uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(kTwoPi * u2);
  }
};

// One smooth field: `channels` channels of kWaves plane waves each.
struct Field {
  struct Wave {
    double ft, fh, fw, phase, amp;
  };
  std::vector<Wave> waves;  // channels * kWaves

  Field(Rng& rng, int64_t channels) : waves(channels * kWaves) {
    for (Wave& wv : waves) {
      wv.ft = kTwoPi * (2.0 * rng.uniform() - 1.0) * kMaxCyclesT;  // radians per grid step
      wv.fh = kTwoPi * (2.0 * rng.uniform() - 1.0) * kMaxCyclesHW;
      wv.fw = kTwoPi * (2.0 * rng.uniform() - 1.0) * kMaxCyclesHW;
      wv.phase = kTwoPi * rng.uniform();
      wv.amp = std::sqrt(2.0 / kWaves);  // unit variance per channel
    }
  }
  double at(int64_t channel, int64_t t, int64_t h, int64_t w) const {
    double s = 0.0;
    for (int i = 0; i < kWaves; ++i) {
      const Wave& wv = waves[channel * kWaves + i];
      s += wv.amp * std::cos(wv.ft * t + wv.fh * h + wv.fw * w + wv.phase);
    }
    return s;
  }
};

// Writes head `head` of batch `b` of `dst`: gain * field + noise on video tokens,
// standard normal values on text tokens.
void fill_head(HostTensor& dst, int64_t b, int64_t head, const Field& field, double gain,
               const VideoGrid& g, Rng& rng) {
  const int64_t text_begin = g.position == PSA_TEXT_FIRST ? 0 : g.video_tokens();
  const int64_t video_begin = g.position == PSA_TEXT_FIRST ? g.text : 0;
  for (int64_t l = 0; l < g.tokens(); ++l) {
    const bool is_text = l >= text_begin && l < text_begin + g.text;
    const int64_t n = l - video_begin;
    const int64_t t = n / (g.h * g.w), h = (n / g.w) % g.h, w = n % g.w;
    for (int64_t d = 0; d < dst.head_dim(); ++d) {
      const double x = is_text ? rng.normal() : gain * field.at(d, t, h, w) + kNoise * rng.normal();
      dst.values[dst.offset(b, head, l, d)] = static_cast<float>(x);
    }
  }
}

}  // namespace

void fill_synthetic(HostTensor& q, HostTensor& k, HostTensor& v, const VideoGrid& grid,
                    uint64_t seed) {
  Rng rng{seed * 0x2545f4914f6cdd1dull + 1};
  const int64_t group = q.heads() / k.heads();
  const int64_t dim = q.head_dim();
  for (int64_t b = 0; b < q.batch(); ++b) {
    for (int64_t g = 0; g < k.heads(); ++g) {
      const Field qk(rng, dim), values(rng, v.head_dim());
      fill_head(k, b, g, qk, kQkGain, grid, rng);
      fill_head(v, b, g, values, 1.0, grid, rng);
      for (int64_t h = g * group; h < (g + 1) * group; ++h) fill_head(q, b, h, qk, kQkGain, grid, rng);
    }
  }
  round_to_dtype(q.values, q.desc.dtype);
  round_to_dtype(k.values, k.desc.dtype);
  round_to_dtype(v.values, v.desc.dtype);
}

}  // namespace psa_cli

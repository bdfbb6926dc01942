// cli/synthetic.cpp -- synthetic video attention inputs. Each channel of a field is a sum
// of a few random low-frequency plane waves over (t, h, w); q and k of one head read the
// same field, so q_i . k_j behaves like a stationary kernel of the distance between
// tokens i and j (random Fourier features) and the attention mass stays local.
#include "synthetic.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
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
    uint64_t z = (s += 0x9e3779b97f4a7c15ull);  // kGolden
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

constexpr uint64_t kGolden = 0x9e3779b97f4a7c15ull;  // splitmix64's increment

// One head of one tensor to fill: its field and the RNG state its noise starts from.
struct Job {
  HostTensor* dst;
  int64_t b, head;
  const Field* field;
  double gain;
  uint64_t rng_state;
};

// Storage offset of token l, channel 0 of the job's head; channels are contiguous.
float* head_row(const Job& j, int64_t l) {
  return j.dst->values.data() + j.dst->offset(j.b, j.head, l, 0);
}

// Exact fill (psa run): gain * field + noise on video tokens, standard normal values on text
// tokens, rounded to the dtype. Two draws per value, in token-major order.
void fill_head_exact(const Job& j, const VideoGrid& g) {
  HostTensor& dst = *j.dst;
  Rng rng{j.rng_state};
  const int64_t text_begin = g.position == PSA_TEXT_FIRST ? 0 : g.video_tokens();
  const int64_t video_begin = g.position == PSA_TEXT_FIRST ? g.text : 0;
  const psa_dtype dtype = dst.desc.dtype;
  for (int64_t l = 0; l < g.tokens(); ++l) {
    const bool is_text = l >= text_begin && l < text_begin + g.text;
    const int64_t n = l - video_begin;
    const int64_t t = n / (g.h * g.w), h = (n / g.w) % g.h, w = n % g.w;
    float* row = head_row(j, l);
    for (int64_t d = 0; d < dst.head_dim(); ++d) {
      const double x =
          is_text ? rng.normal() : j.gain * j.field->at(d, t, h, w) + kNoise * rng.normal();
      row[d] = round_to_dtype(static_cast<float>(x), dtype);
    }
  }
}

// Approximately standard normal from one draw: the sum of four 16-bit uniforms (Irwin-Hall),
// centred and scaled to unit variance; |x| <= 3.47.
inline double fast_normal(Rng& rng) {
  const uint64_t z = rng.next();
  const int64_t sum = static_cast<int64_t>((z & 0xffff) + ((z >> 16) & 0xffff) +
                                           ((z >> 32) & 0xffff) + (z >> 48));
  return (static_cast<double>(sum) - 131070.0) * (1.7320508075688772 / 65536.0);
}

// Fast fill (psa bench): the same fields evaluated by angle addition, cos(a + b + c) as the
// real part of e^{ia} e^{ib} e^{ic} from per-axis tables, and one-draw noise. The field
// values equal the exact ones up to double rounding; the noise has the same mean and variance.
void fill_head_fast(const Job& j, const VideoGrid& g) {
  HostTensor& dst = *j.dst;
  Rng rng{j.rng_state};
  const int64_t dim = dst.head_dim(), nw = dim * kWaves;
  const psa_dtype dtype = dst.desc.dtype;
  // Tables [axis index][wave * dim + channel]; the t table holds gain * amp * e^{i(ft t + phase)}.
  auto table = [&](int64_t n, auto angle_scale) {
    std::vector<double> re(static_cast<size_t>(n * nw)), im(re.size());
    for (int64_t x = 0; x < n; ++x)
      for (int64_t d = 0; d < dim; ++d)
        for (int i = 0; i < kWaves; ++i) {
          const Field::Wave& wv = j.field->waves[d * kWaves + i];
          double scale = 1.0;
          const double a = angle_scale(wv, x, scale);
          re[x * nw + i * dim + d] = scale * std::cos(a);
          im[x * nw + i * dim + d] = scale * std::sin(a);
        }
    return std::make_pair(std::move(re), std::move(im));
  };
  const auto [tre, tim] = table(g.t, [&](const Field::Wave& wv, int64_t x, double& scale) {
    scale = j.gain * wv.amp;
    return wv.ft * x + wv.phase;
  });
  const auto [hre, him] = table(g.h, [](const Field::Wave& wv, int64_t x, double&) { return wv.fh * x; });
  const auto [wre, wim] = table(g.w, [](const Field::Wave& wv, int64_t x, double&) { return wv.fw * x; });

  const int64_t text_begin = g.position == PSA_TEXT_FIRST ? 0 : g.video_tokens();
  const int64_t video_begin = g.position == PSA_TEXT_FIRST ? g.text : 0;
  for (int64_t l = text_begin; l < text_begin + g.text; ++l) {
    float* row = head_row(j, l);
    for (int64_t d = 0; d < dim; ++d) row[d] = round_to_dtype(static_cast<float>(fast_normal(rng)), dtype);
  }
  std::vector<double> thre(static_cast<size_t>(nw)), thim(thre.size()), sum(static_cast<size_t>(dim));
  int64_t l = video_begin;
  for (int64_t t = 0; t < g.t; ++t) {
    for (int64_t h = 0; h < g.h; ++h) {
      const double *ar = &tre[t * nw], *ai = &tim[t * nw], *br = &hre[h * nw], *bi = &him[h * nw];
      for (int64_t x = 0; x < nw; ++x) {  // e^{i(ft t + phase)} e^{i fh h}
        thre[x] = ar[x] * br[x] - ai[x] * bi[x];
        thim[x] = ar[x] * bi[x] + ai[x] * br[x];
      }
      for (int64_t w = 0; w < g.w; ++w, ++l) {
        const double *cr = &wre[w * nw], *ci = &wim[w * nw];
        for (int64_t d = 0; d < dim; ++d) sum[d] = 0.0;
        for (int i = 0; i < kWaves; ++i)
          for (int64_t d = 0; d < dim; ++d) {
            const int64_t x = i * dim + d;
            sum[d] += thre[x] * cr[x] - thim[x] * ci[x];
          }
        float* row = head_row(j, l);
        for (int64_t d = 0; d < dim; ++d) {
          row[d] = round_to_dtype(static_cast<float>(sum[d] + kNoise * fast_normal(rng)), dtype);
        }
      }
    }
  }
}

// Runs fn(0) .. fn(count - 1) on up to `threads` threads (0: one per hardware thread).
template <typename Fn>
void parallel_for(size_t count, int threads, Fn fn) {
  size_t n = threads > 0 ? static_cast<size_t>(threads) : std::thread::hardware_concurrency();
  n = std::max<size_t>(1, std::min(n, count));
  std::atomic<size_t> next{0};
  std::exception_ptr error;
  std::mutex error_mu;
  auto work = [&] {
    try {
      for (size_t i; (i = next.fetch_add(1)) < count;) fn(i);
    } catch (...) {
      std::lock_guard<std::mutex> lock(error_mu);
      if (!error) error = std::current_exception();
      next = count;
    }
  };
  std::vector<std::thread> pool;
  for (size_t i = 1; i < n; ++i) pool.emplace_back(work);
  work();
  for (std::thread& th : pool) th.join();
  if (error) std::rethrow_exception(error);
}

}  // namespace

void fill_synthetic(HostTensor& q, HostTensor& k, HostTensor& v, const VideoGrid& grid,
                    uint64_t seed, SyntheticFill mode, int threads) {
  // The fields are drawn in order from one stream; each head's noise then starts where the
  // serial fill (k, v, then the group's q heads, per KV head) would be: splitmix64 jumps
  // ahead by adding the increment, so heads fill in parallel with the serial values.
  Rng rng{seed * 0x2545f4914f6cdd1dull + 1};
  const int64_t group = q.heads() / k.heads();
  const int64_t dim = q.head_dim();
  std::vector<std::unique_ptr<Field>> fields;
  std::vector<Job> jobs;
  auto add = [&](HostTensor& t, int64_t b, int64_t head, const Field& f, double gain) {
    jobs.push_back(Job{&t, b, head, &f, gain, rng.s});
    rng.s += static_cast<uint64_t>(2 * grid.tokens() * t.head_dim()) * kGolden;  // two draws per value
  };
  for (int64_t b = 0; b < q.batch(); ++b) {
    for (int64_t g = 0; g < k.heads(); ++g) {
      fields.push_back(std::make_unique<Field>(rng, dim));
      const Field& qk = *fields.back();
      fields.push_back(std::make_unique<Field>(rng, v.head_dim()));
      add(k, b, g, qk, kQkGain);
      add(v, b, g, *fields.back(), 1.0);
      for (int64_t h = g * group; h < (g + 1) * group; ++h) add(q, b, h, qk, kQkGain);
    }
  }
  parallel_for(jobs.size(), threads, [&](size_t i) {
    if (mode == SyntheticFill::kFast) {
      fill_head_fast(jobs[i], grid);
    } else {
      fill_head_exact(jobs[i], grid);
    }
  });
}

}  // namespace psa_cli

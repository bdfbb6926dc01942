// tests/cli/synthetic_test.cpp -- the CLI's synthetic inputs (cli/synthetic.cpp).
//  * The parallel exact fill equals, bit for bit, the serial fill it replaced (kept below as
//    the reference), on every thread count, for GQA, text first/last, batches, layouts, dtypes.
//  * The fast fill (psa bench) does not depend on the thread count and differs from the exact
//    one only by its noise: video values within ~sqrt(2) * 0.1 rms, text values ~N(0, 1).
// With `--time SHAPE [exact|fast|reference] [THREADS]` (cogvideox, wan13, wan14, as psa
// bench) it times one fill instead.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "cli.h"
#include "host_tensor.h"
#include "synthetic.h"

namespace psa_cli {
std::string library_error(psa_status status) { return psa_status_name(status); }
}  // namespace psa_cli

using namespace psa_cli;

namespace reference {
// The serial fill as it was (cli/synthetic.cpp before the heads were filled in parallel).
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


void fill_reference(HostTensor& q, HostTensor& k, HostTensor& v, const VideoGrid& grid,
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

}  // namespace reference

namespace {

int failures = 0;

void expect(bool ok, const std::string& what) {
  if (!ok) {
    std::fprintf(stderr, "FAIL: %s\n", what.c_str());
    ++failures;
  }
}

struct Case {
  const char* name;
  int64_t batch, heads, kv_heads, dim;
  VideoGrid grid;
  psa_layout layout;
  psa_dtype dtype;
  uint64_t seed;
};

struct Inputs {
  HostTensor q, k, v;
};

Inputs make(const Case& c) {
  Inputs in{make_tensor(c.layout, c.dtype, c.batch, c.heads, c.grid.tokens(), c.dim),
            make_tensor(c.layout, c.dtype, c.batch, c.kv_heads, c.grid.tokens(), c.dim),
            make_tensor(c.layout, c.dtype, c.batch, c.kv_heads, c.grid.tokens(), c.dim)};
  return in;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// RMS of (a - b) and of b over video or text tokens of every head.
void compare(const HostTensor& a, const HostTensor& b, const VideoGrid& g, bool text,
             double& diff_rms, double& ref_rms, double& a_mean) {
  const int64_t text_begin = g.position == PSA_TEXT_FIRST ? 0 : g.video_tokens();
  double d2 = 0, r2 = 0, s = 0;
  int64_t n = 0;
  for (int64_t bb = 0; bb < a.batch(); ++bb)
    for (int64_t h = 0; h < a.heads(); ++h)
      for (int64_t l = 0; l < g.tokens(); ++l) {
        const bool is_text = l >= text_begin && l < text_begin + g.text;
        if (is_text != text) continue;
        for (int64_t d = 0; d < a.head_dim(); ++d) {
          const double x = a.values[a.offset(bb, h, l, d)], y = b.values[b.offset(bb, h, l, d)];
          d2 += (x - y) * (x - y);
          r2 += y * y;
          s += x;
          ++n;
        }
      }
  diff_rms = std::sqrt(d2 / n);
  ref_rms = std::sqrt(r2 / n);
  a_mean = s / n;
}

int time_fill(const std::string& shape, const std::string& mode, int threads) {
  struct Shape {
    const char* key;
    int64_t heads, dim;
    VideoGrid grid;
  };
  const Shape shapes[] = {{"cogvideox", 48, 64, {13, 30, 45, 226, PSA_TEXT_FIRST}},
                          {"wan13", 12, 128, {21, 30, 52, 0, PSA_TEXT_NONE}},
                          {"wan14", 40, 128, {21, 45, 80, 0, PSA_TEXT_NONE}}};
  for (const Shape& s : shapes) {
    if (shape != s.key) continue;
    HostTensor q = make_tensor(PSA_LAYOUT_BSND, PSA_DTYPE_BF16, 1, s.heads, s.grid.tokens(), s.dim);
    HostTensor k = q, v = q;
    const auto t0 = std::chrono::steady_clock::now();
    if (mode == "reference") {
      reference::fill_reference(q, k, v, s.grid, 0);
    } else {
      fill_synthetic(q, k, v, s.grid, 0, mode == "exact" ? SyntheticFill::kExact : SyntheticFill::kFast,
                     threads);
    }
    const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("%s %s threads=%d: %lld values per tensor, fill of q, k, v %.2f s\n", s.key,
                mode.c_str(), threads, static_cast<long long>(q.values.size()), sec);
    return 0;
  }
  std::fprintf(stderr, "unknown shape %s\n", shape.c_str());
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 3 && std::string(argv[1]) == "--time") {
    return time_fill(argv[2], argc >= 4 ? argv[3] : "fast", argc >= 5 ? std::atoi(argv[4]) : 0);
  }
  const Case cases[] = {
      {"plain", 1, 2, 2, 64, {3, 8, 12, 0, PSA_TEXT_NONE}, PSA_LAYOUT_BNSD, PSA_DTYPE_F32, 0},
      {"gqa bsnd bf16", 1, 6, 2, 32, {2, 8, 16, 0, PSA_TEXT_NONE}, PSA_LAYOUT_BSND, PSA_DTYPE_BF16, 7},
      {"text first f16 batch 2", 2, 3, 3, 64, {2, 8, 12, 20, PSA_TEXT_FIRST}, PSA_LAYOUT_BNSD,
       PSA_DTYPE_F16, 1},
      {"text last bsnd", 1, 4, 1, 48, {3, 5, 7, 17, PSA_TEXT_LAST}, PSA_LAYOUT_BSND, PSA_DTYPE_F32, 3},
      {"wide", 1, 4, 4, 128, {4, 16, 20, 30, PSA_TEXT_FIRST}, PSA_LAYOUT_BSND, PSA_DTYPE_BF16, 11},
  };
  for (const Case& c : cases) {
    Inputs ref = make(c);
    reference::fill_reference(ref.q, ref.k, ref.v, c.grid, c.seed);
    for (int threads : {1, 3, 0}) {
      Inputs x = make(c);
      fill_synthetic(x.q, x.k, x.v, c.grid, c.seed, SyntheticFill::kExact, threads);
      const std::string tag = std::string(c.name) + ", exact, threads " + std::to_string(threads);
      expect(same_bits(x.q.values, ref.q.values), tag + ": q bit for bit");
      expect(same_bits(x.k.values, ref.k.values), tag + ": k bit for bit");
      expect(same_bits(x.v.values, ref.v.values), tag + ": v bit for bit");
    }
    Inputs fast1 = make(c), fast = make(c);
    fill_synthetic(fast1.q, fast1.k, fast1.v, c.grid, c.seed, SyntheticFill::kFast, 1);
    fill_synthetic(fast.q, fast.k, fast.v, c.grid, c.seed, SyntheticFill::kFast, 0);
    expect(same_bits(fast.q.values, fast1.q.values) && same_bits(fast.k.values, fast1.k.values) &&
               same_bits(fast.v.values, fast1.v.values),
           std::string(c.name) + ", fast: independent of the thread count");
    const HostTensor* f[3] = {&fast.q, &fast.k, &fast.v};
    const HostTensor* r[3] = {&ref.q, &ref.k, &ref.v};
    for (int i = 0; i < 3; ++i) {
      const std::string tag = std::string(c.name) + ", fast " + "qkv"[i];
      double diff, rms, mean;
      compare(*f[i], *r[i], c.grid, /*text=*/false, diff, rms, mean);
      // Independent noise of std 0.1 in each (plus dtype rounding): diff ~0.141 rms.
      expect(diff > 0.11 && diff < 0.17, tag + ": video rms difference " + std::to_string(diff));
      expect(rms > 0.8, tag + ": video rms " + std::to_string(rms));
      if (c.grid.text > 0) {
        double fr, tr, fm;
        compare(*f[i], *f[i], c.grid, /*text=*/true, diff, fr, fm);
        compare(*r[i], *r[i], c.grid, /*text=*/true, diff, tr, mean);
        expect(std::abs(fr - 1.0) < 0.1 && std::abs(fm) < 0.1,
               tag + ": text rms " + std::to_string(fr) + ", mean " + std::to_string(fm));
      }
    }
  }
  if (failures == 0) std::printf("synthetic fill: all checks passed\n");
  return failures == 0 ? 0 : 1;
}

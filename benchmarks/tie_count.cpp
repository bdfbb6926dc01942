// benchmarks/tie_count.cpp -- measures the ties of the importance stage on small video grids (CPU
// stages, no rearrangement: raster token order): per query-block row, how many key blocks score
// exactly the row's top score (unnormalised P = 1: the block holds some sampled row's best key),
// and what the key-index rule did with them compared with the tie-mass rule (mask_spec.h): rows
// whose topk levels differ, and the mean signed offset (in key blocks) of the level-1 and level-2
// blocks from the key block at the query block's centre (negative: earlier in the sequence).
// Build (CPU build dir):
//   g++ -O2 -std=c++17 -Isrc -Iinclude benchmarks/tie_count.cpp build-cpu/libpsa_internal.a \
//       $(pkg-config --libs yaml-cpp zlib) -o build-cpu/tie_count && build-cpu/tie_count
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <vector>

#include "importance/importance.h"
#include "importance/importance_spec.h"
#include "mask/mask.h"

namespace {

// [L, d] smooth random field over the t x h x w grid (cosines of random plane waves) + noise;
// `shared` reuses the previous field's waves (q and k read one field, as the CLI's inputs).
struct Field {
  std::vector<double> f, ph;
};
std::vector<float> make(std::mt19937_64& rng, int t, int h, int w, int d, const Field& fl) {
  std::normal_distribution<double> n(0.0, 1.0);
  std::vector<float> x(static_cast<size_t>(t * h * w * d));
  size_t at = 0;
  for (int z = 0; z < t; ++z)
    for (int y = 0; y < h; ++y)
      for (int xx = 0; xx < w; ++xx)
        for (int c = 0; c < d; ++c) {
          const double arg = z / 2.0 * fl.f[c * 3] + y / 3.0 * fl.f[c * 3 + 1] + xx / 3.0 * fl.f[c * 3 + 2] + fl.ph[c];
          x[at++] = static_cast<float>(3.0 * std::cos(arg) + 0.3 * n(rng));
        }
  return x;
}
Field field(std::mt19937_64& rng, int d) {
  std::normal_distribution<double> n(0.0, 1.0);
  std::uniform_real_distribution<double> u(0.0, 6.3);
  Field fl;
  for (int i = 0; i < 3 * d; ++i) fl.f.push_back(n(rng));
  for (int i = 0; i < d; ++i) fl.ph.push_back(u(rng));
  return fl;
}

}  // namespace

int main() {
  struct Grid {
    const char* name;
    int t, h, w;
  };
  const Grid grids[] = {{"img32", 1, 32, 32}, {"img64", 1, 64, 64}, {"clip32", 4, 32, 32}};
  const int d = 128, bm = 128, heads = 2, seeds = 3;
  std::printf("| grid | q/k fields | block_n | key blocks | tied top blocks per row: mean | max | rows with >= 2 "
              "| rows whose topk levels change | level 1-2 blocks, mean offset from the query block's own key block: key index | tie mass |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|\n");
  for (const Grid& g : grids)
    for (int shared = 1; shared >= 0; --shared)
      for (int bn : {32, 64, 128}) {
        const int64_t L = int64_t{g.t} * g.h * g.w, mq = (L + bm - 1) / bm, nk = (L + bn - 1) / bn;
        double rows = 0, tied_sum = 0, multi = 0, changed = 0, dist_index = 0, dist_mass = 0, picks = 0;
        int64_t tied_max = 0;
        for (int seed = 0; seed < seeds; ++seed)
          for (int hd = 0; hd < heads; ++hd) {
            std::mt19937_64 rng(static_cast<uint64_t>(seed * 100 + hd));
            const Field fq = field(rng, d);
            const Field fk = shared ? fq : field(rng, d);
            const std::vector<float> q = make(rng, g.t, g.h, g.w, d, fq), k = make(rng, g.t, g.h, g.w, d, fk);
            std::vector<int32_t> qo(bm / 4), ko(static_cast<size_t>(bn / 4)), scratch(128);
            psa::sample_offsets(static_cast<uint64_t>(seed), 0, hd, psa::kSampleQuery, bm, bm / 4, scratch.data(), qo.data());
            psa::sample_offsets(static_cast<uint64_t>(seed), 0, hd, psa::kSampleKey, bn, bn / 4, scratch.data(), ko.data());
            std::vector<float> s(static_cast<size_t>(mq * nk)), t(s.size());
            psa::importance_cpu(q.data(), L, k.data(), L, d, bm, bn, qo.data(), bm / 4, ko.data(), bn / 4,
                                static_cast<float>(1.0 / std::sqrt(double(d))), s.data(), t.data());
            psa::MaskRowParams p;
            p.block_n = bn;
            std::vector<int8_t> a(static_cast<size_t>(nk)), b(a.size());
            std::vector<int32_t> order(a.size());
            for (int64_t i = 0; i < mq; ++i) {
              int64_t c = 0;
              for (int64_t j = 0; j < nk; ++j) c += t[i * nk + j] != 0.0f;
              rows += 1;
              tied_sum += static_cast<double>(c);
              tied_max = std::max(tied_max, c);
              multi += c >= 2;
              psa::build_mask_row(s.data() + i * nk, nk, p, a.data(), order.data(), nullptr, nullptr);
              psa::build_mask_row(s.data() + i * nk, nk, p, b.data(), order.data(), nullptr, t.data() + i * nk);
              changed += a != b;
              const double diag = (i * bm + bm / 2.0) / bn;  // key block holding the query block's centre
              for (int64_t j = 0; j < nk; ++j) {
                if (a[j] == 1 || a[j] == 2) dist_index += j + 0.5 - diag, picks += 1;
                if (b[j] == 1 || b[j] == 2) dist_mass += j + 0.5 - diag;
              }
            }
          }
        std::printf("| %s | %s | %d | %lld | %.2f | %lld | %.0f%% | %.0f%% | %.2f | %.2f |\n", g.name,
                    shared ? "one field" : "independent", bn, static_cast<long long>(nk), tied_sum / rows,
                    static_cast<long long>(tied_max), 100.0 * multi / rows, 100.0 * changed / rows,
                    dist_index / picks, dist_mass / picks);
      }
  return 0;
}

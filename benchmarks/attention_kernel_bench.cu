// benchmarks/attention_kernel_bench.cu -- the attention kernels alone (no library, no plan):
// dense attention with the sm80 kernel and the Hopper kernel on the standard shapes, bf16,
// batch 1, CUDA events, median of reps. Used to iterate on cuda/attention/ kernels without
// the rest of the pipeline. Prints one line per (shape, kernel, density): ms and effective
// TFLOP/s (4*H*L^2*D*density).
//
// Usage: attention_kernel_bench [--shapes cogvideox,wan13,wan14] [--reps N] [--densities LIST]
//                               [--block-n N] [--rows-grid]
//   LIST: comma-separated; "dense" = the dense path; a number d in (0, 1] = a work list that
//   keeps round(d * nk) level-1 key blocks per query block (random, ascending; seed fixed), so
//   "1" is the dense work through the sparse path; "Lp:d" (p in 1, 2, 4, 8) = the same work
//   d at level p only, round(d * p * nk) blocks of block_n / p pooled keys each (pooled tiles
//   against full-resolution tiles at equal work); "mix:a/b/c/e" = a pyramid row: fractions a, b,
//   c, e of the nk key blocks at levels 1, 2, 4, 8 (disjoint random blocks; "mix:0.1/0.05/0/0.2"
//   is the reference implementation's default configuration at density 0.15). Sparse lines run
//   the Hopper kernel only.
//   --block-n: key block size of the sparse lines (default 128; PSA's default is 64).
//   --rows-grid: also time the Hopper kernel with one CTA per query block instead of the
//   persistent grid (line tag "sm90r").
// (the sm90 line only on compute capability 9.x; the binary must hold sm_90a code)
#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "cuda/attention/attention_kernel_sm80.cuh"
#include "cuda/attention/sm90/attention_launch_sm90.cuh"

namespace {

#define CK(x)                                                                        \
  do {                                                                               \
    cudaError_t e_ = (x);                                                            \
    if (e_ != cudaSuccess) {                                                         \
      std::fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e_)); \
      std::exit(1);                                                                  \
    }                                                                                \
  } while (0)

__global__ void fill_kernel(__nv_bfloat16* x, size_t n, uint32_t seed) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n; i += size_t{gridDim.x} * blockDim.x) {
    uint32_t h = static_cast<uint32_t>(i) * 2654435761u ^ seed;
    h ^= h >> 13;
    h *= 0x5bd1e995u;
    h ^= h >> 15;
    x[i] = __float2bfloat16((static_cast<float>(h & 0xffff) / 65535.0f - 0.5f) * 2.0f);
  }
}

struct Shape {
  const char* name;
  int64_t heads, len, d;
};

// Hopper kernel with an explicit grid (one CTA per query block when `rows_grid`; the library's
// launcher runs one persistent CTA per SM).
template <int D>
cudaError_t launch_sm90(const psa::gpu::AttnKernelParams& p, bool rows_grid) {
  if (!rows_grid) return psa::gpu::sm90::launch_sparse_attention_sm90<__nv_bfloat16, D>(p, 1, nullptr);
  using Tr = psa::gpu::sm90::Traits<D>;
  psa::gpu::sm90::Sm90Params sp;
  if (!psa::gpu::sm90::make_sm90_params(p, false, D, 1, &sp)) return cudaErrorNotSupported;
  cudaError_t e = cudaFuncSetAttribute(psa::gpu::sm90::sparse_attention_sm90_kernel<__nv_bfloat16, D>,
                                       cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(Tr::kSmemBytes));
  if (e != cudaSuccess) return e;
  psa::gpu::sm90::sparse_attention_sm90_kernel<__nv_bfloat16, D>
      <<<static_cast<unsigned>(p.mq * p.heads_q), Tr::kThreads, Tr::kSmemBytes>>>(sp);
  return cudaGetLastError();
}

template <int D>
float time_kernel(bool sm90, const psa::gpu::AttnKernelParams& p, int reps, bool rows_grid = false) {
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  std::vector<float> ms;
  for (int r = 0; r < reps + 2; ++r) {
    CK(cudaEventRecord(a));
    if (sm90)
      CK(launch_sm90<D>(p, rows_grid));
    else
      CK((psa::gpu::launch_sparse_attention<__nv_bfloat16, D, 128>(p, 1, nullptr)));
    CK(cudaEventRecord(b));
    CK(cudaEventSynchronize(b));
    float t = 0;
    CK(cudaEventElapsedTime(&t, a, b));
    if (r >= 2) ms.push_back(t);
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  {
    // Without a usable device, one line saying why (exit 2) instead of a raw CUDA error.
    int n = 0;
    const cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n == 0) {
      std::fprintf(stderr, "attention_kernel_bench: needs a CUDA device: %s\n",
                   e != cudaSuccess ? cudaGetErrorString(e) : "the driver reports none");
      return 2;
    }
  }
  std::string shapes = "cogvideox,wan13,wan14", densities = "dense";
  int reps = 5, block_n = 128;
  bool rows_grid = false;
  // An integer option's value in [lo, hi], or -1 (after a message naming the option and value).
  auto int_arg = [](const char* opt, const char* v, long lo, long hi) -> int {
    char* end = nullptr;
    const long x = std::strtol(v, &end, 10);
    if (end == v || *end != '\0' || x < lo || x > hi) {
      std::fprintf(stderr, "attention_kernel_bench: %s takes an integer in [%ld, %ld] (got '%s')\n", opt, lo, hi, v);
      return -1;
    }
    return static_cast<int>(x);
  };
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--shapes") && i + 1 < argc) {
      shapes = argv[++i];
    } else if (!std::strcmp(argv[i], "--reps") && i + 1 < argc) {
      if ((reps = int_arg("--reps", argv[++i], 1, 100000)) < 0) return 2;
    } else if (!std::strcmp(argv[i], "--densities") && i + 1 < argc) {
      densities = argv[++i];
    } else if (!std::strcmp(argv[i], "--rows-grid")) {
      rows_grid = true;
    } else if (!std::strcmp(argv[i], "--block-n") && i + 1 < argc) {
      if ((block_n = int_arg("--block-n", argv[++i], 8, 128)) < 0) return 2;
    } else {
      std::fprintf(stderr, "attention_kernel_bench: unknown option or missing value: '%s'\n"
                           "usage: attention_kernel_bench [--shapes cogvideox,wan13,wan14] [--reps N] "
                           "[--densities LIST] [--rows-grid] [--block-n N]\n", argv[i]);
      return 2;
    }
  }
  if (block_n < 8 || block_n > 128 || block_n % 8 != 0) {
    std::fprintf(stderr, "attention_kernel_bench: --block-n %d: a multiple of 8 up to 128\n", block_n);
    return 2;
  }
  const Shape all[] = {{"cogvideox", 48, 17776, 64}, {"wan13", 12, 32760, 128}, {"wan14", 40, 75600, 128}};
  cudaDeviceProp prop{};
  CK(cudaGetDeviceProperties(&prop, 0));
  std::printf("GPU: %s\n", prop.name);
  for (const Shape& s : all) {
    if (shapes.find(s.name) == std::string::npos) continue;
    const size_t n = static_cast<size_t>(s.heads * s.len * s.d);
    __nv_bfloat16 *q, *k, *v, *o;
    CK(cudaMalloc(&q, n * 2));
    CK(cudaMalloc(&k, n * 2));
    CK(cudaMalloc(&v, n * 2));
    CK(cudaMalloc(&o, n * 2));
    fill_kernel<<<1024, 256>>>(q, n, 1);
    fill_kernel<<<1024, 256>>>(k, n, 2);
    fill_kernel<<<1024, 256>>>(v, n, 3);
    psa::gpu::AttnKernelParams p{};
    p.q = q;
    p.q_sb = s.heads * s.len * s.d;
    p.q_sh = s.len * s.d;
    p.q_sl = s.d;
    for (int li = 0; li < 4; ++li) {
      p.k[li] = k;
      p.v[li] = v;
      p.k_sb[li] = p.v_sb[li] = p.q_sb;
      p.k_sh[li] = p.v_sh[li] = p.q_sh;
      p.k_sl[li] = p.v_sl[li] = s.d;
    }
    p.out = o;
    p.o_sb = p.q_sb;
    p.o_sh = p.q_sh;
    p.o_sl = s.d;
    p.out_vec = 1;
    p.heads_q = s.heads;
    p.group = 1;
    p.len_q = p.len_k = s.len;
    p.block_n = 128;
    p.nk = (s.len + 127) / 128;  // dense lines; sparse lines use --block-n
    p.mq = (s.len + 127) / 128;
    p.scale = 1.0f / std::sqrt(static_cast<float>(s.d));
    const double flop = 4.0 * s.heads * static_cast<double>(s.len) * s.len * s.d;
    size_t pos = 0;
    while (pos <= densities.size()) {
      size_t end = densities.find(',', pos);
      if (end == std::string::npos) end = densities.size();
      const std::string item = densities.substr(pos, end - pos);
      pos = end + 1;
      if (item.empty()) continue;
      int32_t *wl = nullptr, *wc = nullptr;
      double dens = 1.0;
      if (item == "dense") {
        p.dense = 1;
        p.wl_blocks = p.wl_count = nullptr;
        p.block_n = 128;
        p.nk = (s.len + 127) / 128;
      } else {
        p.block_n = block_n;
        p.nk = (s.len + block_n - 1) / block_n;
        const int64_t rows = s.heads * p.mq;
        int li = 0;
        double work = 0.0;
        double frac[4] = {0.0, 0.0, 0.0, 0.0};  // mix: fractions of the key blocks per level
        const bool mix = item.rfind("mix:", 0) == 0;
        const bool lp = !mix && item.size() > 3 && item[0] == 'L' && item[2] == ':';
        if (mix) {
          if (std::sscanf(item.c_str() + 4, "%lf/%lf/%lf/%lf", &frac[0], &frac[1], &frac[2], &frac[3]) != 4 ||
              !(frac[0] >= 0) || !(frac[1] >= 0) || !(frac[2] >= 0) || !(frac[3] >= 0) ||
              !(frac[0] + frac[1] + frac[2] + frac[3] <= 1.0)) {  // NaN fails too
            std::fprintf(stderr, "attention_kernel_bench: %s: want mix:a/b/c/e, fractions >= 0 summing to <= 1\n",
                         item.c_str());
            return 2;
          }
        } else if (lp) {
          const int level = item[1] - '0';
          li = level == 1 ? 0 : level == 2 ? 1 : level == 4 ? 2 : level == 8 ? 3 : -1;
          if (li < 0) {
            std::fprintf(stderr, "attention_kernel_bench: %s: level must be 1, 2, 4 or 8\n", item.c_str());
            return 2;
          }
        }
        if (!mix) {  // the density d of "d" or "Lp:d": a number in (0, 1]
          const char* v = item.c_str() + (lp ? 3 : 0);
          char* end = nullptr;
          work = std::strtod(v, &end);
          if (end == v || *end != '\0' || !(work > 0.0 && work <= 1.0)) {
            std::fprintf(stderr, "attention_kernel_bench: %s: want a density in (0, 1], Lp:d or mix:a/b/c/e\n",
                         item.c_str());
            return 2;
          }
        }
        // blocks kept per level (a single-level line keeps `work` at level li)
        int keep[4] = {0, 0, 0, 0};
        if (mix) {
          for (int l = 0; l < 4; ++l) keep[l] = static_cast<int>(std::lround(frac[l] * p.nk));
        } else {
          keep[li] = std::min<int>(static_cast<int>(p.nk),
                                   std::max<int>(1, static_cast<int>(std::lround(work * (1 << li) * p.nk))));
        }
        std::vector<int32_t> blocks(static_cast<size_t>(rows * p.nk), 0), count(static_cast<size_t>(rows * 4), 0);
        std::mt19937 rng(7);
        std::vector<int32_t> perm(static_cast<size_t>(p.nk));
        for (int64_t r = 0; r < rows; ++r) {
          for (int64_t j = 0; j < p.nk; ++j) perm[j] = static_cast<int32_t>(j);
          std::shuffle(perm.begin(), perm.end(), rng);
          int at = 0;  // each level's blocks ascending, levels in order (the work list's layout)
          for (int l = 0; l < 4; ++l) {
            std::sort(perm.begin() + at, perm.begin() + at + keep[l]);
            count[r * 4 + l] = keep[l];
            at += keep[l];
          }
          std::copy(perm.begin(), perm.begin() + at, blocks.begin() + r * p.nk);
        }
        CK(cudaMalloc(&wl, blocks.size() * 4));
        CK(cudaMalloc(&wc, count.size() * 4));
        CK(cudaMemcpy(wl, blocks.data(), blocks.size() * 4, cudaMemcpyHostToDevice));
        CK(cudaMemcpy(wc, count.data(), count.size() * 4, cudaMemcpyHostToDevice));
        p.dense = 0;
        p.wl_blocks = wl;
        p.wl_count = wc;
        dens = 0.0;
        for (int l = 0; l < 4; ++l) dens += static_cast<double>(keep[l]) / p.nk / (1 << l);
      }
      for (int k = (p.dense ? 0 : 1); k < (prop.major == 9 ? (rows_grid ? 3 : 2) : 1); ++k) {
        const bool sm90 = k > 0, rg = k == 2;
        const float ms = s.d == 64 ? time_kernel<64>(sm90, p, reps, rg) : time_kernel<128>(sm90, p, reps, rg);
        std::printf("%-10s %-5s %-6s density %.3f %9.3f ms %7.1f TFLOP/s\n", s.name,
                    rg ? "sm90r" : sm90 ? "sm90" : "sm80", item.c_str(), dens, ms, flop * dens / (ms * 1e-3) / 1e12);
      }
      if (wl != nullptr) CK(cudaFree(wl));
      if (wc != nullptr) CK(cudaFree(wc));
    }
    CK(cudaFree(q));
    CK(cudaFree(k));
    CK(cudaFree(v));
    CK(cudaFree(o));
  }
  return 0;
}

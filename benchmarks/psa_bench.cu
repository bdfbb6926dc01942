// benchmarks/psa_bench.cu -- libpsa CUDA benchmark: dense kernel, per-stage and whole-forward
// times of PSA presets and topk quotas on the standard video-DiT shapes (bf16, batch 1), with
// realised density, effective TFLOP/s and error against our dense output. JSON on stdout (or
// --json FILE), a short table on stderr. CUDA events, warm-up, median of many reps.
// Stage times come from the context's own stage events (psa_context_set_stage_timing,
// experimental API).
//
// Usage: psa_bench [--shapes cogvideox,wan13,wan14] [--json FILE] [--min-ms 600] [--max-reps 30]
//                  [--configs NAME,...]  (only these rows besides dense, e.g. pyramid:ref-default)
//                  [--ncu]   (one dense launch at Wan2.1-1.3B for an ncu capture, no timing)
#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#define PSA_EXPERIMENTAL_API
#include "cli/standard_shapes.h"
#include "psa.h"

#define CK(x)                                                                                  \
  do {                                                                                         \
    cudaError_t e_ = (x);                                                                      \
    if (e_ != cudaSuccess) {                                                                   \
      std::fprintf(stderr, "CUDA error %s at %s:%d: %s\n", cudaGetErrorString(e_), __FILE__, \
                   __LINE__, #x);                                                              \
      std::exit(2);                                                                            \
    }                                                                                          \
  } while (0)
#define PK(x)                                                                                     \
  do {                                                                                            \
    psa_status s_ = (x);                                                                          \
    if (s_ != PSA_OK) {                                                                           \
      std::fprintf(stderr, "libpsa error %d at %s:%d: %s: %s\n", (int)s_, __FILE__, __LINE__, #x, \
                   psa_last_error_message());                                                     \
      std::exit(3);                                                                               \
    }                                                                                             \
  } while (0)

namespace {

using Shape = psa_cli::StandardShape;
const auto& kShapes = psa_cli::kStandardShapes;

__device__ __forceinline__ uint32_t hash32(uint32_t x) {
  x ^= x >> 16;
  x *= 0x7feb352du;
  x ^= x >> 15;
  x *= 0x846ca68bu;
  x ^= x >> 16;
  return x;
}
__device__ __forceinline__ float unit(uint32_t x) { return (hash32(x) >> 8) * (1.0f / 16777216.0f); }

// Video-like BSND [L, H, D]: a smooth function of the (t, y, x) latent position per (head,
// channel) plus noise (q, k and v alike, as in real video DiTs); text tokens are noise. Never zeros.
__global__ void fill_video(__nv_bfloat16* out, int64_t L, int64_t H, int64_t D, int64_t text,
                           int text_first, int64_t gh, int64_t gw, uint32_t seed, int noise_only) {
  const int64_t n = L * H * D;
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    const int64_t c = i % D, h = (i / D) % H, l = i / (D * H);
    const uint32_t hc = static_cast<uint32_t>(h * D + c) * 2654435761u + seed * 97u;
    const float noise = (unit(static_cast<uint32_t>(i) * 747796405u + seed) - 0.5f) * 0.5f;
    float v;
    const int64_t vid = text_first ? l - text : l;
    const int64_t nvid = L - text;
    if (noise_only || vid < 0 || vid >= nvid) {
      v = (unit(static_cast<uint32_t>(i) * 2891336453u + seed * 7u) - 0.5f) * 3.0f;
    } else {
      const int64_t x = vid % gw, y = (vid / gw) % gh, t = vid / (gw * gh);
      const float ft = 0.05f + 0.4f * unit(hc + 1), fy = 0.05f + 0.3f * unit(hc + 2),
                  fx = 0.05f + 0.3f * unit(hc + 3), ph = 6.2831853f * unit(hc + 4);
      v = 1.5f * __sinf(ft * t + fy * y + fx * x + ph) + noise;
    }
    out[i] = __float2bfloat16(v);
  }
}

// sum (a-b)^2 and sum b^2 over n bf16 values (double atomics).
__global__ void diff_norms(const __nv_bfloat16* a, const __nv_bfloat16* b, int64_t n, double* acc) {
  double s0 = 0, s1 = 0;
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    const float x = __bfloat162float(a[i]), y = __bfloat162float(b[i]);
    const double dd = static_cast<double>(x) - y;
    s0 += (x == x) ? dd * dd : 1e30;
    s1 += static_cast<double>(y) * y;
  }
  for (int o = 16; o > 0; o >>= 1) {
    s0 += __shfl_xor_sync(0xffffffffu, s0, o);
    s1 += __shfl_xor_sync(0xffffffffu, s1, o);
  }
  if ((threadIdx.x & 31) == 0) {
    atomicAdd(acc, s0);
    atomicAdd(acc + 1, s1);
  }
}

double rel_l2(const void* a, const void* ref, int64_t n) {
  double* acc = nullptr;
  CK(cudaMalloc(&acc, 2 * sizeof(double)));
  CK(cudaMemset(acc, 0, 2 * sizeof(double)));
  diff_norms<<<1024, 256>>>(static_cast<const __nv_bfloat16*>(a), static_cast<const __nv_bfloat16*>(ref), n, acc);
  CK(cudaGetLastError());
  double h[2];
  CK(cudaMemcpy(h, acc, sizeof(h), cudaMemcpyDeviceToHost));
  CK(cudaFree(acc));
  return std::sqrt(h[0] / std::max(h[1], 1e-300));
}

struct Opts {
  std::vector<std::string> shapes{"cogvideox", "wan13", "wan14"};
  std::string json;
  double min_ms = 600;
  int max_reps = 30;
  bool ncu = false;
  std::vector<std::string> configs;  // empty: every row
  bool wanted(const std::string& name) const {
    return configs.empty() || std::find(configs.begin(), configs.end(), name) != configs.end();
  }
};

float median(std::vector<float> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0f : v[v.size() / 2];
}

// Problem buffers of one shape.
struct Bufs {
  const Shape* s;
  int64_t L;
  psa_tensor_desc desc;
  void *q, *k, *v, *out, *dense_out;
  size_t n;
};

struct Result {
  std::string shape, config, kind;
  double density = 1.0, ms = 0, tflops = 0, err = 0;
  double stage_ms[5] = {0, 0, 0, 0, 0};  // rearrange, pool, importance, mask, attention
  double pre_ms = 0;          // rearrange + pool + importance + mask
  double mask_agree = -1;     // vs sample divisor 4 (sampling study only)
  int64_t divisor = 4;
  int reps = 0;
  const char* precision = "default";  // what the attention ran (psa_stats.precision)
};

std::vector<Result> g_results;

psa_context* make_ctx(psa_config* cfg, const Bufs& b) {
  psa_context* ctx = nullptr;
  PK(psa_context_create(cfg, PSA_BACKEND_CUDA, -1, &ctx));
  PK(psa_context_set_video_grid(ctx, b.s->t, b.s->h, b.s->w, b.s->text, b.s->position));
  PK(psa_context_set_step(ctx, 1000));  // past every warm-up
  return ctx;
}

// Times whole forwards of ctx (median), then per-stage times through the hook; fills r.
void run_config(const Opts& o, const Bufs& b, psa_context* ctx, Result& r, std::vector<int8_t>* levels_out) {
  uint64_t bytes = 0;
  PK(psa_workspace_size(ctx, &b.desc, &b.desc, &b.desc, &b.desc, &bytes));
  void* ws = nullptr;
  CK(cudaMalloc(&ws, std::max<uint64_t>(bytes, 256)));
  auto fwd = [&]() {
    PK(psa_attention_forward(ctx, &b.desc, b.q, &b.desc, b.k, &b.desc, b.v, &b.desc, b.out, nullptr, ws, bytes,
                             nullptr));
  };
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  // warm-up (plan, module load) + a time probe
  fwd();
  fwd();
  CK(cudaEventRecord(e0));
  fwd();
  CK(cudaEventRecord(e1));
  CK(cudaEventSynchronize(e1));
  float probe = 0;
  CK(cudaEventElapsedTime(&probe, e0, e1));
  const int reps = std::max(3, std::min(o.max_reps, static_cast<int>(o.min_ms / std::max(probe, 0.01f))));
  std::vector<float> ts;
  for (int i = 0; i < reps; ++i) {
    CK(cudaEventRecord(e0));
    fwd();
    CK(cudaEventRecord(e1));
    CK(cudaEventSynchronize(e1));
    float m = 0;
    CK(cudaEventElapsedTime(&m, e0, e1));
    ts.push_back(m);
  }
  r.ms = median(ts);
  r.reps = reps;
  psa_stats st{};
  st.struct_size = sizeof(st);
  PK(psa_context_get_stats(ctx, &st));
  r.density = st.ran_dense ? 1.0 : st.density;
  r.precision = psa_param_value_name(PSA_PARAM_PRECISION, st.precision);
  const double flops = 4.0 * b.s->heads * static_cast<double>(b.L) * b.L * b.s->head_dim * r.density;
  r.tflops = flops / (r.ms * 1e-3) / 1e12;
  CK(cudaDeviceSynchronize());
  r.err = b.dense_out && b.out != b.dense_out ? rel_l2(b.out, b.dense_out, static_cast<int64_t>(b.n)) : 0.0;

  if (!st.ran_dense) {
    // Per-stage times from the context's own stage events (experimental API).
    PK(psa_context_set_stage_timing(ctx, 1));
    std::vector<std::vector<float>> st_ms(5);
    for (int i = 0; i < reps; ++i) {
      fwd();
      psa_stats ts_stats{};
      ts_stats.struct_size = sizeof(ts_stats);
      PK(psa_context_get_stats(ctx, &ts_stats));
      for (int s = 0; s < 5; ++s) st_ms[s].push_back(static_cast<float>(ts_stats.stage_ms[s]));
    }
    PK(psa_context_set_stage_timing(ctx, 0));
    for (int s = 0; s < 5; ++s) r.stage_ms[s] = median(st_ms[s]);
    r.pre_ms = r.stage_ms[0] + r.stage_ms[1] + r.stage_ms[2] + r.stage_ms[3];
    if (levels_out) {
      int64_t lb = 0, lh = 0, lq = 0, lk = 0;
      PK(psa_context_level_map_shape(ctx, &lb, &lh, &lq, &lk));
      levels_out->resize(static_cast<size_t>(lb * lh * lq * lk));
      PK(psa_context_get_level_map(ctx, levels_out->data(), levels_out->size()));
    }
  }
  CK(cudaEventDestroy(e0));
  CK(cudaEventDestroy(e1));
  CK(cudaFree(ws));
}

void print_row(const Result& r) {
  std::fprintf(stderr,
               "%-10s %-26s dens %.3f  %9.3f ms  %6.1f TF/s  err %.2e | rearr %.3f pool %.3f imp %.3f mask %.3f "
               "attn %.3f (pre %.3f) %s%s\n",
               r.shape.c_str(), r.config.c_str(), r.density, r.ms, r.tflops, r.err, r.stage_ms[0], r.stage_ms[1],
               r.stage_ms[2], r.stage_ms[3], r.stage_ms[4], r.pre_ms, r.precision,
               r.mask_agree >= 0 ? (" agree " + std::to_string(r.mask_agree)).c_str() : "");
}

psa_config* topk_config(const char* model, double density, int64_t divisor) {
  psa_config* cfg = nullptr;
  // Start from the model's psa_balanced preset (block sizes, rearrangement, text rule), then
  // topk quotas: every kept block at level 1, the rest skipped.
  PK(psa_config_load_embedded(model, "psa_balanced", &cfg));
  PK(psa_config_set_int(cfg, PSA_PARAM_MASK_MODE, PSA_MASK_MODE_TOPK));
  PK(psa_config_set_double(cfg, PSA_PARAM_RATIO_L1, density));
  PK(psa_config_set_double(cfg, PSA_PARAM_RATIO_L2, density));
  PK(psa_config_set_double(cfg, PSA_PARAM_RATIO_L4, density));
  PK(psa_config_set_double(cfg, PSA_PARAM_RATIO_L8, density));
  PK(psa_config_set_double(cfg, PSA_PARAM_RATIO_L0, 1.0));
  PK(psa_config_set_int(cfg, PSA_PARAM_SAMPLE_DIVISOR, divisor));
  PK(psa_config_set_int(cfg, PSA_PARAM_WARMUP_STEPS, 0));
  PK(psa_config_validate(cfg));
  return cfg;
}

// The pyramid configuration of BENCHMARKS.md (cli/standard_shapes.h; level1_density > 0: every
// kept block at level 1 at that density).
psa_config* pyramid_config(const char* model, double level1_density,
                           psa_precision precision = PSA_PRECISION_DEFAULT) {
  psa_config* cfg = nullptr;
  PK(psa_cli::make_pyramid_config(model, level1_density, &cfg));
  PK(psa_config_set_int(cfg, PSA_PARAM_PRECISION, precision));
  return cfg;
}

void bench_shape(const Opts& o, const Shape& s) {
  Bufs b;
  b.s = &s;
  b.L = s.t * s.h * s.w + s.text;
  PK(psa_tensor_desc_init(&b.desc, PSA_LAYOUT_BSND, PSA_DTYPE_BF16, 1, s.heads, b.L, s.head_dim));
  b.n = static_cast<size_t>(b.L * s.heads * s.head_dim);
  CK(cudaMalloc(&b.q, b.n * 2));
  CK(cudaMalloc(&b.k, b.n * 2));
  CK(cudaMalloc(&b.v, b.n * 2));
  CK(cudaMalloc(&b.out, b.n * 2));
  CK(cudaMalloc(&b.dense_out, b.n * 2));
  const int tf = s.position == PSA_TEXT_FIRST;
  fill_video<<<2048, 256>>>(static_cast<__nv_bfloat16*>(b.q), b.L, s.heads, s.head_dim, s.text, tf, s.h, s.w, 11, 0);
  fill_video<<<2048, 256>>>(static_cast<__nv_bfloat16*>(b.k), b.L, s.heads, s.head_dim, s.text, tf, s.h, s.w, 22, 0);
  fill_video<<<2048, 256>>>(static_cast<__nv_bfloat16*>(b.v), b.L, s.heads, s.head_dim, s.text, tf, s.h, s.w, 33, 0);
  CK(cudaGetLastError());
  CK(cudaMemset(b.out, 0xff, b.n * 2));  // NaN poison
  CK(cudaDeviceSynchronize());
  std::fprintf(stderr, "== %s: 1 x %lld heads x %lld tokens x d%lld bf16\n", s.key, (long long)s.heads,
               (long long)b.L, (long long)s.head_dim);

  // Dense kernel (preset type dense), output kept as the error reference.
  {
    psa_config* cfg = nullptr;
    PK(psa_config_load_embedded(s.model, "baseline", &cfg));
    psa_context* ctx = make_ctx(cfg, b);
    Bufs bd = b;
    bd.out = b.dense_out;
    Result r;
    r.shape = s.key;
    r.config = "dense";
    r.kind = "dense";
    run_config(o, bd, ctx, r, nullptr);
    print_row(r);
    g_results.push_back(r);
    if (o.ncu) {
      psa_context_destroy(ctx);
      psa_config_destroy(cfg);
      return;
    }
    psa_context_destroy(ctx);
    psa_config_destroy(cfg);
  }

  // Shipped PSA presets of the model.
  psa_catalog* cat = nullptr;
  PK(psa_catalog_open(nullptr, &cat));
  const int32_t np = psa_catalog_preset_count(cat, s.model);
  for (int32_t i = 0; i < np; ++i) {
    const char* name = psa_catalog_preset_name(cat, s.model, i);
    psa_config* cfg = nullptr;
    PK(psa_catalog_get_config(cat, s.model, name, &cfg));
    int64_t method = 0;
    PK(psa_config_get_int(cfg, PSA_PARAM_METHOD, &method));
    if (method != PSA_METHOD_PSA || !o.wanted(std::string("preset:") + name)) {
      psa_config_destroy(cfg);
      continue;
    }
    psa_context* ctx = nullptr;
    if (psa_context_create(cfg, PSA_BACKEND_CUDA, -1, &ctx) != PSA_OK) {
      std::fprintf(stderr, "skip preset %s: %s\n", name, psa_last_error_message());
      psa_config_destroy(cfg);
      continue;
    }
    psa_context_destroy(ctx);
    ctx = make_ctx(cfg, b);
    Result r;
    r.shape = s.key;
    r.config = std::string("preset:") + name;
    r.kind = "preset";
    run_config(o, b, ctx, r, nullptr);
    print_row(r);
    g_results.push_back(r);
    psa_context_destroy(ctx);
    psa_config_destroy(cfg);
  }
  psa_catalog_destroy(cat);

  // The pyramid configuration of the reference implementation's defaults (topk, block_m 128,
  // block_n 64, tile_n 32, ratio ends 1: 0.10, 2: 0.15, 4: 0.15, 8: 0.35, 0: 1 -- 10% of the key
  // blocks at full resolution, 5% pooled by 2, 20% pooled by 8: density 0.15), then every kept
  // block at level 1 at the density that configuration measured: the two attention stages do
  // the same work, so their ratio is the cost of pooled tiles.
  auto pyramid_row = [&](const char* name, const char* kind, double level1_density, psa_precision precision) {
    psa_config* cfg = pyramid_config(s.model, level1_density, precision);
    psa_context* ctx = make_ctx(cfg, b);
    Result r;
    r.shape = s.key;
    r.config = name;
    r.kind = kind;
    run_config(o, b, ctx, r, nullptr);
    print_row(r);
    g_results.push_back(r);
    psa_context_destroy(ctx);
    psa_config_destroy(cfg);
    return r.density;
  };
  // (The pyramid row also runs when only the level-1 row is asked for: it gives that row's density.)
  if (o.wanted("pyramid:ref-default") || o.wanted("level1:pyramid-density")) {
    const double pyramid_density = pyramid_row("pyramid:ref-default", "pyramid", 0.0, PSA_PRECISION_DEFAULT);
    if (o.wanted("level1:pyramid-density"))
      pyramid_row("level1:pyramid-density", "pyramid-level1", pyramid_density, PSA_PRECISION_DEFAULT);
  }
  // The same configuration with precision fp8 (8-bit attention where the backend runs it).
  if (o.wanted("pyramid:ref-default:fp8"))
    pyramid_row("pyramid:ref-default:fp8", "pyramid-fp8", 0.0, PSA_PRECISION_FP8);

  // topk quotas, all level 1; sampling study (divisors 8, 16) at density 0.15.
  const double dens[] = {0.05, 0.10, 0.15, 0.25, 0.5};
  std::vector<int8_t> lv4;
  for (double d : dens) {
    char nm[64];
    std::snprintf(nm, sizeof(nm), "topk:%.2f", d);
    if (!o.wanted(nm)) continue;
    psa_config* cfg = topk_config(s.model, d, 4);
    psa_context* ctx = make_ctx(cfg, b);
    Result r;
    r.shape = s.key;
    r.config = nm;
    r.kind = "topk";
    run_config(o, b, ctx, r, d == 0.15 ? &lv4 : nullptr);
    print_row(r);
    g_results.push_back(r);
    psa_context_destroy(ctx);
    psa_config_destroy(cfg);
  }
  for (int64_t div : {8, 16}) {
    char nm[64];
    std::snprintf(nm, sizeof(nm), "topk:0.15/div%lld", (long long)div);
    if (!o.wanted(nm)) continue;
    psa_config* cfg = topk_config(s.model, 0.15, div);
    psa_context* ctx = make_ctx(cfg, b);
    Result r;
    r.shape = s.key;
    r.config = nm;
    r.kind = "sampling";
    r.divisor = div;
    std::vector<int8_t> lv;
    run_config(o, b, ctx, r, &lv);
    if (lv.size() == lv4.size() && !lv.empty()) {
      int64_t same = 0, kept = 0, kept_both = 0;
      for (size_t i = 0; i < lv.size(); ++i) {
        same += lv[i] == lv4[i];
        kept += lv4[i] != 0;
        kept_both += lv4[i] != 0 && lv[i] != 0;
      }
      r.mask_agree = static_cast<double>(kept_both) / std::max<int64_t>(kept, 1);  // recall of divisor-4 kept blocks
    }
    print_row(r);
    g_results.push_back(r);
    psa_context_destroy(ctx);
    psa_config_destroy(cfg);
  }
  CK(cudaFree(b.q));
  CK(cudaFree(b.k));
  CK(cudaFree(b.v));
  CK(cudaFree(b.out));
  CK(cudaFree(b.dense_out));
}

void write_json(const Opts& o) {
  FILE* f = o.json.empty() ? stdout : std::fopen(o.json.c_str(), "w");
  if (!f) {
    std::fprintf(stderr, "cannot write %s\n", o.json.c_str());
    std::exit(4);
  }
  cudaDeviceProp prop{};
  CK(cudaGetDeviceProperties(&prop, 0));
  std::fprintf(f, "{\n  \"gpu\": \"%s\",\n  \"libpsa\": \"%s\",\n  \"results\": [\n", prop.name, psa_version_string());
  for (size_t i = 0; i < g_results.size(); ++i) {
    const Result& r = g_results[i];
    std::fprintf(f,
                 "    {\"shape\": \"%s\", \"config\": \"%s\", \"kind\": \"%s\", \"density\": %.6f, \"ms\": %.4f, "
                 "\"tflops\": %.2f, \"err_vs_dense\": %.4e, \"reps\": %d, \"sample_divisor\": %lld, "
                 "\"stage_ms\": {\"rearrange\": %.4f, \"pool\": %.4f, \"importance\": %.4f, \"mask\": %.4f, "
                 "\"attention_and_inverse\": %.4f}, \"pre_attention_ms\": %.4f, \"mask_recall_vs_div4\": %.4f, "
                 "\"precision\": \"%s\"}%s\n",
                 r.shape.c_str(), r.config.c_str(), r.kind.c_str(), r.density, r.ms, r.tflops, r.err, r.reps,
                 (long long)r.divisor, r.stage_ms[0], r.stage_ms[1], r.stage_ms[2], r.stage_ms[3], r.stage_ms[4],
                 r.pre_ms, r.mask_agree, r.precision, i + 1 < g_results.size() ? "," : "");
  }
  std::fprintf(f, "  ]\n}\n");
  if (f != stdout) std::fclose(f);
}

}  // namespace

// Without a usable device, one line saying why (exit 2) instead of a raw CUDA error.
int require_gpu(const char* program) {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e == cudaSuccess && n > 0) return 0;
  std::fprintf(stderr, "%s: needs a CUDA device: %s\n", program,
               e != cudaSuccess ? cudaGetErrorString(e) : "the driver reports none");
  return 2;
}

int main(int argc, char** argv) {
  if (const int rc = require_gpu("psa_bench")) return rc;
  Opts o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", a.c_str());
        std::exit(1);
      }
      return argv[++i];
    };
    auto split = [](const std::string& v) {
      std::vector<std::string> out;
      size_t p = 0;
      while (p <= v.size()) {
        const size_t q = v.find(',', p);
        out.push_back(v.substr(p, q == std::string::npos ? std::string::npos : q - p));
        if (q == std::string::npos) break;
        p = q + 1;
      }
      return out;
    };
    if (a == "--shapes") {
      o.shapes = split(next());
    } else if (a == "--configs") {
      o.configs = split(next());
    } else if (a == "--json") {
      o.json = next();
    } else if (a == "--min-ms") {
      const std::string v = next();
      char* end = nullptr;
      o.min_ms = std::strtod(v.c_str(), &end);
      if (end == v.c_str() || *end != '\0' || !(o.min_ms >= 0 && o.min_ms <= 1e6)) {
        std::fprintf(stderr, "--min-ms takes a number of milliseconds in [0, 1e6] (got '%s')\n", v.c_str());
        return 1;
      }
    } else if (a == "--max-reps") {
      const std::string v = next();
      char* end = nullptr;
      const long n = std::strtol(v.c_str(), &end, 10);
      if (end == v.c_str() || *end != '\0' || n < 1 || n > 100000) {
        std::fprintf(stderr, "--max-reps takes an integer in [1, 100000] (got '%s')\n", v.c_str());
        return 1;
      }
      o.max_reps = static_cast<int>(n);
    } else if (a == "--ncu") {
      o.ncu = true;
      o.max_reps = 1;
      o.min_ms = 0;
    } else {
      std::fprintf(stderr, "usage: psa_bench [--shapes cogvideox,wan13,wan14] [--json FILE] [--min-ms MS] "
                           "[--max-reps N] [--configs NAME,...] [--ncu]\n");
      return 1;
    }
  }
  for (const std::string& k : o.shapes) {
    const Shape* s = nullptr;
    for (const Shape& x : kShapes)
      if (k == x.key) s = &x;
    if (!s) {
      std::fprintf(stderr, "unknown shape %s\n", k.c_str());
      return 1;
    }
    bench_shape(o, *s);
  }
  write_json(o);
  return 0;
}

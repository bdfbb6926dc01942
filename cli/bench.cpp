// cli/bench.cpp -- `psa bench`: whole-forward times of our dense attention (the model's
// `baseline` preset), of every shipped PSA preset of the model and of the pyramid
// configuration of BENCHMARKS.md (the reference implementation's defaults, and every kept block
// at level 1 at the density it measured), on the standard shapes of BENCHMARKS.md (bf16,
// batch 1, BSND, synthetic video-like inputs), through psa.h only.
// Wall time of synchronised forwards (the median of the reps); for per-stage times and topk
// sweeps use benchmarks/psa_bench. Needs the CUDA backend and a device: otherwise one line on
// stderr and exit 2. Progress goes to stderr as short plain lines (also when stderr is not a
// terminal) unless --quiet: filling the inputs of the large shapes and timing each config
// take seconds each.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "backend_info.h"
#include "buffer.h"
#include "cli.h"
#include "cuda_runtime.h"
#include "host_tensor.h"
#include "json.h"
#include "options.h"
#include "preset_info.h"
#include "standard_shapes.h"
#include "synthetic.h"

namespace psa_cli {
namespace {

using BenchShape = StandardShape;
const auto& kShapes = kStandardShapes;

struct CatalogDeleter {
  void operator()(psa_catalog* c) const { psa_catalog_destroy(c); }
};
struct ConfigDeleter {
  void operator()(psa_config* c) const { psa_config_destroy(c); }
};
struct ContextDeleter {
  void operator()(psa_context* c) const { psa_context_destroy(c); }
};

// "psa bench: wan14: filling inputs ... done in 1.2 s" on stderr: begin() prints up to the
// dots, end() the rest of the line. No-ops under --quiet. A line left open by an exception
// is ended before the error prints.
class Log {
 public:
  explicit Log(bool on) : on_(on) {}
  ~Log() {
    if (open_) std::fputs("failed\n", stderr);
  }
  Log(const Log&) = delete;
  Log& operator=(const Log&) = delete;
  void begin(const char* shape, const std::string& what) {
    start_ = std::chrono::steady_clock::now();
    if (!on_) return;
    std::fprintf(stderr, "psa bench: %s: %s ... ", shape, what.c_str());
    std::fflush(stderr);
    open_ = true;
  }
  double seconds() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }
  void end(const std::string& text) {
    if (!on_) return;
    std::fprintf(stderr, "%s\n", text.c_str());
    std::fflush(stderr);
    open_ = false;
  }
  void end_done() {
    char buf[48];
    std::snprintf(buf, sizeof buf, "done in %.1f s", seconds());
    end(buf);
  }

 private:
  bool on_, open_ = false;
  std::chrono::steady_clock::time_point start_;
};

struct Row {
  std::string shape, config;  // config: "dense" or "preset:<name>"
  double ms = 0.0, density = 1.0, rel_l2 = 0.0, tflops = 0.0, speedup = 1.0;
  int reps = 0;
  const char* precision = "default";  // the arithmetic the attention ran (psa_stats.precision)
};

struct BenchOptions {
  std::vector<std::string> shapes;
  int warmup = 2, max_reps = 20;
  double min_ms = 300.0;
  bool json = false, quiet = false;
};

// Times one config: warm-ups, then synchronised forwards until min_ms or max_reps; the
// median. Leaves the last output in `out_host` (bf16 values as float).
Row time_config(const BenchShape& s, const std::string& name, psa_config* cfg,
                const BenchOptions& o, const psa_tensor_desc& desc, const Buffer& q,
                const Buffer& k, const Buffer& v, std::vector<float>& out_host) {
  psa_context* raw = nullptr;
  check(psa_context_create(cfg, PSA_BACKEND_CUDA, -1, &raw));
  std::unique_ptr<psa_context, ContextDeleter> ctx(raw);
  check(psa_context_set_video_grid(ctx.get(), s.t, s.h, s.w, s.text, s.position));
  int64_t warmup_steps = 0;
  check(psa_config_get_int(cfg, PSA_PARAM_WARMUP_STEPS, &warmup_steps));
  check(psa_context_set_step(ctx.get(), warmup_steps));  // the first sparse step
  uint64_t ws_bytes = 0;
  check(psa_workspace_size(ctx.get(), &desc, &desc, &desc, &desc, &ws_bytes));
  const Buffer ws(PSA_BACKEND_CUDA, ws_bytes);
  const Buffer out(PSA_BACKEND_CUDA, q.size());
  CudaRuntime& rt = CudaRuntime::get();
  auto once = [&] {
    check(psa_attention_forward(ctx.get(), &desc, q.data(), &desc, k.data(), &desc, v.data(),
                                &desc, out.data(), nullptr, ws.data(), ws_bytes, nullptr));
    rt.synchronize();
  };
  for (int i = 0; i < o.warmup; ++i) once();
  std::vector<double> ms;
  double total = 0.0;
  while (static_cast<int>(ms.size()) < o.max_reps && (ms.size() < 3 || total < o.min_ms)) {
    const auto t0 = std::chrono::steady_clock::now();
    once();
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    total += ms.back();
  }
  std::sort(ms.begin(), ms.end());
  Row r;
  r.shape = s.key;
  r.config = name;
  r.ms = ms[ms.size() / 2];
  r.reps = static_cast<int>(ms.size());
  psa_stats st{};
  st.struct_size = sizeof st;
  check(psa_context_get_stats(ctx.get(), &st));
  r.density = st.density;
  r.precision = psa_param_value_name(PSA_PARAM_PRECISION, st.precision);
  const double L = static_cast<double>(desc.shape[2]);
  r.tflops = 4.0 * s.heads * L * L * s.head_dim * r.density / (r.ms * 1e-3) / 1e12;
  std::vector<uint8_t> bytes(out.size());
  out.download(bytes.data(), bytes.size());
  out_host = decode(bytes.data(), bytes.size() / 2, PSA_DTYPE_BF16);
  return r;
}

// The pyramid configuration of BENCHMARKS.md on the model's psa_balanced preset (its
// rearrangement and text rule): the reference implementation's defaults -- topk, block_m 128,
// block_n 64, tile_n 32, ratio ends 1: 0.10, 2: 0.15, 4: 0.15, 8: 0.35, 0: 1 (10% of the key
// blocks at full resolution, 5% pooled by 2, 20% pooled by 8), no similarity cap. With
// `level1_density` > 0: the same blocks and format with every kept block at level 1 and that
// density (the attention work of the pyramid row, at full resolution).
// `precision` sets PSA_PARAM_PRECISION (the 8-bit row).
std::unique_ptr<psa_config, ConfigDeleter> pyramid_config(const char* model, double level1_density,
                                                          psa_precision precision = PSA_PRECISION_DEFAULT) {
  psa_config* raw = nullptr;
  check(make_pyramid_config(model, level1_density, &raw));
  std::unique_ptr<psa_config, ConfigDeleter> cfg(raw);
  check(psa_config_set_int(raw, PSA_PARAM_PRECISION, precision));
  return cfg;
}

double rel_l2(const std::vector<float>& a, const std::vector<float>& ref) {
  double d2 = 0.0, r2 = 0.0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double d = static_cast<double>(a[i]) - ref[i];
    d2 += d * d;
    r2 += static_cast<double>(ref[i]) * ref[i];
  }
  return r2 > 0.0 ? std::sqrt(d2 / r2) : (d2 > 0.0 ? INFINITY : 0.0);
}

std::vector<Row> bench_shape(const BenchShape& s, const BenchOptions& o, Log& log) {
  log.begin(s.key, "filling inputs");
  const VideoGrid g{s.t, s.h, s.w, s.text, s.position};
  HostTensor q = make_tensor(PSA_LAYOUT_BSND, PSA_DTYPE_BF16, 1, s.heads, g.tokens(), s.head_dim);
  HostTensor k = q, v = q;
  // The fast fill on all cores: Wan2.1-14B's q, k, v hold 1.2G values.
  fill_synthetic(q, k, v, g, /*seed=*/0, SyntheticFill::kFast);
  log.end_done();
  log.begin(s.key, "uploading inputs");
  auto upload = [](const HostTensor& t) {
    const std::vector<uint8_t> bytes = encode(t.values, t.desc.dtype);
    Buffer b(PSA_BACKEND_CUDA, bytes.size());
    b.upload(bytes.data(), bytes.size());
    return b;
  };
  const Buffer qb = upload(q), kb = upload(k), vb = upload(v);
  const psa_tensor_desc desc = q.desc;
  log.end_done();

  psa_catalog* raw = nullptr;
  check(psa_catalog_open(nullptr, &raw));
  std::unique_ptr<psa_catalog, CatalogDeleter> cat(raw);
  std::vector<std::pair<std::string, std::unique_ptr<psa_config, ConfigDeleter>>> configs;
  for (int32_t i = 0; i < psa_catalog_preset_count(cat.get(), s.model); ++i) {
    const char* preset = psa_catalog_preset_name(cat.get(), s.model, i);
    psa_config* c = nullptr;
    check(psa_catalog_get_config(cat.get(), s.model, preset, &c));
    std::unique_ptr<psa_config, ConfigDeleter> cfg(c);
    const PresetInfo info = read_preset_info(c);
    if (std::string(preset) == "baseline") {
      configs.insert(configs.begin(), {"dense", std::move(cfg)});
    } else if (info.method == PSA_METHOD_PSA) {
      configs.push_back({std::string("preset:") + preset, std::move(cfg)});
    }
  }
  if (configs.empty() || configs.front().first != "dense") {
    throw Failure(std::string(s.model) + " has no `baseline` preset in the embedded catalog");
  }

  std::vector<Row> rows;
  std::vector<float> dense_out, out;
  auto run = [&](const std::string& name, psa_config* cfg) {
    log.begin(s.key, "timing " + name);
    Row r = time_config(s, name, cfg, o, desc, qb, kb, vb, name == "dense" ? dense_out : out);
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.3f ms (%d reps)", r.ms, r.reps);
    log.end(buf);
    r.rel_l2 = name == "dense" ? 0.0 : rel_l2(out, dense_out);
    r.speedup = rows.empty() ? 1.0 : rows.front().ms / r.ms;
    rows.push_back(r);
  };
  for (auto& [name, cfg] : configs) run(name, cfg.get());
  run("pyramid:ref-default", pyramid_config(s.model, 0.0).get());
  const double pyramid_density = rows.back().density;
  run("level1:pyramid-density", pyramid_config(s.model, pyramid_density).get());
  // The same mask with 8-bit attention (where the CUDA backend runs it: Hopper, head_dim 128;
  // the row's precision says what ran).
  run("pyramid:ref-default:fp8", pyramid_config(s.model, 0.0, PSA_PRECISION_FP8).get());
  return rows;
}

// The allowed values of the numeric options. The defaults (2, 20, 300 ms) and the settings
// BENCHMARKS.md records (15 reps, 300 ms) lie well inside; the upper ends keep a mistyped value
// from holding a GPU for days. The timing loop stops at --max-reps or, after 3 forwards, once
// --min-ms have passed, so --min-ms bounds each config's timing (10 minutes at most); the
// warm-up forwards are bounded by their count alone. --min-ms 0 asks for the 3 forwards only.
constexpr int kWarmupMax = 1000;
constexpr int kMaxRepsMax = 100000;
constexpr double kMinMsMax = 600000.0;

// "--max-reps = 0: allowed [1, 100000]": the option, the value as typed and the range.
UsageError out_of_range(const char* option, const std::string& value, const std::string& allowed,
                        const cxxopts::Options& opts) {
  return UsageError(std::string(option) + " = " + value + ": allowed " + allowed, opts.help());
}

int int_in_range(const cxxopts::Options& opts, const cxxopts::ParseResult& r, const char* name,
                 int lo, int hi) {
  const int v = option_value<int>(opts, r, name);
  if (v < lo || v > hi) {
    throw out_of_range(("--" + std::string(name)).c_str(), std::to_string(v),
                       "[" + std::to_string(lo) + ", " + std::to_string(hi) + "]", opts);
  }
  return v;
}

// --min-ms: a plain decimal number ("300", "2.5", "1e3"; parse_decimal), in range.
double min_ms_option(const cxxopts::Options& opts, const cxxopts::ParseResult& r) {
  const std::string text = option_value<std::string>(opts, r, "min-ms");
  const std::string allowed = "[0, " + std::to_string(static_cast<int>(kMinMsMax)) + "]";
  double v = 0.0;
  switch (parse_decimal(text, &v)) {
    case Decimal::kOutOfRange: throw out_of_range("--min-ms", text, allowed, opts);
    case Decimal::kNotANumber:
      throw UsageError("--min-ms: '" + text + "' is not a valid value for this option (a decimal "
                       "number of milliseconds)", opts.help());
    case Decimal::kOk: break;
  }
  if (!(v >= 0.0 && v <= kMinMsMax)) throw out_of_range("--min-ms", text, allowed, opts);
  return v;
}

const BenchShape* find_shape(const std::string& key) {
  for (const BenchShape& s : kShapes)
    if (key == s.key) return &s;
  return nullptr;
}

}  // namespace

int cmd_bench(int argc, const char* const* argv) {
  cxxopts::Options opts(
      "psa bench",
      "Time our dense attention (the model's baseline preset), every shipped PSA preset of the "
      "model, and the pyramid configuration of BENCHMARKS.md (pyramid:ref-default: topk, blocks "
      "128x64, tile 32, ratio ends .10/.15/.15/.35; level1:pyramid-density: every kept block at "
      "level 1 at the density it measured; pyramid:ref-default:fp8: the pyramid row with precision "
      "fp8, which runs 8-bit attention where the CUDA backend supports it, column `precision`) on "
      "the standard shapes of BENCHMARKS.md: CogVideoX-5B "
      "(48 heads, d64, 13x30x45 + 226 text), Wan2.1-1.3B 480p (12 heads, d128, 21x30x52), "
      "Wan2.1-14B 720p (40 heads, d128, 21x45x80); bf16, batch 1, BSND, synthetic video-like "
      "inputs, step = warmup_steps. Median wall time of synchronised forwards. Needs a CUDA "
      "device (exit 2 without one).");
  opts.add_options()
      ("shapes", "comma-separated subset of cogvideox, wan13, wan14",
       cxxopts::value<std::string>()->default_value("cogvideox,wan13,wan14"), "S")
      ("warmup", "untimed forwards per config, 0 to 1000",
       cxxopts::value<int>()->default_value("2"), "N")
      ("max-reps", "at most N timed forwards per config, 1 to 100000",
       cxxopts::value<int>()->default_value("20"), "N")
      ("min-ms", "time at least this long per config, and at least 3 forwards (both within "
                 "--max-reps); 0 to 600000 (10 minutes)",
       cxxopts::value<std::string>()->default_value("300"), "MS")
      ("json", "print one JSON object (gpu, shapes, one row per shape and config)")
      ("quiet", "no progress lines on stderr")
      ("h,help", "print this help");
  cxxopts::ParseResult r;
  if (!parse_options(opts, argc, argv, r)) return 0;
  BenchOptions o;
  const std::string shapes = option_value<std::string>(opts, r, "shapes");
  for (size_t p = 0; p <= shapes.size();) {
    const size_t c = shapes.find(',', p);
    const std::string key = shapes.substr(p, c == std::string::npos ? std::string::npos : c - p);
    if (find_shape(key) == nullptr) {
      throw UsageError("--shapes: unknown shape '" + key + "'; allowed: cogvideox, wan13, wan14",
                       opts.help());
    }
    // A repeated shape would be filled and timed twice, for the same rows.
    if (std::find(o.shapes.begin(), o.shapes.end(), key) != o.shapes.end())
      throw UsageError("--shapes: '" + key + "' is listed twice", opts.help());
    o.shapes.push_back(key);
    if (c == std::string::npos) break;
    p = c + 1;
  }
  o.warmup = int_in_range(opts, r, "warmup", 0, kWarmupMax);
  o.max_reps = int_in_range(opts, r, "max-reps", 1, kMaxRepsMax);
  o.min_ms = min_ms_option(opts, r);
  o.json = r.count("json") != 0;
  o.quiet = r.count("quiet") != 0;

  // No device: one line and exit 2, before any allocation (and after every option check, so
  // that a bad command line is reported as such on any machine).
  std::string detail;
  const std::string cuda = cuda_availability(&detail);
  std::string gpu;
  if (cuda == "available") {
    try {
      gpu = CudaRuntime::get().device_name();
    } catch (const Failure& e) {
      std::fprintf(stderr, "psa bench: %s\n", e.what());
      return 2;
    }
  } else {
    std::fprintf(stderr, "psa bench: needs a CUDA device: %s\n",
                 cuda == "not built in" ? "this libpsa was built without the CUDA backend"
                 : cuda == "built in, no usable device" ? detail.c_str()
                                                        : ("cuda " + cuda).c_str());
    return 2;
  }

  Log log(!o.quiet);
  std::vector<Row> rows;
  for (const std::string& key : o.shapes) {
    const std::vector<Row> part = bench_shape(*find_shape(key), o, log);
    rows.insert(rows.end(), part.begin(), part.end());
  }

  if (o.json) {
    std::vector<std::string> items;
    for (const Row& x : rows) {
      Json j;
      j.str("shape", x.shape).str("config", x.config).num("ms", x.ms).num("density", x.density);
      j.num("tflops", x.tflops).num("speedup_vs_dense", x.speedup).num("rel_l2_vs_dense", x.rel_l2);
      j.integer("reps", x.reps).str("precision", x.precision);
      items.push_back(j.done());
    }
    std::vector<std::string> shape_items;
    for (const std::string& key : o.shapes) {
      const BenchShape& s = *find_shape(key);
      Json j;
      j.str("key", s.key).str("label", s.label).str("model", s.model).integer("heads", s.heads);
      j.integer("head_dim", s.head_dim);
      j.raw("grid", "[" + std::to_string(s.t) + ", " + std::to_string(s.h) + ", " +
                        std::to_string(s.w) + "]");
      j.integer("text_length", s.text).integer("seq_len", s.t * s.h * s.w + s.text);
      shape_items.push_back(j.done());
    }
    Json top;
    top.str("gpu", gpu).str("backend", "cuda").str("dtype", "bf16").str("layout", "bsnd");
    top.integer("batch", 1).str("timing", "median wall time of synchronised forwards");
    top.raw("shapes", Json::array(shape_items)).raw("results", Json::array(items));
    std::printf("%s\n", top.done().c_str());
    return 0;
  }
  std::printf("psa bench: %s, bf16, batch 1, BSND, median of synchronised forwards\n\n", gpu.c_str());
  std::printf("%-10s %-24s %8s %10s %9s %9s %12s %9s\n", "shape", "config", "density", "ms",
              "TFLOP/s", "vs dense", "err vs dense", "precision");
  for (const Row& x : rows) {
    std::printf("%-10s %-24s %8.3f %10.3f %9.0f %8.2fx %12.2e %9s\n", x.shape.c_str(), x.config.c_str(),
                x.density, x.ms, x.tflops, x.speedup, x.rel_l2, x.precision);
  }
  return 0;
}

}  // namespace psa_cli

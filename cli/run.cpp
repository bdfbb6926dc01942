// cli/run.cpp -- `psa run` / `psa demo`: config -> two contexts (the preset, and the same
// preset with method dense) -> inputs -> one forward each -> stats and error vs dense.
// Everything goes through psa.h; this file holds no attention math.
#include <algorithm>
#include <chrono>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend_info.h"
#include "buffer.h"
#include "cli.h"
#include "cuda_runtime.h"
#include "host_tensor.h"
#include "progress.h"
#include "run.h"

namespace psa_cli {
namespace {

struct ConfigDeleter {
  void operator()(psa_config* c) const { psa_config_destroy(c); }
};
struct ContextDeleter {
  void operator()(psa_context* c) const { psa_context_destroy(c); }
};
struct CatalogDeleter {
  void operator()(psa_catalog* c) const { psa_catalog_destroy(c); }
};
using ConfigPtr = std::unique_ptr<psa_config, ConfigDeleter>;
using ContextPtr = std::unique_ptr<psa_context, ContextDeleter>;

// Demo verdict: the forward must be sparse and stay close to dense attention. Cosine
// 0.99 is loose on purpose: the demo proves the pipeline runs end to end, the test suite
// holds the tight tolerances.
constexpr double kDemoMinCosine = 0.99;

ConfigPtr load_config(const RunOptions& o, RunReport& r) {
  const char* file = o.config.empty() ? nullptr : o.config.c_str();
  const char* preset = o.preset.empty() ? nullptr : o.preset.c_str();
  psa_config* raw = nullptr;
  check(file ? psa_config_load_file(file, o.model.c_str(), preset, &raw)
             : psa_config_load_embedded(o.model.c_str(), preset, &raw));
  ConfigPtr cfg(raw);
  r.model = o.model;
  r.preset = o.preset;
  if (o.preset.empty()) {
    // psa_config_load_* does not report which preset default_attention named.
    // A catalog validates every preset of the file; when another one is broken, the
    // report only loses the name.
    r.preset_defaulted = true;
    r.preset = "default_attention";
    psa_catalog* cat = nullptr;
    if (psa_catalog_open(file, &cat) == PSA_OK) {
      const char* def = psa_catalog_default_preset(cat, o.model.c_str());
      if (def != nullptr) r.preset = def;
    }
    std::unique_ptr<psa_catalog, CatalogDeleter> guard(cat);
  }
  return cfg;
}

ContextPtr make_context(const psa_config* cfg, psa_backend backend) {
  psa_context* raw = nullptr;
  check(psa_context_create(cfg, backend, -1, &raw));
  return ContextPtr(raw);
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// An output the run will write (--out, --save-inputs' files, --mask-png), tried before the
// forwards run: a path that cannot be written fails now instead of after minutes of CPU
// work, and before any other output exists. A missing file is created and removed again;
// an existing regular file is opened for writing without truncating it; an existing
// non-regular target (/dev/stdout, a FIFO) is left to the writer.
void check_output_path(const std::string& path, const char* option) {
  struct stat st {};
  const std::string head = std::string(option) + " '" + path + "': ";
  if (::stat(path.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) throw Failure(head + "is a directory");
    if (!S_ISREG(st.st_mode)) return;
    const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0) throw Failure(head + "cannot write: " + std::strerror(errno));
    ::close(fd);
    return;
  }
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0 && errno == EEXIST) return;  // a dangling symlink: the writer follows it
  if (fd < 0) throw Failure(head + "cannot create: " + std::strerror(errno));
  ::close(fd);
  ::unlink(path.c_str());
}

// The dense reference: the preset with method dense. It keeps causal and the block sizes; a
// mask mode that only psa_causal allows (energybound, the Qwen presets) goes back to topk,
// which dense does not read.
ConfigPtr dense_reference(const psa_config* cfg) {
  psa_config* raw = nullptr;
  check(psa_config_clone(cfg, &raw));
  ConfigPtr dense(raw);
  check(psa_config_set_int(raw, PSA_PARAM_METHOD, PSA_METHOD_DENSE));
  int64_t mode = 0;
  check(psa_config_get_int(raw, PSA_PARAM_MASK_MODE, &mode));
  if (mode == PSA_MASK_MODE_ENERGYBOUND) check(psa_config_set_int(raw, PSA_PARAM_MASK_MODE, PSA_MASK_MODE_TOPK));
  return dense;
}

// Sets the video grid on `ctx` and returns it. Pixel sizes go through the library
// (psa_context_set_video_pixels); the grid it derives is recomputed here from the same
// documented rule because psa.h has no getter for it.
VideoGrid apply_grid(const RunOptions& o, const PresetInfo& info, psa_context* ctx) {
  VideoGrid g;
  g.text = o.text_length >= 0 ? o.text_length : info.text_length;
  if (g.text == 0 && o.text_position >= 0)
    throw UsageError(std::string("--text-position ") +
                     (o.text_position == PSA_TEXT_LAST ? "last" : "first") +
                     ": there are no text tokens (text length 0" +
                     (o.text_length >= 0 ? ", --text-length 0)" : ", the preset's)") +
                     "; give --text-length N or leave --text-position out");
  g.position = g.text == 0 ? PSA_TEXT_NONE
               : o.text_position >= 0 ? static_cast<psa_text_position>(o.text_position)
                                      : PSA_TEXT_FIRST;
  if (o.pixels) {
    check(psa_context_set_video_pixels(ctx, o.frames, o.height, o.width, o.text_length,
                                       g.position));
    g.t = ceil_div(o.frames, info.divisor[0]);
    g.h = ceil_div(o.height, info.divisor[1]);
    g.w = ceil_div(o.width, info.divisor[2]);
  } else {
    g.t = o.grid[0];
    g.h = o.grid[1];
    g.w = o.grid[2];
    check(psa_context_set_video_grid(ctx, g.t, g.h, g.w, g.text, g.position));
  }
  return g;
}

struct Inputs {
  HostTensor q, k, v;
};

Inputs make_inputs(const RunOptions& o, const VideoGrid& g, RunReport& r) {
  Inputs in;
  if (!o.q_path.empty()) {
    in.q = load_npy_tensor(o.q_path, o.layout, o.dtype);
    in.k = load_npy_tensor(o.k_path, o.layout, o.dtype);
    in.v = load_npy_tensor(o.v_path, o.layout, o.dtype);
    r.synthetic = false;
    r.input_files = o.q_path + ", " + o.k_path + ", " + o.v_path;
  } else {
    // The CUDA kernels take f16/bf16 only; the CPU reference is the oracle, in f32.
    const psa_dtype dt = o.dtype >= 0                     ? static_cast<psa_dtype>(o.dtype)
                         : r.backend == PSA_BACKEND_CUDA ? PSA_DTYPE_BF16
                                                          : PSA_DTYPE_F32;
    // q, k, v and the output as f32 on the host, before any of them is allocated.
    const double per_head = static_cast<double>(g.tokens()) * static_cast<double>(o.batch) *
                            static_cast<double>(o.head_dim);
    const double heads = 2.0 * static_cast<double>(o.heads) + 2.0 * static_cast<double>(o.kv_heads);
    check_host_memory(4.0 * per_head * heads,
                      "synthetic inputs of " + std::to_string(g.tokens()) + " tokens x " +
                          std::to_string(o.heads) + " heads (q, k, v and the output, f32 on the host)");
    in.q = make_tensor(o.layout, dt, o.batch, o.heads, g.tokens(), o.head_dim);
    in.k = make_tensor(o.layout, dt, o.batch, o.kv_heads, g.tokens(), o.head_dim);
    in.v = make_tensor(o.layout, dt, o.batch, o.kv_heads, g.tokens(), o.head_dim);
    r.synthetic = true;
    r.seed = o.seed;
  }
  return in;
}

// One forward into `out` (host values), synchronised, returning its wall time in ms.
double timed_forward(psa_context* ctx, psa_backend backend, const Inputs& in,
                     const Buffer& q, const Buffer& k, const Buffer& v, const Buffer& ws,
                     HostTensor& out) {
  Buffer ob(backend, out.values.size() * static_cast<uint64_t>(psa_dtype_size(out.desc.dtype)));
  const auto t0 = std::chrono::steady_clock::now();
  check(psa_attention_forward(ctx, &in.q.desc, q.data(), &in.k.desc, k.data(), &in.v.desc,
                              v.data(), &out.desc, ob.data(), nullptr, ws.data(), ws.size(),
                              nullptr));
  if (backend == PSA_BACKEND_CUDA) CudaRuntime::get().synchronize();
  const auto t1 = std::chrono::steady_clock::now();
  std::vector<uint8_t> bytes(ob.size());
  ob.download(bytes.data(), bytes.size());
  out.values = decode(bytes.data(), out.values.size(), out.desc.dtype);
  return std::chrono::duration<double, std::milli>(t1 - t0).count();
}

Buffer upload(psa_backend backend, const HostTensor& t) {
  const std::vector<uint8_t> bytes = encode(t.values, t.desc.dtype);
  Buffer b(backend, bytes.size());
  b.upload(bytes.data(), bytes.size());
  return b;
}

// Counts the non-finite values of `t` and finds the first in logical [b, h, l, d] order.
RunReport::NonFinite count_nonfinite(const HostTensor& t) {
  RunReport::NonFinite n;
  for (int64_t b = 0; b < t.batch(); ++b)
    for (int64_t h = 0; h < t.heads(); ++h)
      for (int64_t l = 0; l < t.seq_len(); ++l)
        for (int64_t d = 0; d < t.head_dim(); ++d) {
          if (std::isfinite(t.values[static_cast<size_t>(t.offset(b, h, l, d))])) continue;
          if (n.count++ == 0) {
            n.first[0] = b;
            n.first[1] = h;
            n.first[2] = l;
            n.first[3] = d;
          }
        }
  return n;
}

// Sparse vs dense. With a non-finite value in either output the sums are meaningless (a NaN
// once made them 0, a perfect match): they are left at NaN and the counts tell why.
void compare(const HostTensor& sparse, const HostTensor& dense, RunReport& r) {
  r.nonfinite[3] = count_nonfinite(sparse);
  r.nonfinite[4] = count_nonfinite(dense);
  if (r.nonfinite[3].count != 0 || r.nonfinite[4].count != 0) {
    r.rel_l2 = r.cosine = r.max_abs = NAN;
    return;
  }
  double diff2 = 0.0, dense2 = 0.0, sparse2 = 0.0, dot = 0.0, max_abs = 0.0;
  for (size_t i = 0; i < sparse.values.size(); ++i) {
    const double s = sparse.values[i], d = dense.values[i];
    diff2 += (s - d) * (s - d);
    dense2 += d * d;
    sparse2 += s * s;
    dot += s * d;
    max_abs = std::max(max_abs, std::fabs(s - d));
  }
  r.rel_l2 = dense2 > 0.0 ? std::sqrt(diff2 / dense2) : (diff2 > 0.0 ? INFINITY : 0.0);
  r.cosine = sparse2 > 0.0 && dense2 > 0.0 ? dot / std::sqrt(sparse2 * dense2) : 0.0;
  r.max_abs = max_abs;
}

// Progress estimates of the two forwards on the CPU: one small dense forward (1 head, 256
// tokens, the run's dtype and head dim) gives the time per query-key pair; the sparse forward
// is charged its expected density (from the preset's level ends) plus 10% for pooling and
// importance, or all of it when it runs dense. Any failure leaves the estimates unknown.
void estimate_forwards(const RunOptions& o, const PresetInfo& info, const Inputs& in,
                       psa_backend backend, Progress& progress) {
  if (backend != PSA_BACKEND_CPU) return;
  constexpr int64_t kL = 256;
  psa_config* raw = nullptr;
  if (psa_config_create(&raw) != PSA_OK) return;
  ConfigPtr cfg(raw);
  if (psa_config_set_int(raw, PSA_PARAM_METHOD, PSA_METHOD_DENSE) != PSA_OK ||
      psa_config_set_int(raw, PSA_PARAM_USE_REARRANGE, 0) != PSA_OK) {
    return;
  }
  psa_context* craw = nullptr;
  if (psa_context_create(raw, PSA_BACKEND_CPU, -1, &craw) != PSA_OK) return;
  ContextPtr ctx(craw);
  const psa_dtype dt = in.q.desc.dtype;
  psa_tensor_desc d{};
  if (psa_tensor_desc_init(&d, PSA_LAYOUT_BNSD, dt, 1, 1, kL, in.q.head_dim()) != PSA_OK) return;
  uint64_t ws_bytes = 0;
  if (psa_workspace_size(ctx.get(), &d, &d, &d, &d, &ws_bytes) != PSA_OK) return;
  const size_t bytes = static_cast<size_t>(kL * in.q.head_dim() * psa_dtype_size(dt));
  std::vector<uint8_t> q(bytes, 0), k(bytes, 0), v(bytes, 0), out(bytes, 0), ws(ws_bytes + 1);
  const auto t0 = std::chrono::steady_clock::now();
  if (psa_attention_forward(ctx.get(), &d, q.data(), &d, k.data(), &d, v.data(), &d, out.data(),
                            nullptr, ws.data(), ws_bytes, nullptr) != PSA_OK) {
    return;
  }
  const double per_pair =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / (kL * kL);
  const double dense_s = per_pair * static_cast<double>(in.q.batch() * in.q.heads()) *
                         static_cast<double>(in.q.seq_len()) * static_cast<double>(in.k.seq_len());
  const int64_t step = o.step_given ? o.step : info.warmup_steps;
  double density = 1.0;
  if (info.method == PSA_METHOD_PSA && step >= info.warmup_steps) {
    const double* e = info.ratio_end;  // levels 1, 2, 4, 8
    density = e[0] + (e[1] - e[0]) / 2 + (e[2] - e[1]) / 4 + (e[3] - e[2]) / 8 + 0.1;
  } else if (info.method != PSA_METHOD_DENSE && step >= info.warmup_steps) {
    density = 1.0 - info.sparsity + 0.1;
  }
  progress.estimate("sparse forward", dense_s * std::min(1.0, density));
  progress.estimate("dense forward", dense_s);
}

}  // namespace

RunReport execute_run(const RunOptions& o) {
  RunReport r;
  ConfigPtr cfg = load_config(o, r);
  if (o.causal) check(psa_config_set_int(cfg.get(), PSA_PARAM_CAUSAL, 1));
  if (o.precision >= 0) check(psa_config_set_int(cfg.get(), PSA_PARAM_PRECISION, o.precision));
  r.info = read_preset_info(cfg.get());
  ConfigPtr dense_cfg = dense_reference(cfg.get());
  if (!o.out_path.empty()) check_output_path(o.out_path, "--out");
  if (!o.save_inputs.empty()) check_output_path(o.save_inputs + "q.npy", "--save-inputs");
  if (!o.mask.png.empty()) check_output_path(o.mask.png, "--mask-png");

  ContextPtr ctx, dense;
  // The sparse and the dense-reference context on one backend, with the grid and the step.
  auto open_contexts = [&](psa_backend backend) {
    ctx = make_context(cfg.get(), backend);
    r.backend = psa_context_backend(ctx.get());
    dense = make_context(dense_cfg.get(), r.backend);
    r.grid = apply_grid(o, r.info, ctx.get());
    apply_grid(o, r.info, dense.get());
    check(psa_context_set_step(ctx.get(), o.step_given ? o.step : r.info.warmup_steps));
  };
  open_contexts(o.backend);
  r.backend_reason = backend_reason(o.backend, r.backend);
  r.max_error = o.max_error;
  r.step_pinned = o.step_given;

  Inputs in = make_inputs(o, r.grid, r);
  // --backend auto with f32 inputs (--dtype f32 or '<f4' files): the CUDA kernels take f16 and
  // bf16 only, so the run goes to the CPU backend, which takes f32, and says so.
  if (o.backend == PSA_BACKEND_AUTO && r.backend == PSA_BACKEND_CUDA &&
      in.q.desc.dtype == PSA_DTYPE_F32) {
    open_contexts(PSA_BACKEND_CPU);
    r.backend_reason = "cpu: --backend auto: the inputs are f32 and the CUDA kernels take f16 and "
                       "bf16 (--dtype bf16 or f16 runs on the GPU)";
  }
  HostTensor out = make_tensor(o.layout, in.q.desc.dtype, in.q.batch(), in.q.heads(),
                               in.q.seq_len(), in.q.head_dim());
  HostTensor dense_out = out;
  // Ask first: shape errors come from the library before any data is generated. With
  // files, the message ("k: seq_len = ...") also says which files q, k and v are.
  const psa_status shape_status = psa_workspace_size(ctx.get(), &in.q.desc, &in.k.desc,
                                                     &in.v.desc, &out.desc, &r.workspace_bytes);
  if (shape_status != PSA_OK && !r.synthetic)
    throw Failure(library_error(shape_status) + "; q, k, v: " + r.input_files);
  check(shape_status);
  check(psa_workspace_size(dense.get(), &in.q.desc, &in.k.desc, &in.v.desc, &out.desc,
                           &r.dense_workspace_bytes));
  Progress progress(Progress::wanted(o.quiet), "psa run");
  progress.plan({{"inputs", 0.0}, {"sparse forward", 0.0}, {"dense forward", 0.0}});
  progress.stage("inputs");
  if (r.synthetic) fill_synthetic(in.q, in.k, in.v, r.grid, o.seed);
  for (int i = 0; i < 3; ++i) r.nonfinite[i] = count_nonfinite(i == 0 ? in.q : i == 1 ? in.k : in.v);
  if (progress.enabled()) estimate_forwards(o, r.info, in, r.backend, progress);
  if (!o.save_inputs.empty()) {
    const char* names[3] = {"q.npy", "k.npy", "v.npy"};
    const HostTensor* ts[3] = {&in.q, &in.k, &in.v};
    for (int i = 0; i < 3; ++i) {
      save_npy_tensor(o.save_inputs + names[i], *ts[i], /*native=*/true);
      r.saved_inputs += (i ? ", " : "") + o.save_inputs + names[i];
    }
  }
  r.batch = in.q.batch();
  r.heads_q = in.q.heads();
  r.heads_kv = in.k.heads();
  r.seq_len = in.q.seq_len();
  r.head_dim = in.q.head_dim();
  r.dtype = in.q.desc.dtype;
  r.layout = o.layout;

  const Buffer qb = upload(r.backend, in.q), kb = upload(r.backend, in.k),
               vb = upload(r.backend, in.v);
  const Buffer ws(r.backend, std::max(r.workspace_bytes, r.dense_workspace_bytes));
  progress.stage("sparse forward");
  r.sparse_ms = timed_forward(ctx.get(), r.backend, in, qb, kb, vb, ws, out);
  r.stats.struct_size = sizeof(psa_stats);
  check(psa_context_get_stats(ctx.get(), &r.stats));
  if (r.stats.ran_dense) {
    r.dense_reason = r.info.method == PSA_METHOD_DENSE ? "method"
                     : r.stats.step < r.info.warmup_steps ? "warmup"
                                                          : "other";
  }
  if (!o.mask.png.empty()) write_mask_picture(ctx.get(), o.mask);
  progress.stage("dense forward");
  r.dense_ms = timed_forward(dense.get(), r.backend, in, qb, kb, vb, ws, dense_out);
  progress.finish();
  compare(out, dense_out, r);

  if (!o.out_path.empty()) {
    save_npy_tensor(o.out_path, out, /*native=*/false);
    r.out_path = o.out_path;
  }
  return r;
}

Quality judge(const RunReport& r, double max_error) {
  Quality q;
  const std::string limit = max_error >= 0.0 ? " (--max-error " + fmt_num(max_error) + ")" : "";
  if (!r.finite()) {
    q.grade = "non-finite";
    q.failed = true;
    q.line = "FAILED: an output or input holds NaN or inf, so the error against dense is not "
             "defined (see the nonfinite line)";
    return q;
  }
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.3e", r.rel_l2);
  if (r.rel_l2 <= kCloseRelL2) {
    q.grade = "close";
    q.line = std::string("close to dense attention: relative L2 ") + buf + " <= " +
             fmt_num(kCloseRelL2);
  } else if (r.rel_l2 <= kFairRelL2) {
    q.grade = "fair";
    q.line = std::string("fair: relative L2 ") + buf + " is above " + fmt_num(kCloseRelL2) +
             " (close) but <= " + fmt_num(kFairRelL2) + "; check the result on real inputs";
  } else {
    q.grade = "poor";
    q.line = std::string("POOR: relative L2 ") + buf + " > " + fmt_num(kFairRelL2) +
             "; the sparse output is far from dense attention (try a denser preset)";
  }
  if (max_error >= 0.0) {
    q.failed = r.rel_l2 > max_error;
    q.line += q.failed ? "; exceeds" + limit + ", exit status 3" : "; within" + limit;
  }
  return q;
}

int cmd_run(int argc, const char* const* argv) {
  RunOptions o;
  if (!parse_run_options(argc, argv, /*demo=*/false, o)) return 0;
  const RunReport r = execute_run(o);
  const Quality q = judge(r, o.max_error);
  if (o.json) {
    print_report_json(r, "");
  } else {
    print_report_text(r);
  }
  return q.failed ? kExitQuality : 0;
}

int cmd_demo(int argc, const char* const* argv) {
  RunOptions o;
  if (!parse_run_options(argc, argv, /*demo=*/true, o)) return 0;
  const RunReport r = execute_run(o);
  const bool sparse = !r.stats.ran_dense && r.stats.density < 1.0;
  const bool close = r.cosine >= kDemoMinCosine;
  char line[512];
  std::snprintf(line, sizeof line,
                "%s: PSA computed %.1f%% of the dense attention work (%.1f%% sparsity) with "
                "relative L2 error %.2e and cosine similarity %.5f against dense attention, "
                "%.1f ms vs %.1f ms dense on %s",
                sparse && close ? "OK" : "FAILED", 100.0 * r.stats.density,
                100.0 * (1.0 - r.stats.density), r.rel_l2, r.cosine, r.sparse_ms, r.dense_ms,
                r.backend == PSA_BACKEND_CUDA ? "cuda" : "cpu");
  std::string verdict = line;
  if (!sparse) verdict += " (the forward ran dense)";
  if (!close) verdict += " (cosine below " + fmt_num(kDemoMinCosine) + ")";
  if (o.json) {
    print_report_json(r, verdict);
  } else {
    print_report_text(r);
    std::printf("\npsa demo: %s\n", verdict.c_str());
  }
  return sparse && close ? 0 : 1;
}

}  // namespace psa_cli

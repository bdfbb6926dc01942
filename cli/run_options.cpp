// cli/run_options.cpp -- command line of `psa run` and `psa demo` -> RunOptions. Checks
// only what the CLI itself needs (which flags go together); values the library checks
// (head_dim, block sizes, grid vs sequence length) are left to its messages.
#include <string>
#include <utility>
#include <vector>

#include "options.h"
#include "run.h"

namespace psa_cli {
namespace {

// The demo: Wan2.1-1.3B's default preset on a 5x16x24 grid (1920 tokens, 15 blocks of
// 128), small enough for the plain CPU reference to finish in a few seconds.
constexpr const char* kDemoModel = "Wan2.1_1.3b";
constexpr const char* kDemoPreset = "psa_balanced";
constexpr int64_t kDemoGrid[3] = {5, 16, 24};

cxxopts::Options make_options(bool demo) {
  cxxopts::Options o(demo ? "psa demo" : "psa run",
                     demo ? "Run PSA once on a small built-in example and compare it with dense "
                            "attention (Wan2.1_1.3b / psa_balanced, grid 5x16x24, 2 heads, head "
                            "dim 64; CUDA when available). Every `psa run` option may override the example."
                          : "Run one PSA forward on video-like synthetic inputs (or .npy files) "
                            "and compare it with dense attention on the same inputs.");
  o.custom_help(demo ? "[OPTION...]"
                     : "--model M [--preset P] (--grid T,H,W | --frames F --height H --width W) "
                       "[OPTION...]");
  o.add_options()
      ("model", "model name in the config (see `psa presets`)", cxxopts::value<std::string>(), "M")
      ("preset", "preset name (default: the model's default_attention)",
       cxxopts::value<std::string>(), "P")
      ("config", "YAML file (default: the copy built into the library)",
       cxxopts::value<std::string>(), "FILE")
      ("grid", "latent token grid: frames,rows,columns", cxxopts::value<std::string>(), "T,H,W")
      ("frames", "video frames (grid = pixels / the model's video_scale)",
       cxxopts::value<int64_t>(), "F")
      ("height", "video height in pixels", cxxopts::value<int64_t>(), "H")
      ("width", "video width in pixels", cxxopts::value<int64_t>(), "W")
      ("batch", "batch size (synthetic inputs)", cxxopts::value<int64_t>()->default_value("1"), "B")
      ("heads", "query heads (synthetic inputs)", cxxopts::value<int64_t>()->default_value("2"), "N")
      ("kv-heads", "key/value heads, dividing --heads (default: --heads)",
       cxxopts::value<int64_t>(), "N")
      ("head-dim", "head dimension (synthetic inputs)",
       cxxopts::value<int64_t>()->default_value("64"), "D")
      ("dtype", "bf16, f16 or f32 (default: the --q/--k/--v files' dtype; else f32 on cpu, "
                "bf16 on cuda)",
       cxxopts::value<std::string>(), "T")
      ("backend", "auto (CUDA when built in and a device is usable, else CPU), cpu or cuda",
       cxxopts::value<std::string>()->default_value("auto"), "B")
      ("seed", "seed of the synthetic inputs", cxxopts::value<uint64_t>()->default_value("0"), "S")
      ("text-length", "text tokens (default: the preset's text_length)",
       cxxopts::value<int64_t>(), "N")
      ("text-position", "first or last (default: first)", cxxopts::value<std::string>(), "P")
      ("layout", "bnsd ([B,H,L,D]) or bsnd ([B,L,H,D]) for inputs, files and --out",
       cxxopts::value<std::string>()->default_value("bnsd"), "L")
      ("causal", "causal attention (presets that rearrange tokens reject it)")
      ("precision", "default or fp8: the sparse attention's arithmetic (fp8: the 8-bit rule, on the "
                    "cpu backend; default: the preset's)", cxxopts::value<std::string>(), "P")
      ("query", "(or --q) queries from a .npy file: '<f4', '<f2', or '<u2' holding bf16 bits "
                "with --dtype bf16", cxxopts::value<std::string>(), "FILE")
      ("key", "(or --k) keys from a .npy file", cxxopts::value<std::string>(), "FILE")
      ("value", "(or --v) values from a .npy file", cxxopts::value<std::string>(), "FILE")
      ("out", "write the sparse output as a '<f4' .npy file", cxxopts::value<std::string>(), "FILE")
      ("save-inputs", "write q, k, v as PREFIXq.npy, PREFIXk.npy, PREFIXv.npy in the run's dtype",
       cxxopts::value<std::string>(), "PREFIX")
      ("step", "pin the denoising step (default: the preset's warmup_steps, i.e. the first "
               "sparse step)", cxxopts::value<int64_t>(), "S")
      ("mask-png", "write a PNG of the sparse forward's level map (every head's query x key "
                   "blocks; `psa mask` draws other views)", cxxopts::value<std::string>(), "FILE")
      ("json", "print the report as one JSON object")
      ("quiet", "no progress line on stderr (shown only when stderr is a terminal and the run "
                "takes more than about a second)")
      ("max-error", "exit with status 3 when the relative L2 error against dense exceeds E (or an "
                    "output is not finite)", cxxopts::value<std::string>(), "E")
      ("h,help", "print this help");
  return o;
}

// Parses "5,16,24" (or "5x16x24") into three positive integers (past int64: refused, not
// clamped to INT64_MAX).
bool parse_grid(const std::string& s, int64_t out[3]) {
  size_t pos = 0;
  for (int i = 0; i < 3; ++i) {
    const size_t end = i < 2 ? s.find_first_of(",x", pos) : s.size();
    if (end == std::string::npos || pos >= s.size() || s[pos] < '0' || s[pos] > '9') return false;
    if (parse_integer(s.substr(pos, end - pos), &out[i]) != Decimal::kOk || out[i] < 1) return false;
    pos = end + 1;
  }
  return true;
}

// cxxopts only knows long options of two or more characters; --q/--k/--v (the names the
// documentation uses) are spelled --query/--key/--value for it.
std::vector<std::string> expand_short_long_names(int argc, const char* const* argv) {
  std::vector<std::string> args(argv, argv + argc);
  for (std::string& a : args) {
    for (const auto& alias : {std::pair<const char*, const char*>{"--q", "--query"},
                              {"--k", "--key"}, {"--v", "--value"}}) {
      if (a == alias.first || a.rfind(std::string(alias.first) + "=", 0) == 0) {
        a = alias.second + a.substr(3);
      }
    }
  }
  return args;
}

template <typename E>
E pick(const cxxopts::Options& o, const std::string& flag, const std::string& value,
       std::initializer_list<std::pair<const char*, E>> choices) {
  std::string names;
  for (const auto& c : choices) {
    if (value == c.first) return c.second;
    names += std::string(names.empty() ? "" : ", ") + c.first;
  }
  throw UsageError("--" + flag + " '" + value + "': expected one of " + names, o.help());
}

// A parameter's value from one of its words (the library's list, exact spelling).
int64_t pick_word(const cxxopts::Options& o, const std::string& flag, const std::string& value, psa_param param) {
  std::string names;
  for (int64_t v = 0; const char* w = psa_param_value_name(param, v); ++v) {
    if (value == w) return v;
    names += std::string(names.empty() ? "" : ", ") + w;
  }
  throw UsageError("--" + flag + " '" + value + "': expected one of " + names, o.help());
}

}  // namespace

bool parse_run_options(int argc, const char* const* argv, bool demo, RunOptions& out) {
  cxxopts::Options o = make_options(demo);
  const std::vector<std::string> args = expand_short_long_names(argc, argv);
  std::vector<const char*> arg_ptrs;
  for (const std::string& a : args) arg_ptrs.push_back(a.c_str());
  cxxopts::ParseResult r;
  if (!parse_options(o, argc, arg_ptrs.data(), r)) return false;
  auto str = [&](const char* name) { return option_value<std::string>(o, r, name); };
  auto i64 = [&](const char* name) { return option_value<int64_t>(o, r, name); };
  auto usage = [&](const std::string& msg) { throw UsageError(msg, o.help()); };

  RunOptions& p = out;
  if (r.count("model")) p.model = str("model");
  if (r.count("preset")) p.preset = str("preset");
  if (r.count("config")) p.config = str("config");
  const int pixel_flags = static_cast<int>(r.count("frames") + r.count("height") + r.count("width"));
  if (pixel_flags != 0 && pixel_flags != 3) usage("--frames, --height and --width go together");
  p.pixels = pixel_flags == 3;
  if (p.pixels) {
    p.frames = i64("frames");
    p.height = i64("height");
    p.width = i64("width");
  }
  p.grid_given = r.count("grid") != 0;
  if (p.grid_given && !parse_grid(str("grid"), p.grid)) {
    usage("--grid '" + str("grid") + "': expected three positive integers T,H,W");
  }
  if (p.grid_given && p.pixels) usage("give either --grid or --frames/--height/--width, not both");

  const int files = static_cast<int>(r.count("query") + r.count("key") + r.count("value"));
  if (files != 0 && files != 3) usage("--q, --k and --v go together");
  if (files == 3) {
    for (const char* shape_flag : {"batch", "heads", "kv-heads", "head-dim", "seed"}) {
      if (r.count(shape_flag)) {
        usage(std::string("--") + shape_flag + " applies to synthetic inputs; with --q/--k/--v "
              "the files' shapes are used");
      }
    }
    p.q_path = str("query");
    p.k_path = str("key");
    p.v_path = str("value");
  }
  // Named here: the library's message would say "heads = 0" for --kv-heads 0.
  auto positive = [&](const char* name) {
    const int64_t v = i64(name);
    if (v < 1) usage(std::string("--") + name + " = " + std::to_string(v) + ": must be >= 1");
    return v;
  };
  p.batch = positive("batch");
  p.heads = positive("heads");
  p.kv_heads = r.count("kv-heads") ? positive("kv-heads") : p.heads;
  p.head_dim = positive("head-dim");
  if (r.count("dtype")) {
    p.dtype = pick<psa_dtype>(o, "dtype", str("dtype"),
                              {{"f32", PSA_DTYPE_F32}, {"f16", PSA_DTYPE_F16},
                               {"bf16", PSA_DTYPE_BF16}});
  }
  p.backend = pick<psa_backend>(o, "backend", str("backend"),
                                {{"cpu", PSA_BACKEND_CPU}, {"cuda", PSA_BACKEND_CUDA},
                                 {"auto", PSA_BACKEND_AUTO}});
  p.seed = option_value<uint64_t>(o, r, "seed");
  if (r.count("text-length")) {
    p.text_length = i64("text-length");
    if (p.text_length < 0)
      usage("--text-length = " + std::to_string(p.text_length) + ": must be >= 0");
  }
  if (r.count("text-position")) {
    p.text_position = pick<psa_text_position>(o, "text-position", str("text-position"),
                                              {{"first", PSA_TEXT_FIRST}, {"last", PSA_TEXT_LAST}});
  }
  p.layout = pick<psa_layout>(o, "layout", str("layout"),
                              {{"bnsd", PSA_LAYOUT_BNSD}, {"bsnd", PSA_LAYOUT_BSND}});
  p.causal = r.count("causal") != 0;
  if (r.count("precision")) {
    p.precision = static_cast<int>(pick_word(o, "precision", str("precision"), PSA_PARAM_PRECISION));
  }
  if (r.count("out")) p.out_path = str("out");
  if (r.count("save-inputs")) p.save_inputs = str("save-inputs");
  p.step_given = r.count("step") != 0;
  if (p.step_given) p.step = i64("step");
  p.json = r.count("json") != 0;
  p.quiet = r.count("quiet") != 0;
  if (r.count("max-error")) {
    const std::string text = str("max-error");
    if (parse_decimal(text, &p.max_error) != Decimal::kOk || p.max_error < 0.0)
      usage("--max-error '" + text + "': expected a number >= 0");
  }
  if (r.count("mask-png")) p.mask.png = str("mask-png");

  if (demo) {
    if (p.model.empty()) {
      p.model = kDemoModel;
      if (p.preset.empty()) p.preset = kDemoPreset;
    }
    if (!p.grid_given && !p.pixels) {
      p.grid_given = true;
      for (int i = 0; i < 3; ++i) p.grid[i] = kDemoGrid[i];
    }
  }
  if (p.model.empty()) usage("--model is required (see `psa presets` for the names)");
  if (!p.grid_given && !p.pixels) usage("give the video size: --grid T,H,W or --frames/--height/--width");
  return true;
}

}  // namespace psa_cli

// cli/run.h -- `psa run` and `psa demo`: the options, one sparse forward compared with a
// dense forward of the same inputs, and the report. Declarations shared by run_options.cpp
// (parsing), run.cpp (execution) and report.cpp (printing).
#pragma once
#include <cstdint>
#include <string>

#include "mask.h"
#include "preset_info.h"
#include "psa.h"
#include "synthetic.h"

namespace psa_cli {

struct RunOptions {
  std::string model, preset, config;  // empty preset: the model's default_attention
  bool pixels = false;                // --frames/--height/--width given
  int64_t frames = 0, height = 0, width = 0;
  bool grid_given = false;            // --grid given
  int64_t grid[3] = {0, 0, 0};        // t, h, w
  int64_t batch = 1, heads = 2, kv_heads = 0, head_dim = 64;  // kv_heads 0: = heads
  int dtype = -1;                     // psa_dtype; -1: the files', else f32 (cpu) / bf16 (cuda)
  psa_backend backend = PSA_BACKEND_AUTO;  // --backend (default auto)
  uint64_t seed = 0;
  int64_t text_length = -1;           // -1: the preset's text_length
  int text_position = -1;             // psa_text_position; -1: first when there is text
  psa_layout layout = PSA_LAYOUT_BNSD;
  bool causal = false;
  int precision = -1;                 // psa_precision; -1: the preset's
  std::string q_path, k_path, v_path; // all three or none
  std::string out_path, save_inputs;  // --out FILE, --save-inputs PREFIX
  bool step_given = false;
  int64_t step = 0;
  bool json = false;
  bool quiet = false;                 // --quiet: no progress line
  double max_error = -1.0;            // --max-error E (relative L2); < 0: not given
  MaskOptions mask;                   // --mask-png FILE (run), psa mask
};

struct RunReport {
  std::string model, preset;
  bool preset_defaulted = false;  // preset came from default_attention
  PresetInfo info;
  psa_backend backend = PSA_BACKEND_CPU;
  std::string backend_reason;     // "cuda: NVIDIA H100 ... (--backend auto: ...)"
  double max_error = -1.0;        // --max-error, for the verdict
  VideoGrid grid;
  int64_t batch = 0, heads_q = 0, heads_kv = 0, seq_len = 0, head_dim = 0;
  psa_dtype dtype = PSA_DTYPE_F32;
  psa_layout layout = PSA_LAYOUT_BNSD;
  bool synthetic = true;
  uint64_t seed = 0;
  std::string input_files;        // "q.npy, k.npy, v.npy" when not synthetic
  bool step_pinned = false;       // --step given
  psa_stats stats{};              // of the sparse forward
  // Why the sparse forward ran dense (stats.ran_dense): "method" (a dense preset) or
  // "warmup" (step < warmup_steps); empty when it ran sparse.
  std::string dense_reason;
  uint64_t workspace_bytes = 0, dense_workspace_bytes = 0;
  double sparse_ms = 0.0, dense_ms = 0.0;  // wall time of each forward (synchronised)
  double rel_l2 = 0.0, cosine = 0.0, max_abs = 0.0;  // sparse output vs dense output
  // Non-finite values (NaN, +-inf) per tensor: q, k, v, sparse out, dense out; the first one's
  // logical index [b, h, l, d]. The error above is only meaningful when all counts are 0.
  struct NonFinite {
    int64_t count = 0;
    int64_t first[4] = {-1, -1, -1, -1};
  };
  NonFinite nonfinite[5];
  bool finite() const {
    for (const NonFinite& n : nonfinite)
      if (n.count != 0) return false;
    return true;
  }
  std::string saved_inputs;       // "PREFIXq.npy, ..." when --save-inputs was given
  std::string out_path;
};

// Parses `psa run` (or `psa demo`, whose `demo_defaults` fill what the user left out).
// Returns false when --help was printed. Throws UsageError.
bool parse_run_options(int argc, const char* const* argv, bool demo, RunOptions& out);

// Runs the sparse and the dense forward. Throws Failure (library errors carry
// psa_last_error_message and the status name).
RunReport execute_run(const RunOptions& options);

void print_report_text(const RunReport& r);
// One JSON object on one line; `verdict` is added as a field when non-empty.
void print_report_json(const RunReport& r, const std::string& verdict);

// Quality of the sparse output against dense attention, from the relative L2 error (README,
// "The psa command"): "close" <= 0.05 < "fair" <= 0.15 < "poor"; "non-finite" when an
// output holds NaN or inf. `line` is the sentence printed after "verdict".
struct Quality {
  std::string grade;  // close, fair, poor, non-finite
  std::string line;
  bool failed = false;  // non-finite, or --max-error given and exceeded
};
Quality judge(const RunReport& r, double max_error);
constexpr double kCloseRelL2 = 0.05;
constexpr double kFairRelL2 = 0.15;
// Exit status of `psa run` when an output is non-finite or --max-error is exceeded.
constexpr int kExitQuality = 3;

}  // namespace psa_cli

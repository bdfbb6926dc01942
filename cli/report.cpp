// cli/report.cpp -- prints a RunReport as aligned text or as one JSON object. Formatting
// only; every number was measured or queried in run.cpp.
#include <cstdio>
#include <string>

#include "backend_info.h"
#include "host_tensor.h"
#include "json.h"
#include "run.h"

namespace psa_cli {
namespace {

const char* const kLevelNames[5] = {"1", "2", "4", "8", "skip"};
const char* const kStageNames[7] = {"rearrange", "pool",    "importance", "mask",
                                    "attention", "inverse", "total"};

const char* layout_name(psa_layout l) { return l == PSA_LAYOUT_BSND ? "bsnd" : "bnsd"; }
const char* position_name(psa_text_position p) {
  return p == PSA_TEXT_FIRST ? "first" : p == PSA_TEXT_LAST ? "last" : "none";
}

std::string bytes_text(uint64_t b) {
  char buf[32];
  if (b < 1024) {
    std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(b));
  } else if (b < (uint64_t{1} << 20)) {
    std::snprintf(buf, sizeof buf, "%.1f KiB", b / 1024.0);
  } else {
    std::snprintf(buf, sizeof buf, "%.1f MiB", b / (1024.0 * 1024.0));
  }
  return buf;
}

std::string shape_text(const RunReport& r) {
  const bool bnsd = r.layout == PSA_LAYOUT_BNSD;
  return "[" + std::to_string(r.batch) + ", " + std::to_string(bnsd ? r.heads_q : r.seq_len) +
         ", " + std::to_string(bnsd ? r.seq_len : r.heads_q) + ", " + std::to_string(r.head_dim) +
         "]";
}

void row(const char* label, const std::string& text) {
  std::printf("  %-10s %s\n", label, text.c_str());
}

const char* const kTensorNames[5] = {"q", "k", "v", "sparse_out", "dense_out"};

std::string index_text(const RunReport::NonFinite& n) {
  return "[" + std::to_string(n.first[0]) + ", " + std::to_string(n.first[1]) + ", " +
         std::to_string(n.first[2]) + ", " + std::to_string(n.first[3]) + "]";
}

// "sparse out 16384 (first at [0, 0, 0, 0]), dense out 16384 (...), q 1 (...)": the tensors
// holding NaN or inf, with the count and the first logical index [b, h, l, d].
std::string nonfinite_text(const RunReport& r) {
  static const char* const kNames[5] = {"q", "k", "v", "sparse out", "dense out"};
  std::string s;
  for (int i : {3, 4, 0, 1, 2}) {
    const RunReport::NonFinite& n = r.nonfinite[i];
    if (n.count == 0) continue;
    s += (s.empty() ? "" : ", ") + std::string(kNames[i]) + " " + std::to_string(n.count) +
         " of " + std::to_string(r.batch * (i == 1 || i == 2 ? r.heads_kv : r.heads_q) *
                                 r.seq_len * r.head_dim) +
         " (first at [b, h, l, d] = " + index_text(n) + ")";
  }
  return s;
}

std::string nonfinite_json(const RunReport::NonFinite& n) {
  Json j;
  j.integer("count", n.count);
  if (n.count > 0) {
    j.raw("first", index_text(n));
  } else {
    j.null("first");
  }
  return j.done();
}

std::string step_text(const RunReport& r) {
  std::string s = std::to_string(r.stats.step);
  if (r.step_pinned) return s + " (pinned with --step)";
  if (r.info.method == PSA_METHOD_DENSE) return s + " (a dense preset runs dense at every step)";
  return s + " (default: pinned to warmup_steps = " + std::to_string(r.info.warmup_steps) +
         ", the first step after warm-up, so that the forward is sparse; --step S pins another)";
}

// The note printed when the forward ran dense, saying why and how to get a sparse one;
// empty when it ran sparse.
std::string dense_note(const RunReport& r) {
  if (r.dense_reason == "method") {
    return "ran dense: the preset's method is dense (type dense runs dense at every step)";
  }
  if (r.dense_reason == "warmup") {
    const std::string w = std::to_string(r.info.warmup_steps);
    return "ran dense: step " + std::to_string(r.stats.step) + " < warmup_steps " + w +
           " (warm-up; pass --step " + w + " or later for a sparse forward)";
  }
  if (!r.dense_reason.empty()) return "ran dense";
  return "";
}

}  // namespace

void print_report_text(const RunReport& r) {
  std::printf("psa run: %s / %s%s on %s\n", r.model.c_str(), r.preset.c_str(),
              r.preset_defaulted ? " (default preset)" : "", backend_name(r.backend));
  row("backend", r.backend_reason);
  row("preset", describe_preset_labelled(r.info));
  row("inputs", r.synthetic ? "synthetic video-like fields, seed " + std::to_string(r.seed)
                            : r.input_files);
  row("shape", "batch " + std::to_string(r.batch) + ", heads " + std::to_string(r.heads_q) +
                   " (kv " + std::to_string(r.heads_kv) + "), head dim " +
                   std::to_string(r.head_dim) + ", " + dtype_name(r.dtype) + ", " +
                   layout_name(r.layout) + " " + shape_text(r));
  std::string seq = "grid " + std::to_string(r.grid.t) + "x" + std::to_string(r.grid.h) + "x" +
                    std::to_string(r.grid.w) + " = " + std::to_string(r.grid.video_tokens()) +
                    " video tokens";
  if (r.grid.text > 0) {
    seq += " + " + std::to_string(r.grid.text) + " text tokens (" + position_name(r.grid.position) +
           ")";
  }
  row("sequence", seq + ", L = " + std::to_string(r.seq_len));
  row("step", step_text(r));
  const std::string note = dense_note(r);
  if (!note.empty()) row("note", note);
  row("blocks", std::to_string(r.stats.query_blocks) + " query x " +
                    std::to_string(r.stats.key_blocks) + " key blocks per head");
  if (r.stats.ran_dense) {
    row("levels", "all level 1: the forward ran dense (" +
                      std::string(r.info.method == PSA_METHOD_DENSE ? "dense preset"
                                                                    : "warm-up step") + ")");
  } else {
    std::string lv;
    for (int i = 0; i < 5; ++i) {
      char buf[48];
      std::snprintf(buf, sizeof buf, "%s%s: %.1f%%", i ? "   " : "", kLevelNames[i],
                    100.0 * r.stats.level_fraction[i]);
      lv += buf;
    }
    row("levels", lv);
  }
  // Said once per report: what the level columns mean.
  row("", std::string("(level 1 = full attention; 2/4/8 = keys pooled by 2/4/8; skip = block "
                      "pair not computed)"));
  char buf[256];
  std::snprintf(buf, sizeof buf, "%.4f of the dense work (sparsity %.1f%%)", r.stats.density,
                100.0 * (1.0 - r.stats.density));
  row("density", buf);
  const std::string precision = psa_param_value_name(PSA_PARAM_PRECISION, r.stats.precision);
  row("precision", r.stats.precision == PSA_PRECISION_FP8 ? precision + " (8-bit attention)" : precision);
  if (r.backend == PSA_BACKEND_CPU) {
    std::string st;
    for (int i = 0; i < 7; ++i) {
      std::snprintf(buf, sizeof buf, "%s%s %.2f", i ? "  " : "", kStageNames[i], r.stats.stage_ms[i]);
      st += buf;
    }
    row("stages", st + " ms");
  } else {
    row("stages", "(per-stage times are measured by the CPU backend only)");
  }
  std::snprintf(buf, sizeof buf, "sparse %.2f ms, dense %.2f ms (%.2fx)", r.sparse_ms, r.dense_ms,
                r.sparse_ms > 0.0 ? r.dense_ms / r.sparse_ms : 0.0);
  row("wall", buf);
  if (r.finite()) {
    std::snprintf(buf, sizeof buf, "vs dense: relative L2 %.3e, cosine %.6f, max abs %.3e",
                  r.rel_l2, r.cosine, r.max_abs);
    row("error", buf);
  } else {
    row("error", "not defined: non-finite values (below), never a match");
    row("nonfinite", nonfinite_text(r));
  }
  row("workspace", bytes_text(r.workspace_bytes) + " (dense " +
                       bytes_text(r.dense_workspace_bytes) + ")");
  if (!r.saved_inputs.empty()) row("saved", r.saved_inputs);
  if (!r.out_path.empty()) row("output", r.out_path + " ('<f4', shape " + shape_text(r) + ")");
  row("verdict", judge(r, r.max_error).line);
}

void print_report_json(const RunReport& r, const std::string& verdict) {
  Json levels, stages;
  for (int i = 0; i < 5; ++i) levels.num(kLevelNames[i], r.stats.level_fraction[i]);
  for (int i = 0; i < 7; ++i) stages.num(kStageNames[i], r.stats.stage_ms[i]);
  Json j;
  j.str("model", r.model).str("preset", r.preset).boolean("preset_defaulted", r.preset_defaulted);
  j.str("type", method_name(r.info.method)).str("backend", backend_name(r.backend));
  j.str("backend_reason", r.backend_reason);
  j.str("dtype", dtype_name(r.dtype)).str("layout", layout_name(r.layout));
  j.integer("batch", r.batch).integer("heads", r.heads_q).integer("kv_heads", r.heads_kv);
  j.integer("seq_len", r.seq_len).integer("head_dim", r.head_dim);
  j.raw("grid", "[" + std::to_string(r.grid.t) + ", " + std::to_string(r.grid.h) + ", " +
                    std::to_string(r.grid.w) + "]");
  j.integer("text_length", r.grid.text).str("text_position", position_name(r.grid.position));
  if (r.synthetic) {
    j.str("inputs", "synthetic").integer("seed", static_cast<int64_t>(r.seed));
  } else {
    j.str("inputs", r.input_files);
  }
  // The command always pins the step (psa_context_set_step), as the text says: step_pinned
  // is true; step_from says whether --step or the preset's warmup_steps chose it.
  j.integer("step", r.stats.step).boolean("step_pinned", true);
  j.str("step_from", r.step_pinned ? "--step" : "warmup_steps");
  j.integer("warmup_steps", r.info.warmup_steps).boolean("ran_dense", r.stats.ran_dense != 0);
  if (r.dense_reason.empty()) {
    j.null("dense_reason");
  } else {
    j.str("dense_reason", r.dense_reason).str("dense_note", dense_note(r));
  }
  j.integer("query_blocks", r.stats.query_blocks).integer("key_blocks", r.stats.key_blocks);
  j.num("density", r.stats.density).num("sparsity", 1.0 - r.stats.density);
  j.str("precision", psa_param_value_name(PSA_PARAM_PRECISION, r.stats.precision));
  j.raw("level_fraction", levels.done());
  if (r.backend == PSA_BACKEND_CPU) {
    j.raw("stage_ms", stages.done());
  } else {
    j.null("stage_ms");
  }
  j.num("sparse_ms", r.sparse_ms).num("dense_ms", r.dense_ms);
  j.num("rel_l2", r.rel_l2).num("cosine", r.cosine).num("max_abs", r.max_abs);
  Json nf;
  for (int i = 0; i < 5; ++i) nf.raw(kTensorNames[i], nonfinite_json(r.nonfinite[i]));
  j.raw("nonfinite", nf.done());
  const Quality q = judge(r, r.max_error);
  Json qj;
  qj.str("grade", q.grade).str("line", q.line).boolean("failed", q.failed);
  if (r.max_error >= 0.0) {
    qj.num("max_error", r.max_error);
  } else {
    qj.null("max_error");
  }
  qj.num("close_rel_l2", kCloseRelL2).num("fair_rel_l2", kFairRelL2);
  j.raw("quality", qj.done());
  j.integer("workspace_bytes", static_cast<int64_t>(r.workspace_bytes));
  j.integer("dense_workspace_bytes", static_cast<int64_t>(r.dense_workspace_bytes));
  if (r.out_path.empty()) {
    j.null("out");
  } else {
    j.str("out", r.out_path);
  }
  if (!verdict.empty()) j.str("verdict", verdict);
  std::printf("%s\n", j.done().c_str());
}

}  // namespace psa_cli

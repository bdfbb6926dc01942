// cli/mask.cpp -- `psa mask`: one forward of `psa run` (same options, the demo's example when
// --model is left out), then a PNG of the decision: the block matrix of every head, or the
// video view of one query block. The picture is drawn by the library.
#include "mask.h"

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "cli.h"
#include "run.h"

namespace psa_cli {
namespace {

const char* const kMaskUsage =
    "usage: psa mask --png FILE [--view blocks|video] [--head N] [--query-block N | --query-at T,H,W]\n"
    "                [--cell PX] [--batch-index B] [psa run options...]\n"
    "\n"
    "Runs one PSA forward as `psa run` does (every `psa run` option applies; without --model,\n"
    "the demo's Wan2.1_1.3b / psa_balanced on a 5x16x24 grid) and writes a PNG of its level\n"
    "map: one colour per level (1 red, 2 orange, 4 yellow, 8 blue, skip grey).\n"
    "\n"
    "  --png FILE         the PNG to write (required)\n"
    "  --view V           blocks: query blocks x key blocks for every head (default);\n"
    "                     video: the key levels of one query block on the latent frames\n"
    "  --head N           the head to draw (blocks: default all; video: default 0)\n"
    "  --query-block N    video: the query block (default: the block holding --query-at)\n"
    "  --query-at T,H,W   video: a latent position whose query block is drawn (default: the\n"
    "                     grid's centre)\n"
    "  --cell PX          pixels per block (blocks) or per token (video), 1-64 (default: auto)\n"
    "  --batch-index B    batch item to draw (default 0)\n";

int64_t to_int(const std::string& flag, const std::string& s) {
  char* end = nullptr;
  const long long v = std::strtoll(s.c_str(), &end, 10);
  if (s.empty() || *end != '\0') throw UsageError("--" + flag + " '" + s + "': expected an integer", kMaskUsage);
  return v;
}

}  // namespace

void write_mask_picture(psa_context* ctx, const MaskOptions& m) {
  const int64_t head = m.head >= 0 ? m.head : (m.view == PSA_MASK_VIEW_VIDEO ? 0 : -1);
  check(psa_context_write_mask_png(ctx, m.png.c_str(), m.view, m.batch_index, head, m.query_block,
                                   m.query_given ? m.query : nullptr, m.cell));
}

int cmd_mask(int argc, const char* const* argv) {
  MaskOptions m;
  std::vector<const char*> rest = {argv[0]};
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "-h" || a == "--help") {
      std::fputs(kMaskUsage, stdout);
      return 0;
    }
    std::string flag, value;
    const size_t eq = a.find('=');
    if (a.rfind("--", 0) == 0) flag = a.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
    const bool ours = flag == "png" || flag == "view" || flag == "head" || flag == "query-block" ||
                      flag == "query-at" || flag == "cell" || flag == "batch-index";
    if (!ours) {
      rest.push_back(argv[i]);
      continue;
    }
    if (eq != std::string::npos) {
      value = a.substr(eq + 1);
    } else {
      if (i + 1 >= argc) throw UsageError("--" + flag + ": missing value", kMaskUsage);
      value = argv[++i];
    }
    if (flag == "png") {
      m.png = value;
    } else if (flag == "view") {
      if (value == "blocks") m.view = PSA_MASK_VIEW_BLOCKS;
      else if (value == "video") m.view = PSA_MASK_VIEW_VIDEO;
      else throw UsageError("--view '" + value + "': expected blocks or video", kMaskUsage);
    } else if (flag == "head") {
      m.head = to_int(flag, value);
      if (m.head < 0) throw UsageError("--head " + value + ": must be >= 0", kMaskUsage);
    } else if (flag == "query-block") {
      m.query_block = to_int(flag, value);
      if (m.query_block < 0) throw UsageError("--query-block " + value + ": must be >= 0", kMaskUsage);
    } else if (flag == "query-at") {
      size_t pos = 0;
      for (int k = 0; k < 3; ++k) {
        const size_t next = value.find_first_of(",x", pos);
        if ((k < 2) == (next == std::string::npos))
          throw UsageError("--query-at '" + value + "': expected three integers T,H,W", kMaskUsage);
        m.query[k] = to_int(flag, value.substr(pos, next == std::string::npos ? std::string::npos : next - pos));
        pos = next + 1;
      }
      m.query_given = true;
    } else if (flag == "cell") {
      const int64_t c = to_int(flag, value);
      if (c < 1 || c > 64) throw UsageError("--cell " + value + ": allowed 1 to 64", kMaskUsage);
      m.cell = static_cast<int32_t>(c);
    } else {
      m.batch_index = to_int(flag, value);
      if (m.batch_index < 0) throw UsageError("--batch-index " + value + ": must be >= 0", kMaskUsage);
    }
  }
  if (m.png.empty()) throw UsageError("--png FILE is required", kMaskUsage);
  if (m.query_given && m.query_block >= 0)
    throw UsageError("give either --query-block or --query-at, not both", kMaskUsage);
  RunOptions o;
  if (!parse_run_options(static_cast<int>(rest.size()), rest.data(), /*demo=*/true, o)) return 0;
  o.mask = m;
  const RunReport r = execute_run(o);
  std::printf("psa mask: %s / %s on %s, %lld query blocks x %lld key blocks, density %.4f%s\n",
              r.model.c_str(), r.preset.c_str(), r.backend == PSA_BACKEND_CUDA ? "cuda" : "cpu",
              static_cast<long long>(r.stats.query_blocks), static_cast<long long>(r.stats.key_blocks),
              r.stats.density, r.stats.ran_dense ? " (ran dense)" : "");
  std::printf("  levels   1: %.1f%%   2: %.1f%%   4: %.1f%%   8: %.1f%%   skip: %.1f%%\n",
              100.0 * r.stats.level_fraction[PSA_STAT_LEVEL_1], 100.0 * r.stats.level_fraction[PSA_STAT_LEVEL_2],
              100.0 * r.stats.level_fraction[PSA_STAT_LEVEL_4], 100.0 * r.stats.level_fraction[PSA_STAT_LEVEL_8],
              100.0 * r.stats.level_fraction[PSA_STAT_LEVEL_SKIP]);
  std::printf("  wrote    %s (%s view)\n", m.png.c_str(), m.view == PSA_MASK_VIEW_VIDEO ? "video" : "blocks");
  return 0;
}

}  // namespace psa_cli

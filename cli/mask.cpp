// cli/mask.cpp -- `psa mask`: one forward of `psa run` (same options, the demo's example when
// --model is left out), then a PNG of the decision: the block matrix of every head, or the
// video view of one query block. The picture is drawn by the library.
#include "mask.h"

#include <cstdio>
#include <string>
#include <vector>

#include "cli.h"
#include "options.h"
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
    "  --batch-index B    batch item to draw (default 0)\n"
    "\n"
    "--query-block and --query-at need --view video. The `psa run` options: psa run --help.\n";

// `text` as a whole decimal integer (an optional '-', then digits: no spaces, no '+'), for
// the option --`flag` given as `typed` (all of its value; `text` may be one part of it).
// Out of int64's range is an error rather than the nearest value, which would pass the range
// checks and then fail with a number the user never typed.
int64_t to_int(const std::string& flag, const std::string& text, const std::string& typed,
               const char* expected = "an integer") {
  int64_t v = 0;
  const std::string where = "--" + flag + " '" + typed + "': ";
  switch (parse_integer(text, &v)) {
    case Decimal::kOutOfRange: throw UsageError(where + "out of range", kMaskUsage);
    case Decimal::kNotANumber: throw UsageError(where + "expected " + expected, kMaskUsage);
    case Decimal::kOk: break;
  }
  return v;
}

}  // namespace

void write_mask_picture(psa_context* ctx, const MaskOptions& m) {
  // The library checks these too, but names its own parameters ("batch = 1"); `psa mask`
  // is the one caller that sets them, so the messages name its options.
  int64_t batch = 0, heads = 0, q_blocks = 0;
  check(psa_context_level_map_shape(ctx, &batch, &heads, &q_blocks, nullptr));
  const auto out_of = [](const char* option, int64_t value, int64_t count, const std::string& has) {
    return UsageError(std::string(option) + " " + std::to_string(value) + ": allowed 0 to " +
                          std::to_string(count - 1) + " (the forward has " + has + ")",
                      kMaskUsage);
  };
  if (m.batch_index >= batch)
    throw out_of("--batch-index", m.batch_index, batch, "batch " + std::to_string(batch));
  if (m.head >= heads) throw out_of("--head", m.head, heads, std::to_string(heads) + " heads");
  if (m.view == PSA_MASK_VIEW_VIDEO && m.query_block >= q_blocks)
    throw out_of("--query-block", m.query_block, q_blocks, std::to_string(q_blocks) + " query blocks");
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
      m.head = to_int(flag, value, value);
      if (m.head < 0) throw UsageError("--head " + value + ": must be >= 0", kMaskUsage);
    } else if (flag == "query-block") {
      m.query_block = to_int(flag, value, value);
      if (m.query_block < 0) throw UsageError("--query-block " + value + ": must be >= 0", kMaskUsage);
    } else if (flag == "query-at") {
      size_t pos = 0;
      for (int k = 0; k < 3; ++k) {
        const size_t next = value.find_first_of(",x", pos);
        if ((k < 2) == (next == std::string::npos))
          throw UsageError("--query-at '" + value + "': expected three integers T,H,W", kMaskUsage);
        const size_t len = next == std::string::npos ? std::string::npos : next - pos;
        m.query[k] = to_int(flag, value.substr(pos, len), value, "three integers T,H,W");
        pos = next + 1;
      }
      m.query_given = true;
    } else if (flag == "cell") {
      const int64_t c = to_int(flag, value, value);
      if (c < 1 || c > 64) throw UsageError("--cell " + value + ": allowed 1 to 64", kMaskUsage);
      m.cell = static_cast<int32_t>(c);
    } else {
      m.batch_index = to_int(flag, value, value);
      if (m.batch_index < 0) throw UsageError("--batch-index " + value + ": must be >= 0", kMaskUsage);
    }
  }
  // The `psa run` options first, so that a mistyped option is named even when --png is missing;
  // their errors carry this command's usage, not the demo's.
  RunOptions o;
  try {
    if (!parse_run_options(static_cast<int>(rest.size()), rest.data(), /*demo=*/true, o)) return 0;
  } catch (const UsageError& e) {
    throw UsageError(e.what(), kMaskUsage);
  }
  if (m.png.empty()) throw UsageError("--png FILE is required", kMaskUsage);
  if (m.query_given && m.query_block >= 0)
    throw UsageError("give either --query-block or --query-at, not both", kMaskUsage);
  // The blocks view draws every query block: a query block or position would be ignored.
  if (m.view == PSA_MASK_VIEW_BLOCKS && (m.query_block >= 0 || m.query_given)) {
    throw UsageError(std::string(m.query_given ? "--query-at" : "--query-block") +
                         " picks the query block of --view video; --view blocks (the default) "
                         "draws them all",
                     kMaskUsage);
  }
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

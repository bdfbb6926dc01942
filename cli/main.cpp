// cli/main.cpp -- the psa command: picks the subcommand and turns the two error kinds into
// exit codes (1: a library/file/runtime error, 2: bad usage). Prints nothing else itself.
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>

#include "backend_info.h"
#include "cli.h"
#include "json.h"
#include "options.h"

namespace {

const char* const kUsage =
    "usage: psa <command> [options]\n"
    "\n"
    "commands:\n"
    "  presets [--config FILE]     list models, presets and their key settings\n"
    "  check-config FILE           validate an attention_config.yaml\n"
    "  run --model M [--preset P] (--grid T,H,W | --frames F --height H --width W) [...]\n"
    "                              one PSA forward on synthetic video-like (or .npy) inputs,\n"
    "                              compared with dense attention (psa run --help)\n"
    "  demo                        run a small built-in example (a few seconds on a CPU)\n"
    "  mask --png FILE [...]       a PNG of PSA's decision (level map) for a `psa run` forward\n"
    "                              (psa mask --help)\n"
    "  bench [--shapes S] [--json] time dense vs PSA presets on the standard video shapes\n"
    "                              (CUDA device needed; psa bench --help)\n"
    "  version [--json]            print the library and header versions\n"
    "  help                        print this text\n";

int cmd_version(int argc, const char* const* argv) {
  using namespace psa_cli;
  cxxopts::Options opts("psa version", "Print the library and header versions and whether the "
                                       "CUDA backend is built in and has a device.");
  opts.add_options()
      ("json", "print one JSON object")
      ("h,help", "print this help");
  cxxopts::ParseResult r;
  if (!parse_options(opts, argc, argv, r)) return 0;
  const std::string cuda = cuda_availability();
  const bool same = psa_version_number() == PSA_VERSION_NUMBER;
  if (r.count("json")) {
    Json j;
    j.str("library", psa_version_string()).str("header", PSA_VERSION_STRING);
    j.integer("library_number", psa_version_number()).integer("header_number", PSA_VERSION_NUMBER);
    j.boolean("versions_match", same).str("cuda", cuda);
    std::printf("%s\n", j.done().c_str());
  } else {
    std::printf("psa %s (built with psa.h %s)\n", psa_version_string(), PSA_VERSION_STRING);
    std::printf("backends: cpu available; cuda %s\n", cuda.c_str());
  }
  if (!same) {
    std::fprintf(stderr, "psa: warning: the library (%u) and the header this command was built "
                 "with (%d) differ\n", psa_version_number(), PSA_VERSION_NUMBER);
  }
  return 0;
}

int dispatch(int argc, const char* const* argv) {
  using namespace psa_cli;
  if (argc < 2) throw UsageError("missing command");
  const std::string cmd = argv[1];
  const int sub_argc = argc - 1;
  const char* const* sub_argv = argv + 1;
  if (cmd == "presets") return cmd_presets(sub_argc, sub_argv);
  if (cmd == "check-config") return cmd_check_config(sub_argc, sub_argv);
  if (cmd == "run") return cmd_run(sub_argc, sub_argv);
  if (cmd == "demo") return cmd_demo(sub_argc, sub_argv);
  if (cmd == "mask") return cmd_mask(sub_argc, sub_argv);
  if (cmd == "bench") return cmd_bench(sub_argc, sub_argv);
  if (cmd == "version" || cmd == "--version") return cmd_version(sub_argc, sub_argv);
  if (cmd == "help" || cmd == "--help" || cmd == "-h") {
    // `psa help COMMAND` prints that command's help (exit 0, as every --help does).
    // `psa help --help` (or -h) is this text: re-dispatching it would recurse forever.
    if (argc > 2 && std::strcmp(argv[2], "help") != 0 && std::strcmp(argv[2], "--help") != 0 &&
        std::strcmp(argv[2], "-h") != 0) {
      const char* const help_argv[] = {argv[0], argv[2], "--help"};
      return dispatch(3, help_argv);
    }
    std::fputs(kUsage, stdout);
    return 0;
  }
  throw UsageError("unknown command '" + cmd + "'");
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return dispatch(argc, argv);
  } catch (const psa_cli::UsageError& e) {
    std::fprintf(stderr, "psa: %s\n\n%s", e.what(), e.usage.empty() ? kUsage : e.usage.c_str());
    return 2;
  } catch (const psa_cli::Failure& e) {
    std::fprintf(stderr, "psa: error: %s\n", e.what());
    return 1;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "psa: error: out of host memory\n");
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "psa: error: %s\n", e.what());
    return 1;
  }
}

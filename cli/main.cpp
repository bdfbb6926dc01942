// cli/main.cpp -- the psa command: picks the subcommand and turns the two error kinds into
// exit codes (1: a library/file/runtime error, 2: bad usage). Prints nothing else itself.
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>

#include "cli.h"

namespace psa_cli {

std::string library_error(psa_status status) {
  std::string msg = psa_last_error_message();
  if (msg.empty()) msg = psa_status_string(status);
  return msg + " (" + psa_status_name(status) + ")";
}

}  // namespace psa_cli

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
    "  version                     print the library and header versions\n"
    "  help                        print this text\n";

// What the loaded library can run here: the CUDA backend may be missing from the build, or
// built in with no device; a context creation answers both.
std::string cuda_availability() {
  psa_config* cfg = nullptr;
  if (psa_config_create(&cfg) != PSA_OK) return "unknown";
  psa_context* ctx = nullptr;
  const psa_status st = psa_context_create(cfg, PSA_BACKEND_CUDA, -1, &ctx);
  psa_context_destroy(ctx);
  psa_config_destroy(cfg);
  switch (st) {
    case PSA_OK: return "available";
    case PSA_ERR_BACKEND_UNAVAILABLE: return "not built in";
    case PSA_ERR_NO_DEVICE: return "built in, no usable device";
    default: return std::string("unavailable (") + psa_status_name(st) + ")";
  }
}

int cmd_version() {
  std::printf("psa %s (built with psa.h %s)\n", psa_version_string(), PSA_VERSION_STRING);
  std::printf("backends: cpu available; cuda %s\n", cuda_availability().c_str());
  if (psa_version_number() != PSA_VERSION_NUMBER) {
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
  if (cmd == "version" || cmd == "--version") {
    if (argc > 2) throw UsageError("version takes no arguments");
    return cmd_version();
  }
  if (cmd == "help" || cmd == "--help" || cmd == "-h") {
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

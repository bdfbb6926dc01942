// cli/cli.h -- shared pieces of the psa command: the two error kinds, the library status
// check, and the subcommand entry points. Uses only include/psa.h from the library.
#pragma once
#include <stdexcept>
#include <string>
#include <utility>

#include "psa.h"

namespace psa_cli {

// Bad command line: main prints the message and `usage` (the subcommand's help, or the
// top-level usage when empty), then exits 2.
struct UsageError : std::runtime_error {
  explicit UsageError(const std::string& what, std::string usage_text = {})
      : std::runtime_error(what), usage(std::move(usage_text)) {}
  std::string usage;
};

// Anything else that stops a command (a library call, a file, the CUDA runtime): main
// prints "psa: error: <what>" and exits 1.
struct Failure : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// "<psa_last_error_message()> (<psa_status_name>)": the one wording of a library error.
std::string library_error(psa_status status);

// Throws Failure(library_error(status)) unless status is PSA_OK.
inline void check(psa_status status) {
  if (status != PSA_OK) throw Failure(library_error(status));
}

// Subcommands. `argc`/`argv` start at the subcommand's name; each returns the exit code.
int cmd_presets(int argc, const char* const* argv);
int cmd_check_config(int argc, const char* const* argv);
int cmd_run(int argc, const char* const* argv);
int cmd_demo(int argc, const char* const* argv);
int cmd_bench(int argc, const char* const* argv);  // cli/bench.cpp
int cmd_mask(int argc, const char* const* argv);  // cli/mask.cpp

}  // namespace psa_cli

// cli/options.h -- cxxopts glue shared by the subcommands: parse errors and stray
// positional arguments become UsageError carrying the subcommand's help text.
#pragma once
#include <cxxopts.hpp>
#include <string>

#include "cli.h"

namespace psa_cli {

// Parses argv (starting at the subcommand name). Returns false after printing the help
// when --help was given (the caller then exits 0); the options must define "help".
inline bool parse_options(cxxopts::Options& opts, int argc, const char* const* argv,
                          cxxopts::ParseResult& result) {
  try {
    result = opts.parse(argc, argv);
  } catch (const cxxopts::exceptions::exception& e) {
    throw UsageError(e.what(), opts.help());
  }
  if (result.count("help")) {
    std::fputs(opts.help().c_str(), stdout);
    return false;
  }
  if (!result.unmatched().empty()) {
    throw UsageError("unexpected argument '" + result.unmatched().front() + "'", opts.help());
  }
  return true;
}

// Value of an option that was given, converting cxxopts' type errors to UsageError.
template <typename T>
T option_value(const cxxopts::Options& opts, const cxxopts::ParseResult& r, const char* name) {
  try {
    return r[name].as<T>();
  } catch (const cxxopts::exceptions::exception& e) {
    throw UsageError(std::string("--") + name + ": " + e.what(), opts.help());
  }
}

}  // namespace psa_cli

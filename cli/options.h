// cli/options.h -- cxxopts glue shared by the subcommands: parse errors and stray
// positional arguments become UsageError carrying the subcommand's help text.
#pragma once
#include <cxxopts.hpp>
#include <string>

#include "cli.h"

namespace psa_cli {

// cxxopts names only the value that failed to convert ("Argument 'x' failed to parse", the
// quotes U+2018/U+2019 in UTF-8, or ASCII); this finds the option it was given to ("--opt x",
// "-o x" or "--opt=x") and names both.
inline std::string bad_value_message(const std::string& what, int argc, const char* const* argv) {
  const std::string head = "Argument ", tail = " failed to parse";
  if (what.size() <= head.size() + tail.size() || what.compare(0, head.size(), head) != 0 ||
      what.compare(what.size() - tail.size(), tail.size(), tail) != 0)
    return what;
  const std::string quoted = what.substr(head.size(), what.size() - head.size() - tail.size());
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const size_t eq = a.find('=');
    std::string name, value;
    if (a.rfind("--", 0) == 0 && eq != std::string::npos) {
      name = a.substr(0, eq);
      value = a.substr(eq + 1);
    } else if (a.size() > 1 && a[0] == '-' && i + 1 < argc) {
      name = a;
      value = argv[i + 1];
    } else {
      continue;
    }
    if (quoted == "\xE2\x80\x98" + value + "\xE2\x80\x99" || quoted == "'" + value + "'")
      return name + ": '" + value + "' is not a valid value for this option";
  }
  return what;
}

// Parses argv (starting at the subcommand name). Returns false after printing the help
// when --help was given (the caller then exits 0); the options must define "help".
inline bool parse_options(cxxopts::Options& opts, int argc, const char* const* argv,
                          cxxopts::ParseResult& result) {
  try {
    result = opts.parse(argc, argv);
  } catch (const cxxopts::exceptions::incorrect_argument_type& e) {
    throw UsageError(bad_value_message(e.what(), argc, argv), opts.help());
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

// cli/options.h -- cxxopts glue shared by the subcommands: parse errors, stray positional
// arguments, repeated options, empty values and flags given a value become UsageError
// carrying the subcommand's help text.
#pragma once
#include <cctype>
#include <charconv>
#include <cmath>
#include <cxxopts.hpp>
#include <set>
#include <string>
#include <system_error>

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

// cxxopts names an unknown option without its dashes ("Option 'nope' does not exist", the
// quotes ASCII or U+2018/U+2019); this names it as it was typed ("--nope", "-n"), or returns
// `what` unchanged when it is another message.
inline std::string unknown_option_message(const std::string& what, int argc,
                                          const char* const* argv) {
  const std::string head = "Option ", tail = " does not exist";
  if (what.size() <= head.size() + tail.size() || what.compare(0, head.size(), head) != 0 ||
      what.compare(what.size() - tail.size(), tail.size(), tail) != 0)
    return what;
  std::string name = what.substr(head.size(), what.size() - head.size() - tail.size());
  for (const std::string& q : {std::string("\xE2\x80\x98"), std::string("'")})
    if (name.compare(0, q.size(), q) == 0) name.erase(0, q.size());
  for (const std::string& q : {std::string("\xE2\x80\x99"), std::string("'")})
    if (name.size() >= q.size() && name.compare(name.size() - q.size(), q.size(), q) == 0)
      name.erase(name.size() - q.size());
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const std::string typed = a.substr(0, a.find('='));
    // "--name", "--name=value", or a group of short options starting with it ("-n", "-nq").
    if (typed == "--" + name || (name.size() == 1 && a.size() >= 2 && a[0] == '-' && a[1] == name[0]))
      return "unknown option '" + (typed == "--" + name ? typed : "-" + name) + "'";
  }
  return what;
}

// What cxxopts lets through and a command line should not mean: an option given twice (the
// last would win silently), an empty value ("--q ''" read as "no file"), and a flag with a
// value ("--json=false" would turn the flag on: cxxopts counts it as given).
inline void check_given_once(const cxxopts::Options& opts, const cxxopts::ParseResult& result,
                             int argc, const char* const* argv) {
  // A positional argument (check-config's FILE) is named as the usage line names it.
  auto shown = [&](const std::string& key) {
    const std::string opt = "--" + key;
    for (int i = 1; i < argc; ++i)
      if (argv[i] == opt || std::string(argv[i]).rfind(opt + "=", 0) == 0) return opt;
    std::string upper = key;
    for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    return upper;
  };
  std::set<std::string> flags;
  for (const std::string& group : opts.groups())
    for (const cxxopts::HelpOptionDetails& d : opts.group_help(group).options)
      if (d.is_boolean)
        for (const std::string& name : d.l) flags.insert(name);
  std::set<std::string> seen;
  for (const cxxopts::KeyValue& kv : result.arguments()) {
    const std::string name = shown(kv.key());
    if (!seen.insert(kv.key()).second)
      throw UsageError(name + " is given more than once; give it once", opts.help());
    if (flags.count(kv.key()) != 0) {
      if (kv.value() != "true")
        throw UsageError(name + "=" + kv.value() + ": a flag takes no value (leave " + name +
                             " out to turn it off)", opts.help());
    } else if (kv.value().empty()) {
      throw UsageError(name + " '': an empty value", opts.help());
    }
  }
}

// A number option's text, read whole as a decimal double ("300", "2.5", "1e3"): cxxopts'
// stream conversion would take "5abc" as 5. Hexadecimal, a sign '+', spaces, nan and inf are
// not numbers here; a value past double's range (1e400) is kOutOfRange.
enum class Decimal { kOk, kNotANumber, kOutOfRange };
inline Decimal parse_decimal(const std::string& text, double* out) {
  const char* const end = text.data() + text.size();
  double v = 0.0;
  const auto [ptr, ec] = std::from_chars(text.data(), end, v, std::chars_format::general);
  if (ec == std::errc::result_out_of_range) return Decimal::kOutOfRange;
  if (text.empty() || ec != std::errc() || ptr != end || !std::isfinite(v)) return Decimal::kNotANumber;
  *out = v;
  return Decimal::kOk;
}

// An integer option's text, read whole as a decimal int64 (an optional '-', then digits: no
// spaces, no '+'); past int64 is kOutOfRange, not the nearest value.
inline Decimal parse_integer(const std::string& text, int64_t* out) {
  const char* const end = text.data() + text.size();
  int64_t v = 0;
  const auto [ptr, ec] = std::from_chars(text.data(), end, v);
  if (ec == std::errc::result_out_of_range) return Decimal::kOutOfRange;
  if (text.empty() || ec != std::errc() || ptr != end) return Decimal::kNotANumber;
  *out = v;
  return Decimal::kOk;
}

// Parses argv (starting at the subcommand name). Returns false after printing the help
// when --help was given (the caller then exits 0); the options must define "help".
inline bool parse_options(cxxopts::Options& opts, int argc, const char* const* argv,
                          cxxopts::ParseResult& result) {
  try {
    result = opts.parse(argc, argv);
  } catch (const cxxopts::exceptions::incorrect_argument_type& e) {
    throw UsageError(bad_value_message(e.what(), argc, argv), opts.help());
  } catch (const cxxopts::exceptions::no_such_option& e) {
    throw UsageError(unknown_option_message(e.what(), argc, argv), opts.help());
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
  check_given_once(opts, result, argc, argv);
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

// cli/json.h -- a minimal JSON object writer shared by the subcommands' --json outputs:
// keys are plain identifiers, strings are escaped, numbers go through fmt_num (NaN -> null).
#pragma once
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "preset_info.h"

namespace psa_cli {

class Json {
 public:
  Json& key(const char* k) {
    s_ += first_ ? "" : ", ";
    first_ = false;
    s_ += "\"" + std::string(k) + "\": ";
    return *this;
  }
  Json& str(const char* k, const std::string& v) { key(k).s_ += quote(v); return *this; }
  Json& num(const char* k, double v) { key(k).s_ += fmt_num(v); return *this; }
  Json& integer(const char* k, int64_t v) { key(k).s_ += std::to_string(v); return *this; }
  Json& boolean(const char* k, bool v) { key(k).s_ += v ? "true" : "false"; return *this; }
  Json& raw(const char* k, const std::string& v) { key(k).s_ += v; return *this; }
  Json& null(const char* k) { key(k).s_ += "null"; return *this; }
  std::string done() const { return "{" + s_ + "}"; }

  // "[a, b, c]" of already formatted JSON values.
  static std::string array(const std::vector<std::string>& items) {
    std::string o = "[";
    for (size_t i = 0; i < items.size(); ++i) o += (i ? ", " : "") + items[i];
    return o + "]";
  }

  static std::string quote(const std::string& v) {
    std::string o = "\"";
    for (const char c : v) {
      if (c == '"' || c == '\\') {
        o += '\\';
        o += c;
      } else if (static_cast<unsigned char>(c) < 0x20) {
        char buf[8];
        std::snprintf(buf, sizeof buf, "\\u%04x", c);
        o += buf;
      } else {
        o += c;
      }
    }
    return o + "\"";
  }

 private:
  std::string s_;
  bool first_ = true;
};

}  // namespace psa_cli

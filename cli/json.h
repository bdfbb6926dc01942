// cli/json.h -- a minimal JSON object writer shared by the subcommands' --json outputs:
// keys are plain identifiers, strings are escaped (valid JSON for any bytes, quote()), numbers
// go through fmt_num (NaN -> null).
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

  // A JSON string literal of `v`, valid JSON (RFC 8259) for any bytes: '"', '\\' and the
  // control characters are escaped, well-formed UTF-8 passes through unchanged, and each byte
  // that does not start a well-formed sequence (stray continuation bytes, truncated or overlong
  // sequences, surrogates, code points past U+10FFFF) becomes U+FFFD. U+FFFD rather than
  // "\u00XX": in JSON "\u00ff" means the character U+00FF, so a reader could not tell a
  // replaced byte from a real character, while U+FFFD is Unicode's mark for undecodable input.
  static std::string quote(const std::string& v) {
    std::string o = "\"";
    o.reserve(v.size() + 2);
    const size_t n = v.size();
    for (size_t i = 0; i < n;) {
      const unsigned char c = static_cast<unsigned char>(v[i]);
      if (c == '"' || c == '\\') {
        o += '\\';
        o += static_cast<char>(c);
        ++i;
      } else if (c < 0x20) {
        char buf[8];
        std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
        o += buf;
        ++i;
      } else if (c < 0x80) {
        o += static_cast<char>(c);
        ++i;
      } else if (const size_t len = utf8_sequence_length(v, i); len != 0) {
        o.append(v, i, len);
        i += len;
      } else {
        o += "\xEF\xBF\xBD";  // U+FFFD
        ++i;
      }
    }
    return o + "\"";
  }

 private:
  // Length (2 to 4) of the well-formed UTF-8 sequence starting at v[i] (a byte >= 0x80), or 0
  // when there is none: the table of well-formed byte sequences of the Unicode Standard
  // (section 3.9, table 3-7), which excludes overlong forms, surrogates and values past
  // U+10FFFF by narrowing the range of the second byte.
  static size_t utf8_sequence_length(const std::string& v, size_t i) {
    const auto byte = [&](size_t k) { return static_cast<unsigned char>(v[i + k]); };
    const unsigned char c = byte(0);
    size_t len = 0;
    unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
    if (c >= 0xC2 && c <= 0xDF) {
      len = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
      len = 3;
      if (c == 0xE0) lo = 0xA0;  // overlong below U+0800
      if (c == 0xED) hi = 0x9F;  // surrogates U+D800..U+DFFF
    } else if (c >= 0xF0 && c <= 0xF4) {
      len = 4;
      if (c == 0xF0) lo = 0x90;  // overlong below U+10000
      if (c == 0xF4) hi = 0x8F;  // past U+10FFFF
    } else {
      return 0;  // a continuation byte, C0/C1 (always overlong) or F5..FF
    }
    if (v.size() - i < len || byte(1) < lo || byte(1) > hi) return 0;
    for (size_t k = 2; k < len; ++k)
      if (byte(k) < 0x80 || byte(k) > 0xBF) return 0;
    return len;
  }

  std::string s_;
  bool first_ = true;
};

}  // namespace psa_cli

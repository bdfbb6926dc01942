// core/utf8.h -- well-formed UTF-8 (Unicode Table 3-7): what libpsa's messages and the YAML it
// reads must be, since every binding decodes them as UTF-8 (C#'s marshaller throws on a bad
// byte; a name from a YAML key comes back as a C# or Python string).
#pragma once
#include <cstddef>
#include <string>

namespace psa {

// Length of the well-formed sequence at s[i] (1 to 4), or 0 when s[i] does not start one.
inline size_t utf8_sequence(const std::string& s, size_t i) {
  const auto at = [&](size_t j) { return j < s.size() ? static_cast<unsigned char>(s[j]) : 0u; };
  const auto cont = [&](size_t j, unsigned lo = 0x80, unsigned hi = 0xBF) {
    return at(j) >= lo && at(j) <= hi;
  };
  const unsigned b0 = at(i);
  if (b0 < 0x80) return 1;
  if (b0 >= 0xC2 && b0 <= 0xDF) return cont(i + 1) ? 2 : 0;
  if (b0 == 0xE0) return cont(i + 1, 0xA0) && cont(i + 2) ? 3 : 0;
  if (b0 == 0xED) return cont(i + 1, 0x80, 0x9F) && cont(i + 2) ? 3 : 0;  // no surrogates
  if (b0 >= 0xE1 && b0 <= 0xEF) return cont(i + 1) && cont(i + 2) ? 3 : 0;
  if (b0 == 0xF0) return cont(i + 1, 0x90) && cont(i + 2) && cont(i + 3) ? 4 : 0;
  if (b0 >= 0xF1 && b0 <= 0xF3) return cont(i + 1) && cont(i + 2) && cont(i + 3) ? 4 : 0;
  if (b0 == 0xF4) return cont(i + 1, 0x80, 0x8F) && cont(i + 2) && cont(i + 3) ? 4 : 0;
  return 0;
}

// Offset of the first byte of `s` that does not start a well-formed sequence, or s.size().
inline size_t first_non_utf8(const std::string& s) {
  for (size_t i = 0; i < s.size();) {
    const size_t n = utf8_sequence(s, i);
    if (n == 0) return i;
    i += n;
  }
  return s.size();
}

}  // namespace psa

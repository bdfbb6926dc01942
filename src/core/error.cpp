// core/error.cpp -- thread-local last-error storage and the status table's strings.
#include "core/error.h"

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "core/utf8.h"

namespace psa {
namespace {
struct ErrorSlot {
  psa_status status = PSA_OK;
  std::string message;
};
thread_local ErrorSlot g_error;

// Messages are kept under this many bytes (plus the NUL).
constexpr size_t kMaxMessage = 2047;
// A %s argument longer than this is shortened in the middle when the whole message would
// not fit: the echoed value (a path, a name, a list) gives way, the reason stays.
constexpr size_t kMaxEchoedValue = 400;

std::string shortened(const std::string& v, size_t max) {
  if (v.size() <= max) return v;
  const size_t keep = max / 2;
  return v.substr(0, keep) + "[... " + std::to_string(v.size() - 2 * keep) +
         " characters left out ...]" + v.substr(v.size() - keep);
}

// `fmt` formatted with every %s argument shortened to `max_arg` characters. Handles the
// conversions libpsa's messages use (flags, digit widths and precisions, hh h l ll z j t L);
// returns false on anything else ('*', %n), and the caller falls back to a plain cut.
bool format_with_short_strings(const char* fmt, va_list ap, size_t max_arg, std::string* out) {
  std::string o;
  const char* p = fmt;
  while (*p != '\0') {
    if (*p != '%') {
      o += *p++;
      continue;
    }
    const char* spec_begin = p++;
    if (*p == '%') {
      o += '%';
      ++p;
      continue;
    }
    while (*p != '\0' && std::strchr("-+ #0", *p) != nullptr) ++p;
    while (*p >= '0' && *p <= '9') ++p;
    if (*p == '.') {
      ++p;
      while (*p >= '0' && *p <= '9') ++p;
    }
    int longs = 0;  // 0: int, 1: long, 2: long long; size_t and friends as long long
    bool long_double = false;
    while (*p != '\0' && std::strchr("hlzjtL", *p) != nullptr) {
      if (*p == 'l') ++longs;
      if (*p == 'z' || *p == 'j' || *p == 't') longs = 2;
      if (*p == 'L') long_double = true;
      ++p;
    }
    const char conv = *p;
    if (conv == '\0' || *spec_begin != '%') return false;
    ++p;
    const std::string spec(spec_begin, p);
    char buf[512];
    switch (conv) {
      case 's': {
        const char* v = va_arg(ap, const char*);
        o += shortened(v != nullptr ? v : "(null)", max_arg);
        continue;
      }
      case 'd': case 'i': case 'u': case 'o': case 'x': case 'X': case 'c':
        if (longs == 0) {
          std::snprintf(buf, sizeof buf, spec.c_str(), va_arg(ap, int));
        } else if (longs == 1) {
          std::snprintf(buf, sizeof buf, spec.c_str(), va_arg(ap, long));
        } else {
          std::snprintf(buf, sizeof buf, spec.c_str(), va_arg(ap, long long));
        }
        break;
      case 'f': case 'F': case 'e': case 'E': case 'g': case 'G': case 'a': case 'A':
        if (long_double) {
          std::snprintf(buf, sizeof buf, spec.c_str(), va_arg(ap, long double));
        } else {
          std::snprintf(buf, sizeof buf, spec.c_str(), va_arg(ap, double));
        }
        break;
      case 'p':
        std::snprintf(buf, sizeof buf, spec.c_str(), va_arg(ap, void*));
        break;
      default:
        return false;
    }
    o += buf;
  }
  out->swap(o);
  return true;
}

// The message of set_error, at most kMaxMessage bytes. A message that fits is kept as is;
// a longer one has its long %s values shortened in the middle; what still does not fit (many
// long values) is cut in the middle, so both its start (what) and end (why) survive.
std::string bounded_message(const char* fmt, va_list ap) {
  char buf[kMaxMessage + 1];
  va_list ap1;
  va_copy(ap1, ap);
  const int n = std::vsnprintf(buf, sizeof(buf), fmt, ap1);
  va_end(ap1);
  if (n < 0) return fmt;
  if (static_cast<size_t>(n) <= kMaxMessage) return buf;
  std::string msg;
  va_list ap2;
  va_copy(ap2, ap);
  const bool ok = format_with_short_strings(fmt, ap2, kMaxEchoedValue, &msg);
  va_end(ap2);
  if (!ok) {
    std::vector<char> full(static_cast<size_t>(n) + 1);
    va_list ap3;
    va_copy(ap3, ap);
    std::vsnprintf(full.data(), full.size(), fmt, ap3);
    va_end(ap3);
    msg.assign(full.data(), static_cast<size_t>(n));
  }
  return shortened(msg, kMaxMessage - 64);
}

// Messages echo what callers gave (YAML keys, paths), which may be any bytes; bindings
// decode the message as UTF-8 (C#'s marshaller throws on a bad byte). Every byte that does
// not start a well-formed sequence becomes U+FFFD, as psa --json writes it.
std::string valid_utf8(const std::string& s) {
  std::string o;
  o.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const size_t n = utf8_sequence(s, i);
    if (n == 0) {
      o += "\xEF\xBF\xBD";
      ++i;
    } else {
      o.append(s, i, n);
      i += n;
    }
  }
  return o;
}

}  // namespace

psa_status set_error(psa_status status, const char* fmt, ...) {
  g_error.status = status;
  try {
    va_list ap;
    va_start(ap, fmt);
    std::string msg = valid_utf8(bounded_message(fmt, ap));
    va_end(ap);
    g_error.message.swap(msg);
  } catch (...) {
    g_error.message.clear();
  }
  return status;
}

psa_status clear_error() {
  g_error.status = PSA_OK;
  g_error.message.clear();
  return PSA_OK;
}

void prefix_error(const std::string& prefix) {
  try {
    g_error.message = valid_utf8(shortened(shortened(prefix, kMaxEchoedValue) + ": " +
                                           g_error.message, kMaxMessage - 64));
  } catch (...) {
  }
}

const char* last_error_message() { return g_error.message.c_str(); }
psa_status last_error_status() { return g_error.status; }

}  // namespace psa

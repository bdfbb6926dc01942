// core/error.cpp -- thread-local last-error storage and the status table's strings.
#include "core/error.h"

#include <cstdio>

namespace psa {
namespace {
struct ErrorSlot {
  psa_status status = PSA_OK;
  std::string message;
};
thread_local ErrorSlot g_error;
}  // namespace

psa_status set_error(psa_status status, const char* fmt, ...) {
  char buf[2048];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  g_error.status = status;
  try {
    g_error.message = buf;
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
    g_error.message = prefix + ": " + g_error.message;
  } catch (...) {
  }
}

const char* last_error_message() { return g_error.message.c_str(); }
psa_status last_error_status() { return g_error.status; }

}  // namespace psa

// core/error.h -- internal error recording: one thread-local message per thread, set by the
// check macros below and read through psa_last_error_message(). Never throws.
#pragma once
#include <cstdarg>
#include <string>

#include "psa.h"

namespace psa {

// Records `status` with a printf-style message for this thread and returns `status`.
psa_status set_error(psa_status status, const char* fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
// Records success (clears the message).
psa_status clear_error();
// Prepends "prefix: " to the current message (used to add context, e.g. a YAML path).
void prefix_error(const std::string& prefix);
const char* last_error_message();
psa_status last_error_status();

}  // namespace psa

// Returns `status` with a formatted message from the enclosing function when `cond` holds.
#define PSA_RETURN_IF(cond, status, ...)            \
  do {                                              \
    if (cond) return ::psa::set_error((status), __VA_ARGS__); \
  } while (0)

// Propagates a non-OK status (its message is already recorded).
#define PSA_TRY(expr)                               \
  do {                                              \
    psa_status psa_try_status_ = (expr);            \
    if (psa_try_status_ != PSA_OK) return psa_try_status_; \
  } while (0)

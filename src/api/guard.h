// api/guard.h -- the exception guard every extern "C" body runs inside (ORT's
// API_IMPL_BEGIN/END): no C++ exception and no abort crosses the ABI.
#pragma once
#include <exception>
#include <new>

#include "core/error.h"

#define PSA_API_BEGIN \
  try {               \
    ::psa::clear_error();
#define PSA_API_END                                                                        \
  }                                                                                        \
  catch (const std::bad_alloc&) {                                                          \
    return ::psa::set_error(PSA_ERR_OUT_OF_MEMORY, "host allocation failed");              \
  }                                                                                        \
  catch (const std::exception& e) {                                                        \
    return ::psa::set_error(PSA_ERR_INTERNAL, "unexpected exception: %s", e.what());       \
  }                                                                                        \
  catch (...) {                                                                            \
    return ::psa::set_error(PSA_ERR_INTERNAL, "unexpected non-standard exception");        \
  }

// tests/fuzz/fuzz_common.h -- what the libFuzzer targets of tests/fuzz/ share: the trap on a
// broken promise, the check of a failing call's status and message, and fuzzed integers
// that favour the values where shapes, counts and byte sizes break.
#pragma once
#include <fuzzer/FuzzedDataProvider.h>

#include <cstdint>
#include <cstdio>
#include <cstring>

#include "psa.h"

namespace psa_fuzz {

// Trap with the last libpsa status and message on stderr, so a crash report says which
// promise broke.
inline void check(bool ok) {
  if (ok) return;
  std::fprintf(stderr, "broken invariant; last libpsa status %s: %s\n", psa_status_name(psa_last_error_status()),
               psa_last_error_message());
  __builtin_trap();
}

// A failing call must leave a known, non-internal status (an internal error is a bug by
// definition) and a message naming something.
inline void check_failure(psa_status st) {
  check(st != PSA_OK && static_cast<int>(st) > 0 && static_cast<int>(st) < PSA_ERR_INTERNAL);
  check(psa_last_error_status() == st);
  check(psa_last_error_message()[0] != '\0');
  check(std::strcmp(psa_status_name(st), "PSA_STATUS_UNKNOWN") != 0);
}

// Small values, powers of two (block sizes, divisors), and values next to powers of two up
// to 2^62, where element counts and workspace sizes overflow.
inline int64_t fuzzed_int(FuzzedDataProvider& in) {
  switch (in.ConsumeIntegralInRange<int>(0, 4)) {
    case 0: return in.ConsumeIntegralInRange<int64_t>(-2, 4);
    case 1: return int64_t{1} << in.ConsumeIntegralInRange<int>(0, 8);
    case 2: return in.ConsumeIntegralInRange<int64_t>(0, 40);
    case 3: return (int64_t{1} << in.ConsumeIntegralInRange<int>(9, 62)) + in.ConsumeIntegralInRange<int64_t>(-1, 1);
    default: return in.ConsumeIntegral<int64_t>();
  }
}

// Bytes a descriptor addresses (extent x element size), or 0 when any dimension or stride is
// out of [1, max_dim] / [0, max_dim] or the bytes pass max_bytes: then it is not allocated.
inline uint64_t described_bytes(const psa_tensor_desc& d, int64_t max_dim, uint64_t max_bytes) {
  uint64_t extent = 1;
  for (int i = 0; i < 4; ++i) {
    if (d.shape[i] < 1 || d.shape[i] > max_dim || d.strides[i] < 0 || d.strides[i] > max_dim) return 0;
    extent += static_cast<uint64_t>(d.shape[i] - 1) * static_cast<uint64_t>(d.strides[i]);
  }
  const int32_t size = psa_dtype_size(d.dtype);
  const uint64_t bytes = extent * static_cast<uint64_t>(size);
  return size > 0 && bytes <= max_bytes ? bytes : 0;
}

}  // namespace psa_fuzz

// tests/fuzz/fuzz_common.h -- what the libFuzzer targets of tests/fuzz/ share: the trap on a
// broken promise, the check of a failing call's status and message, and fuzzed integers
// that favour the values where shapes, counts and byte sizes break.
#pragma once
#include <fuzzer/FuzzedDataProvider.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

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

// Half the time one of the caller's special values (edges, infinities, NaN), else uniform in
// [lo, hi].
template <size_t N>
double fuzzed_double(FuzzedDataProvider& in, const double (&special)[N], double lo, double hi) {
  if (in.ConsumeBool()) return special[in.ConsumeIntegralInRange<size_t>(0, N - 1)];
  return in.ConsumeFloatingPointInRange<double>(lo, hi);
}

// One field of a tensor descriptor (a shape or stride entry, the dtype or struct_size) set to a
// fuzzed value: the field first, then the value.
inline void mutate_desc_field(FuzzedDataProvider& in, psa_tensor_desc& d) {
  const int field = in.ConsumeIntegralInRange<int>(0, 9);
  const int64_t value = fuzzed_int(in);
  if (field < 4) d.shape[field] = value;
  else if (field < 8) d.strides[field - 4] = value;
  else if (field == 8) d.dtype = static_cast<psa_dtype>(value);
  else d.struct_size = static_cast<uint32_t>(value);
}

// The byte every output buffer starts as: a byte a call must not write keeps it.
constexpr uint8_t kSentinel = 0xa7;

// Which bytes of an n-byte buffer the descriptor's elements occupy (the rest must keep their
// sentinel after a call).
inline std::vector<bool> covered_bytes(const psa_tensor_desc& d, size_t n) {
  std::vector<bool> cov(n, false);
  const int64_t es = psa_dtype_size(d.dtype);
  for (int64_t b = 0; b < d.shape[0]; ++b)
    for (int64_t h = 0; h < d.shape[1]; ++h)
      for (int64_t l = 0; l < d.shape[2]; ++l)
        for (int64_t c = 0; c < d.shape[3]; ++c) {
          const int64_t off = (b * d.strides[0] + h * d.strides[1] + l * d.strides[2] + c * d.strides[3]) * es;
          for (int64_t e = 0; e < es; ++e) cov[static_cast<size_t>(off + e)] = true;
        }
  return cov;
}

// The cheap data generator the targets seed from a few input bytes: one xorshift32 step, and
// the value in [-1, 1] (steps of 0.001) a state stands for.
inline uint32_t xorshift32(uint32_t& s) {
  s ^= s << 13;
  s ^= s >> 17;
  s ^= s << 5;
  return s;
}
inline float unit_value(uint32_t s) { return static_cast<float>(s % 2001u) / 1000.0f - 1.0f; }

// f stored as an element of `es` bytes: fp32, or its upper half (a bf16 pattern; any bits are
// a valid f16 too).
inline void store_value(uint8_t* p, float f, int es) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if (es == 4) {
    std::memcpy(p, &u, 4);
  } else {
    const uint16_t h = static_cast<uint16_t>(u >> 16);
    std::memcpy(p, &h, 2);
  }
}

}  // namespace psa_fuzz

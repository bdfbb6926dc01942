// api/vendor_cache.h -- internal view of the context cache behind psa_sparse_attention on the
// CUDA backend (api/vendor_api.cpp): its bound and counters, for tests (not exported).
#pragma once
#include <cstddef>
#include <cstdint>

namespace psa {

// Contexts kept by psa_sparse_attention on CUDA, one per argument set (key). Idle entries
// beyond this bound are evicted least recently used first; entries in use by a call or
// captured into a CUDA graph are never evicted, so the cache may hold more while they exist.
constexpr size_t kVendorCacheCapacity = 16;

struct VendorCacheCounters {
  uint64_t hits = 0;       // calls that found their key planned (no planning, no cudaMalloc)
  uint64_t misses = 0;     // calls that created and planned a context
  uint64_t evictions = 0;  // entries dropped to respect kVendorCacheCapacity
  uint64_t entries = 0;    // entries cached now
};

// A snapshot of the counters (totals since the process started).
VendorCacheCounters vendor_cache_counters();

}  // namespace psa

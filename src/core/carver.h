// core/carver.h -- host workspace carving: aligned pieces taken in order out of one caller
// buffer, so that a workspace size query and the forward that uses the workspace run the same
// code (with base == nullptr the carver only measures).
#pragma once
#include <cstdint>

namespace psa {

class Carver {
 public:
  // base: the workspace, or nullptr to measure. Pieces are 64-byte aligned relative to base.
  explicit Carver(void* base) : base_(static_cast<char*>(base)) {}
  template <typename T>
  T* take(int64_t count) {
    used_ = (used_ + 63) & ~uint64_t{63};
    T* p = base_ ? reinterpret_cast<T*>(base_ + used_) : nullptr;
    used_ += static_cast<uint64_t>(count) * sizeof(T);
    return p;
  }
  // Bytes taken so far (without the slack a caller adds for aligning base itself).
  uint64_t used() const { return used_; }

  // A workspace pointer rounded up to 64 bytes (callers reserve 64 bytes of slack).
  static void* align64(void* p) {
    return reinterpret_cast<void*>((reinterpret_cast<uintptr_t>(p) + 63) & ~uintptr_t{63});
  }

 private:
  char* base_;
  uint64_t used_ = 0;
};

}  // namespace psa

// cli/buffer.h -- a byte buffer in a backend's memory: host memory for the CPU backend,
// device memory (through CudaRuntime) for CUDA. Owns its memory; move-only.
#pragma once
#include <cstdint>

#include "psa.h"

namespace psa_cli {

class Buffer {
 public:
  Buffer() = default;
  // `bytes` may be 0 (data() is then NULL). Throws Failure when allocation fails.
  Buffer(psa_backend backend, uint64_t bytes);
  ~Buffer();
  Buffer(Buffer&& other) noexcept;
  Buffer& operator=(Buffer&& other) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  void* data() const { return data_; }
  uint64_t size() const { return bytes_; }
  void upload(const void* src, uint64_t bytes);   // host -> this buffer
  void download(void* dst, uint64_t bytes) const; // this buffer -> host

 private:
  void release() noexcept;
  bool device_ = false;
  void* data_ = nullptr;
  uint64_t bytes_ = 0;
};

}  // namespace psa_cli

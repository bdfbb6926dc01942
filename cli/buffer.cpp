// cli/buffer.cpp -- host or device byte buffers for inputs, outputs and workspaces. Host
// buffers are 256-byte aligned, as cudaMalloc's are, so neither backend sees a difference.
#include "buffer.h"

#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>

#include "cli.h"
#include "cuda_runtime.h"

namespace psa_cli {
namespace {
constexpr uint64_t kHostAlign = 256;
}

Buffer::Buffer(psa_backend backend, uint64_t bytes)
    : device_(backend == PSA_BACKEND_CUDA), bytes_(bytes) {
  if (bytes == 0) return;
  if (device_) {
    data_ = CudaRuntime::get().malloc(bytes);
  } else {
    data_ = std::aligned_alloc(kHostAlign, (bytes + kHostAlign - 1) / kHostAlign * kHostAlign);
    if (data_ == nullptr) {
      throw Failure("cannot allocate " + std::to_string(bytes) + " bytes of host memory");
    }
  }
}

Buffer::~Buffer() { release(); }

Buffer::Buffer(Buffer&& other) noexcept
    : device_(other.device_),
      data_(std::exchange(other.data_, nullptr)),
      bytes_(std::exchange(other.bytes_, 0)) {}

Buffer& Buffer::operator=(Buffer&& other) noexcept {
  if (this != &other) {
    release();
    device_ = other.device_;
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

void Buffer::release() noexcept {
  if (data_ == nullptr) return;
  if (device_) {
    CudaRuntime::get().free(data_);
  } else {
    std::free(data_);
  }
  data_ = nullptr;
}

void Buffer::upload(const void* src, uint64_t bytes) {
  if (bytes == 0) return;
  if (device_) {
    CudaRuntime::get().to_device(data_, src, bytes);
  } else {
    std::memcpy(data_, src, bytes);
  }
}

void Buffer::download(void* dst, uint64_t bytes) const {
  if (bytes == 0) return;
  if (device_) {
    CudaRuntime::get().to_host(dst, data_, bytes);
  } else {
    std::memcpy(dst, data_, bytes);
  }
}

}  // namespace psa_cli

// backend/cuda/cuda_device_scope.h -- the two small CUDA runtime helpers the backend and the
// one-call vendor entry share: a scope that makes a device current, and the capture state
// of a stream. Host code only; include where cuda_runtime_api.h is available.
#pragma once

#include <cuda_runtime_api.h>

namespace psa {

// Makes `device` current for a scope and restores the caller's device afterwards. A
// negative `device` leaves the current device as it is.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device) {
    if (device >= 0 && cudaGetDevice(&prev_) == cudaSuccess && prev_ != device &&
        cudaSetDevice(device) == cudaSuccess)
      switched_ = true;
  }
  ~DeviceGuard() {
    if (switched_) cudaSetDevice(prev_);
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int prev_ = 0;
  bool switched_ = false;
};

// Whether `stream` is being captured into a CUDA graph. When the runtime cannot tell (the
// query fails, e.g. on the legacy stream while another thread captures in global mode), the
// error is cleared and `if_unknown` is the answer: each caller picks the safe side.
inline bool stream_capturing(void* stream, bool if_unknown) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(static_cast<cudaStream_t>(stream), &status) != cudaSuccess) {
    (void)cudaGetLastError();
    return if_unknown;
  }
  return status != cudaStreamCaptureStatusNone;
}

}  // namespace psa

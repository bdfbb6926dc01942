// backend/cuda/cuda_vendor_runtime.h -- the few CUDA runtime calls the one-call vendor entry
// (api/vendor_api.cpp) needs around the context API: device checks, stream-ordered workspace,
// capture detection and a completion fence per cached context. src/api includes no CUDA
// header; without PSA_WITH_CUDA every function reports PSA_ERR_BACKEND_UNAVAILABLE (or the
// host answer) and nothing here touches a device.
#pragma once
#include <cstdint>

#include "psa.h"

namespace psa {

// PSA_OK when the CUDA backend is built in and a device exists; otherwise
// PSA_ERR_BACKEND_UNAVAILABLE (no CUDA in this build) or PSA_ERR_NO_DEVICE, with a message
// that starts with `what` (e.g. "backend = PSA_BACKEND_CUDA").
psa_status cuda_vendor_check_available(const char* what);

// Device ordinal that holds `ptr` (device or managed memory: the device it was allocated
// on), or -1 for host memory and in a build without CUDA.
int cuda_vendor_pointer_device(const void* ptr);

// `bytes` of device memory from the current memory pool of `device`, ordered on `stream`
// (cudaMallocAsync); release with cuda_vendor_stream_free on the same stream. Capturable.
psa_status cuda_vendor_stream_alloc(int device, uint64_t bytes, void* stream, void** out);
// cudaFreeAsync(ptr, stream) on `device`; NULL is a no-op.
psa_status cuda_vendor_stream_free(int device, void* ptr, void* stream);

// True while `stream` is being captured into a CUDA graph (also true when the query itself
// fails, e.g. the legacy stream during another stream's global-mode capture: the caller then
// treats the call as captured, which is the safe side).
bool cuda_vendor_stream_capturing(void* stream);

// Marks the end of the last call of a cached context on its stream, so that the context can
// be destroyed only after that call's kernels are done. Host-only builds: all no-ops.
class CudaVendorFence {
 public:
  CudaVendorFence() = default;
  ~CudaVendorFence();  // waits for the recorded point (if any), then destroys the event
  CudaVendorFence(const CudaVendorFence&) = delete;
  CudaVendorFence& operator=(const CudaVendorFence&) = delete;
  // Creates the event on `device` (cudaEventDisableTiming). Call once, outside capture.
  psa_status create(int device);
  // cudaEventRecord on `stream` (not while the stream is captured).
  psa_status record(void* stream);
  // Blocks until the recorded point is reached; PSA_OK when nothing was recorded.
  psa_status wait();

 private:
  int device_ = -1;
  void* event_ = nullptr;  // cudaEvent_t
  bool recorded_ = false;
};

}  // namespace psa

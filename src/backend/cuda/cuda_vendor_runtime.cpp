// backend/cuda/cuda_vendor_runtime.cpp -- CUDA runtime calls of the one-call vendor entry
// (see cuda_vendor_runtime.h). Without PSA_WITH_CUDA only the "unavailable" answers remain.
#include "backend/cuda/cuda_vendor_runtime.h"

#include "core/error.h"

#if defined(PSA_WITH_CUDA)
#include <cuda_runtime_api.h>

#include "backend/cuda/cuda_device_scope.h"
#include "cuda/core/cuda_status.h"

namespace psa {

psa_status cuda_vendor_check_available(const char* what) {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || count == 0) {
    (void)cudaGetLastError();
    return set_error(PSA_ERR_NO_DEVICE, "%s: no usable CUDA device (%s)", what,
                     e != cudaSuccess ? cudaGetErrorString(e) : "device count is 0");
  }
  return PSA_OK;
}

int cuda_vendor_pointer_device(const void* ptr) {
  cudaPointerAttributes attr{};
  if (cudaPointerGetAttributes(&attr, ptr) != cudaSuccess) {
    (void)cudaGetLastError();
    return -1;
  }
  if (attr.type != cudaMemoryTypeDevice && attr.type != cudaMemoryTypeManaged) return -1;
  if (attr.device >= 0) return attr.device;
  int dev = -1;
  if (cudaGetDevice(&dev) != cudaSuccess) {
    (void)cudaGetLastError();
    return -1;
  }
  return dev;
}

psa_status cuda_vendor_stream_alloc(int device, uint64_t bytes, void* stream, void** out) {
  *out = nullptr;
  if (bytes == 0) return PSA_OK;
  DeviceGuard guard(device);
  const cudaError_t e = cudaMallocAsync(out, static_cast<size_t>(bytes), static_cast<cudaStream_t>(stream));
  if (e != cudaSuccess) {
    *out = nullptr;
    (void)cudaGetLastError();
    if (e == cudaErrorMemoryAllocation)
      return set_error(PSA_ERR_OUT_OF_MEMORY,
                       "workspace: cudaMallocAsync of %llu bytes on device %d: %s",
                       static_cast<unsigned long long>(bytes), device, cudaGetErrorString(e));
    return set_error(PSA_ERR_CUDA,
                     "workspace: cudaMallocAsync of %llu bytes on device %d: %s (%s)%s",
                     static_cast<unsigned long long>(bytes), device, cudaGetErrorString(e),
                     cudaGetErrorName(e),
                     e == cudaErrorNotSupported
                         ? "; this device or driver has no stream-ordered memory pools"
                         : "");
  }
  return PSA_OK;
}

psa_status cuda_vendor_stream_free(int device, void* ptr, void* stream) {
  if (ptr == nullptr) return PSA_OK;
  DeviceGuard guard(device);
  PSA_CUDA_TRY(cudaFreeAsync(ptr, static_cast<cudaStream_t>(stream)), "workspace: cudaFreeAsync");
  return PSA_OK;
}

bool cuda_vendor_stream_capturing(void* stream) {
  return stream_capturing(stream, /*if_unknown=*/true);
}

CudaVendorFence::~CudaVendorFence() {
  if (event_ == nullptr) return;
  DeviceGuard guard(device_);
  if (recorded_) (void)cudaEventSynchronize(static_cast<cudaEvent_t>(event_));
  (void)cudaEventDestroy(static_cast<cudaEvent_t>(event_));
  (void)cudaGetLastError();
}

psa_status CudaVendorFence::create(int device) {
  PSA_RETURN_IF(event_ != nullptr, PSA_ERR_INTERNAL, "completion event created twice");
  DeviceGuard guard(device);
  cudaEvent_t ev = nullptr;
  PSA_CUDA_TRY(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming), "completion event: cudaEventCreate");
  device_ = device;
  event_ = ev;
  return PSA_OK;
}

psa_status CudaVendorFence::record(void* stream) {
  PSA_RETURN_IF(event_ == nullptr, PSA_ERR_INTERNAL, "completion event recorded before creation");
  DeviceGuard guard(device_);
  PSA_CUDA_TRY(cudaEventRecord(static_cast<cudaEvent_t>(event_), static_cast<cudaStream_t>(stream)),
               "completion event: cudaEventRecord");
  recorded_ = true;
  return PSA_OK;
}

psa_status CudaVendorFence::wait() {
  if (event_ == nullptr || !recorded_) return PSA_OK;
  DeviceGuard guard(device_);
  PSA_CUDA_TRY(cudaEventSynchronize(static_cast<cudaEvent_t>(event_)),
               "completion event: cudaEventSynchronize");
  return PSA_OK;
}

}  // namespace psa

#else  // !PSA_WITH_CUDA

namespace psa {

psa_status cuda_vendor_check_available(const char* what) {
  return set_error(PSA_ERR_BACKEND_UNAVAILABLE,
                   "%s: this build of libpsa has no CUDA backend (configure with "
                   "-DPSA_WITH_CUDA=ON)",
                   what);
}

int cuda_vendor_pointer_device(const void* ptr) {
  (void)ptr;
  return -1;
}

psa_status cuda_vendor_stream_alloc(int device, uint64_t bytes, void* stream, void** out) {
  (void)device;
  (void)bytes;
  (void)stream;
  *out = nullptr;
  return set_error(PSA_ERR_BACKEND_UNAVAILABLE, "workspace: this build of libpsa has no CUDA backend");
}

psa_status cuda_vendor_stream_free(int device, void* ptr, void* stream) {
  (void)device;
  (void)ptr;
  (void)stream;
  return PSA_OK;
}

bool cuda_vendor_stream_capturing(void* stream) {
  (void)stream;
  return false;
}

CudaVendorFence::~CudaVendorFence() { (void)event_; }
psa_status CudaVendorFence::create(int device) {
  device_ = device;
  return PSA_OK;
}
psa_status CudaVendorFence::record(void* stream) {
  (void)stream;
  recorded_ = true;
  return PSA_OK;
}
psa_status CudaVendorFence::wait() { return PSA_OK; }

}  // namespace psa

#endif

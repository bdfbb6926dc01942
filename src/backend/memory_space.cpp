// backend/memory_space.cpp -- asks the CUDA runtime where a pointer lives, so each backend
// can reject pointers from the other memory space. Host-only builds see host memory only.
#include "backend/backend.h"

#include "core/error.h"

#if defined(PSA_WITH_CUDA)
#include <cuda_runtime_api.h>
#endif

namespace psa {

MemorySpace memory_space_of(const void* ptr) {
#if defined(PSA_WITH_CUDA)
  cudaPointerAttributes attr{};
  if (cudaPointerGetAttributes(&attr, ptr) != cudaSuccess) {
    (void)cudaGetLastError();  // no driver / unregistered host memory: plain host memory
    return MemorySpace::kHost;
  }
  if (attr.type == cudaMemoryTypeDevice) return MemorySpace::kDevice;
  if (attr.type == cudaMemoryTypeManaged) return MemorySpace::kManaged;
  return MemorySpace::kHost;
#else
  (void)ptr;
  return MemorySpace::kHost;
#endif
}

psa_status check_element_alignment(const void* ptr, unsigned align, const char* name) {
  PSA_RETURN_IF(reinterpret_cast<uintptr_t>(ptr) % align != 0, PSA_ERR_MISALIGNED_POINTER,
                "%s: address %p is not aligned to %u bytes (its element size)", name, ptr, align);
  return PSA_OK;
}

}  // namespace psa

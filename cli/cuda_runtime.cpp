// cli/cuda_runtime.cpp -- dlopen of the shared CUDA runtime. Device pointers it returns
// are valid in libpsa's statically linked runtime too: both use the device's primary
// context. The library handle is never closed (the runtime must outlive every buffer).
#include "cuda_runtime.h"

#include <dlfcn.h>

#include <cstddef>
#include <cstring>
#include <string>
#include <vector>

#include "cli.h"

namespace psa_cli {
namespace {

// cudaMemcpyKind values (driver_types.h); pinned by CUDA since 2.x.
constexpr int kHostToDevice = 1;
constexpr int kDeviceToHost = 2;

template <typename Fn>
Fn symbol(void* lib, const char* name, const std::string& from) {
  void* p = dlsym(lib, name);
  if (p == nullptr) throw Failure(from + " has no symbol " + name);
  return reinterpret_cast<Fn>(p);
}

}  // namespace

CudaRuntime& CudaRuntime::get() {
  static CudaRuntime instance;  // a throwing constructor leaves it to be retried next call
  return instance;
}

CudaRuntime::CudaRuntime() {
  static const char* const kNames[] = {"libcudart.so.13", "libcudart.so.12", "libcudart.so"};
  void* lib = nullptr;
  std::string name, tried;
  for (const char* n : kNames) {
    lib = dlopen(n, RTLD_NOW | RTLD_LOCAL);
    if (lib != nullptr) {
      name = n;
      break;
    }
    tried += std::string(tried.empty() ? "" : "; ") + dlerror();
  }
  if (lib == nullptr) {
    throw Failure("the cuda backend needs device buffers, and the CLI allocates them through "
                  "the shared CUDA runtime, which could not be loaded (" + tried + "); add its "
                  "directory to LD_LIBRARY_PATH or use --backend cpu");
  }
  malloc_ = symbol<MallocFn>(lib, "cudaMalloc", name);
  free_ = symbol<FreeFn>(lib, "cudaFree", name);
  memcpy_ = symbol<MemcpyFn>(lib, "cudaMemcpy", name);
  sync_ = symbol<SyncFn>(lib, "cudaDeviceSynchronize", name);
  error_string_ = symbol<ErrorStringFn>(lib, "cudaGetErrorString", name);
  get_device_ = symbol<GetDeviceFn>(lib, "cudaGetDevice", name);
  // CUDA 12 exports the current struct layout as _v2; name[256] is its first field in every
  // version, which is all that is read.
  for (const char* n : {"cudaGetDeviceProperties_v2", "cudaGetDeviceProperties"}) {
    if (props_ == nullptr) props_ = reinterpret_cast<PropsFn>(dlsym(lib, n));
  }
}

std::string CudaRuntime::device_name() {
  int dev = 0;
  ok(get_device_(&dev), "cudaGetDevice");
  std::string name;
  if (props_ != nullptr) {
    // cudaDeviceProp is about 1 KiB; the buffer leaves room for later versions.
    std::vector<char> prop(16384, 0);
    if (props_(prop.data(), dev) == 0) name.assign(prop.data(), strnlen(prop.data(), 256));
  }
  return (name.empty() ? "CUDA device" : name) + " (device " + std::to_string(dev) + ")";
}

void CudaRuntime::ok(int status, const char* what) {
  if (status != 0) {
    throw Failure(std::string(what) + " failed: " + error_string_(status) + " (cudaError " +
                  std::to_string(status) + ")");
  }
}

void* CudaRuntime::malloc(uint64_t bytes) {
  void* p = nullptr;
  ok(malloc_(&p, static_cast<std::size_t>(bytes)),
     ("cudaMalloc of " + std::to_string(bytes) + " bytes").c_str());
  return p;
}

void CudaRuntime::free(void* ptr) noexcept {
  if (ptr != nullptr) free_(ptr);
}

void CudaRuntime::to_device(void* dst, const void* src, uint64_t bytes) {
  ok(memcpy_(dst, src, static_cast<std::size_t>(bytes), kHostToDevice), "cudaMemcpy to device");
}

void CudaRuntime::to_host(void* dst, const void* src, uint64_t bytes) {
  ok(memcpy_(dst, src, static_cast<std::size_t>(bytes), kDeviceToHost), "cudaMemcpy to host");
}

void CudaRuntime::synchronize() { ok(sync_(), "cudaDeviceSynchronize"); }

}  // namespace psa_cli

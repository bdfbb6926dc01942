// cli/cuda_runtime.h -- the few CUDA runtime calls the CLI needs for device buffers,
// loaded with dlopen at run time: libpsa links cudart statically and exposes no
// allocator, and the CLI must build and run without the CUDA toolkit.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace psa_cli {

class CudaRuntime {
 public:
  // The process-wide instance; loads libcudart.so.13, .so.12 or .so on first use and
  // throws Failure naming what was tried when none loads or a symbol is missing.
  static CudaRuntime& get();

  void* malloc(uint64_t bytes);  // throws Failure with cudaGetErrorString
  void free(void* ptr) noexcept;
  void to_device(void* dst, const void* src, uint64_t bytes);
  void to_host(void* dst, const void* src, uint64_t bytes);
  void synchronize();  // cudaDeviceSynchronize
  // "NVIDIA H100 80GB HBM3 (device 0)": the current device's name (cudaGetDeviceProperties).
  std::string device_name();

 private:
  CudaRuntime();
  void ok(int status, const char* what);

  using MallocFn = int (*)(void**, std::size_t);
  using FreeFn = int (*)(void*);
  using MemcpyFn = int (*)(void*, const void*, std::size_t, int);
  using SyncFn = int (*)();
  using ErrorStringFn = const char* (*)(int);
  MallocFn malloc_ = nullptr;
  FreeFn free_ = nullptr;
  MemcpyFn memcpy_ = nullptr;
  SyncFn sync_ = nullptr;
  ErrorStringFn error_string_ = nullptr;
  using GetDeviceFn = int (*)(int*);
  using PropsFn = int (*)(void*, int);
  GetDeviceFn get_device_ = nullptr;
  PropsFn props_ = nullptr;  // optional: cudaGetDeviceProperties(_v2)
};

}  // namespace psa_cli

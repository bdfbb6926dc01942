// tests/cuda/cuda_test_util.h -- helpers shared by the GPU tests: skip without a device,
// device buffers, the timing tests' clock; the host tensors and error metrics of
// common/tensor16.h. Test-only; every test that touches the GPU starts with PSA_REQUIRE_GPU().
#pragma once
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "common/tensor16.h"
#include "core/half.h"
#include "psa.h"

#define PSA_REQUIRE_GPU()                                                        \
  do {                                                                           \
    int psa_n_dev_ = 0;                                                          \
    if (cudaGetDeviceCount(&psa_n_dev_) != cudaSuccess || psa_n_dev_ == 0) {     \
      (void)cudaGetLastError();                                                  \
      GTEST_SKIP() << "no CUDA device";                                          \
    }                                                                            \
  } while (0)

#define PSA_CUDA_OK(call) ASSERT_EQ(cudaSuccess, (call)) << cudaGetErrorString(cudaGetLastError())
#define PSA_OK_MSG(call) ASSERT_EQ(PSA_OK, (call)) << psa_last_error_message()

namespace psa {
namespace test {

template <typename T>
class DevBuf {
 public:
  DevBuf() = default;
  explicit DevBuf(size_t n) { alloc(n); }
  explicit DevBuf(const std::vector<T>& host) {
    alloc(host.size());
    upload(host);
  }
  ~DevBuf() {
    if (p_) cudaFree(p_);
  }
  DevBuf(const DevBuf&) = delete;
  DevBuf& operator=(const DevBuf&) = delete;
  void alloc(size_t n) {
    if (p_) cudaFree(p_);
    n_ = n;
    p_ = nullptr;
    if (n > 0) cudaMalloc(reinterpret_cast<void**>(&p_), n * sizeof(T));
  }
  void upload(const std::vector<T>& host) {
    cudaMemcpy(p_, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice);
  }
  std::vector<T> download() const {
    std::vector<T> h(n_);
    cudaDeviceSynchronize();
    if (n_) cudaMemcpy(h.data(), p_, n_ * sizeof(T), cudaMemcpyDeviceToHost);
    return h;
  }
  // Fills every byte with `byte` (poison before a kernel that must write everything).
  void fill_bytes(int byte) {
    if (n_) cudaMemset(p_, byte, n_ * sizeof(T));
  }
  T* get() const { return p_; }
  size_t size() const { return n_; }

 private:
  T* p_ = nullptr;
  size_t n_ = 0;
};


// Median over `reps` timed calls of fn() on the default stream (CUDA events), after `warmups`
// untimed ones: the timing tests' clock.
template <typename Fn>
float median_ms(Fn&& fn, int reps, int warmups = 1) {
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  for (int w = 0; w < warmups; ++w) fn();
  std::vector<float> ms;
  for (int r = 0; r < reps; ++r) {
    cudaEventRecord(e0, nullptr);
    fn();
    cudaEventRecord(e1, nullptr);
    cudaEventSynchronize(e1);
    float m = 0;
    cudaEventElapsedTime(&m, e0, e1);
    ms.push_back(m);
  }
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

// Timing tests' shape filter: true when the environment variable `env` is unset or its
// comma-separated list names `shape` (e.g. PSA_IMPORTANCE_SHAPES=wan14,wan14/bn64 under a
// profiler).
inline bool shape_selected(const char* env, const char* shape) {
  const char* only = std::getenv(env);
  return only == nullptr || (std::string(",") + only + ",").find(std::string(",") + shape + ",") != std::string::npos;
}

}  // namespace test
}  // namespace psa

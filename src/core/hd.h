// core/hd.h -- PSA_HD marks the small inline functions that define a stage's meaning once
// for both backends: __host__ __device__ under nvcc, plain inline under a host compiler.
#pragma once
#if defined(__CUDACC__)
#define PSA_HD __host__ __device__ __forceinline__
#else
#define PSA_HD inline
#endif

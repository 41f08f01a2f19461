#pragma once
// Library status codes become strata::Error naming the call and the status string.
// Internal to backends/cuda.
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include "strata/core/error.h"

namespace strata::backends::cuda {

[[noreturn]] void throw_cuda(cudaError_t e, const char* call, const char* file, int line);
[[noreturn]] void throw_cudnn(cudnnStatus_t s, const char* call, const char* file, int line);
[[noreturn]] void throw_cublas(cublasStatus_t s, const char* call, const char* file, int line);

}  // namespace strata::backends::cuda

#define STRATA_CUDA_CHECK(call)                                                       \
  do {                                                                                \
    const cudaError_t strata_e_ = (call);                                             \
    if (strata_e_ != cudaSuccess) [[unlikely]]                                        \
      ::strata::backends::cuda::throw_cuda(strata_e_, #call, __FILE__, __LINE__);     \
  } while (0)

#define STRATA_CUDNN_CHECK(call)                                                      \
  do {                                                                                \
    const cudnnStatus_t strata_s_ = (call);                                           \
    if (strata_s_ != CUDNN_STATUS_SUCCESS) [[unlikely]]                               \
      ::strata::backends::cuda::throw_cudnn(strata_s_, #call, __FILE__, __LINE__);    \
  } while (0)

#define STRATA_CUBLAS_CHECK(call)                                                     \
  do {                                                                                \
    const cublasStatus_t strata_s_ = (call);                                          \
    if (strata_s_ != CUBLAS_STATUS_SUCCESS) [[unlikely]]                              \
      ::strata::backends::cuda::throw_cublas(strata_s_, #call, __FILE__, __LINE__);   \
  } while (0)

// After a kernel launch: launch-configuration errors surface here, not at the next
// unrelated call.
#define STRATA_CUDA_CHECK_LAUNCH(what)                                                \
  do {                                                                                \
    const cudaError_t strata_e_ = cudaGetLastError();                                 \
    if (strata_e_ != cudaSuccess) [[unlikely]]                                        \
      ::strata::backends::cuda::throw_cuda(strata_e_, "launch of " what, __FILE__, __LINE__); \
  } while (0)

// Error checking of CUDA runtime calls in the core: every failure becomes an iognn::DeviceError
// naming the call and the runtime's description, never an exit or an ignored status.
#pragma once

#include <cuda_runtime_api.h>

#include "core/error.h"

// IOGNN_CUDA_CHECK(call): evaluate a cudaError_t-returning call, throw DeviceError unless it succeeded.
#define IOGNN_CUDA_CHECK(call)                                                                   \
  do {                                                                                          \
    const cudaError_t iognn_status_ = (call);                                                    \
    if (iognn_status_ != cudaSuccess)                                                            \
      throw ::iognn::DeviceError(::iognn::detail::concat(#call, " failed: ",                    \
                                                         cudaGetErrorString(iognn_status_),     \
                                                         " (", __FILE__, ":", __LINE__, ")"));  \
  } while (0)

// IOGNN_CUDA_CHECK_LAUNCH(name): after a <<<...>>> launch, report a bad configuration or an earlier
// asynchronous failure under the kernel's name.
#define IOGNN_CUDA_CHECK_LAUNCH(name)                                                            \
  do {                                                                                          \
    const cudaError_t iognn_status_ = cudaGetLastError();                                        \
    if (iognn_status_ != cudaSuccess)                                                            \
      throw ::iognn::DeviceError(::iognn::detail::concat("launch of ", name, " failed: ",       \
                                                         cudaGetErrorString(iognn_status_),     \
                                                         " (", __FILE__, ":", __LINE__, ")"));  \
  } while (0)

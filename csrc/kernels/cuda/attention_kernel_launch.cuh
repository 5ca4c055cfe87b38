// The one place the attention kernels are launched from: every launch of attention_launch.cuh
// goes through launch_kernel, which queues the kernel on `stream` with kThreads threads per
// block and turns a launch failure into a DeviceError naming the kernel.
#pragma once

#include <cuda_runtime.h>

#include "core/cuda_check.h"

namespace iognn::cuda::attention_detail {

template <typename... Params, typename... Args>
void launch_kernel(const char* name, void (*kernel)(Params...), dim3 grid, int threads,
                   cudaStream_t stream, const Args&... args) {
  kernel<<<grid, threads, 0, stream>>>(args...);
  IOGNN_CUDA_CHECK_LAUNCH(name);
}

}  // namespace iognn::cuda::attention_detail

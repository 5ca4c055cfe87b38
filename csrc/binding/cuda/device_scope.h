// The Scope of every CUDA backend of a binding (<family>_ops.h): a guard of the inputs' device and
// that device's current stream, held for one op call.
#pragma once

#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

namespace iognn::torch_ext {

struct DeviceScope {
  explicit DeviceScope(const at::Tensor& ref)
      : ref(ref), guard(ref.device()), stream(at::cuda::getCurrentCUDAStream().stream()) {}
  const at::Tensor& ref;  // the call's reference input (its device, its options for scratch)
  c10::cuda::CUDAGuard guard;
  cudaStream_t stream;  // read after the guard is set: the current stream of ref's device
};

}  // namespace iognn::torch_ext

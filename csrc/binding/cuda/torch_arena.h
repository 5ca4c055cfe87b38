// The CUDA samplers' device memory (kernels/cuda/neighbor_sample.h's DeviceArena) for the sampler
// bindings (binding/sampler.cpp, binding/hetero_sampler.cpp): blocks of PyTorch's caching
// allocator on the current stream; the output tensors are views of the blocks that hold them.
#pragma once

#include <ATen/ATen.h>

#include <cstddef>
#include <cstdint>
#include <unordered_map>
#include <utility>

#include "kernels/cuda/neighbor_sample.h"

namespace iognn::torch_ext {

class TorchArena final : public cuda::DeviceArena {
 public:
  explicit TorchArena(const at::Tensor& ref) : options_(ref.options().dtype(at::kByte)) {}
  void* allocate(size_t bytes) override {
    at::Tensor block = at::empty({int64_t(bytes)}, options_);
    void* ptr = block.data_ptr();
    blocks_.emplace(ptr, std::move(block));
    return ptr;
  }
  void release(void* block) override { blocks_.erase(block); }
  // The first `count` entries of the block at ptr, as a 1-D tensor of `like`'s dtype.
  at::Tensor tensor(void* ptr, int64_t count, const at::Tensor& like) const {
    if (count == 0) return at::empty({0}, like.options());
    return blocks_.at(ptr).view(like.scalar_type()).narrow(0, 0, count);
  }

 private:
  at::TensorOptions options_;
  std::unordered_map<void*, at::Tensor> blocks_;
};

}  // namespace iognn::torch_ext

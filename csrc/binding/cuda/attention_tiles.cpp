// The tile path of the attention (Transformer, GAT, GATv2) on CUDA tensors (schemas:
// binding/attention_tiles.cpp; op bodies: binding/attention_tiles_ops.h; kernels:
// kernels/cuda/attention_tiles.h), on the current stream under a guard of the inputs' device.
// Tensor Cores take fp32 (as TF32), fp16 and bf16 heads of at most kTileAttentionMaxChannels
// channels; fp64 and wider heads stay on the CSR kernels (the Python chooser never sends them).
#include <torch/library.h>

#include <type_traits>

#include "binding/attention_tiles_ops.h"
#include "binding/cuda/device_scope.h"
#include "kernels/cuda/attention_tiles.h"

namespace iognn::torch_ext {
namespace {

template <typename T>
void check_runs_on_tensor_cores(const char* op, int64_t channels) {
  TORCH_CHECK_NOT_IMPLEMENTED((!std::is_same_v<T, double>), op,
                              ": float64 heads have no Tensor Core path on CUDA (use the CSR "
                              "path)");
  TORCH_CHECK_NOT_IMPLEMENTED(channels <= cuda::kTileAttentionMaxChannels, op, ": heads of ",
                              channels, " channels are wider than the tile kernels' ",
                              cuda::kTileAttentionMaxChannels, " (use the CSR path)");
}

// Every variant's arguments (kernels/attention_tiles_types.h) go to their kernels' overload; op
// names the op in the messages.
struct CudaAttentionTiles {
  using Scope = DeviceScope;
  template <typename T, typename I, class Args>
  static void forward(const Scope& s, const Args& a, const char* op) {
    check_runs_on_tensor_cores<T>(op, a.channels);
    if constexpr (!std::is_same_v<T, double>)
      translate_errors([&] { cuda::tiles_forward(a, s.stream); });
  }
  template <typename T, typename I, class Args>
  static void backward(const Scope& s, const Args& a, const char* op) {
    check_runs_on_tensor_cores<T>(op, a.channels);
    if constexpr (!std::is_same_v<T, double>)
      translate_errors([&] { cuda::tiles_backward(a, s.stream); });
  }
};

}  // namespace

TORCH_LIBRARY_IMPL(iognn, CUDA, m) {
  attention_tiles::register_attention_tiles<CudaAttentionTiles>(m);
}

}  // namespace iognn::torch_ext

// The attention ops (schemas and op bodies: binding/attention.cpp, binding/attention_ops.h) on
// CUDA tensors: the device kernels of kernels/cuda/attention.h on the current stream of the
// inputs' device, with scratch from PyTorch's caching allocator; nothing synchronises, so the ops
// can be captured in a CUDA graph.
#include <ATen/ATen.h>
#include <torch/library.h>

#include <tuple>
#include <type_traits>

#include "binding/attention_ops.h"
#include "binding/cuda/device_scope.h"
#include "kernels/cuda/attention.h"

namespace iognn::torch_ext {
namespace {

using namespace attention;

// The device kernels: each asks its workspace size, takes that much scratch on the inputs' device
// (stream-ordered, back to the cache afterwards) and runs.
struct CudaAttention {
  using Scope = DeviceScope;

  // The kernels of the variant whose inputs are Inputs: (forward workspace bytes, forward,
  // backward workspace bytes, backward).
  template <typename T, typename I, class Inputs>
  static constexpr auto kernels() {
    if constexpr (std::is_same_v<Inputs, GatInputs<T>>)
      return std::make_tuple(&cuda::gat_forward_workspace_bytes<T, I>, &cuda::gat_forward<T, I>,
                             &cuda::gat_backward_workspace_bytes<T, I>, &cuda::gat_backward<T, I>);
    else if constexpr (std::is_same_v<Inputs, GatV2Inputs<T>>)
      return std::make_tuple(&cuda::gatv2_forward_workspace_bytes<T, I>, &cuda::gatv2_forward<T, I>,
                             &cuda::gatv2_backward_workspace_bytes<T, I>,
                             &cuda::gatv2_backward<T, I>);
    else
      return std::make_tuple(&cuda::transformer_forward_workspace_bytes<T, I>,
                             &cuda::transformer_forward<T, I>,
                             &cuda::transformer_backward_workspace_bytes<T, I>,
                             &cuda::transformer_backward<T, I>);
  }

  // run(workspace, n, stream) with a workspace of n = bytes() bytes (core errors of either
  // translated into Python's).
  template <typename Bytes, typename Run>
  static void with_workspace(const Scope& scope, Bytes&& bytes, Run&& run) {
    translate_errors([&] {
      const size_t n = bytes();
      const Tensor ws = at::empty({int64_t(n)}, scope.ref.options().dtype(at::kByte));
      run(ws.data_ptr(), n, scope.stream);
    });
  }

  template <typename T, typename I, class Inputs>
  static void forward(const Scope& s, const AttentionGraph<I>& g, const AttentionConfig& cfg,
                      int64_t edge_dim, const Inputs& in, const AttentionOutputs<T>& out) {
    constexpr auto k = kernels<T, I, Inputs>();
    with_workspace(
        s, [&] { return std::get<0>(k)(g, cfg, edge_dim); },
        [&](void* ws, size_t n, cudaStream_t st) { std::get<1>(k)(g, cfg, in, out, ws, n, st); });
  }

  template <typename T, typename I, class Inputs>
  static void backward(const Scope& s, const AttentionGraph<I>& g, const AttentionConfig& cfg,
                       int64_t edge_dim, const Inputs& in, const acc_t<T>* lse,
                       const T* grad_out, const T* grad_alpha,
                       const typename Inputs::Grads& grads) {
    constexpr auto k = kernels<T, I, Inputs>();
    with_workspace(
        s, [&] { return std::get<2>(k)(g, cfg, edge_dim); },
        [&](void* ws, size_t n, cudaStream_t st) {
          std::get<3>(k)(g, cfg, in, lse, grad_out, grad_alpha, grads, ws, n, st);
        });
  }
};

}  // namespace

TORCH_LIBRARY_IMPL(iognn, CUDA, m) { attention::register_attention<CudaAttention>(m); }

}  // namespace iognn::torch_ext

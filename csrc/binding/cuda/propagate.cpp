// iognn::propagate family on CUDA tensors (schemas: binding/propagate.cpp; op bodies:
// binding/propagate_ops.h). The two gathers and the sampled dense-dense product run on the shared
// CSR schedule (kernels/cuda/propagate.h) on the current stream under a guard of the inputs'
// device. Nothing synchronises, nothing is cached between calls, and the heavy-row workspace comes
// from PyTorch's caching allocator (none when the degree hint rules heavy rows out), so every
// call is capturable.
#include <ATen/ATen.h>
#include <torch/library.h>

#include "binding/cuda/device_scope.h"
#include "binding/propagate_ops.h"
#include "binding/propagate_tiles_ops.h"
#include "kernels/cuda/propagate.h"
#include "kernels/cuda/propagate_tiles.h"

namespace iognn::torch_ext {
namespace {

using namespace propagate;

struct CudaPropagate {
  using Scope = DeviceScope;

  // run(workspace, bytes) with `bytes` of scratch on the call's device (null for none).
  template <typename Run>
  static void with_workspace(const Scope& scope, size_t bytes, Run&& run) {
    const at::Tensor ws =
        bytes ? at::empty({int64_t(bytes)}, scope.ref.options().dtype(at::kByte)) : at::Tensor();
    translate_errors([&] { run(bytes ? ws.data_ptr() : nullptr, bytes); });
  }

  template <typename T, typename I>
  static void forward(const Scope& s, const ForwardArgs<T, I>& a) {
    const size_t bytes =
        cuda::propagate_gather_workspace<T>(a.num_dst, a.num_edges, a.max_degree, a.F);
    with_workspace(s, bytes, [&](void* ws, size_t n) {
      cuda::propagate_forward<T, I>(a.rowptr, a.col, a.weight, a.x, a.x_stride, a.num_dst,
                                    a.num_edges, a.max_degree, a.F, a.reduce, a.bias, a.out, ws,
                                    n, s.stream);
    });
  }
  template <typename T, typename I>
  static void backward_x(const Scope& s, const BackwardXArgs<T, I>& a) {
    const size_t bytes =
        cuda::propagate_gather_workspace<T>(a.num_src, a.num_edges, a.max_degree, a.F);
    with_workspace(s, bytes, [&](void* ws, size_t n) {
      cuda::propagate_backward_x<T, I>(a.colptr, a.row, a.csc2csr, a.rowptr, a.weight,
                                       a.grad_out, a.num_src, a.num_edges, a.max_degree, a.F,
                                       a.reduce, a.grad_x, ws, n, s.stream);
    });
  }
  template <typename T, typename I>
  static void backward_weight(const Scope& s, const BackwardWeightArgs<T, I>& a) {
    const size_t bytes = cuda::propagate_sddmm_workspace<T>(a.num_dst, a.num_edges, a.max_degree);
    with_workspace(s, bytes, [&](void* ws, size_t n) {
      cuda::propagate_backward_weight<T, I>(a.rowptr, a.col, a.grad_out, a.x, a.x_stride,
                                            a.num_dst, a.num_edges, a.max_degree, a.F, a.reduce,
                                            a.grad_w, ws, n, s.stream);
    });
  }
  template <typename acc, typename I>
  static void tile_values(const Scope& s, const TileValuesArgs<acc, I>& a) {
    translate_errors([&] {
      cuda::tile_values<acc, I>(a.ptr, a.edge_slot, a.weight, a.perm, a.target, a.deg_ptr,
                                a.num_rows, a.vals, s.stream);
    });
  }
  // Tensor Cores take fp32 (as TF32), fp16 and bf16; fp64 stays on the CSR kernels.
  template <typename T, typename I>
  static void tile_spmm(const Scope& s, const TileSpmmArgs<T, I>& a) {
    if constexpr (std::is_same_v<T, double>) {
      TORCH_CHECK_NOT_IMPLEMENTED(false, "iognn::propagate_tiles: float64 features have no "
                                         "Tensor Core path on CUDA (use the CSR path)");
    } else {
      translate_errors([&] {
        cuda::tile_spmm<T, I>(a.window_ptr, a.tile_cols, a.row_order, a.vals, a.x, a.x_stride,
                              a.num_rows, a.F, a.bias, a.out, s.stream);
      });
    }
  }
};

}  // namespace

TORCH_LIBRARY_IMPL(iognn, CUDA, m) {
  propagate::register_propagate<CudaPropagate>(m);
  propagate::register_propagate_tiles<CudaPropagate>(m);
}

}  // namespace iognn::torch_ext

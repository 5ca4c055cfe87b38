// iognn::segment_reduce / segment_reduce_backward on CUDA tensors (schemas:
// binding/segment_reduce.cpp; op bodies: binding/segment_reduce_ops.h). Kernels run on the
// current stream of x's device; the heavy-row workspace comes from the caching allocator (none
// when the degree hint rules heavy rows out); nothing synchronises.
#include <ATen/ATen.h>
#include <torch/library.h>

#include "binding/cuda/device_scope.h"
#include "binding/segment_reduce_ops.h"
#include "kernels/cuda/segment_reduce.h"

namespace iognn::torch_ext {
namespace {

using namespace segment_reduce;

struct CudaSegmentReduce {
  using Scope = DeviceScope;

  // Scratch bytes on the call's device (256-byte aligned: the allocator hands out whole blocks).
  static at::Tensor workspace(const Scope& s, size_t bytes) {
    return at::empty({int64_t(bytes)}, s.ref.options().dtype(at::kByte));
  }

  template <typename T, typename I>
  static void forward(const Scope& s, const ForwardArgs<T, I>& a) {
    const at::Tensor ws = workspace(
        s, cuda::segment_reduce_forward_workspace<T>(a.num_dst, a.num_edges, a.max_degree, a.F));
    translate_errors([&] {
      cuda::segment_reduce_forward<T, I>(a.rowptr, a.col, a.x, a.x_stride, a.num_dst, a.num_edges,
                                         a.max_degree, a.F, a.reduces, a.out, a.ties, a.mean,
                                         a.scales, ws.data_ptr(), size_t(ws.numel()), s.stream);
    });
  }
  template <typename T>
  static void fold_scales(const Scope& s, const T* grad_out, const T* scale, int64_t num_dst,
                          int64_t S, int64_t KF, T* folded) {
    translate_errors([&] {
      cuda::segment_reduce_fold_scales<T>(grad_out, scale, num_dst, S, KF, folded, s.stream);
    });
  }
  template <typename T, typename I>
  static void backward(const Scope& s, const BackwardArgs<T, I>& a) {
    const at::Tensor ws =
        workspace(s, cuda::segment_reduce_backward_workspace<T>(
                         a.num_src, a.num_dst, a.num_edges, a.max_degree, a.F, a.reduces));
    translate_errors([&] {
      cuda::segment_reduce_backward<T, I>(
          a.colptr, a.row, a.csc2csr, a.rowptr, a.x, a.x_stride, a.out, a.ties, a.mean,
          a.mean_stride, a.grad_out, a.num_src, a.num_dst, a.num_edges, a.max_degree, a.F,
          a.reduces, a.grad_x, ws.data_ptr(), size_t(ws.numel()), s.stream);
    });
  }
};

}  // namespace

TORCH_LIBRARY_IMPL(iognn, CUDA, m) {
  segment_reduce::register_segment_reduce<CudaSegmentReduce>(m);
}

}  // namespace iognn::torch_ext

// iognn::segment_reduce / segment_reduce_backward on CUDA tensors (schemas: ../segment_reduce.cpp).
//
// Same checks and outputs as the CPU implementation (segment_reduce_checks.h). Kernels run on the
// current stream of x's device; the heavy-row workspace and the folded gradient of a scaled
// forward come from the caching allocator; nothing synchronises with the host.
#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "binding/segment_reduce_checks.h"
#include "binding/utils.h"
#include "kernels/cuda/segment_reduce.h"

namespace iognn::torch_ext {
namespace {

// Scratch bytes on x's device (256-byte aligned: the allocator hands out whole blocks).
at::Tensor workspace_like(size_t bytes, const at::Tensor& x) {
  return at::empty({int64_t(bytes)}, x.options().dtype(at::kByte));
}

SegmentReduceOutputs segment_reduce_cuda(const at::Tensor& rowptr, const at::Tensor& col,
                                         const at::Tensor& colptr, const at::Tensor& row,
                                         const at::Tensor& csc2csr, const at::Tensor& x_in,
                                         std::vector<std::string> reduce_names,
                                         const std::optional<at::Tensor>& scale_in,
                                         int64_t max_in_degree, int64_t) {
  constexpr const char* op = "iognn::segment_reduce";
  const SegmentReduceCall call =
      check_segment_reduce(op, rowptr, col, colptr, row, csc2csr, x_in, reduce_names, scale_in);
  const c10::cuda::CUDAGuard guard(x_in.device());
  const at::Tensor x = last_dim_contiguous(x_in);
  const at::Tensor scale = contiguous_scale(call, scale_in);
  auto [out, ties, wide, mean, plain] = empty_segment_reduce_outputs(call, x);
  if (out.numel() == 0) return {out, ties, wide, mean, plain};
  const int64_t num_edges = col.numel();
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  dispatch_float(x.scalar_type(), op, [&](auto ft) {
    using T = typename decltype(ft)::type;
    const at::Tensor ws = workspace_like(
        cuda::segment_reduce_forward_workspace<T>(call.num_dst, num_edges, max_in_degree, call.F),
        x);
    dispatch_index(rowptr.scalar_type(), op, [&](auto it) {
      using I = typename decltype(it)::type;
      translate_errors([&] {
        cuda::segment_reduce_forward<T, I>(
            cptr<I>(rowptr), cptr<I>(col), cptr<T>(x), x.stride(0), call.num_dst, num_edges,
            max_in_degree, call.F, call.reduces, ptr<T>(out), tie_arrays(call, ties, wide),
            call.want_mean ? ptr<acc_t<T>>(mean) : nullptr, degree_scales<T>(scale, plain),
            ws.data_ptr(), size_t(ws.numel()), stream);
      });
    });
  });
  return {out, ties, wide, mean, plain};
}

at::Tensor segment_reduce_backward_cuda(const at::Tensor& colptr, const at::Tensor& row,
                                        const at::Tensor& csc2csr, const at::Tensor& rowptr,
                                        const at::Tensor& x_in, const at::Tensor& out_in,
                                        const at::Tensor& ties_in, const at::Tensor& wide_in,
                                        const at::Tensor& mean_in, const at::Tensor& grad_out_in,
                                        std::vector<std::string> reduce_names,
                                        const std::optional<at::Tensor>& scale,
                                        int64_t max_out_degree) {
  constexpr const char* op = "iognn::segment_reduce_backward";
  const SegmentReduceCall call =
      check_segment_reduce_backward(op, colptr, row, csc2csr, rowptr, x_in, out_in, ties_in,
                                    wide_in, mean_in, grad_out_in, reduce_names, scale);
  const c10::cuda::CUDAGuard guard(x_in.device());
  SegmentReduceBackwardOperands t = segment_reduce_backward_operands(
      call, x_in, out_in, ties_in, wide_in, mean_in, grad_out_in, scale);
  if (t.grad_x.numel() == 0) return t.grad_x;
  const int64_t num_edges = row.numel();
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  dispatch_float(t.x.scalar_type(), op, [&](auto ft) {
    using T = typename decltype(ft)::type;
    if (t.scale.defined()) {  // the gradient of the plain results
      at::Tensor folded = at::empty({call.num_dst, call.K * call.F}, t.x.options());
      translate_errors([&] {
        cuda::segment_reduce_fold_scales<T>(cptr<T>(t.grad_out), cptr<T>(t.scale), call.num_dst,
                                            call.S, call.K * call.F, ptr<T>(folded), stream);
      });
      t.grad_out = folded;
    }
    const at::Tensor ws = workspace_like(
        cuda::segment_reduce_backward_workspace<T>(call.num_src, call.num_dst, num_edges,
                                                   max_out_degree, call.F, call.reduces),
        t.x);
    const auto [mean, mean_stride] = t.mean_rows<T>(call);
    dispatch_index(rowptr.scalar_type(), op, [&](auto it) {
      using I = typename decltype(it)::type;
      translate_errors([&] {
        cuda::segment_reduce_backward<T, I>(
            cptr<I>(colptr), cptr<I>(row), cptr<I>(csc2csr), cptr<I>(rowptr), cptr<T>(t.x),
            t.x.stride(0), cptr<T>(t.out), tie_view(call, t.ties, t.wide), mean, mean_stride,
            cptr<T>(t.grad_out), call.num_src, call.num_dst, num_edges, max_out_degree, call.F,
            call.reduces,
            ptr<T>(t.grad_x), ws.data_ptr(), size_t(ws.numel()), stream);
      });
    });
  });
  return t.grad_x;
}

}  // namespace

TORCH_LIBRARY_IMPL(iognn, CUDA, m) {
  m.impl("segment_reduce", &segment_reduce_cuda);
  m.impl("segment_reduce_backward", &segment_reduce_backward_cuda);
}

}  // namespace iognn::torch_ext

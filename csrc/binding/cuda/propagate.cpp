// iognn::propagate family, CUDA implementations (schemas and host twins: binding/propagate.cpp).
//
// The two gathers (forward over the CSR, backward_x over the transposed CSR) and the sampled
// dense-dense product of backward_weight run on the shared CSR schedule (kernels/cuda/propagate.h)
// on the current stream under a guard of the inputs' device. Nothing synchronises, nothing is
// cached between calls, and the heavy-row workspace comes from PyTorch's caching allocator (none
// when the caller's max-degree hint rules heavy rows out), so every call is capturable.
#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include <cstdint>

#include "binding/propagate_checks.h"
#include "binding/utils.h"
#include "kernels/cuda/propagate.h"

namespace iognn::torch_ext {
namespace {

// Scratch bytes on `like`'s device (256-byte aligned: the allocator hands out whole blocks), or
// an undefined tensor for none.
at::Tensor workspace_like(size_t bytes, const at::Tensor& like) {
  return bytes ? at::empty({int64_t(bytes)}, like.options().dtype(at::kByte)) : at::Tensor();
}

void* data_or_null(const at::Tensor& t) { return t.defined() ? t.data_ptr() : nullptr; }
size_t bytes_of(const at::Tensor& t) { return t.defined() ? size_t(t.numel()) : 0; }

at::Tensor propagate_cuda(const at::Tensor& rowptr, const at::Tensor& col, const at::Tensor& colptr,
                          const at::Tensor& row, const at::Tensor& csc2csr,
                          const std::optional<at::Tensor>& weight_in, const at::Tensor& x_in,
                          c10::string_view reduce, const std::optional<at::Tensor>& bias_in,
                          int64_t max_in_degree, int64_t) {
  constexpr const char* op = "iognn::propagate";
  const auto red = parse_reduce(reduce, op);
  check_propagate_args(op, rowptr, col, colptr, weight_in, x_in, bias_in);
  const c10::cuda::CUDAGuard guard(x_in.device());
  const at::Tensor x = last_dim_contiguous(x_in);
  const int64_t num_dst = rowptr.numel() - 1, F = x.size(1);
  at::Tensor out = at::empty({num_dst, F}, x.options());
  dispatch_float(x.scalar_type(), op, [&](auto ft) {
    using T = typename decltype(ft)::type;
    if (out.numel() == 0) return;
    const int64_t E = col.numel();
    const at::Tensor ws = workspace_like(
        iognn::cuda::propagate_gather_workspace<T>(num_dst, E, max_in_degree, F), x);
    const at::Tensor weight = weight_in ? weight_in->contiguous() : at::Tensor();
    const at::Tensor bias = bias_in ? bias_in->contiguous() : at::Tensor();
    const cudaStream_t stream = at::cuda::getCurrentCUDAStream().stream();
    dispatch_index(rowptr.scalar_type(), op, [&](auto it) {
      using I = typename decltype(it)::type;
      translate_errors([&] {
        iognn::cuda::propagate_forward<T, I>(
            cptr<I>(rowptr), cptr<I>(col), weight.defined() ? cptr<acc_t<T>>(weight) : nullptr,
            cptr<T>(x), x.stride(0), num_dst, E, max_in_degree, F, red,
            bias.defined() ? cptr<T>(bias) : nullptr, ptr<T>(out), data_or_null(ws), bytes_of(ws),
            stream);
      });
    });
  });
  return out;
}

at::Tensor propagate_backward_x_cuda(const at::Tensor& colptr, const at::Tensor& row,
                                     const at::Tensor& csc2csr, const at::Tensor& rowptr,
                                     const std::optional<at::Tensor>& weight_in,
                                     const at::Tensor& grad_out_in, c10::string_view reduce,
                                     int64_t max_out_degree) {
  constexpr const char* op = "iognn::propagate_backward_x";
  const auto red = parse_reduce(reduce, op);
  check_backward_x_args(op, colptr, row, csc2csr, rowptr, weight_in, grad_out_in);
  const c10::cuda::CUDAGuard guard(grad_out_in.device());
  const at::Tensor grad_out = grad_out_in.contiguous();
  const int64_t num_src = colptr.numel() - 1, F = grad_out.size(1);
  at::Tensor grad_x = at::empty({num_src, F}, grad_out.options());
  dispatch_float(grad_out.scalar_type(), op, [&](auto ft) {
    using T = typename decltype(ft)::type;
    if (grad_x.numel() == 0) return;
    const int64_t E = row.numel();
    const at::Tensor ws = workspace_like(
        iognn::cuda::propagate_gather_workspace<T>(num_src, E, max_out_degree, F), grad_out);
    const at::Tensor weight = weight_in ? weight_in->contiguous() : at::Tensor();
    const cudaStream_t stream = at::cuda::getCurrentCUDAStream().stream();
    dispatch_index(colptr.scalar_type(), op, [&](auto it) {
      using I = typename decltype(it)::type;
      translate_errors([&] {
        iognn::cuda::propagate_backward_x<T, I>(
            cptr<I>(colptr), cptr<I>(row), cptr<I>(csc2csr), cptr<I>(rowptr),
            weight.defined() ? cptr<acc_t<T>>(weight) : nullptr, cptr<T>(grad_out), num_src, E,
            max_out_degree, F, red, ptr<T>(grad_x), data_or_null(ws), bytes_of(ws), stream);
      });
    });
  });
  return grad_x;
}

at::Tensor propagate_backward_weight_cuda(const at::Tensor& rowptr, const at::Tensor& col,
                                          const at::Tensor& grad_out_in, const at::Tensor& x_in,
                                          c10::string_view reduce, int64_t max_in_degree) {
  constexpr const char* op = "iognn::propagate_backward_weight";
  const auto red = parse_reduce(reduce, op);
  check_backward_weight_args(op, rowptr, col, grad_out_in, x_in);
  const c10::cuda::CUDAGuard guard(x_in.device());
  const at::Tensor grad_out = grad_out_in.contiguous();
  const at::Tensor x = last_dim_contiguous(x_in);
  const int64_t num_dst = rowptr.numel() - 1, F = x.size(1);
  at::Tensor grad_w = at::empty({col.numel()}, x.options().dtype(acc_dtype(x.scalar_type())));
  dispatch_float(x.scalar_type(), op, [&](auto ft) {
    using T = typename decltype(ft)::type;
    if (grad_w.numel() == 0) return;
    if (F == 0) {  // every product is empty
      grad_w.zero_();
      return;
    }
    const int64_t E = col.numel();
    const at::Tensor ws = workspace_like(
        iognn::cuda::propagate_sddmm_workspace<T>(num_dst, E, max_in_degree), x);
    const cudaStream_t stream = at::cuda::getCurrentCUDAStream().stream();
    dispatch_index(rowptr.scalar_type(), op, [&](auto it) {
      using I = typename decltype(it)::type;
      translate_errors([&] {
        iognn::cuda::propagate_backward_weight<T, I>(
            cptr<I>(rowptr), cptr<I>(col), cptr<T>(grad_out), cptr<T>(x), x.stride(0), num_dst, E,
            max_in_degree, F, red, ptr<acc_t<T>>(grad_w), data_or_null(ws), bytes_of(ws),
            stream);
      });
    });
  });
  return grad_w;
}

}  // namespace

TORCH_LIBRARY_IMPL(iognn, CUDA, m) {
  m.impl("propagate", &propagate_cuda);
  m.impl("propagate_backward_x", &propagate_backward_x_cuda);
  m.impl("propagate_backward_weight", &propagate_backward_weight_cuda);
}

}  // namespace iognn::torch_ext

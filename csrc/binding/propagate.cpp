// iognn::propagate (SpMM family): schemas, argument checks and host implementations.
//
// Forward:  propagate(rowptr, col, colptr, row, csc2csr, weight?, x, reduce, bias?,
//                     max_in_degree, max_out_degree) -> out [num_dst, F] (the layer's bias fused)
// Backward: propagate_backward_x -> grad_x [num_src, F]   (transposed CSR gather)
//           propagate_backward_weight -> grad_weight [E]   (sampled dense-dense product)
// The transposed-CSR arguments of the forward are unused by it; they are part of the schema so the
// autograd formula (binding/autograd/propagate.cpp) can hand them to the backward ops.
// max_in_degree / max_out_degree: the longest row of rowptr / colptr when the caller knows it (a
// Graph does), else -1. Only the CUDA schedule reads them (no heavy row: one launch); a value
// below the true maximum still gives the right result (heavy rows then take the light path).
// The CUDA implementations are in binding/cuda/propagate.cpp (same checks: propagate_checks.h).
#include <ATen/ATen.h>
#include <torch/library.h>

#include "binding/propagate_checks.h"
#include "binding/utils.h"
#include "kernels/cpu/propagate.h"

namespace iognn::torch_ext {
namespace {

at::Tensor propagate_cpu(const at::Tensor& rowptr, const at::Tensor& col, const at::Tensor& colptr,
                         const at::Tensor& row, const at::Tensor& csc2csr,
                         const std::optional<at::Tensor>& weight_in, const at::Tensor& x_in,
                         c10::string_view reduce, const std::optional<at::Tensor>& bias_in,
                         int64_t, int64_t) {
  constexpr const char* op = "iognn::propagate";
  const auto red = parse_reduce(reduce, op);
  check_propagate_args(op, rowptr, col, colptr, weight_in, x_in, bias_in);
  const at::Tensor x = last_dim_contiguous(x_in);
  const auto weight = weight_in ? std::optional<at::Tensor>(weight_in->contiguous()) : std::nullopt;
  const auto bias = bias_in ? std::optional<at::Tensor>(bias_in->contiguous()) : std::nullopt;
  const int64_t num_dst = rowptr.numel() - 1, F = x.size(1);
  at::Tensor out = at::empty({num_dst, F}, x.options());
  if (out.numel() == 0) return out;
  dispatch_float(x.scalar_type(), op, [&](auto ft) {
    using T = typename decltype(ft)::type;
    dispatch_index(rowptr.scalar_type(), op, [&](auto it) {
      using I = typename decltype(it)::type;
      cpu::propagate_forward<T, I>(cptr<I>(rowptr), cptr<I>(col), optional_cptr<acc_t<T>>(weight),
                                   cptr<T>(x), x.stride(0), num_dst, F, red,
                                   optional_cptr<T>(bias), ptr<T>(out));
    });
  });
  return out;
}

at::Tensor propagate_backward_x_cpu(const at::Tensor& colptr, const at::Tensor& row,
                                    const at::Tensor& csc2csr, const at::Tensor& rowptr,
                                    const std::optional<at::Tensor>& weight_in,
                                    const at::Tensor& grad_out_in, c10::string_view reduce,
                                    int64_t) {
  constexpr const char* op = "iognn::propagate_backward_x";
  const auto red = parse_reduce(reduce, op);
  check_backward_x_args(op, colptr, row, csc2csr, rowptr, weight_in, grad_out_in);
  const at::Tensor grad_out = grad_out_in.contiguous();
  const auto weight = weight_in ? std::optional<at::Tensor>(weight_in->contiguous()) : std::nullopt;
  const int64_t num_src = colptr.numel() - 1, F = grad_out.size(1);
  at::Tensor grad_x = at::empty({num_src, F}, grad_out.options());
  if (grad_x.numel() == 0) return grad_x;
  dispatch_float(grad_out.scalar_type(), op, [&](auto ft) {
    using T = typename decltype(ft)::type;
    dispatch_index(colptr.scalar_type(), op, [&](auto it) {
      using I = typename decltype(it)::type;
      cpu::propagate_backward_x<T, I>(cptr<I>(colptr), cptr<I>(row), cptr<I>(csc2csr),
                                      cptr<I>(rowptr), optional_cptr<acc_t<T>>(weight),
                                      cptr<T>(grad_out), num_src, F, red, ptr<T>(grad_x));
    });
  });
  return grad_x;
}

at::Tensor propagate_backward_weight_cpu(const at::Tensor& rowptr, const at::Tensor& col,
                                         const at::Tensor& grad_out_in, const at::Tensor& x_in,
                                         c10::string_view reduce, int64_t) {
  constexpr const char* op = "iognn::propagate_backward_weight";
  const auto red = parse_reduce(reduce, op);
  check_backward_weight_args(op, rowptr, col, grad_out_in, x_in);
  const at::Tensor grad_out = grad_out_in.contiguous();
  const at::Tensor x = last_dim_contiguous(x_in);
  const int64_t num_dst = rowptr.numel() - 1, F = x.size(1);
  at::Tensor grad_w = at::empty({col.numel()}, x.options().dtype(acc_dtype(x.scalar_type())));
  if (grad_w.numel() == 0) return grad_w;
  dispatch_float(x.scalar_type(), op, [&](auto ft) {
    using T = typename decltype(ft)::type;
    dispatch_index(rowptr.scalar_type(), op, [&](auto it) {
      using I = typename decltype(it)::type;
      cpu::propagate_backward_weight<T, I>(cptr<I>(rowptr), cptr<I>(col), cptr<T>(grad_out),
                                           cptr<T>(x), x.stride(0), num_dst, F, red,
                                           ptr<acc_t<T>>(grad_w));
    });
  });
  return grad_w;
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(iognn, m) {
  m.def(
      "propagate(Tensor rowptr, Tensor col, Tensor colptr, Tensor row, Tensor csc2csr, "
      "Tensor? weight, Tensor x, str reduce, Tensor? bias=None, int max_in_degree=-1, "
      "int max_out_degree=-1) -> Tensor");
  m.def(
      "propagate_backward_x(Tensor colptr, Tensor row, Tensor csc2csr, Tensor rowptr, "
      "Tensor? weight, Tensor grad_out, str reduce, int max_out_degree=-1) -> Tensor");
  m.def(
      "propagate_backward_weight(Tensor rowptr, Tensor col, Tensor grad_out, Tensor x, "
      "str reduce, int max_in_degree=-1) -> Tensor");
}

TORCH_LIBRARY_IMPL(iognn, CPU, m) {
  m.impl("propagate", &propagate_cpu);
  m.impl("propagate_backward_x", &propagate_backward_x_cpu);
  m.impl("propagate_backward_weight", &propagate_backward_weight_cpu);
}

}  // namespace iognn::torch_ext

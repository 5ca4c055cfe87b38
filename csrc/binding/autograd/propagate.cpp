// Autograd of iognn::propagate, registered for the Autograd dispatch key in C++ so that a layer
// call pays no Python autograd machinery (a Python formula costs more host time per call than the
// kernels of a small graph take).
//
// out = A x + b (sum) or D^-1 A x + b (mean), A weighted by `weight` when given:
//   grad_x      = propagate_backward_x(A^T, grad_out)        when x requires a gradient
//   grad_weight = propagate_backward_weight(grad_out, x)     when weight requires one (x is kept
//                                                            alive only then)
//   grad_bias   = grad_out summed over rows                  when bias requires one
// The index tensors take no gradient. The backward ops are not differentiable: a double backward
// through them raises (autograd's "not implemented" node) instead of silently giving zeros.
#include <ATen/ATen.h>
#include <torch/autograd.h>
#include <torch/csrc/autograd/autograd_not_implemented_fallback.h>
#include <torch/library.h>

#include "binding/autograd/dispatch.h"
#include "binding/propagate_calls.h"

namespace iognn::torch_ext {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;
using Optional = std::optional<at::Tensor>;

class PropagateFunction : public torch::autograd::Function<PropagateFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& rowptr, const at::Tensor& col,
                            const at::Tensor& colptr, const at::Tensor& row,
                            const at::Tensor& csc2csr, const Optional& weight,
                            const at::Tensor& x, c10::string_view reduce, const Optional& bias,
                            c10::SymInt max_in_degree, c10::SymInt max_out_degree) {
    at::Tensor out;
    {
      at::AutoDispatchBelowADInplaceOrView guard;
      out = call_propagate(rowptr, col, colptr, row, csc2csr, weight, x, reduce, bias,
                           max_in_degree, max_out_degree);
    }
    // Autograd edges exist for the tensor arguments that are present, in argument order.
    const at::Tensor w = value_or_undefined(weight);
    const int64_t x_edge = w.defined() ? 6 : 5;
    const bool keep_x = w.defined() && w.requires_grad();  // x only feeds grad_weight
    ctx->saved_data["reduce"] = std::string(reduce);
    ctx->saved_data["x_edge"] = x_edge;
    ctx->saved_data["has_bias"] = value_or_undefined(bias).defined();
    ctx->saved_data["max_in_degree"] = max_in_degree;
    ctx->saved_data["max_out_degree"] = max_out_degree;
    ctx->save_for_backward({rowptr, col, colptr, row, csc2csr, w, keep_x ? x : at::Tensor()});
    return out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor &rowptr = saved[0], &col = saved[1], &colptr = saved[2], &row = saved[3],
                     &csc2csr = saved[4], &weight = saved[5], &x = saved[6];
    const std::string reduce = ctx->saved_data["reduce"].toStringRef();
    const int64_t x_edge = ctx->saved_data["x_edge"].toInt();
    const at::Tensor grad_out = grads[0].contiguous();
    at::Tensor grad_x, grad_weight, grad_bias;
    if (ctx->needs_input_grad(x_edge))
      grad_x = call_propagate_backward_x(colptr, row, csc2csr, rowptr, optional_of(weight),
                                         grad_out, reduce,
                                         ctx->saved_data["max_out_degree"].toSymInt());
    if (weight.defined() && ctx->needs_input_grad(5))
      grad_weight = call_propagate_backward_weight(rowptr, col, grad_out, x, reduce,
                                                   ctx->saved_data["max_in_degree"].toSymInt());
    // The bias, when given, is the last tensor argument (edge x_edge + 1).
    if (ctx->saved_data["has_bias"].toBool() && ctx->needs_input_grad(x_edge + 1))
      grad_bias = column_sum(grad_out);
    return {at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(), grad_weight,
            grad_x,       at::Tensor(), grad_bias,    at::Tensor(), at::Tensor()};
  }
};

}  // namespace

TORCH_LIBRARY_IMPL(iognn, Autograd, m) {
  m.impl("propagate", &AutogradKernel<PropagateFunction>::call);
  m.impl("propagate_backward_x", torch::autograd::autogradNotImplementedFallback());
  m.impl("propagate_backward_weight", torch::autograd::autogradNotImplementedFallback());
}

}  // namespace iognn::torch_ext

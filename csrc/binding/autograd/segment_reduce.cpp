// Autograd of iognn::segment_reduce, registered for the Autograd dispatch key in C++ (no Python
// autograd machinery per call; see autograd/propagate.cpp).
//
// (out, ties, wide, mean, plain) = segment_reduce(..., x, reduces, scale?):
//   grad_x     = segment_reduce_backward(..., results, ties, wide, mean, grad_out, reduces, scale)
//   grad_scale = sum_c grad_out[i, s, c] * results[i, c]          when scale requires a gradient
// where results are the unscaled results (out, or plain with scale). Only out is differentiable:
// the auxiliary outputs are marked non-differentiable and their gradients are not materialised
// (else autograd would hand the backward zero-filled [num_dst, F] tensors: an allocation and a
// memset per step). The backward op is not differentiable: a double backward through it raises.
#include <ATen/ATen.h>
#include <torch/autograd.h>
#include <torch/csrc/autograd/autograd_not_implemented_fallback.h>
#include <torch/library.h>

#include <string>
#include <tuple>
#include <vector>

#include "binding/autograd/dispatch.h"

namespace iognn::torch_ext {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;
using Tensor = at::Tensor;
using Optional = std::optional<Tensor>;
using Names = std::vector<std::string>;
using Outputs = std::tuple<Tensor, Tensor, Tensor, Tensor, Tensor>;

Outputs call_segment_reduce(const Tensor& rowptr, const Tensor& col, const Tensor& colptr,
                            const Tensor& row, const Tensor& csc2csr, const Tensor& x,
                            const Names& reduces, const Optional& scale, c10::SymInt max_in_degree,
                            c10::SymInt max_out_degree) {
  static const auto op =
      typed_op<Outputs(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                       const Tensor&, Names, const Optional&, c10::SymInt, c10::SymInt)>(
          "iognn::segment_reduce");
  return op.call(rowptr, col, colptr, row, csc2csr, x, reduces, scale, max_in_degree,
                 max_out_degree);
}

Tensor call_backward(const Tensor& colptr, const Tensor& row, const Tensor& csc2csr,
                     const Tensor& rowptr, const Tensor& x, const Tensor& results,
                     const Tensor& ties, const Tensor& wide, const Tensor& mean,
                     const Tensor& grad_out, const Names& reduces, const Optional& scale,
                     c10::SymInt max_out_degree) {
  static const auto op = typed_op<Tensor(
      const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&,
      const Tensor&, const Tensor&, const Tensor&, const Tensor&, Names, const Optional&,
      c10::SymInt)>("iognn::segment_reduce_backward");
  return op.call(colptr, row, csc2csr, rowptr, x, results, ties, wide, mean, grad_out, reduces,
                 scale, max_out_degree);
}

class SegmentReduceFunction : public torch::autograd::Function<SegmentReduceFunction> {
 public:
  static variable_list forward(AutogradContext* ctx, const Tensor& rowptr, const Tensor& col,
                               const Tensor& colptr, const Tensor& row, const Tensor& csc2csr,
                               const Tensor& x, const Names& reduces, const Optional& scale,
                               c10::SymInt max_in_degree, c10::SymInt max_out_degree) {
    Outputs outputs;
    {
      at::AutoDispatchBelowADInplaceOrView guard;
      outputs = call_segment_reduce(rowptr, col, colptr, row, csc2csr, x, reduces, scale,
                                    max_in_degree, max_out_degree);
    }
    auto& [out, ties, wide, mean, plain] = outputs;
    const Tensor s = value_or_undefined(scale);
    ctx->mark_non_differentiable({ties, wide, mean, plain});
    ctx->set_materialize_grads(false);
    ctx->saved_data["reduces"] = reduces;
    ctx->saved_data["max_out_degree"] = max_out_degree;
    ctx->save_for_backward(
        {rowptr, colptr, row, csc2csr, x, s.defined() ? plain : out, ties, wide, mean, s});
    return {out, ties, wide, mean, plain};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    // Edges: rowptr, col, colptr, row, csc2csr, x (5), scale (6) when given; the gradient list
    // has one entry per argument (reduces, scale and the two degree hints after x).
    variable_list result(10);
    if (!grads[0].defined()) return result;
    const auto saved = ctx->get_saved_variables();
    const Tensor &rowptr = saved[0], &colptr = saved[1], &row = saved[2], &csc2csr = saved[3],
                 &x = saved[4], &results = saved[5], &ties = saved[6], &wide = saved[7],
                 &mean = saved[8], &scale = saved[9];
    const Names reduces = ctx->saved_data["reduces"].to<Names>();
    const Tensor grad_out = grads[0].contiguous();
    if (ctx->needs_input_grad(5))
      result[5] = call_backward(colptr, row, csc2csr, rowptr, x, results, ties, wide, mean,
                                grad_out, reduces, optional_of(scale),
                                ctx->saved_data["max_out_degree"].toSymInt());
    if (scale.defined() && ctx->needs_input_grad(6)) {
      // Symbolic sizes under torch.compile.
      const c10::SymInt num_dst = scale.sym_size(0), num_scales = scale.sym_size(1),
                        width = results.sym_size(1);
      result[7] = at::bmm(grad_out.view_symint({num_dst, num_scales, width}),
                          results.view_symint({num_dst, width, 1}))
                      .view_symint({num_dst, num_scales});
    }
    return result;
  }
};

Outputs segment_reduce_autograd(const Tensor& rowptr, const Tensor& col, const Tensor& colptr,
                                const Tensor& row, const Tensor& csc2csr, const Tensor& x,
                                Names reduces, const Optional& scale, c10::SymInt max_in_degree,
                                c10::SymInt max_out_degree) {
  const variable_list out = SegmentReduceFunction::apply(rowptr, col, colptr, row, csc2csr, x,
                                                         reduces, scale, max_in_degree,
                                                         max_out_degree);
  return {out[0], out[1], out[2], out[3], out[4]};
}

}  // namespace

TORCH_LIBRARY_IMPL(iognn, Autograd, m) {
  m.impl("segment_reduce", &segment_reduce_autograd);
  m.impl("segment_reduce_backward", torch::autograd::autogradNotImplementedFallback());
}

}  // namespace iognn::torch_ext

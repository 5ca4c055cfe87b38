// Autograd of the fused layer ops (binding/propagate_layers.h): one node per layer call.
//
// linear_propagate, out = A h + b with h = x W^T:
//   g_h      = propagate_backward_x(A^T, grad_out)       when x or W needs a gradient
//   grad_x   = g_h W,  grad_W = g_h^T x,  grad_b = grad_out summed over rows
//   grad_w   = propagate_backward_weight(grad_out, h)    (h is kept only then)
// propagate_linear, out = agg W^T + b + root W_root^T with agg = A x:
//   g_agg    = grad_out W                                 when x or the edge weights need one
//   grad_x   = propagate_backward_x(A^T, g_agg) (+ grad_out W_root in the same product when the
//              root is x),  grad_W = grad_out^T agg,  grad_W_root = grad_out^T root,
//   grad_x_root = grad_out W_root,  grad_w = propagate_backward_weight(g_agg, x)
// or, projected first (propagate_layers::projects_first), out = A h + b + root W_root^T:
//   linear_propagate's gradients, plus the root's as above.
// Only what a requested gradient reads is saved. As for iognn::propagate, the backward is not
// differentiable (its ops raise under a double backward).
#include <ATen/ATen.h>
#include <torch/autograd.h>
#include <torch/library.h>

#include "binding/propagate_layers.h"

namespace iognn::torch_ext {
namespace {

using propagate_layers::Optional;
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Autograd edges exist for the tensor arguments that are present, in argument order: the five
// graph tensors, then the edge weights when given, then the layer's own.
struct Edges {
  int64_t next;
  explicit Edges(const Optional& weight) : next(weight ? 6 : 5) {}
  int64_t take(bool present) { return present ? next++ : -1; }
};

bool needs(AutogradContext* ctx, int64_t edge) { return edge >= 0 && ctx->needs_input_grad(edge); }

at::Tensor kept(const at::Tensor& t, bool keep) { return keep ? t : at::Tensor(); }

void save_graph(AutogradContext* ctx, c10::string_view reduce, const c10::SymInt& max_in_degree,
                const c10::SymInt& max_out_degree) {
  ctx->saved_data["reduce"] = std::string(reduce);
  ctx->saved_data["max_in_degree"] = max_in_degree;
  ctx->saved_data["max_out_degree"] = max_out_degree;
}

class LinearPropagateFunction : public torch::autograd::Function<LinearPropagateFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& rowptr, const at::Tensor& col,
                            const at::Tensor& colptr, const at::Tensor& row,
                            const at::Tensor& csc2csr, const Optional& weight,
                            const at::Tensor& x, const at::Tensor& lin_weight,
                            c10::string_view reduce, const Optional& bias,
                            c10::SymInt max_in_degree, c10::SymInt max_out_degree) {
    at::AutoDispatchBelowADInplaceOrView guard;
    auto [h, out] = propagate_layers::linear_propagate_forward(
        rowptr, col, colptr, row, csc2csr, weight, x, lin_weight, reduce, bias, max_in_degree,
        max_out_degree);
    Edges edges(weight);
    const int64_t x_edge = edges.take(true), w_edge = edges.take(true);
    ctx->saved_data["x_edge"] = x_edge;
    ctx->saved_data["w_edge"] = w_edge;
    ctx->saved_data["bias_edge"] = edges.take(bias.has_value());
    save_graph(ctx, reduce, max_in_degree, max_out_degree);
    const bool weight_grad = weight && weight->requires_grad();
    ctx->save_for_backward({rowptr, col, colptr, row, csc2csr, value_or_undefined(weight),
                            kept(x, lin_weight.requires_grad()),
                            kept(lin_weight, x.requires_grad()), kept(h, weight_grad)});
    return out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto s = ctx->get_saved_variables();
    const at::Tensor &rowptr = s[0], &col = s[1], &colptr = s[2], &row = s[3], &csc2csr = s[4],
                     &weight = s[5], &x = s[6], &lin_weight = s[7], &h = s[8];
    const std::string reduce = ctx->saved_data["reduce"].toStringRef();
    const bool need_x = needs(ctx, ctx->saved_data["x_edge"].toInt()),
               need_w = needs(ctx, ctx->saved_data["w_edge"].toInt()),
               need_bias = needs(ctx, ctx->saved_data["bias_edge"].toInt()),
               need_weight = weight.defined() && needs(ctx, 5);
    const at::Tensor grad_out = grads[0].contiguous();
    at::Tensor grad_x, grad_w, grad_bias, grad_weight;
    if (need_x || need_w) {
      const at::Tensor g_h = call_propagate_backward_x(
          colptr, row, csc2csr, rowptr, optional_of(weight), grad_out, reduce,
          ctx->saved_data["max_out_degree"].toSymInt());
      if (need_x) grad_x = at::mm(g_h, lin_weight);
      if (need_w) grad_w = at::mm(g_h.t(), x);
    }
    if (need_weight)
      grad_weight = call_propagate_backward_weight(rowptr, col, grad_out, h, reduce,
                                                   ctx->saved_data["max_in_degree"].toSymInt());
    if (need_bias) grad_bias = column_sum(grad_out);
    return {at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(), grad_weight,
            grad_x,       grad_w,       at::Tensor(), grad_bias,    at::Tensor(), at::Tensor()};
  }
};

class PropagateLinearFunction : public torch::autograd::Function<PropagateLinearFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& rowptr, const at::Tensor& col,
                            const at::Tensor& colptr, const at::Tensor& row,
                            const at::Tensor& csc2csr, const Optional& weight,
                            const at::Tensor& x, c10::string_view reduce,
                            const at::Tensor& lin_weight, const Optional& bias,
                            const Optional& root_weight, const Optional& x_root,
                            c10::SymInt max_in_degree, c10::SymInt max_out_degree) {
    at::AutoDispatchBelowADInplaceOrView guard;
    auto f = propagate_layers::propagate_linear_forward(rowptr, col, colptr, row, csc2csr, weight,
                                                        x, reduce, lin_weight, bias, root_weight,
                                                        x_root, max_in_degree, max_out_degree);
    Edges edges(weight);
    ctx->saved_data["x_edge"] = edges.take(true);
    ctx->saved_data["w_edge"] = edges.take(true);
    ctx->saved_data["bias_edge"] = edges.take(bias.has_value());
    ctx->saved_data["root_w_edge"] = edges.take(root_weight.has_value());
    ctx->saved_data["x_root_edge"] = edges.take(x_root.has_value());
    ctx->saved_data["projected"] = f.projected;
    save_graph(ctx, reduce, max_in_degree, max_out_degree);
    const bool weight_grad = weight && weight->requires_grad();
    const bool w_grad = lin_weight.requires_grad();
    const at::Tensor root_w = value_or_undefined(root_weight);
    const at::Tensor root = x_root ? *x_root : x;
    const bool root_w_grad = root_w.defined() && root_w.requires_grad();
    const bool root_grad = root_w.defined() && root.requires_grad();
    // Projected first: x for grad_W, h for the edge weights; else x for the edge weights, agg
    // for grad_W. W serves grad_x in both, and the edge weights' g_agg when aggregated first.
    const bool keep_x = f.projected ? w_grad : weight_grad;
    const bool keep_kept = f.projected ? weight_grad : w_grad;
    const bool keep_w = x.requires_grad() || (!f.projected && weight_grad);
    ctx->save_for_backward({rowptr, col, colptr, row, csc2csr, value_or_undefined(weight),
                            kept(x, keep_x), kept(f.kept, keep_kept), kept(lin_weight, keep_w),
                            kept(root_w, root_grad), kept(root, root_w_grad)});
    return f.out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto s = ctx->get_saved_variables();
    const at::Tensor &rowptr = s[0], &col = s[1], &colptr = s[2], &row = s[3], &csc2csr = s[4],
                     &weight = s[5], &x = s[6], &kept_value = s[7], &lin_weight = s[8],
                     &root_weight = s[9], &root = s[10];
    const std::string reduce = ctx->saved_data["reduce"].toStringRef();
    const int64_t x_root_edge = ctx->saved_data["x_root_edge"].toInt();
    const bool need_x = needs(ctx, ctx->saved_data["x_edge"].toInt()),
               need_w = needs(ctx, ctx->saved_data["w_edge"].toInt()),
               need_bias = needs(ctx, ctx->saved_data["bias_edge"].toInt()),
               need_root_w = needs(ctx, ctx->saved_data["root_w_edge"].toInt()),
               need_x_root = needs(ctx, x_root_edge),
               need_weight = weight.defined() && needs(ctx, 5);
    const bool root_is_x = x_root_edge < 0 && ctx->saved_data["root_w_edge"].toInt() >= 0;
    const at::Tensor grad_out = grads[0].contiguous();
    const c10::SymInt max_in_degree = ctx->saved_data["max_in_degree"].toSymInt(),
                      max_out_degree = ctx->saved_data["max_out_degree"].toSymInt();
    at::Tensor grad_x, grad_w, grad_bias, grad_root_w, grad_x_root, grad_weight;
    if (ctx->saved_data["projected"].toBool()) {  // kept_value: h
      if (need_x || need_w) {
        const at::Tensor g_h = call_propagate_backward_x(
            colptr, row, csc2csr, rowptr, optional_of(weight), grad_out, reduce, max_out_degree);
        if (need_x) grad_x = at::mm(g_h, lin_weight);
        if (need_w) grad_w = at::mm(g_h.t(), x);
      }
      if (need_weight)
        grad_weight = call_propagate_backward_weight(rowptr, col, grad_out, kept_value, reduce,
                                                     max_in_degree);
    } else {  // kept_value: agg
      if (need_x || need_weight) {
        const at::Tensor g_agg = at::mm(grad_out, lin_weight);
        if (need_x)
          grad_x = call_propagate_backward_x(colptr, row, csc2csr, rowptr, optional_of(weight),
                                             g_agg, reduce, max_out_degree);
        if (need_weight)
          grad_weight =
              call_propagate_backward_weight(rowptr, col, g_agg, x, reduce, max_in_degree);
      }
      if (need_w) grad_w = at::mm(grad_out.t(), kept_value);
    }
    if (need_x && root_is_x) grad_x.addmm_(grad_out, root_weight);
    if (need_bias) grad_bias = column_sum(grad_out);
    if (need_root_w) grad_root_w = at::mm(grad_out.t(), root);
    if (need_x_root) grad_x_root = at::mm(grad_out, root_weight);
    return {at::Tensor(), at::Tensor(), at::Tensor(),  at::Tensor(), at::Tensor(),
            grad_weight,  grad_x,       at::Tensor(),  grad_w,       grad_bias,
            grad_root_w,  grad_x_root,  at::Tensor(),  at::Tensor()};
  }
};

}  // namespace

TORCH_LIBRARY_IMPL(iognn, Autograd, m) {
  m.impl("linear_propagate", &AutogradKernel<LinearPropagateFunction>::call);
  m.impl("propagate_linear", &AutogradKernel<PropagateLinearFunction>::call);
}

}  // namespace iognn::torch_ext

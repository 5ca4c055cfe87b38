// Autograd of iognn::gat_projection (binding/gat_projection.h), one node:
//   grad_x     = grad_rows W_cat
//   grad_W_cat = grad_rows^T x, split into grad_W's direct rows and g_att = d W_att [2, H, F]
//   grad_W    += sum_k att_k[h, c] g_att[k, h, :]       (W_att[k h] = sum_c att_k[h, c] W[h C + c])
//   grad_att_k = sum_f g_att[k, h, f] W[h C + c, f]
// Only the gradients asked for are computed. Not differentiable twice (a double backward raises).
#include <ATen/ATen.h>
#include <torch/autograd.h>
#include <torch/library.h>

#include "binding/autograd/dispatch.h"
#include "binding/gat_projection.h"

namespace iognn::torch_ext {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

class GatProjectionFunction : public torch::autograd::Function<GatProjectionFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& weight,
                            const at::Tensor& att_src, const at::Tensor& att_dst) {
    at::AutoDispatchBelowADInplaceOrView guard;
    auto [w_cat, rows] = gat_projection::forward(x, weight, att_src, att_dst);
    const bool params = weight.requires_grad() || att_src.requires_grad() ||
                        att_dst.requires_grad();
    ctx->save_for_backward({x.requires_grad() ? w_cat : at::Tensor(), params ? x : at::Tensor(),
                            weight, att_src, att_dst});
    return rows;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto s = ctx->get_saved_variables();
    const at::Tensor &w_cat = s[0], &x = s[1], &weight = s[2], &att_src = s[3], &att_dst = s[4];
    const at::Tensor grad_rows = grads[0].contiguous();
    at::Tensor grad_x, grad_w, grad_att_src, grad_att_dst;
    if (ctx->needs_input_grad(0)) grad_x = at::mm(grad_rows, w_cat);
    const bool need_w = ctx->needs_input_grad(1),
               need_att = ctx->needs_input_grad(2) || ctx->needs_input_grad(3);
    if (need_w || need_att) {
      const int64_t H = att_src.size(1), C = att_src.size(2);
      const at::Tensor grad_cat = at::mm(grad_rows.t(), x);
      const at::Tensor g_att = grad_cat.narrow(0, H * C, 2 * H).view({2, H, 1, -1});
      if (need_w) {
        const at::Tensor att = gat_projection::stacked_att(att_src, att_dst).view({2, H, C, 1});
        grad_w = grad_cat.narrow(0, 0, H * C) + (g_att * att).sum(0).view({H * C, -1});
      }
      if (need_att) {
        const at::Tensor grad_att = (g_att * weight.view({1, H, C, -1})).sum(-1);  // [2, H, C]
        grad_att_src = grad_att.narrow(0, 0, 1);
        grad_att_dst = grad_att.narrow(0, 1, 1);
      }
    }
    return {grad_x, grad_w, grad_att_src, grad_att_dst};
  }
};

}  // namespace

TORCH_LIBRARY_IMPL(iognn, Autograd, m) {
  m.impl("gat_projection", &AutogradKernel<GatProjectionFunction>::call);
}

}  // namespace iognn::torch_ext

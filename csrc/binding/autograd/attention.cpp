// Autograd of the attention family (iognn::gat_attention, gatv2_attention,
// transformer_attention), registered for the Autograd dispatch key in C++ (no Python autograd
// machinery per call; see autograd/propagate.cpp).
//
// Each forward takes the graph (6 index tensors), three node tensors, edge_attr?, w_edge?, two
// float scalars, the dropout seed, return_alpha and the graph's two degree hints, and returns
// (out, lse, alpha); its backward op takes the graph, the five inputs, lse, grad_out, grad_alpha?,
// the same scalars and hints, and returns one gradient per input. Only out and alpha are
// differentiable (lse is marked non-differentiable); gradients are not materialised, so an unused
// alpha costs nothing, and a missing grad_out becomes zeros (only alpha was used). The backward
// ops are not differentiable: a double backward raises.
#include <ATen/ATen.h>
#include <torch/autograd.h>
#include <torch/csrc/autograd/autograd_not_implemented_fallback.h>
#include <torch/library.h>

#include <array>
#include <tuple>
#include <type_traits>

#include "binding/attention_checks.h"
#include "binding/autograd/dispatch.h"

namespace iognn::torch_ext {
namespace {

using attention::Gat;
using attention::GatV2;
using attention::Transformer;
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;
using Optional = std::optional<at::Tensor>;
using Tensor = at::Tensor;

constexpr int kGraphTensors = 6;  // rowptr, col, eid, colptr, row, csc2csr
constexpr int kInputs = 5;        // three node tensors, edge_attr, w_edge

template <class V>
class AttentionFunction : public torch::autograd::Function<AttentionFunction<V>> {
  using Third = typename V::Third;
  using ForwardOut = std::tuple<Tensor, Tensor, Tensor>;
  using BackwardOut = std::tuple<Tensor, Tensor, Tensor, Tensor, Tensor>;

  static Third third_of(const Tensor& t) {
    if constexpr (std::is_same_v<Third, Tensor>) return t;
    else return optional_of(t);
  }

 public:
  static variable_list forward(AutogradContext* ctx, const Tensor& rowptr, const Tensor& col,
                               const Tensor& eid, const Tensor& colptr, const Tensor& row,
                               const Tensor& csc2csr, const Tensor& a, const Tensor& b,
                               const Third& c, const Optional& edge_attr, const Optional& w_edge,
                               double scalar, double dropout, c10::SymInt seed, bool return_alpha,
                               c10::SymInt max_in_degree, c10::SymInt max_out_degree) {
    static const auto op = typed_op<ForwardOut(
        const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&,
        const Tensor&, const Tensor&, const Third&, const Optional&, const Optional&, double,
        double, c10::SymInt, bool, c10::SymInt, c10::SymInt)>(V::kOp);
    ForwardOut outputs;
    {
      at::AutoDispatchBelowADInplaceOrView guard;
      outputs = op.call(rowptr, col, eid, colptr, row, csc2csr, a, b, c, edge_attr, w_edge,
                        scalar, dropout, seed, return_alpha, max_in_degree, max_out_degree);
    }
    auto& [out, lse, alpha] = outputs;
    ctx->mark_non_differentiable({lse});
    ctx->set_materialize_grads(false);
    ctx->saved_data["scalar"] = scalar;
    ctx->saved_data["dropout"] = dropout;
    ctx->saved_data["seed"] = seed;
    ctx->saved_data["out_sizes"] = out.sym_sizes().vec();  // symbolic under torch.compile
    ctx->saved_data["return_alpha"] = return_alpha;
    ctx->saved_data["max_in_degree"] = max_in_degree;
    ctx->saved_data["max_out_degree"] = max_out_degree;
    ctx->save_for_backward({rowptr, col, eid, colptr, row, csc2csr, a, b,
                            value_or_undefined(c), value_or_undefined(edge_attr),
                            value_or_undefined(w_edge), lse});
    return {out, lse, alpha};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    static const auto op = typed_op<BackwardOut(
        const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&,
        const Tensor&, const Tensor&, const Third&, const Optional&, const Optional&,
        const Tensor&, const Tensor&, const Optional&, double, double, c10::SymInt, c10::SymInt,
        c10::SymInt)>(V::kBackwardOp);
    const auto s = ctx->get_saved_variables();
    const std::array<Tensor, kInputs> inputs = {s[6], s[7], s[8], s[9], s[10]};
    const Tensor& lse = s[11];
    const Tensor grad_out = grads[0].defined()
                                ? grads[0].contiguous()
                                : at::zeros_symint(ctx->saved_data["out_sizes"].toSymIntVector(),
                                                   inputs[0].options());
    Optional grad_alpha;  // alpha is an empty placeholder unless it was requested
    if (ctx->saved_data["return_alpha"].toBool() && grads[2].defined())
      grad_alpha = grads[2].contiguous();
    const BackwardOut g =
        op.call(s[0], s[1], s[2], s[3], s[4], s[5], inputs[0], inputs[1], third_of(inputs[2]),
                optional_of(inputs[3]), optional_of(inputs[4]), lse, grad_out, grad_alpha,
                ctx->saved_data["scalar"].toDouble(), ctx->saved_data["dropout"].toDouble(),
                ctx->saved_data["seed"].toSymInt(), ctx->saved_data["max_in_degree"].toSymInt(),
                ctx->saved_data["max_out_degree"].toSymInt());
    const std::array<Tensor, kInputs> computed = {std::get<0>(g), std::get<1>(g), std::get<2>(g),
                                                  std::get<3>(g), std::get<4>(g)};
    // Autograd edges: the graph tensors, then the inputs that are present, in argument order.
    variable_list result(kGraphTensors + kInputs + 6);
    size_t edge = kGraphTensors;
    for (int k = 0; k < kInputs; ++k) {
      if (!inputs[k].defined()) continue;
      if (ctx->needs_input_grad(edge++)) result[kGraphTensors + k] = computed[k];
    }
    return result;
  }
};

template <class V>
std::tuple<Tensor, Tensor, Tensor> attention_autograd(
    const Tensor& rowptr, const Tensor& col, const Tensor& eid, const Tensor& colptr,
    const Tensor& row, const Tensor& csc2csr, const Tensor& a, const Tensor& b,
    const typename V::Third& c, const Optional& edge_attr, const Optional& w_edge, double scalar,
    double dropout, c10::SymInt seed, bool return_alpha, c10::SymInt max_in_degree,
    c10::SymInt max_out_degree) {
  const variable_list out =
      AttentionFunction<V>::apply(rowptr, col, eid, colptr, row, csc2csr, a, b, c, edge_attr,
                                  w_edge, scalar, dropout, seed, return_alpha, max_in_degree,
                                  max_out_degree);
  return {out[0], out[1], out[2]};
}

template <class V>
void register_variant(torch::Library& m) {
  m.impl(V::kOp, &attention_autograd<V>);
  m.impl(V::kBackwardOp, torch::autograd::autogradNotImplementedFallback());
}

}  // namespace

TORCH_LIBRARY_IMPL(iognn, Autograd, m) {
  register_variant<Gat>(m);
  register_variant<GatV2>(m);
  register_variant<Transformer>(m);
}

}  // namespace iognn::torch_ext

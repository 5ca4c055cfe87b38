// The attention ops (GAT, GATv2, Graph Transformer), written once for every backend and variant:
// argument checks (attention_checks.h), outputs, the dtype / index dispatch and the call of the
// backend's kernels. binding/attention.cpp defines the schemas and registers these bodies with
// the host kernels; binding/cuda/attention.cpp with the device kernels; binding/meta.cpp as the
// Meta kernels (MetaBackend: the outputs only). A variant V (Gat, GatV2,
// Transformer: attention_checks.h) names its ops, its reference input and its checks. A Backend
// other than MetaBackend provides
//
//   using Scope = HostScope or DeviceScope (binding/utils.h, binding/cuda/device_scope.h)
//   template <typename T, typename I, class Inputs>
//   static void forward(const Scope&, const AttentionGraph<I>&, const AttentionConfig&,
//                       int64_t edge_dim, const Inputs&, const AttentionOutputs<T>&);
//   template <typename T, typename I, class Inputs>
//   static void backward(const Scope&, const AttentionGraph<I>&, const AttentionConfig&,
//                        int64_t edge_dim, const Inputs&, const acc_t<T>* lse,
//                        const T* grad_out, const T* grad_alpha, const typename Inputs::Grads&);
//
// for each variant's Inputs (GatInputs, GatV2Inputs, TransformerInputs: the kernels differ by
// variant and backend, nothing else does).
#pragma once

#include <torch/library.h>

#include <array>
#include <type_traits>

#include "binding/attention_checks.h"
#include "binding/utils.h"

namespace iognn::torch_ext::attention {

inline int64_t edge_dim_of(const OptTensor& edge_attr) {
  return edge_attr ? edge_attr->size(1) : 0;
}

// The three feature inputs of variant V (its third: V::Third), edge_attr and w_edge.
template <class V>
std::array<OptTensor, 5> inputs_of(const Tensor& first, const Tensor& second,
                                   const typename V::Third& third, const OptTensor& edge_attr,
                                   const OptTensor& w_edge) {
  return {first, second, third, edge_attr, w_edge};
}

template <class Backend>
struct AttentionOps {
  // (out, lse, alpha) of variant V; scalar: its negative slope or score scale.
  template <class V>
  static Forward forward(const Tensor& rowptr, const Tensor& col, const Tensor& eid,
                         const Tensor& colptr, const Tensor& row, const Tensor& csc2csr,
                         const Tensor& first, const Tensor& second, const typename V::Third& third,
                         const OptTensor& edge_attr, const OptTensor& w_edge, double scalar,
                         double dropout, c10::SymInt seed, bool return_alpha,
                         c10::SymInt max_in_degree, c10::SymInt max_out_degree) {
    const GraphArgs g{rowptr, col, eid, colptr, row, csc2csr};
    if constexpr (is_meta_v<Backend>) {
      return empty_forward_outputs(g, first, return_alpha);
    } else {
      const auto a = V::check(V::kOp, g, first, second, third, edge_attr, w_edge);
      const AttentionConfig cfg = make_config(V::kOp, a.H, a.C, dropout, seed.expect_int());
      const typename Backend::Scope scope(first);
      Forward out = empty_forward_outputs(g, first, return_alpha);
      dispatch_float_index(first.scalar_type(), rowptr.scalar_type(), V::kOp,
                           [&](auto ft, auto it) {
        using T = typename decltype(ft)::type;
        using I = typename decltype(it)::type;
        Backend::template forward<T, I>(scope, graph_view<I>(g, max_in_degree, max_out_degree),
                                        cfg, edge_dim_of(a.edge_attr),
                                        kernel_inputs<T>(a, scalar), output_view<T>(out));
      });
      return out;
    }
  }

  // One gradient per input of variant V (attention_checks.h's empty_grads).
  template <class V>
  static Backward backward(const Tensor& rowptr, const Tensor& col, const Tensor& eid,
                           const Tensor& colptr, const Tensor& row, const Tensor& csc2csr,
                           const Tensor& first, const Tensor& second,
                           const typename V::Third& third, const OptTensor& edge_attr,
                           const OptTensor& w_edge, const Tensor& lse, const Tensor& grad_out,
                           const OptTensor& grad_alpha, double scalar, double dropout,
                           c10::SymInt seed, c10::SymInt max_in_degree,
                           c10::SymInt max_out_degree) {
    const GraphArgs g{rowptr, col, eid, colptr, row, csc2csr};
    const auto inputs = inputs_of<V>(first, second, third, edge_attr, w_edge);
    if constexpr (is_meta_v<Backend>) {
      return empty_grads(first, inputs);
    } else {
      const auto a = V::check(V::kBackwardOp, g, first, second, third, edge_attr, w_edge);
      const AttentionConfig cfg = make_config(V::kBackwardOp, a.H, a.C, dropout,
                                              seed.expect_int());
      const BackwardInputs b = check_backward_inputs(V::kBackwardOp, g, first, V::kRef, a.H, a.C,
                                                     lse, grad_out, grad_alpha);
      const typename Backend::Scope scope(first);
      Backward grads = empty_grads(first, inputs);
      dispatch_float_index(first.scalar_type(), rowptr.scalar_type(), V::kBackwardOp,
                           [&](auto ft, auto it) {
        using T = typename decltype(ft)::type;
        using I = typename decltype(it)::type;
        const auto in = kernel_inputs<T>(a, scalar);
        Backend::template backward<T, I>(
            scope, graph_view<I>(g, max_in_degree, max_out_degree), cfg,
            edge_dim_of(a.edge_attr), in, lse_ptr<T>(b),
            cptr<T>(b.grad_out), grad_alpha_ptr<T>(b),
            grads_view<typename std::decay_t<decltype(in)>::Grads, T>(grads));
      });
      return grads;
    }
  }
};

// Registers the six ops of `Backend` for one dispatch key (m: a TORCH_LIBRARY_IMPL block's).
template <class Backend>
void register_attention(torch::Library& m) {
  using Ops = AttentionOps<Backend>;
  m.impl(Gat::kOp, &Ops::template forward<Gat>);
  m.impl(Gat::kBackwardOp, &Ops::template backward<Gat>);
  m.impl(GatV2::kOp, &Ops::template forward<GatV2>);
  m.impl(GatV2::kBackwardOp, &Ops::template backward<GatV2>);
  m.impl(Transformer::kOp, &Ops::template forward<Transformer>);
  m.impl(Transformer::kBackwardOp, &Ops::template backward<Transformer>);
}

}  // namespace iognn::torch_ext::attention

// The attention ops (GAT, GATv2, Graph Transformer), written once for both backends: argument
// checks (attention_checks.h), outputs, the dtype / index dispatch and the call of the backend's
// kernels. binding/attention.cpp defines the schemas and registers these bodies with the host
// kernels; binding/cuda/attention.cpp registers them with the device kernels. A Backend provides
//
//   using Scope = HostScope or DeviceScope (binding/utils.h, binding/cuda/device_scope.h)
//   template <typename T, typename I, class Inputs>
//   static void forward(const Scope&, const AttentionGraph<I>&, const AttentionConfig&,
//                       int64_t edge_dim, const Inputs&, const AttentionOutputs<T>&);
//   template <typename T, typename I, class Inputs, class Grads>
//   static void backward(const Scope&, const AttentionGraph<I>&, const AttentionConfig&,
//                        int64_t edge_dim, const Inputs&, const acc_t<T>* lse,
//                        const T* grad_out, const T* grad_alpha, const Grads&);
//
// overloaded on the variant's Inputs (GatInputs, GatV2Inputs, TransformerInputs: the kernels
// differ by variant and backend, nothing else does).
#pragma once

#include <torch/library.h>

#include "binding/attention_checks.h"
#include "binding/utils.h"

namespace iognn::torch_ext::attention {

inline int64_t edge_dim_of(const OptTensor& edge_attr) {
  return edge_attr ? edge_attr->size(1) : 0;
}

// Outputs, then the backend's forward of `inputs(ft)` (a lambda of the feature-dtype tag).
template <class Backend, class Args, class MakeInputs>
Forward run_forward(const char* op, const GraphArgs& g, const Args& a, const Tensor& ref,
                    double dropout, int64_t seed, bool return_alpha, MakeInputs&& inputs) {
  const AttentionConfig cfg = make_config(op, a.H, a.C, dropout, seed);
  const typename Backend::Scope scope(ref);
  Forward out = make_outputs(g, ref, a.H, a.C, return_alpha);
  dispatch(op, ref, g, [&](auto ft, auto it) {
    using T = typename decltype(ft)::type;
    using I = typename decltype(it)::type;
    Backend::template forward<T, I>(scope, graph_view<I>(g), cfg, edge_dim_of(a.edge_attr),
                                    inputs(ft), output_view<T>(out));
  });
  return out;
}

// The checked gradient inputs, `grads` (one tensor per input), then the backend's backward;
// GradsView<T> is the kernels' view of `grads`.
template <class Backend, template <typename> class GradsView, class Args, class MakeInputs>
Backward run_backward(const char* op, const GraphArgs& g, const Args& a, const Tensor& ref,
                      const char* ref_name, double dropout, int64_t seed, const Tensor& lse,
                      const Tensor& grad_out, const OptTensor& grad_alpha, Backward grads,
                      MakeInputs&& inputs) {
  const AttentionConfig cfg = make_config(op, a.H, a.C, dropout, seed);
  const BackwardInputs b =
      check_backward_inputs(op, g, ref, ref_name, a.H, a.C, lse, grad_out, grad_alpha);
  const typename Backend::Scope scope(ref);
  dispatch(op, ref, g, [&](auto ft, auto it) {
    using T = typename decltype(ft)::type;
    using I = typename decltype(it)::type;
    Backend::template backward<T, I>(scope, graph_view<I>(g), cfg, edge_dim_of(a.edge_attr),
                                     inputs(ft), lse_ptr<T>(b), cptr<T>(b.grad_out),
                                     grad_alpha_ptr<T>(b), grads_view<GradsView<T>, T>(grads));
  });
  return grads;
}

template <class Backend>
struct AttentionOps {
  static Forward gat(const Tensor& rowptr, const Tensor& col, const Tensor& eid,
                     const Tensor& colptr, const Tensor& row, const Tensor& csc2csr,
                     const Tensor& x, const Tensor& a_src, const OptTensor& a_dst,
                     const OptTensor& edge_attr, const OptTensor& w_edge, double negative_slope,
                     double dropout, int64_t seed, bool return_alpha) {
    constexpr const char* op = "iognn::gat_attention";
    const GraphArgs g{rowptr, col, eid, colptr, row, csc2csr};
    const GatArgs a = check_gat(op, g, x, a_src, a_dst, edge_attr, w_edge);
    return run_forward<Backend>(op, g, a, a.x, dropout, seed, return_alpha, [&](auto ft) {
      return gat_inputs<typename decltype(ft)::type>(a, negative_slope);
    });
  }

  static Backward gat_backward(const Tensor& rowptr, const Tensor& col, const Tensor& eid,
                               const Tensor& colptr, const Tensor& row, const Tensor& csc2csr,
                               const Tensor& x, const Tensor& a_src, const OptTensor& a_dst,
                               const OptTensor& edge_attr, const OptTensor& w_edge,
                               const Tensor& lse, const Tensor& grad_out,
                               const OptTensor& grad_alpha, double negative_slope,
                               double dropout, int64_t seed) {
    constexpr const char* op = "iognn::gat_attention_backward";
    const GraphArgs g{rowptr, col, eid, colptr, row, csc2csr};
    const GatArgs a = check_gat(op, g, x, a_src, a_dst, edge_attr, w_edge);
    return run_backward<Backend, GatGrads>(
        op, g, a, a.x, "x", dropout, seed, lse, grad_out, grad_alpha, gat_grads(a),
        [&](auto ft) { return gat_inputs<typename decltype(ft)::type>(a, negative_slope); });
  }

  static Forward gatv2(const Tensor& rowptr, const Tensor& col, const Tensor& eid,
                       const Tensor& colptr, const Tensor& row, const Tensor& csc2csr,
                       const Tensor& x_src, const Tensor& x_dst, const Tensor& att,
                       const OptTensor& edge_attr, const OptTensor& w_edge,
                       double negative_slope, double dropout, int64_t seed, bool return_alpha) {
    constexpr const char* op = "iognn::gatv2_attention";
    const GraphArgs g{rowptr, col, eid, colptr, row, csc2csr};
    const GatV2Args a = check_gatv2(op, g, x_src, x_dst, att, edge_attr, w_edge);
    return run_forward<Backend>(op, g, a, a.x_src, dropout, seed, return_alpha, [&](auto ft) {
      return gatv2_inputs<typename decltype(ft)::type>(a, negative_slope);
    });
  }

  static Backward gatv2_backward(const Tensor& rowptr, const Tensor& col, const Tensor& eid,
                                 const Tensor& colptr, const Tensor& row, const Tensor& csc2csr,
                                 const Tensor& x_src, const Tensor& x_dst, const Tensor& att,
                                 const OptTensor& edge_attr, const OptTensor& w_edge,
                                 const Tensor& lse, const Tensor& grad_out,
                                 const OptTensor& grad_alpha, double negative_slope,
                                 double dropout, int64_t seed) {
    constexpr const char* op = "iognn::gatv2_attention_backward";
    const GraphArgs g{rowptr, col, eid, colptr, row, csc2csr};
    const GatV2Args a = check_gatv2(op, g, x_src, x_dst, att, edge_attr, w_edge);
    return run_backward<Backend, GatV2Grads>(
        op, g, a, a.x_src, "x_src", dropout, seed, lse, grad_out, grad_alpha, gatv2_grads(a),
        [&](auto ft) { return gatv2_inputs<typename decltype(ft)::type>(a, negative_slope); });
  }

  static Forward transformer(const Tensor& rowptr, const Tensor& col, const Tensor& eid,
                             const Tensor& colptr, const Tensor& row, const Tensor& csc2csr,
                             const Tensor& query, const Tensor& key, const Tensor& value,
                             const OptTensor& edge_attr, const OptTensor& w_edge, double scale,
                             double dropout, int64_t seed, bool return_alpha) {
    constexpr const char* op = "iognn::transformer_attention";
    const GraphArgs g{rowptr, col, eid, colptr, row, csc2csr};
    const TransformerArgs a = check_transformer(op, g, query, key, value, edge_attr, w_edge);
    return run_forward<Backend>(op, g, a, a.query, dropout, seed, return_alpha, [&](auto ft) {
      return transformer_inputs<typename decltype(ft)::type>(a, scale);
    });
  }

  static Backward transformer_backward(
      const Tensor& rowptr, const Tensor& col, const Tensor& eid, const Tensor& colptr,
      const Tensor& row, const Tensor& csc2csr, const Tensor& query, const Tensor& key,
      const Tensor& value, const OptTensor& edge_attr, const OptTensor& w_edge, const Tensor& lse,
      const Tensor& grad_out, const OptTensor& grad_alpha, double scale, double dropout,
      int64_t seed) {
    constexpr const char* op = "iognn::transformer_attention_backward";
    const GraphArgs g{rowptr, col, eid, colptr, row, csc2csr};
    const TransformerArgs a = check_transformer(op, g, query, key, value, edge_attr, w_edge);
    return run_backward<Backend, TransformerGrads>(
        op, g, a, a.query, "query", dropout, seed, lse, grad_out, grad_alpha,
        transformer_grads(a),
        [&](auto ft) { return transformer_inputs<typename decltype(ft)::type>(a, scale); });
  }
};

// Registers the six ops of `Backend` for one dispatch key (m: a TORCH_LIBRARY_IMPL block's).
template <class Backend>
void register_attention(torch::Library& m) {
  using Ops = AttentionOps<Backend>;
  m.impl("gat_attention", &Ops::gat);
  m.impl("gat_attention_backward", &Ops::gat_backward);
  m.impl("gatv2_attention", &Ops::gatv2);
  m.impl("gatv2_attention_backward", &Ops::gatv2_backward);
  m.impl("transformer_attention", &Ops::transformer);
  m.impl("transformer_attention_backward", &Ops::transformer_backward);
}

}  // namespace iognn::torch_ext::attention

// iognn attention family (GAT, GATv2, Graph Transformer): schemas and host implementations
// (argument checks: attention_checks.h, shared with the CUDA binding). Math and conventions:
// csrc/kernels/cpu/attention_common.h.
//
// Every forward takes the whole graph (rowptr, col, eid, colptr, row, csc2csr) so the autograd
// formula (binding/autograd/attention.cpp) can hand the transposed CSR to the backward op, and
// returns
//   (out [num_dst, H, C], lse [num_dst, H] fp32 (fp64 for fp64), alpha [E', H] or [0, H]).
// Each backward recomputes the attention from lse and returns one gradient per tensor input; the
// gradient of an absent optional input is an empty tensor.
// All float tensors share one dtype; node tensors may have any row stride (the other dimensions are
// made dense, copying only when they are not); edge_attr [E', De] is in augmented edge order.
#include <ATen/ATen.h>
#include <torch/library.h>

#include <tuple>

#include "binding/attention_checks.h"
#include "binding/utils.h"
#include "kernels/cpu/gat.h"
#include "kernels/cpu/gatv2.h"
#include "kernels/cpu/transformer.h"

namespace iognn::torch_ext {
namespace {

using namespace attention;

// ---- GAT -----------------------------------------------------------------------------------
Forward gat_attention_cpu(const Tensor& rowptr, const Tensor& col, const Tensor& eid,
                          const Tensor& colptr, const Tensor& row, const Tensor& csc2csr,
                          const Tensor& x, const Tensor& a_src, const OptTensor& a_dst,
                          const OptTensor& edge_attr, const OptTensor& w_edge,
                          double negative_slope, double dropout, int64_t seed, bool return_alpha) {
  constexpr const char* op = "iognn::gat_attention";
  const GraphArgs g{rowptr, col, eid, colptr, row, csc2csr};
  const GatArgs a = check_gat(op, g, x, a_src, a_dst, edge_attr, w_edge);
  const auto cfg = make_config(op, a.H, a.C, dropout, seed);
  Forward out = make_outputs(g, a.x, a.H, a.C, return_alpha);
  dispatch(op, a.x, g, [&](auto ft, auto it) {
    using T = typename decltype(ft)::type;
    using I = typename decltype(it)::type;
    cpu::gat_forward<T, I>(graph_view<I>(g), cfg,
                           gat_inputs<T>(a, negative_slope),
                           output_view<T>(out));
  });
  return out;
}

Backward gat_attention_backward_cpu(const Tensor& rowptr, const Tensor& col, const Tensor& eid,
                                    const Tensor& colptr, const Tensor& row,
                                    const Tensor& csc2csr, const Tensor& x, const Tensor& a_src,
                                    const OptTensor& a_dst, const OptTensor& edge_attr,
                                    const OptTensor& w_edge, const Tensor& lse,
                                    const Tensor& grad_out, const OptTensor& grad_alpha,
                                    double negative_slope, double dropout, int64_t seed) {
  constexpr const char* op = "iognn::gat_attention_backward";
  const GraphArgs g{rowptr, col, eid, colptr, row, csc2csr};
  const GatArgs a = check_gat(op, g, x, a_src, a_dst, edge_attr, w_edge);
  const auto cfg = make_config(op, a.H, a.C, dropout, seed);
  const BackwardInputs b =
      check_backward_inputs(op, g, a.x, "x", a.H, a.C, lse, grad_out, grad_alpha);
  Backward grads = gat_grads(a);
  dispatch(op, a.x, g, [&](auto ft, auto it) {
    using T = typename decltype(ft)::type;
    using I = typename decltype(it)::type;
    cpu::gat_backward<T, I>(graph_view<I>(g), cfg,
                            gat_inputs<T>(a, negative_slope), lse_ptr<T>(b),
                            cptr<T>(b.grad_out), grad_alpha_ptr<T>(b),
                            grads_view<GatGrads<T>, T>(grads));
  });
  return grads;
}

// ---- GATv2 ---------------------------------------------------------------------------------
Forward gatv2_attention_cpu(const Tensor& rowptr, const Tensor& col, const Tensor& eid,
                            const Tensor& colptr, const Tensor& row, const Tensor& csc2csr,
                            const Tensor& x_src, const Tensor& x_dst, const Tensor& att,
                            const OptTensor& edge_attr, const OptTensor& w_edge,
                            double negative_slope, double dropout, int64_t seed,
                            bool return_alpha) {
  constexpr const char* op = "iognn::gatv2_attention";
  const GraphArgs g{rowptr, col, eid, colptr, row, csc2csr};
  const GatV2Args a = check_gatv2(op, g, x_src, x_dst, att, edge_attr, w_edge);
  const auto cfg = make_config(op, a.H, a.C, dropout, seed);
  Forward out = make_outputs(g, a.x_src, a.H, a.C, return_alpha);
  dispatch(op, a.x_src, g, [&](auto ft, auto it) {
    using T = typename decltype(ft)::type;
    using I = typename decltype(it)::type;
    cpu::gatv2_forward<T, I>(graph_view<I>(g), cfg,
                             gatv2_inputs<T>(a, negative_slope),
                             output_view<T>(out));
  });
  return out;
}

Backward gatv2_attention_backward_cpu(const Tensor& rowptr, const Tensor& col, const Tensor& eid,
                                      const Tensor& colptr, const Tensor& row,
                                      const Tensor& csc2csr, const Tensor& x_src,
                                      const Tensor& x_dst, const Tensor& att,
                                      const OptTensor& edge_attr, const OptTensor& w_edge,
                                      const Tensor& lse, const Tensor& grad_out,
                                      const OptTensor& grad_alpha, double negative_slope,
                                      double dropout, int64_t seed) {
  constexpr const char* op = "iognn::gatv2_attention_backward";
  const GraphArgs g{rowptr, col, eid, colptr, row, csc2csr};
  const GatV2Args a = check_gatv2(op, g, x_src, x_dst, att, edge_attr, w_edge);
  const auto cfg = make_config(op, a.H, a.C, dropout, seed);
  const BackwardInputs b =
      check_backward_inputs(op, g, a.x_src, "x_src", a.H, a.C, lse, grad_out, grad_alpha);
  Backward grads = gatv2_grads(a);
  dispatch(op, a.x_src, g, [&](auto ft, auto it) {
    using T = typename decltype(ft)::type;
    using I = typename decltype(it)::type;
    cpu::gatv2_backward<T, I>(graph_view<I>(g), cfg,
                              gatv2_inputs<T>(a, negative_slope), lse_ptr<T>(b),
                              cptr<T>(b.grad_out), grad_alpha_ptr<T>(b),
                              grads_view<GatV2Grads<T>, T>(grads));
  });
  return grads;
}

// ---- Graph Transformer ---------------------------------------------------------------------
Forward transformer_attention_cpu(const Tensor& rowptr, const Tensor& col, const Tensor& eid,
                                  const Tensor& colptr, const Tensor& row, const Tensor& csc2csr,
                                  const Tensor& query, const Tensor& key, const Tensor& value,
                                  const OptTensor& edge_attr, const OptTensor& w_edge,
                                  double scale, double dropout, int64_t seed, bool return_alpha) {
  constexpr const char* op = "iognn::transformer_attention";
  const GraphArgs g{rowptr, col, eid, colptr, row, csc2csr};
  const TransformerArgs a = check_transformer(op, g, query, key, value, edge_attr, w_edge);
  const auto cfg = make_config(op, a.H, a.C, dropout, seed);
  Forward out = make_outputs(g, a.query, a.H, a.C, return_alpha);
  dispatch(op, a.query, g, [&](auto ft, auto it) {
    using T = typename decltype(ft)::type;
    using I = typename decltype(it)::type;
    cpu::transformer_forward<T, I>(graph_view<I>(g), cfg,
                                   transformer_inputs<T>(a, scale),
                                   output_view<T>(out));
  });
  return out;
}

Backward transformer_attention_backward_cpu(
    const Tensor& rowptr, const Tensor& col, const Tensor& eid, const Tensor& colptr,
    const Tensor& row, const Tensor& csc2csr, const Tensor& query, const Tensor& key,
    const Tensor& value, const OptTensor& edge_attr, const OptTensor& w_edge, const Tensor& lse,
    const Tensor& grad_out, const OptTensor& grad_alpha, double scale, double dropout,
    int64_t seed) {
  constexpr const char* op = "iognn::transformer_attention_backward";
  const GraphArgs g{rowptr, col, eid, colptr, row, csc2csr};
  const TransformerArgs a = check_transformer(op, g, query, key, value, edge_attr, w_edge);
  const auto cfg = make_config(op, a.H, a.C, dropout, seed);
  const BackwardInputs b =
      check_backward_inputs(op, g, a.query, "query", a.H, a.C, lse, grad_out, grad_alpha);
  Backward grads = transformer_grads(a);
  dispatch(op, a.query, g, [&](auto ft, auto it) {
    using T = typename decltype(ft)::type;
    using I = typename decltype(it)::type;
    cpu::transformer_backward<T, I>(graph_view<I>(g), cfg,
                                    transformer_inputs<T>(a, scale), lse_ptr<T>(b),
                                    cptr<T>(b.grad_out), grad_alpha_ptr<T>(b),
                                    grads_view<TransformerGrads<T>, T>(grads));
  });
  return grads;
}

}  // namespace

// Argument groups shared by the schemas.
#define IOGNN_GRAPH \
  "Tensor rowptr, Tensor col, Tensor eid, Tensor colptr, Tensor row, Tensor csc2csr, "
#define IOGNN_EDGE "Tensor? edge_attr, Tensor? w_edge, "
#define IOGNN_GRADS "Tensor lse, Tensor grad_out, Tensor? grad_alpha, "
#define IOGNN_FORWARD_OUT " -> (Tensor out, Tensor lse, Tensor alpha)"

TORCH_LIBRARY_FRAGMENT(iognn, m) {
  m.def("gat_attention(" IOGNN_GRAPH "Tensor x, Tensor alpha_src, Tensor? alpha_dst, " IOGNN_EDGE
        "float negative_slope, float dropout, int seed, bool return_alpha)" IOGNN_FORWARD_OUT);
  m.def("gat_attention_backward(" IOGNN_GRAPH "Tensor x, Tensor alpha_src, Tensor? alpha_dst, "
        IOGNN_EDGE IOGNN_GRADS "float negative_slope, float dropout, int seed) -> (Tensor grad_x, "
        "Tensor grad_alpha_src, Tensor grad_alpha_dst, Tensor grad_edge_attr, Tensor grad_w_edge)");
  m.def("gatv2_attention(" IOGNN_GRAPH "Tensor x_src, Tensor x_dst, Tensor att, " IOGNN_EDGE
        "float negative_slope, float dropout, int seed, bool return_alpha)" IOGNN_FORWARD_OUT);
  m.def("gatv2_attention_backward(" IOGNN_GRAPH "Tensor x_src, Tensor x_dst, Tensor att, "
        IOGNN_EDGE IOGNN_GRADS "float negative_slope, float dropout, int seed) -> ("
        "Tensor grad_x_src, Tensor grad_x_dst, Tensor grad_att, Tensor grad_edge_attr, "
        "Tensor grad_w_edge)");
  m.def("transformer_attention(" IOGNN_GRAPH "Tensor query, Tensor key, Tensor value, " IOGNN_EDGE
        "float scale, float dropout, int seed, bool return_alpha)" IOGNN_FORWARD_OUT);
  m.def("transformer_attention_backward(" IOGNN_GRAPH "Tensor query, Tensor key, Tensor value, "
        IOGNN_EDGE IOGNN_GRADS "float scale, float dropout, int seed) -> (Tensor grad_query, "
        "Tensor grad_key, Tensor grad_value, Tensor grad_edge_attr, Tensor grad_w_edge)");
}

TORCH_LIBRARY_IMPL(iognn, CPU, m) {
  m.impl("gat_attention", &gat_attention_cpu);
  m.impl("gat_attention_backward", &gat_attention_backward_cpu);
  m.impl("gatv2_attention", &gatv2_attention_cpu);
  m.impl("gatv2_attention_backward", &gatv2_attention_backward_cpu);
  m.impl("transformer_attention", &transformer_attention_cpu);
  m.impl("transformer_attention_backward", &transformer_attention_backward_cpu);
}

}  // namespace iognn::torch_ext

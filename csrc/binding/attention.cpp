// iognn attention family (GAT, GATv2, Graph Transformer): schemas, argument checks and host
// implementations. Math and conventions: csrc/kernels/cpu/attention_common.h.
//
// Every forward takes the whole graph (rowptr, col, eid, colptr, row, csc2csr) so the autograd
// formula (registered from Python) can hand the transposed CSR to the backward op, and returns
//   (out [num_dst, H, C], lse [num_dst, H] fp32 (fp64 for fp64), alpha [E', H] or [0, H]).
// Each backward recomputes the attention from lse and returns one gradient per tensor input; the
// gradient of an absent optional input is an empty tensor.
// All float tensors share one dtype; node tensors may have any row stride (the other dimensions are
// made dense, copying only when they are not); edge_attr [E', De] is in augmented edge order.
#include <ATen/ATen.h>
#include <torch/library.h>

#include <tuple>

#include "binding/utils.h"
#include "kernels/cpu/gat.h"
#include "kernels/cpu/gatv2.h"
#include "kernels/cpu/transformer.h"

namespace iognn::torch_ext {
namespace {

using Tensor = at::Tensor;
using OptTensor = std::optional<at::Tensor>;
using Forward = std::tuple<Tensor, Tensor, Tensor>;
using Backward = std::tuple<Tensor, Tensor, Tensor, Tensor, Tensor>;

struct GraphArgs {
  const Tensor& rowptr;
  const Tensor& col;
  const Tensor& eid;
  const Tensor& colptr;
  const Tensor& row;
  const Tensor& csc2csr;
  int64_t num_src() const { return colptr.numel() - 1; }
  int64_t num_dst() const { return rowptr.numel() - 1; }
  int64_t num_edges() const { return col.numel(); }
};

void check_graph(const char* op, const GraphArgs& g, const Tensor& ref, const char* ref_name) {
  const int64_t E = g.num_edges();
  const std::tuple<const Tensor*, const char*, int64_t> parts[] = {
      {&g.rowptr, "rowptr", -1}, {&g.col, "col", -1}, {&g.eid, "eid", E},
      {&g.colptr, "colptr", -1}, {&g.row, "row", E},  {&g.csc2csr, "csc2csr", E}};
  for (const auto& [t, name, size] : parts) {
    check_index_vector(*t, op, name, size);
    check_same_index_dtype(g.rowptr, *t, op, name);
    check_device(*t, ref, op, name, ref_name);
  }
  TORCH_CHECK_VALUE(g.rowptr.numel() >= 1, op, ": rowptr must have num_dst + 1 >= 1 entries");
  TORCH_CHECK_VALUE(g.colptr.numel() >= 1, op, ": colptr must have num_src + 1 >= 1 entries");
}

template <typename I>
cpu::AttentionGraph<I> graph_view(const GraphArgs& g) {
  return {cptr<I>(g.rowptr), cptr<I>(g.col), cptr<I>(g.eid),     cptr<I>(g.colptr),
          cptr<I>(g.row),    cptr<I>(g.csc2csr), g.num_src(), g.num_dst(), g.num_edges()};
}

// t with every dimension after the first laid out densely; its row stride is kept (a copy only
// when the inner dimensions are not dense).
Tensor dense_rows(const Tensor& t) {
  int64_t expected = 1;
  for (int64_t d = t.dim() - 1; d >= 1; --d) {
    if (t.size(d) != 1 && t.stride(d) != expected) return t.contiguous();
    expected *= t.size(d);
  }
  return t;
}

// Checks a float tensor of shape `shape` with the dtype and device of `ref` (the first feature
// input). `what` names each dimension in the message.
void check_float_tensor(const char* op, const char* name, const Tensor& t, at::IntArrayRef shape,
                        std::initializer_list<const char*> what, const Tensor& ref,
                        const char* ref_name) {
  check_dim(t, int64_t(shape.size()), op, name);
  auto w = what.begin();
  for (size_t d = 0; d < shape.size(); ++d, ++w) check_size(t, int64_t(d), shape[d], op, name, *w);
  check_dtype(t, ref.scalar_type(), op, name);
  check_device(t, ref, op, name, ref_name);
}

// Heads and channels of the reference features [N, H, C].
std::pair<int64_t, int64_t> heads_channels(const char* op, const char* name, const Tensor& t) {
  check_dim(t, 3, op, name);
  TORCH_CHECK_VALUE(t.size(1) >= 1 && t.size(2) >= 1, op, ": ", name,
                    " must have at least one head and one channel, got shape ", t.sizes());
  return {t.size(1), t.size(2)};
}

cpu::AttentionConfig make_config(const char* op, int64_t H, int64_t C, double dropout,
                                 int64_t seed) {
  TORCH_CHECK_VALUE(dropout >= 0.0 && dropout < 1.0, op, ": dropout must be in [0, 1), got ",
                    dropout);
  return {H, C, float(dropout), uint64_t(seed)};
}

// Checks that edge_attr [E', De] and w_edge come together and checks edge_attr; returns De (0
// without edge features). The caller checks w_edge's shape, which depends on the variant.
int64_t check_edge_attr(const char* op, const OptTensor& edge_attr, const OptTensor& w_edge,
                        int64_t E, const Tensor& ref, const char* ref_name) {
  TORCH_CHECK_VALUE(edge_attr.has_value() == w_edge.has_value(), op,
                    ": edge_attr and w_edge must be given together (got ",
                    edge_attr ? "edge_attr" : "w_edge", " only)");
  if (!edge_attr) return 0;
  check_dim(*edge_attr, 2, op, "edge_attr");
  check_float_tensor(op, "edge_attr", *edge_attr, {E, edge_attr->size(1)},
                     {"rows (edges of the graph)", "features"}, ref, ref_name);
  return edge_attr->size(1);
}

// w_edge of GATv2 and the Transformer: lin_edge.weight [H*C, De].
void check_lin_edge(const char* op, const OptTensor& w_edge, int64_t H, int64_t C, int64_t De,
                    const Tensor& ref, const char* ref_name) {
  if (!w_edge) return;
  check_float_tensor(op, "w_edge", *w_edge, {H * C, De},
                     {"rows (heads * channels)", "columns (edge features)"}, ref, ref_name);
}

template <typename T>
cpu::NodeRows<T> node_rows(const Tensor& t) {
  return {cptr<T>(t), t.stride(0)};
}
template <typename T>
cpu::NodeRows<T> node_rows(const OptTensor& t) {
  return t ? node_rows<T>(*t) : cpu::NodeRows<T>{};
}
template <typename T>
cpu::EdgeRows<T> edge_rows(const OptTensor& t) {
  return t ? cpu::EdgeRows<T>{cptr<T>(*t), t->stride(0), t->size(1)} : cpu::EdgeRows<T>{};
}
template <typename T>
T* optional_ptr(const Tensor& t) {
  return t.numel() > 0 ? ptr<T>(t) : nullptr;
}

OptTensor dense_rows(const OptTensor& t) {
  return t ? OptTensor(dense_rows(*t)) : std::nullopt;
}
OptTensor contiguous(const OptTensor& t) {
  return t ? OptTensor(t->contiguous()) : std::nullopt;
}

// Forward outputs: out, lse and alpha (empty [0, H] unless requested).
Forward make_outputs(const GraphArgs& g, const Tensor& ref, int64_t H, int64_t C,
                     bool return_alpha) {
  return {at::empty({g.num_dst(), H, C}, ref.options()),
          at::empty({g.num_dst(), H}, ref.options().dtype(acc_dtype(ref.scalar_type()))),
          at::empty({return_alpha ? g.num_edges() : 0, H}, ref.options())};
}

template <typename T>
cpu::AttentionOutputs<T> output_view(const Forward& o) {
  return {ptr<T>(std::get<0>(o)), ptr<acc_t<T>>(std::get<1>(o)), optional_ptr<T>(std::get<2>(o))};
}

struct BackwardInputs {
  Tensor lse, grad_out;
  OptTensor grad_alpha;
};

// Checks lse, grad_out and grad_alpha of a backward call; returns them contiguous.
BackwardInputs check_backward_inputs(
    const char* op, const GraphArgs& g, const Tensor& ref, const char* ref_name, int64_t H,
    int64_t C, const Tensor& lse, const Tensor& grad_out, const OptTensor& grad_alpha) {
  check_dim(lse, 2, op, "lse");
  check_size(lse, 0, g.num_dst(), op, "lse", "rows (destination nodes)");
  check_size(lse, 1, H, op, "lse", "heads");
  check_dtype(lse, acc_dtype(ref.scalar_type()), op, "lse");
  check_device(lse, ref, op, "lse", ref_name);
  check_float_tensor(op, "grad_out", grad_out, {g.num_dst(), H, C},
                     {"rows (destination nodes)", "heads", "channels"}, ref, ref_name);
  if (grad_alpha)
    check_float_tensor(op, "grad_alpha", *grad_alpha, {g.num_edges(), H},
                       {"rows (edges of the graph)", "heads"}, ref, ref_name);
  return {lse.contiguous(), grad_out.contiguous(), contiguous(grad_alpha)};
}

// Gradient buffer shaped like `input` (contiguous), or an empty tensor for an absent input.
Tensor grad_like(const OptTensor& input, const Tensor& ref) {
  return input ? at::empty(input->sizes(), ref.options()) : at::empty({0}, ref.options());
}

template <typename Fn>
void dispatch(const char* op, const Tensor& features, const GraphArgs& g, Fn&& fn) {
  dispatch_float(features.scalar_type(), op, [&](auto ft) {
    dispatch_index(g.rowptr.scalar_type(), op, [&](auto it) { fn(ft, it); });
  });
}

// ---- GAT -----------------------------------------------------------------------------------
struct GatArgs {
  Tensor x, a_src;
  OptTensor a_dst, edge_attr, w_edge;
  int64_t H, C;
};

GatArgs check_gat(const char* op, const GraphArgs& g, const Tensor& x, const Tensor& a_src,
                  const OptTensor& a_dst, const OptTensor& edge_attr, const OptTensor& w_edge) {
  const auto [H, C] = heads_channels(op, "x", x);
  check_graph(op, g, x, "x");
  check_float_tensor(op, "x", x, {g.num_src(), H, C}, {"rows (source nodes)", "heads", "channels"},
                     x, "x");
  check_float_tensor(op, "alpha_src", a_src, {g.num_src(), H}, {"rows (source nodes)", "heads"},
                     x, "x");
  if (a_dst)
    check_float_tensor(op, "alpha_dst", *a_dst, {g.num_dst(), H},
                       {"rows (destination nodes)", "heads"}, x, "x");
  const int64_t De = check_edge_attr(op, edge_attr, w_edge, g.num_edges(), x, "x");
  if (w_edge)
    check_float_tensor(op, "w_edge", *w_edge, {De, H}, {"rows (edge features)", "heads"}, x, "x");
  return {dense_rows(x), dense_rows(a_src), dense_rows(a_dst), dense_rows(edge_attr),
          contiguous(w_edge), H, C};
}

template <typename T>
cpu::GatInputs<T> gat_inputs(const GatArgs& a, double negative_slope) {
  return {node_rows<T>(a.x), node_rows<T>(a.a_src), node_rows<T>(a.a_dst),
          edge_rows<T>(a.edge_attr), a.w_edge ? cptr<T>(*a.w_edge) : nullptr, negative_slope};
}

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
    cpu::gat_forward<T, I>(graph_view<I>(g), cfg, gat_inputs<T>(a, negative_slope),
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
      check_backward_inputs(op, g, x, "x", a.H, a.C, lse, grad_out, grad_alpha);
  Backward grads{at::empty(x.sizes(), x.options()), at::empty(a_src.sizes(), x.options()),
                 grad_like(a_dst, x), grad_like(edge_attr, x), grad_like(w_edge, x)};
  dispatch(op, a.x, g, [&](auto ft, auto it) {
    using T = typename decltype(ft)::type;
    using I = typename decltype(it)::type;
    const cpu::GatGrads<T> out{ptr<T>(std::get<0>(grads)), ptr<T>(std::get<1>(grads)),
                               optional_ptr<T>(std::get<2>(grads)),
                               optional_ptr<T>(std::get<3>(grads)),
                               optional_ptr<T>(std::get<4>(grads))};
    cpu::gat_backward<T, I>(graph_view<I>(g), cfg, gat_inputs<T>(a, negative_slope),
                            cptr<acc_t<T>>(b.lse), cptr<T>(b.grad_out),
                            b.grad_alpha ? cptr<T>(*b.grad_alpha) : nullptr, out);
  });
  return grads;
}

// ---- GATv2 ---------------------------------------------------------------------------------
struct GatV2Args {
  Tensor x_src, x_dst, att;
  OptTensor edge_attr, w_edge;
  int64_t H, C;
};

GatV2Args check_gatv2(const char* op, const GraphArgs& g, const Tensor& x_src,
                      const Tensor& x_dst, const Tensor& att, const OptTensor& edge_attr,
                      const OptTensor& w_edge) {
  const auto [H, C] = heads_channels(op, "x_src", x_src);
  check_graph(op, g, x_src, "x_src");
  check_float_tensor(op, "x_src", x_src, {g.num_src(), H, C},
                     {"rows (source nodes)", "heads", "channels"}, x_src, "x_src");
  check_float_tensor(op, "x_dst", x_dst, {g.num_dst(), H, C},
                     {"rows (destination nodes)", "heads", "channels"}, x_src, "x_src");
  check_float_tensor(op, "att", att, {H, C}, {"heads", "channels"}, x_src, "x_src");
  const int64_t De = check_edge_attr(op, edge_attr, w_edge, g.num_edges(), x_src, "x_src");
  check_lin_edge(op, w_edge, H, C, De, x_src, "x_src");
  return {dense_rows(x_src), dense_rows(x_dst), att.contiguous(), dense_rows(edge_attr),
          contiguous(w_edge), H, C};
}

template <typename T>
cpu::GatV2Inputs<T> gatv2_inputs(const GatV2Args& a, double negative_slope) {
  return {node_rows<T>(a.x_src), node_rows<T>(a.x_dst), cptr<T>(a.att), edge_rows<T>(a.edge_attr),
          a.w_edge ? cptr<T>(*a.w_edge) : nullptr, negative_slope};
}

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
    cpu::gatv2_forward<T, I>(graph_view<I>(g), cfg, gatv2_inputs<T>(a, negative_slope),
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
      check_backward_inputs(op, g, x_src, "x_src", a.H, a.C, lse, grad_out, grad_alpha);
  const auto& o = x_src.options();
  Backward grads{at::empty(x_src.sizes(), o), at::empty(x_dst.sizes(), o),
                 at::empty(att.sizes(), o), grad_like(edge_attr, x_src),
                 grad_like(w_edge, x_src)};
  dispatch(op, a.x_src, g, [&](auto ft, auto it) {
    using T = typename decltype(ft)::type;
    using I = typename decltype(it)::type;
    const cpu::GatV2Grads<T> out{ptr<T>(std::get<0>(grads)), ptr<T>(std::get<1>(grads)),
                                 ptr<T>(std::get<2>(grads)), optional_ptr<T>(std::get<3>(grads)),
                                 optional_ptr<T>(std::get<4>(grads))};
    cpu::gatv2_backward<T, I>(graph_view<I>(g), cfg, gatv2_inputs<T>(a, negative_slope),
                              cptr<acc_t<T>>(b.lse), cptr<T>(b.grad_out),
                              b.grad_alpha ? cptr<T>(*b.grad_alpha) : nullptr, out);
  });
  return grads;
}

// ---- Graph Transformer ---------------------------------------------------------------------
struct TransformerArgs {
  Tensor query, key, value;
  OptTensor edge_attr, w_edge;
  int64_t H, C;
};

TransformerArgs check_transformer(const char* op, const GraphArgs& g, const Tensor& query,
                                  const Tensor& key, const Tensor& value,
                                  const OptTensor& edge_attr, const OptTensor& w_edge) {
  const auto [H, C] = heads_channels(op, "query", query);
  check_graph(op, g, query, "query");
  check_float_tensor(op, "query", query, {g.num_dst(), H, C},
                     {"rows (destination nodes)", "heads", "channels"}, query, "query");
  check_float_tensor(op, "key", key, {g.num_src(), H, C},
                     {"rows (source nodes)", "heads", "channels"}, query, "query");
  check_float_tensor(op, "value", value, {g.num_src(), H, C},
                     {"rows (source nodes)", "heads", "channels"}, query, "query");
  const int64_t De = check_edge_attr(op, edge_attr, w_edge, g.num_edges(), query, "query");
  check_lin_edge(op, w_edge, H, C, De, query, "query");
  return {dense_rows(query), dense_rows(key), dense_rows(value), dense_rows(edge_attr),
          contiguous(w_edge), H, C};
}

template <typename T>
cpu::TransformerInputs<T> transformer_inputs(const TransformerArgs& a, double scale) {
  return {node_rows<T>(a.query), node_rows<T>(a.key), node_rows<T>(a.value),
          edge_rows<T>(a.edge_attr), a.w_edge ? cptr<T>(*a.w_edge) : nullptr, scale};
}

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
    cpu::transformer_forward<T, I>(graph_view<I>(g), cfg, transformer_inputs<T>(a, scale),
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
      check_backward_inputs(op, g, query, "query", a.H, a.C, lse, grad_out, grad_alpha);
  const auto& o = query.options();
  Backward grads{at::empty(query.sizes(), o), at::empty(key.sizes(), o),
                 at::empty(value.sizes(), o), grad_like(edge_attr, query),
                 grad_like(w_edge, query)};
  dispatch(op, a.query, g, [&](auto ft, auto it) {
    using T = typename decltype(ft)::type;
    using I = typename decltype(it)::type;
    const cpu::TransformerGrads<T> out{
        ptr<T>(std::get<0>(grads)), ptr<T>(std::get<1>(grads)), ptr<T>(std::get<2>(grads)),
        optional_ptr<T>(std::get<3>(grads)), optional_ptr<T>(std::get<4>(grads))};
    cpu::transformer_backward<T, I>(graph_view<I>(g), cfg, transformer_inputs<T>(a, scale),
                                    cptr<acc_t<T>>(b.lse), cptr<T>(b.grad_out),
                                    b.grad_alpha ? cptr<T>(*b.grad_alpha) : nullptr, out);
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

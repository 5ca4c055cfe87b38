// Argument checks, output shapes, kernel-view builders and the variants of the attention ops,
// shared by the CPU binding (attention.cpp, which also holds the schemas), the CUDA binding
// (cuda/attention.cpp), the Meta kernels (meta.cpp: the output shapes only) and the autograd
// formulas (autograd/attention.cpp: the variants).
//
// Both bindings check the same things with the same messages, then hand the kernels the same
// views (kernels/attention_types.h): the host and the device kernels take the same structs.
#pragma once

#include <ATen/ATen.h>

#include <array>
#include <optional>
#include <tuple>

#include "binding/utils.h"
#include "kernels/attention_types.h"

namespace iognn::torch_ext::attention {

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

inline void check_graph(const char* op, const GraphArgs& g, const Tensor& ref,
                        const char* ref_name) {
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

// t with every dimension after the first laid out densely; its row stride is kept (a copy only
// when the inner dimensions are not dense).
inline Tensor dense_rows(const Tensor& t) {
  int64_t expected = 1;
  for (int64_t d = t.dim() - 1; d >= 1; --d) {
    if (t.size(d) != 1 && t.stride(d) != expected) return t.contiguous();
    expected *= t.size(d);
  }
  return t;
}
inline OptTensor dense_rows(const OptTensor& t) {
  return t ? OptTensor(dense_rows(*t)) : std::nullopt;
}
inline OptTensor contiguous(const OptTensor& t) {
  return t ? OptTensor(t->contiguous()) : std::nullopt;
}

// Checks a float tensor of shape `shape` with the dtype and device of `ref` (the first feature
// input). `what` names each dimension in the message.
inline void check_float_tensor(const char* op, const char* name, const Tensor& t,
                               at::IntArrayRef shape, std::initializer_list<const char*> what,
                               const Tensor& ref, const char* ref_name) {
  check_dim(t, int64_t(shape.size()), op, name);
  auto w = what.begin();
  for (size_t d = 0; d < shape.size(); ++d, ++w) check_size(t, int64_t(d), shape[d], op, name, *w);
  check_dtype(t, ref.scalar_type(), op, name);
  check_device(t, ref, op, name, ref_name);
}

// Heads and channels of the reference features [N, H, C].
inline std::pair<int64_t, int64_t> heads_channels(const char* op, const char* name,
                                                  const Tensor& t) {
  check_dim(t, 3, op, name);
  TORCH_CHECK_VALUE(t.size(1) >= 1 && t.size(2) >= 1, op, ": ", name,
                    " must have at least one head and one channel, got shape ", t.sizes());
  return {t.size(1), t.size(2)};
}

inline AttentionConfig make_config(const char* op, int64_t H, int64_t C, double dropout,
                                   int64_t seed) {
  TORCH_CHECK_VALUE(dropout >= 0.0 && dropout < 1.0, op, ": dropout must be in [0, 1), got ",
                    dropout);
  return {H, C, float(dropout), uint64_t(seed)};
}

// Checks that edge_attr [E', De] and w_edge come together and checks edge_attr; returns De (0
// without edge features). The caller checks w_edge's shape, which depends on the variant.
inline int64_t check_edge_attr(const char* op, const OptTensor& edge_attr,
                               const OptTensor& w_edge, int64_t E, const Tensor& ref,
                               const char* ref_name) {
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
inline void check_lin_edge(const char* op, const OptTensor& w_edge, int64_t H, int64_t C,
                           int64_t De, const Tensor& ref, const char* ref_name) {
  if (!w_edge) return;
  check_float_tensor(op, "w_edge", *w_edge, {H * C, De},
                     {"rows (heads * channels)", "columns (edge features)"}, ref, ref_name);
}

// The forward's outputs for the reference features ref [N, H, C]: out [num_dst, H, C] like ref,
// lse [num_dst, H] in the accumulation dtype and alpha [E', H] like ref ([0, H] unless
// requested). A shape function (utils.h): the Meta kernels allocate with it too.
inline Forward empty_forward_outputs(const GraphArgs& g, const Tensor& ref, bool return_alpha) {
  const c10::SymInt num_dst = g.rowptr.sym_numel() - 1, H = ref.sym_size(1);
  return {at::empty_symint({num_dst, H, ref.sym_size(2)}, ref.options()),
          at::empty_symint({num_dst, H}, ref.options().dtype(acc_dtype(ref.scalar_type()))),
          at::empty_symint({return_alpha ? g.col.sym_numel() : c10::SymInt(0), H},
                           ref.options())};
}

struct BackwardInputs {
  Tensor lse, grad_out;
  OptTensor grad_alpha;
};

// Checks lse, grad_out and grad_alpha of a backward call; returns them contiguous.
inline BackwardInputs check_backward_inputs(const char* op, const GraphArgs& g, const Tensor& ref,
                                            const char* ref_name, int64_t H, int64_t C,
                                            const Tensor& lse, const Tensor& grad_out,
                                            const OptTensor& grad_alpha) {
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

template <typename T>
const acc_t<T>* lse_ptr(const BackwardInputs& b) {
  return cptr<acc_t<T>>(b.lse);
}
template <typename T>
const T* grad_alpha_ptr(const BackwardInputs& b) {
  return b.grad_alpha ? cptr<T>(*b.grad_alpha) : nullptr;
}

// ---- per-variant checks ------------------------------------------------------------------------
struct GatArgs {
  Tensor x, a_src;
  OptTensor a_dst, edge_attr, w_edge;
  int64_t H, C;
};

inline GatArgs check_gat(const char* op, const GraphArgs& g, const Tensor& x, const Tensor& a_src,
                         const OptTensor& a_dst, const OptTensor& edge_attr,
                         const OptTensor& w_edge) {
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

struct GatV2Args {
  Tensor x_src, x_dst, att;
  OptTensor edge_attr, w_edge;
  int64_t H, C;
};

inline GatV2Args check_gatv2(const char* op, const GraphArgs& g, const Tensor& x_src,
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

struct TransformerArgs {
  Tensor query, key, value;
  OptTensor edge_attr, w_edge;
  int64_t H, C;
};

inline TransformerArgs check_transformer(const char* op, const GraphArgs& g, const Tensor& query,
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

// ---- kernel views (kernels/attention_types.h, shared by the host and device kernels) ----------
// max_in_degree / max_out_degree: the ops' hint arguments (symbolic or negative: unknown).
template <typename I>
AttentionGraph<I> graph_view(const GraphArgs& g, const c10::SymInt& max_in_degree,
                             const c10::SymInt& max_out_degree) {
  const auto hint = [](const c10::SymInt& h) { return h.maybe_as_int().value_or(-1); };
  return {cptr<I>(g.rowptr), cptr<I>(g.col),     cptr<I>(g.eid),      cptr<I>(g.colptr),
          cptr<I>(g.row),    cptr<I>(g.csc2csr), g.num_src(),         g.num_dst(),
          g.num_edges(),     hint(max_in_degree), hint(max_out_degree)};
}

template <typename T>
T* optional_ptr(const Tensor& t) {
  return t.numel() > 0 ? ptr<T>(t) : nullptr;
}

template <typename T>
NodeRows<T> node_rows(const OptTensor& t) {
  if (!t) return {};
  return {cptr<T>(*t), t->stride(0)};
}
// Edge features: dim = De when given (even with no rows), data null when absent or empty.
template <typename T>
EdgeRows<T> edge_rows(const OptTensor& t) {
  if (!t) return {};
  return {t->numel() > 0 ? cptr<T>(*t) : nullptr, t->stride(0), t->size(1)};
}

template <typename T>
AttentionOutputs<T> output_view(const Forward& o) {
  return {ptr<T>(std::get<0>(o)), ptr<acc_t<T>>(std::get<1>(o)), optional_ptr<T>(std::get<2>(o))};
}

// The kernels' inputs of a checked call (overloaded on the variant's Args).
template <typename T>
GatInputs<T> kernel_inputs(const GatArgs& a, double negative_slope) {
  return {node_rows<T>(a.x),         node_rows<T>(a.a_src),
          node_rows<T>(a.a_dst),     edge_rows<T>(a.edge_attr),
          a.w_edge ? cptr<T>(*a.w_edge) : nullptr, negative_slope};
}
template <typename T>
GatV2Inputs<T> kernel_inputs(const GatV2Args& a, double negative_slope) {
  return {node_rows<T>(a.x_src),     node_rows<T>(a.x_dst),
          cptr<T>(a.att),                    edge_rows<T>(a.edge_attr),
          a.w_edge ? cptr<T>(*a.w_edge) : nullptr, negative_slope};
}
template <typename T>
TransformerInputs<T> kernel_inputs(const TransformerArgs& a, double scale) {
  return {node_rows<T>(a.query),     node_rows<T>(a.key),
          node_rows<T>(a.value),     edge_rows<T>(a.edge_attr),
          a.w_edge ? cptr<T>(*a.w_edge) : nullptr, scale};
}

// The backward's gradients: one per input (first, second, third, edge_attr, w_edge), shaped like
// it and contiguous, in ref's dtype; an empty [0] tensor for an absent input. A shape function
// (utils.h): the Meta kernels allocate with it too.
inline Backward empty_grads(const Tensor& ref, const std::array<OptTensor, 5>& inputs) {
  const auto like = [&](const OptTensor& t) {
    return t ? at::empty_symint(t->sym_sizes(), ref.options()) : at::empty({0}, ref.options());
  };
  return {like(inputs[0]), like(inputs[1]), like(inputs[2]), like(inputs[3]), like(inputs[4])};
}

// The kernels' view of the gradients (Grads: the variant's, e.g. GatGrads<T>): null for empty ones.
template <class Grads, typename T>
Grads grads_view(const Backward& g) {
  return {optional_ptr<T>(std::get<0>(g)), optional_ptr<T>(std::get<1>(g)),
          optional_ptr<T>(std::get<2>(g)), optional_ptr<T>(std::get<3>(g)),
          optional_ptr<T>(std::get<4>(g))};
}

// ---- the variants: their ops' names, reference input (the first feature tensor: its dtype and
// device are the call's, errors name it), the type of their third input and their checks -------
struct Gat {
  static constexpr const char *kOp = "iognn::gat_attention", *kRef = "x";
  static constexpr const char* kBackwardOp = "iognn::gat_attention_backward";
  using Third = OptTensor;  // alpha_dst is optional
  static constexpr auto check = &check_gat;
};
struct GatV2 {
  static constexpr const char *kOp = "iognn::gatv2_attention", *kRef = "x_src";
  static constexpr const char* kBackwardOp = "iognn::gatv2_attention_backward";
  using Third = Tensor;
  static constexpr auto check = &check_gatv2;
};
struct Transformer {
  static constexpr const char *kOp = "iognn::transformer_attention", *kRef = "query";
  static constexpr const char* kBackwardOp = "iognn::transformer_attention_backward";
  using Third = Tensor;
  static constexpr auto check = &check_transformer;
};

}  // namespace iognn::torch_ext::attention

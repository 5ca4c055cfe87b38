// The fused layer ops of the propagate family: a dense projection and a propagate in one op, so
// that a GCN, SAGE or GraphConv layer is one autograd node and one dispatcher call from Python
// (on a small graph a layer's time is the host's, and every op and node it avoids costs 10-50 us
// of it).
//
//   linear_propagate:  out = A (x W^T) + b                       (GCNConv)
//   propagate_linear:  out = (A x) W^T + b + x_root W_root^T     (SAGEConv, GraphConv)
//                      or   A (x W^T) + b + x_root W_root^T     (projected first: fewer bytes)
//
// A is the graph's sum or mean (`reduce`) weighted by `weight` (CSR order, fp32 or fp64), as in
// iognn::propagate. In propagate_linear an absent x_root with a root weight means the root
// features are x itself (a square graph), which lets the backward add both terms of grad_x in one
// product. Both forwards are written here once: the ops' composite kernel
// (binding/propagate_layers.cpp, every backend and the Meta / fake one) and their autograd
// formula (binding/autograd/propagate_layers.cpp) call them.
#pragma once

#include <ATen/ATen.h>

#include <optional>
#include <tuple>
#include <utility>

#include "binding/propagate_calls.h"
#include "binding/utils.h"

namespace iognn::torch_ext::propagate_layers {

using Optional = std::optional<at::Tensor>;

// The projection W [F_out, F_in] of a 2-D operand, named by `name`. A width that does not match
// is left to the dense product, whose message is the one a linear layer gives.
inline void check_projection(const char* op, const at::Tensor& w, const char* name,
                             const at::Tensor& x, const char* x_name) {
  check_dim(x, 2, op, x_name);
  check_dim(w, 2, op, name);
  check_device(w, x, op, name, x_name);
  // A RuntimeError, as the dense product of a linear layer raises for the same mistake.
  TORCH_CHECK(w.scalar_type() == x.scalar_type(), op, ": ", name, " has dtype ", w.scalar_type(),
              " but ", x_name, " has dtype ", x.scalar_type());
}

// bias: optional [F_out] in the dtype of the output.
inline void check_bias(const char* op, const Optional& bias, const at::Tensor& w,
                       const at::Tensor& x) {
  if (!bias) return;
  check_dim(*bias, 1, op, "bias");
  check_device(*bias, x, op, "bias", "x");
  check_dtype(*bias, x.scalar_type(), op, "bias");
  TORCH_CHECK_VALUE(bias->sym_size(0) == w.sym_size(0), op,
                    ": bias must have one entry per output feature");
}

// (h = x W^T, out = A h + b) of checked arguments: the projection is kept for the gradient of
// the edge weights. linear_propagate, and propagate_linear when it projects first.
inline std::pair<at::Tensor, at::Tensor> project_then_propagate(
    const at::Tensor& rowptr, const at::Tensor& col, const at::Tensor& colptr,
    const at::Tensor& row, const at::Tensor& csc2csr, const Optional& weight, const at::Tensor& x,
    const at::Tensor& lin_weight, c10::string_view reduce, const Optional& bias,
    const c10::SymInt& max_in_degree, const c10::SymInt& max_out_degree) {
  at::Tensor h = at::mm(x, lin_weight.t());
  at::Tensor out = call_propagate(rowptr, col, colptr, row, csc2csr, weight, h, reduce, bias,
                                  max_in_degree, max_out_degree);
  return {std::move(h), std::move(out)};
}

inline std::pair<at::Tensor, at::Tensor> linear_propagate_forward(
    const at::Tensor& rowptr, const at::Tensor& col, const at::Tensor& colptr,
    const at::Tensor& row, const at::Tensor& csc2csr, const Optional& weight, const at::Tensor& x,
    const at::Tensor& lin_weight, c10::string_view reduce, const Optional& bias,
    const c10::SymInt& max_in_degree, const c10::SymInt& max_out_degree) {
  constexpr const char* op = "iognn::linear_propagate";
  check_projection(op, lin_weight, "lin_weight", x, "x");
  check_bias(op, bias, lin_weight, x);
  return project_then_propagate(rowptr, col, colptr, row, csc2csr, weight, x, lin_weight, reduce,
                                bias, max_in_degree, max_out_degree);
}

// Whether propagate_linear runs as A (x W^T) instead of (A x) W^T: the same values for a sum or
// a mean (up to rounding), the propagate then reading F_out-wide rows instead of F_in-wide ones,
// at the price of projecting every source row rather than the destinations' aggregates. Chosen
// when that moves fewer elements in the forward (the backward follows the same proportions):
//   projected first:  N_src (F_in + F_out) + E F_out      aggregated first:  (E + N_dst) F_in
// A wide first layer projects first (citeseer, 3,703 -> 64 features: 3.5x fewer); a layer that
// keeps its width, or a sampled block with about as many sources as edges, aggregates first.
// Symbolic sizes (torch.compile) keep PyG's order, aggregate first, without a guard on them.
inline bool projects_first(const at::Tensor& rowptr, const at::Tensor& col, const at::Tensor& x,
                           const at::Tensor& lin_weight) {
  const auto offsets = rowptr.sym_size(0).maybe_as_int(), edges = col.sym_size(0).maybe_as_int(),
             num_src = x.sym_size(0).maybe_as_int(), f_in = x.sym_size(1).maybe_as_int(),
             f_out = lin_weight.sym_size(0).maybe_as_int();
  if (!offsets || !edges || !num_src || !f_in || !f_out) return false;
  const double projected = double(*num_src) * double(*f_in + *f_out) + double(*edges) * *f_out;
  const double aggregated = double(*edges + *offsets - 1) * double(*f_in);  // E + N_dst rows
  return projected < aggregated;
}

// What propagate_linear's forward computes: `out`, and `kept`, the propagate's operand or result
// that a gradient may read (projected: h = x W^T, read for the edge weights' gradient; else
// agg = A x, read for W's).
struct PropagateLinearForward {
  at::Tensor kept, out;
  bool projected;
};

// out = agg W^T + b + root W_root^T (agg = A x) or A h + b + root W_root^T (h = x W^T, when
// projects_first), root = x_root or x.
inline PropagateLinearForward propagate_linear_forward(
    const at::Tensor& rowptr, const at::Tensor& col, const at::Tensor& colptr,
    const at::Tensor& row, const at::Tensor& csc2csr, const Optional& weight, const at::Tensor& x,
    c10::string_view reduce, const at::Tensor& lin_weight, const Optional& bias,
    const Optional& root_weight, const Optional& x_root, const c10::SymInt& max_in_degree,
    const c10::SymInt& max_out_degree) {
  constexpr const char* op = "iognn::propagate_linear";
  check_projection(op, lin_weight, "lin_weight", x, "x");
  check_bias(op, bias, lin_weight, x);
  TORCH_CHECK_VALUE(!x_root || root_weight, op, ": x_root is given without root_weight");
  const at::Tensor& root = x_root ? *x_root : x;
  if (root_weight) {
    const char* root_name = x_root ? "x_root" : "x";
    check_projection(op, *root_weight, "root_weight", root, root_name);
    TORCH_CHECK_VALUE(root_weight->sym_size(0) == lin_weight.sym_size(0), op,
                      ": root_weight and lin_weight must have the same output features");
    TORCH_CHECK_VALUE(root.sym_size(0) == rowptr.sym_size(0) - 1, op, ": ", root_name,
                      " must have one row per destination node",
                      x_root ? "" : " (without x_root the graph must be square)");
  }
  PropagateLinearForward f;
  f.projected = projects_first(rowptr, col, x, lin_weight);
  if (f.projected) {
    std::tie(f.kept, f.out) = project_then_propagate(rowptr, col, colptr, row, csc2csr, weight, x,
                                                     lin_weight, reduce, bias, max_in_degree,
                                                     max_out_degree);
  } else {
    f.kept = call_propagate(rowptr, col, colptr, row, csc2csr, weight, x, reduce, std::nullopt,
                            max_in_degree, max_out_degree);
    f.out = bias ? at::addmm(*bias, f.kept, lin_weight.t()) : at::mm(f.kept, lin_weight.t());
  }
  if (root_weight) f.out.addmm_(root, root_weight->t());
  return f;
}

}  // namespace iognn::torch_ext::propagate_layers

// Argument checks and output shapes of the propagate ops, shared by their CPU, CUDA and Meta
// implementations so that the first two reject the same inputs with the same messages and all
// three size the outputs alike. The graph tensors' contents (monotone offsets,
// indices in range) are trusted: iognn.Graph validated them when it built them.
#pragma once

#include <ATen/ATen.h>

#include <optional>

#include "binding/utils.h"
#include "kernels/propagate_types.h"

namespace iognn::torch_ext {

inline PropagateReduce parse_reduce(c10::string_view reduce, const char* op) {
  if (reduce == "sum") return PropagateReduce::kSum;
  if (reduce == "mean") return PropagateReduce::kMean;
  TORCH_CHECK_VALUE(false, op, ": reduce must be 'sum' or 'mean', got '", reduce, "'");
}

// The CSR (offsets, indices) of a graph against a dense operand x [rows, F] (named x_name) and an
// optional weight [E] in the accumulation dtype of x; all on x's device.
inline void check_csr(const char* op, const at::Tensor& offsets, const at::Tensor& indices,
                      const std::optional<at::Tensor>& weight, const at::Tensor& x,
                      const char* offsets_name = "rowptr", const char* indices_name = "col",
                      const char* x_name = "x") {
  check_index_vector(offsets, op, offsets_name);
  check_index_vector(indices, op, indices_name);
  check_same_index_dtype(offsets, indices, op, indices_name);
  check_device(offsets, x, op, offsets_name, x_name);
  check_device(indices, x, op, indices_name, x_name);
  TORCH_CHECK_VALUE(offsets.numel() >= 1, op, ": ", offsets_name,
                    " must have num_rows + 1 >= 1 entries");
  check_dim(x, 2, op, x_name);
  if (weight) {
    check_dim(*weight, 1, op, "edge_weight");
    check_size(*weight, 0, indices.numel(), op, "edge_weight", "entries");
    check_dtype(*weight, acc_dtype(x.scalar_type()), op, "edge_weight");
    check_device(*weight, x, op, "edge_weight", x_name);
  }
}

// A further index vector of the graph: the index dtype of `ref`, on the device of x (x_name).
inline void check_graph_vector(const char* op, const at::Tensor& t, const char* name,
                               const at::Tensor& ref, const at::Tensor& x, const char* x_name,
                               int64_t size = -1) {
  check_index_vector(t, op, name, size);
  check_same_index_dtype(ref, t, op, name);
  check_device(t, x, op, name, x_name);
}

// bias: optional [F] in the dtype of x, on its device (added to every output row).
inline void check_propagate_args(const char* op, const at::Tensor& rowptr, const at::Tensor& col,
                                 const at::Tensor& colptr,
                                 const std::optional<at::Tensor>& weight, const at::Tensor& x,
                                 const std::optional<at::Tensor>& bias) {
  check_csr(op, rowptr, col, weight, x);
  check_index_vector(colptr, op, "colptr");
  check_size(x, 0, colptr.numel() - 1, op, "x", "rows (source nodes)");
  if (bias) {
    check_dim(*bias, 1, op, "bias");
    check_size(*bias, 0, x.size(1), op, "bias", "entries (one per feature of x)");
    check_dtype(*bias, x.scalar_type(), op, "bias");
    check_device(*bias, x, op, "bias", "x");
  }
}

inline void check_backward_x_args(const char* op, const at::Tensor& colptr, const at::Tensor& row,
                                  const at::Tensor& csc2csr, const at::Tensor& rowptr,
                                  const std::optional<at::Tensor>& weight,
                                  const at::Tensor& grad_out) {
  check_csr(op, colptr, row, weight, grad_out, "colptr", "row", "grad_out");
  check_graph_vector(op, csc2csr, "csc2csr", colptr, grad_out, "grad_out", row.numel());
  check_graph_vector(op, rowptr, "rowptr", colptr, grad_out, "grad_out");
  check_size(grad_out, 0, rowptr.numel() - 1, op, "grad_out", "rows (destination nodes)");
}

inline void check_backward_weight_args(const char* op, const at::Tensor& rowptr,
                                       const at::Tensor& col, const at::Tensor& grad_out,
                                       const at::Tensor& x) {
  check_csr(op, rowptr, col, std::nullopt, x);
  check_dim(grad_out, 2, op, "grad_out");
  check_device(grad_out, x, op, "grad_out", "x");
  check_dtype(grad_out, x.scalar_type(), op, "grad_out");
  check_size(grad_out, 0, rowptr.numel() - 1, op, "grad_out", "rows (destination nodes)");
  check_size(grad_out, 1, x.size(1), op, "grad_out", "features");
}

// propagate_backward_weight's grad_w [E] in the accumulation dtype of x (a shape function,
// utils.h).
inline at::Tensor empty_edge_grad(const at::Tensor& col, const at::Tensor& x) {
  return at::empty_symint({col.sym_numel()}, x.options().dtype(acc_dtype(x.scalar_type())));
}

}  // namespace iognn::torch_ext

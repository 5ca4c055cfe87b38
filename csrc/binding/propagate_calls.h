// Typed calls of the iognn::propagate ops through the dispatcher, for the code that composes them:
// their autograd formula (binding/autograd/propagate.cpp) and the fused layer ops
// (binding/propagate_layers.cpp, binding/autograd/propagate_layers.cpp). Called below the
// Autograd key, they reach the CPU / CUDA / Meta implementations.
#pragma once

#include <ATen/ATen.h>

#include <optional>

#include "binding/autograd/dispatch.h"

namespace iognn::torch_ext {

inline at::Tensor call_propagate(const at::Tensor& rowptr, const at::Tensor& col,
                                 const at::Tensor& colptr, const at::Tensor& row,
                                 const at::Tensor& csc2csr,
                                 const std::optional<at::Tensor>& weight, const at::Tensor& x,
                                 c10::string_view reduce, const std::optional<at::Tensor>& bias,
                                 c10::SymInt max_in_degree, c10::SymInt max_out_degree) {
  static const auto op = typed_op<at::Tensor(
      const at::Tensor&, const at::Tensor&, const at::Tensor&, const at::Tensor&, const at::Tensor&,
      const std::optional<at::Tensor>&, const at::Tensor&, c10::string_view,
      const std::optional<at::Tensor>&, c10::SymInt, c10::SymInt)>("iognn::propagate");
  return op.call(rowptr, col, colptr, row, csc2csr, weight, x, reduce, bias,
                 std::move(max_in_degree), std::move(max_out_degree));
}

inline at::Tensor call_propagate_backward_x(const at::Tensor& colptr, const at::Tensor& row,
                                            const at::Tensor& csc2csr, const at::Tensor& rowptr,
                                            const std::optional<at::Tensor>& weight,
                                            const at::Tensor& grad_out, c10::string_view reduce,
                                            c10::SymInt max_out_degree) {
  static const auto op = typed_op<at::Tensor(
      const at::Tensor&, const at::Tensor&, const at::Tensor&, const at::Tensor&,
      const std::optional<at::Tensor>&, const at::Tensor&, c10::string_view, c10::SymInt)>(
      "iognn::propagate_backward_x");
  return op.call(colptr, row, csc2csr, rowptr, weight, grad_out, reduce,
                 std::move(max_out_degree));
}

inline at::Tensor call_propagate_backward_weight(const at::Tensor& rowptr, const at::Tensor& col,
                                                 const at::Tensor& grad_out, const at::Tensor& x,
                                                 c10::string_view reduce,
                                                 c10::SymInt max_in_degree) {
  static const auto op =
      typed_op<at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&,
                          const at::Tensor&, c10::string_view, c10::SymInt)>(
          "iognn::propagate_backward_weight");
  return op.call(rowptr, col, grad_out, x, reduce, std::move(max_in_degree));
}

}  // namespace iognn::torch_ext

// iognn::linear_propagate and iognn::propagate_linear (binding/propagate_layers.h): schemas and
// the composite kernel every backend and the Meta / fake tensors run. Their autograd is one node
// each (binding/autograd/propagate_layers.cpp); their Python entries are in
// python/iognn/ops/propagate.py, used by GCNConv, SAGEConv and GraphConv.
#include <ATen/ATen.h>
#include <torch/library.h>

#include "binding/propagate_layers.h"

namespace iognn::torch_ext {
namespace {

using propagate_layers::Optional;

at::Tensor linear_propagate(const at::Tensor& rowptr, const at::Tensor& col,
                            const at::Tensor& colptr, const at::Tensor& row,
                            const at::Tensor& csc2csr, const Optional& weight, const at::Tensor& x,
                            const at::Tensor& lin_weight, c10::string_view reduce,
                            const Optional& bias, c10::SymInt max_in_degree,
                            c10::SymInt max_out_degree) {
  return propagate_layers::linear_propagate_forward(rowptr, col, colptr, row, csc2csr, weight, x,
                                                    lin_weight, reduce, bias, max_in_degree,
                                                    max_out_degree)
      .second;
}

at::Tensor propagate_linear(const at::Tensor& rowptr, const at::Tensor& col,
                            const at::Tensor& colptr, const at::Tensor& row,
                            const at::Tensor& csc2csr, const Optional& weight, const at::Tensor& x,
                            c10::string_view reduce, const at::Tensor& lin_weight,
                            const Optional& bias, const Optional& root_weight,
                            const Optional& x_root, c10::SymInt max_in_degree,
                            c10::SymInt max_out_degree) {
  return propagate_layers::propagate_linear_forward(rowptr, col, colptr, row, csc2csr, weight, x,
                                                    reduce, lin_weight, bias, root_weight, x_root,
                                                    max_in_degree, max_out_degree)
      .out;
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(iognn, m) {
  m.def(
      "linear_propagate(Tensor rowptr, Tensor col, Tensor colptr, Tensor row, Tensor csc2csr, "
      "Tensor? weight, Tensor x, Tensor lin_weight, str reduce, Tensor? bias=None, "
      "SymInt max_in_degree=-1, SymInt max_out_degree=-1) -> Tensor");
  m.def(
      "propagate_linear(Tensor rowptr, Tensor col, Tensor colptr, Tensor row, Tensor csc2csr, "
      "Tensor? weight, Tensor x, str reduce, Tensor lin_weight, Tensor? bias=None, "
      "Tensor? root_weight=None, Tensor? x_root=None, SymInt max_in_degree=-1, "
      "SymInt max_out_degree=-1) -> Tensor");
}

TORCH_LIBRARY_IMPL(iognn, CompositeExplicitAutograd, m) {
  m.impl("linear_propagate", &linear_propagate);
  m.impl("propagate_linear", &propagate_linear);
}

}  // namespace iognn::torch_ext

// iognn::gat_projection (binding/gat_projection.h): schema and the composite kernel every backend
// and the Meta / fake tensors run; its autograd is binding/autograd/gat_projection.cpp.
#include <ATen/ATen.h>
#include <torch/library.h>

#include "binding/gat_projection.h"

namespace iognn::torch_ext {
namespace {

at::Tensor gat_projection_composite(const at::Tensor& x, const at::Tensor& weight,
                                    const at::Tensor& att_src, const at::Tensor& att_dst) {
  return gat_projection::forward(x, weight, att_src, att_dst).second;
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(iognn, m) {
  m.def("gat_projection(Tensor x, Tensor weight, Tensor att_src, Tensor att_dst) -> Tensor");
}

TORCH_LIBRARY_IMPL(iognn, CompositeExplicitAutograd, m) {
  m.impl("gat_projection", &gat_projection_composite);
}

}  // namespace iognn::torch_ext

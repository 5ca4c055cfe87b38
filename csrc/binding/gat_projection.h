// GATConv's projection as one op: the features and both attention logits of every node from one
// GEMM, `rows = x [W; W_att]^T = [h | alpha_src | alpha_dst]` ([N, H C + 2 H]), with
// `W_att[k h] = sum_c att_k[h, c] W[h C + c]` (k: src, dst), so that `alpha_k = (h.view(N, H, C) *
// att_k).sum(-1)` costs a thin GEMM instead of a product and a reduction over [N, H, C]. Written
// once for the op's composite kernel (binding/gat_projection.cpp: every backend, Meta / fake) and
// its autograd (binding/autograd/gat_projection.cpp), which makes the layer's projection one
// dispatcher call and one autograd node instead of six of each (python/iognn/nn/conv/gat_conv.py).
#pragma once

#include <ATen/ATen.h>

#include <utility>

#include "binding/utils.h"

namespace iognn::torch_ext::gat_projection {

// att_src / att_dst [1, H, C] (PyG's parameters): [2, H, C].
inline at::Tensor stacked_att(const at::Tensor& att_src, const at::Tensor& att_dst) {
  return at::cat({att_src, att_dst}, 1).view({2, att_src.size(1), att_src.size(2)});
}

// (W_cat = [W; W_att] [H C + 2 H, F], rows = x W_cat^T).
inline std::pair<at::Tensor, at::Tensor> forward(const at::Tensor& x, const at::Tensor& weight,
                                                 const at::Tensor& att_src,
                                                 const at::Tensor& att_dst) {
  constexpr const char* op = "iognn::gat_projection";
  check_dim(x, 2, op, "x");
  check_dim(weight, 2, op, "weight");
  check_dim(att_src, 3, op, "att_src");
  check_dim(att_dst, 3, op, "att_dst");
  check_size(att_src, 0, 1, op, "att_src", "rows (its shape is [1, heads, channels])");
  for (const auto& [t, name] : {std::pair(&weight, "weight"), std::pair(&att_dst, "att_dst")}) {
    check_device(*t, att_src, op, name, "att_src");
    TORCH_CHECK(t->scalar_type() == att_src.scalar_type(), op, ": ", name, " has dtype ",
                t->scalar_type(), " but att_src has dtype ", att_src.scalar_type());
  }
  TORCH_CHECK_VALUE(att_dst.sizes() == att_src.sizes(), op, ": att_dst must have the shape of "
                    "att_src, ", att_src.sizes(), ", got ", att_dst.sizes());
  const int64_t H = att_src.size(1), C = att_src.size(2);
  TORCH_CHECK_VALUE(weight.sym_size(0) == H * C, op, ": weight must have heads * channels = ",
                    H * C, " rows, got ", weight.sym_size(0));
  const at::Tensor w_att =
      (weight.view({1, H, C, -1}) * stacked_att(att_src, att_dst).view({2, H, C, 1}))
          .sum(2)
          .view({2 * H, -1});
  at::Tensor w_cat = at::cat({weight, w_att});
  // x W_cat^T as F.linear computes it, so the rows equal the separate ops' bit for bit; a width
  // that does not match raises the dense product's own message, as a linear layer does.
  at::Tensor rows = at::mm(x, w_cat.t());
  return {std::move(w_cat), std::move(rows)};
}

}  // namespace iognn::torch_ext::gat_projection

// GAT (v1) attention, host kernels (skeleton and conventions: attention_common.h).
//
//   s_p     = leaky_relu(a_src[j,h] + a_dst[i,h] + sum_d edge_attr[e,d] * w_edge[d,h], slope)
//   value_p = x[j,h,:]
// a_src [num_src, H] and a_dst [num_dst, H] are the caller's (x * att).sum(-1); w_edge [De, H] is
// lin_edge.weight contracted with att_edge, so the kernel never forms an [E', H*C] tensor. The
// alpha output is taken after dropout (PyG's GATConv).
#pragma once

#include <cstdint>

#include "kernels/cpu/attention_common.h"

namespace iognn::cpu {

template <typename T>
struct GatInputs {
  NodeRows<T> x;          // [num_src, H, C]
  NodeRows<T> a_src;      // [num_src, H]
  NodeRows<T> a_dst;      // [num_dst, H]; data null: no destination term (PyG's x_dst = None)
  EdgeRows<T> edge_attr;  // [E', De] or absent
  const T* w_edge;        // [De, H] contiguous, with edge_attr
  double negative_slope;
};

// Gradient outputs, contiguous; a_dst / edge_attr / w_edge are null when that input is absent.
template <typename T>
struct GatGrads {
  T* x;          // [num_src, H, C]
  T* a_src;      // [num_src, H]
  T* a_dst;      // [num_dst, H]
  T* edge_attr;  // [E', De]
  T* w_edge;     // [De, H]
};

template <typename T, typename index_t>
void gat_forward(const AttentionGraph<index_t>& g, const AttentionConfig& cfg,
                 const GatInputs<T>& in, const AttentionOutputs<T>& out);

// grad_out [num_dst, H, C] contiguous; grad_alpha [E', H] (of alpha after dropout) or null.
template <typename T, typename index_t>
void gat_backward(const AttentionGraph<index_t>& g, const AttentionConfig& cfg,
                  const GatInputs<T>& in, const acc_t<T>* lse, const T* grad_out,
                  const T* grad_alpha, const GatGrads<T>& grads);

}  // namespace iognn::cpu

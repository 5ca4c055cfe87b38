// GATv2 attention, host kernels (skeleton and conventions: attention_common.h).
//
//   z_p[h,c]  = x_dst[i,h,c] + x_src[j,h,c] + ep_p[h,c]
//   ep_p[h,c] = sum_d W_e[h*C+c, d] edge_attr[e,d]   (0 without edge features)
//   s_p      = sum_c att[h,c] * leaky_relu(z_p[h,c], slope)
//   value_p  = x_src[j,h,:]
// W_e is lin_edge.weight [H*C, De] (no bias); ep_p is recomputed per edge and head, never stored.
// The alpha output is taken after dropout (PyG's GATv2Conv).
#pragma once

#include <cstdint>

#include "kernels/cpu/attention_common.h"

namespace iognn::cpu {

template <typename T>
struct GatV2Inputs {
  NodeRows<T> x_src;      // [num_src, H, C]
  NodeRows<T> x_dst;      // [num_dst, H, C]
  const T* att;           // [H, C] contiguous
  EdgeRows<T> edge_attr;  // [E', De] or absent
  const T* w_edge;        // [H*C, De] contiguous, with edge_attr
  double negative_slope;
};

// Gradient outputs, contiguous; edge_attr / w_edge are null when edge_attr is absent.
template <typename T>
struct GatV2Grads {
  T* x_src;      // [num_src, H, C]
  T* x_dst;      // [num_dst, H, C]
  T* att;        // [H, C]
  T* edge_attr;  // [E', De]
  T* w_edge;     // [H*C, De]
};

template <typename T, typename index_t>
void gatv2_forward(const AttentionGraph<index_t>& g, const AttentionConfig& cfg,
                   const GatV2Inputs<T>& in, const AttentionOutputs<T>& out);

// grad_out [num_dst, H, C] contiguous; grad_alpha [E', H] (of alpha after dropout) or null.
template <typename T, typename index_t>
void gatv2_backward(const AttentionGraph<index_t>& g, const AttentionConfig& cfg,
                    const GatV2Inputs<T>& in, const acc_t<T>* lse, const T* grad_out,
                    const T* grad_alpha, const GatV2Grads<T>& grads);

}  // namespace iognn::cpu

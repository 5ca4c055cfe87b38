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

// Inputs and gradient outputs: kernels/attention_types.h.
template <typename T, typename index_t>
void gatv2_forward(const AttentionGraph<index_t>& g, const AttentionConfig& cfg,
                   const GatV2Inputs<T>& in, const AttentionOutputs<T>& out);

// grad_out [num_dst, H, C] contiguous; grad_alpha [E', H] (of alpha after dropout) or null.
template <typename T, typename index_t>
void gatv2_backward(const AttentionGraph<index_t>& g, const AttentionConfig& cfg,
                    const GatV2Inputs<T>& in, const acc_t<T>* lse, const T* grad_out,
                    const T* grad_alpha, const GatV2Grads<T>& grads);

}  // namespace iognn::cpu

// Graph Transformer (TransformerConv) attention, host kernels (skeleton: attention_common.h).
//
//   ep_p[h,c] = sum_d W_e[h*C+c, d] edge_attr[e,d]   (0 without edge features)
//   s_p       = scale * sum_c q[i,h,c] * (k[j,h,c] + ep_p[h,c])
//   value_p   = v[j,h,:] + ep_p[h,:]
// W_e is lin_edge.weight [H*C, De] (no bias); ep_p is recomputed per edge and head, never stored.
// The alpha output is taken before dropout (PyG's TransformerConv).
#pragma once

#include <cstdint>

#include "kernels/cpu/attention_common.h"

namespace iognn::cpu {

// Inputs and gradient outputs: kernels/attention_types.h.
template <typename T, typename index_t>
void transformer_forward(const AttentionGraph<index_t>& g, const AttentionConfig& cfg,
                         const TransformerInputs<T>& in, const AttentionOutputs<T>& out);

// grad_out [num_dst, H, C] contiguous; grad_alpha [E', H] (of alpha before dropout) or null.
template <typename T, typename index_t>
void transformer_backward(const AttentionGraph<index_t>& g, const AttentionConfig& cfg,
                          const TransformerInputs<T>& in, const acc_t<T>* lse, const T* grad_out,
                          const T* grad_alpha, const TransformerGrads<T>& grads);

}  // namespace iognn::cpu

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

// Inputs and gradient outputs: kernels/attention_types.h.
template <typename T, typename index_t>
void gat_forward(const AttentionGraph<index_t>& g, const AttentionConfig& cfg,
                 const GatInputs<T>& in, const AttentionOutputs<T>& out);

// grad_out [num_dst, H, C] contiguous; grad_alpha [E', H] (of alpha after dropout) or null.
template <typename T, typename index_t>
void gat_backward(const AttentionGraph<index_t>& g, const AttentionConfig& cfg,
                  const GatInputs<T>& in, const acc_t<T>* lse, const T* grad_out,
                  const T* grad_alpha, const GatGrads<T>& grads);

}  // namespace iognn::cpu

// Graph Transformer (TransformerConv) attention, host kernels (skeleton: attention_common.h).
//
//   ep_p[h,c] = sum_d W_e[h*C+c, d] edge_attr[e,d]   (0 without edge features)
//   s_p       = scale * sum_c q[i,h,c] * (k[j,h,c] + ep_p[h,c])
//   value_p   = v[j,h,:] + ep_p[h,:]
// W_e is lin_edge.weight [H*C, De] (no bias); ep_p is recomputed per edge and head, never stored.
// The alpha output is taken before dropout (PyG's TransformerConv).
#pragma once

#include "kernels/cpu/attention_common.h"

namespace iognn::cpu {

// transformer_forward<T, index_t> and transformer_backward<T, index_t>, defined in transformer.cpp.
// Signatures: IOGNN_CPU_ATTENTION_API (attention_common.h); TransformerInputs and TransformerGrads:
// kernels/attention_types.h.
IOGNN_CPU_ATTENTION_API(transformer, TransformerInputs, TransformerGrads)

}  // namespace iognn::cpu

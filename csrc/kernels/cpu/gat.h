// GAT (v1) attention, host kernels (skeleton and conventions: attention_common.h).
//
//   s_p     = leaky_relu(a_src[j,h] + a_dst[i,h] + sum_d edge_attr[e,d] * w_edge[d,h], slope)
//   value_p = x[j,h,:]
// a_src [num_src, H] and a_dst [num_dst, H] are the caller's (x * att).sum(-1); w_edge [De, H] is
// lin_edge.weight contracted with att_edge, so the kernel never forms an [E', H*C] tensor. The
// alpha output is taken after dropout (PyG's GATConv).
#pragma once

#include "kernels/cpu/attention_common.h"

namespace iognn::cpu {

// gat_forward<T, index_t> and gat_backward<T, index_t>, defined in gat.cpp.
// Signatures: IOGNN_CPU_ATTENTION_API (attention_common.h); GatInputs and GatGrads:
// kernels/attention_types.h.
IOGNN_CPU_ATTENTION_API(gat, GatInputs, GatGrads)

}  // namespace iognn::cpu

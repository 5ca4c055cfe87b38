// GATv2 attention, host kernels (skeleton and conventions: attention_common.h).
//
//   z_p[h,c]  = x_dst[i,h,c] + x_src[j,h,c] + ep_p[h,c]
//   ep_p[h,c] = sum_d W_e[h*C+c, d] edge_attr[e,d]   (0 without edge features)
//   s_p      = sum_c att[h,c] * leaky_relu(z_p[h,c], slope)
//   value_p  = x_src[j,h,:]
// W_e is lin_edge.weight [H*C, De] (no bias); ep_p is recomputed per edge and head, never stored.
// The alpha output is taken after dropout (PyG's GATv2Conv).
#pragma once

#include "kernels/cpu/attention_common.h"

namespace iognn::cpu {

// gatv2_forward<T, index_t> and gatv2_backward<T, index_t>, defined in gatv2.cpp.
// Signatures: IOGNN_CPU_ATTENTION_API (attention_common.h); GatV2Inputs and GatV2Grads:
// kernels/attention_types.h.
IOGNN_CPU_ATTENTION_API(gatv2, GatV2Inputs, GatV2Grads)

}  // namespace iognn::cpu

// Attention on the tile layout (Transformer, GAT, GATv2), host kernels: the reference twins of
// kernels/cuda/attention_tiles.h (contract: kernels/attention_tiles_types.h). Parallel over row
// windows; every output row is written by its window alone (deterministic for any thread count).
#pragma once

#include "kernels/attention_tiles_types.h"

namespace iognn::cpu {

// The Transformer's, GAT's and GATv2's (kernels/attention_tiles_types.h), one overload per variant.
// out and lse of every destination row.
template <typename T, typename index_t>
void tiles_forward(const TileAttentionForward<T, index_t>& a);
template <typename T, typename index_t>
void tiles_forward(const GatTileForward<T, index_t>& a);
template <typename T, typename index_t>
void tiles_forward(const GatV2TileForward<T, index_t>& a);

// delta and the destination rows' gradients (grad_query; grad_a_dst; grad_x_dst and att_partial)
// over the forward layout, then the source rows' (grad_key and grad_value; grad_x and grad_a_src;
// grad_x_src) over the transposed; GATv2 then sums att_partial into grad_att.
template <typename T, typename index_t>
void tiles_backward(const TileAttentionBackward<T, index_t>& a);
template <typename T, typename index_t>
void tiles_backward(const GatTileBackward<T, index_t>& a);
template <typename T, typename index_t>
void tiles_backward(const GatV2TileBackward<T, index_t>& a);

}  // namespace iognn::cpu

// Attention on the tile layout (Transformer, GAT, GATv2), host kernels: the reference twins of
// kernels/cuda/attention_tiles.h (contract: kernels/attention_tiles_types.h). Parallel over row
// windows; every output row is written by its window alone (deterministic for any thread count).
#pragma once

#include "kernels/attention_tiles_types.h"

namespace iognn::cpu {

// out and lse of every destination row, for a variant's arguments
// (kernels/attention_tiles_types.h; instantiated for the Transformer's, GAT's and GATv2's).
template <template <typename> class Inputs, typename T, typename index_t>
void tiles_forward(const TileForward<Inputs, T, index_t>& a);

// delta and the destination rows' gradients (grad_query; grad_a_dst; grad_x_dst and att_partial)
// over the forward layout, then the source rows' (grad_key and grad_value; grad_x and grad_a_src;
// grad_x_src) over the transposed; GATv2 then sums att_partial into grad_att.
template <template <typename> class Inputs, template <typename> class Grads, typename T,
          typename index_t>
void tiles_backward(const TileBackward<Inputs, Grads, T, index_t>& a);

}  // namespace iognn::cpu

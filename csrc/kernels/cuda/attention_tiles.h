// Attention on the tile layout (Transformer, GAT, GATv2), CUDA kernels (contract:
// kernels/attention_tiles_types.h; host twins: kernels/cpu/attention_tiles.h). Torch-free,
// asynchronous on `stream`, no allocation (the caller gives the backward's delta scratch), no
// synchronisation.
//
// One warp per (row window, head), on the Tensor Cores (kernels/cuda/tile_mma.cuh: TF32 for
// float, fp16, bf16; fp32 accumulation). Per step the warp takes two tiles (16 key columns): it
// stages their key / value rows (and, in the backward, the columns' query / grad rows) in shared
// memory, zero-padded to Cp channels (C rounded up to 16, 32, 64 or 128), multiplies the 16 x Cp
// blocks into 16 x 16 score blocks, applies the counts and the softmax per row on the CUDA cores
// (two lanes per row, one tile each), and multiplies the 16 x 16 weights back into 16 x Cp
// blocks. The forward keeps its output rows in shared memory (the online softmax rescales them
// when a row's max grows); the backward keeps its sums in accumulator fragments. Every output row
// is written once by its window's warp, the steps run in tile order: deterministic.
// fp32 inputs run as TF32 (10-bit mantissa): the caller decides whether the user allows that.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/attention_tiles_types.h"

namespace iognn::cuda {

// The widest head (C) the kernels take.
inline constexpr int64_t kTileAttentionMaxChannels = 128;

// The forward of a variant (its arguments: kernels/attention_tiles_types.h; instantiated for the
// Transformer's, GAT's and GATv2's). T is float (TF32), half_t or bf16_t; a.channels <=
// kTileAttentionMaxChannels. GAT's scores are computed elementwise from the logits, GATv2's per
// slot from the staged x_dst and x_src rows on the CUDA cores (no score product).
template <template <typename> class Inputs, typename T, typename index_t>
void tiles_forward(const TileForward<Inputs, T, index_t>& a, cudaStream_t stream);

// The destination rows' kernel (writing delta) over the forward layout, then the source rows'
// kernel over the transposed one, in stream order (GATv2: then the sum of att_partial into
// grad_att, a fixed order).
template <template <typename> class Inputs, template <typename> class Grads, typename T,
          typename index_t>
void tiles_backward(const TileBackward<Inputs, Grads, T, index_t>& a, cudaStream_t stream);

}  // namespace iognn::cuda

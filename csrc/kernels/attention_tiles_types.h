// Attention on the tile layout (core/tiles.h): the contract of the host twins
// (kernels/cpu/attention_tiles.h) and the Tensor Core kernels (kernels/cuda/attention_tiles.h),
// and the plain views both take. The path serves the attention of TransformerConv, GATConv and
// GATv2Conv without edge features, dropout or a returned alpha (those stay on the CSR kernels of
// attention_types.h).
//
// For each destination i and head h, with count_ij the multiplicity of the pair (i, j) (duplicate
// edges count once each, as in PyG's softmax) and s_ij the variant's score:
//   Transformer: s_ij = scale * <q_ih, k_jh>,                         value v_jh
//   GAT:         s_ij = leaky_relu(a_src[j,h] + a_dst[i,h]),           value x_jh
//                (no a_dst term when a_dst is absent; leaky_relu'(0) is the negative slope)
//   GATv2:       s_ij = sum_c att[h,c] leaky_relu(z_ij[h,c]),          value x_src_jh
//                z_ij[h,c] = x_dst[i,h,c] + x_src[j,h,c]
//   lse_ih = m + log sum_j count_ij exp(s_ij - m)      (m the row's largest s; -inf: no edge)
//   P_ij   = count_ij exp(s_ij - lse_ih)
//   out_ih = sum_j P_ij value_jh                        (0 for a row without edges)
// Forward, per row window of 16 destinations and head: the window's tiles in order, each a
// block of scores of the window's 16 rows and the tile's 8 columns (the Transformer: a block
// product of query and key rows; GAT: elementwise from the logits; GATv2: per slot, a sum over
// the channels of the window's x_dst row and the column's x_src row), an online softmax per row
// (running max and sum; the sum rescaled when the max grows), the tile's 8 value rows
// aggregated; out and lse stored once per row.
// Backward (FlashAttention-2 style, no atomics, deterministic), with dO = grad_out:
//   D_ih  = <dO_ih, out_ih>                                     (per row, into `delta`)
//   dS_ij = P_ij (<dO_ih, value_jh> - D_ih)
//   over the windows of the forward layout (destination rows):
//     Transformer: dQ_ih = scale sum_j dS_ij k_jh;  GAT: d a_dst[i,h] = sum_j dS_ij leaky_relu'_ij
//     GATv2: d x_dst[i,h,c] = sum_j g_ij[c], g_ij[c] = dS_ij att[h,c] leaky_relu'(z_ij[h,c]);
//            d att[h,c] = sum_ij dS_ij leaky_relu(z_ij[h,c]) (per window into att_partial, then
//            summed over the windows in order)
//   over the windows of the transposed layout (windows of sources, columns of destinations; P
//   recomputed from lse):
//     d value_jh = sum_i P_ij dO_ih (dV, or GAT's dx), and
//     Transformer: dK_jh = scale sum_i dS_ij q_ih;  GAT: d a_src[j,h] = sum_i dS_ij leaky_relu'_ij
//     GATv2: d x_src[j,h,c] = sum_i P_ij dO_ih[c] + sum_i g_ij[c]
// Each output row is written by the one window holding it, the tiles summed in layout order.
//
// counts [num_tiles * 128] in the accumulation type: count_ij at the slot of (i, j) in the layout
// (slot t * 128 + 8 r + c), 0 where a tile holds no pair; the transposed layout's counts index the
// same pairs. The host twin skips a slot with count 0; the Tensor Core kernels multiply it by 0
// inside their block products, so there a non-finite key or value of a source spreads to every
// row of the windows whose tiles hold that source (the CSR kernels keep it to its own edges).
//
// Places (the family's; a variant is its arguments here and its scores in each place):
//   kernels/cpu/attention_tiles.{h,cpp}   host twins (every dtype; fp32 / fp64 accumulation):
//                                         the window loops once, a score class per variant
//   kernels/cuda/attention_tiles.{h,cu}   Tensor Cores (TF32 for fp32, fp16 / bf16; fp32
//                                         accumulation): the kernels once, a score class per
//                                         variant
//   binding/attention_tiles_ops.h         the op bodies; binding/attention_tiles.cpp (schemas,
//                                         host and Meta kernels), binding/cuda/attention_tiles.cpp
//   python/iognn/ops/attention_tiles.py   autograd and the choice of path
//   tests/python/test_attention_tiles{,_cuda}.py, tests/python/test_gat_tiles{,_cuda}.py,
//   tests/python/test_gatv2_tiles{,_cuda}.py
#pragma once

#include <cstdint>

#include "kernels/attention_types.h"

namespace iognn {

// One tile layout of the graph (core/tiles.h) and the multiplicity of each of its slots.
template <typename acc, typename index_t>
struct TileLayoutView {
  const int64_t* window_ptr;  // [num_windows + 1]
  const index_t* tile_cols;   // [num_tiles * 8], -1 padded
  const index_t* row_order;   // [num_rows] or null (identity)
  const acc* counts;          // [num_tiles * 128]
  int64_t num_rows;           // rows the windows cover (destinations, or sources when transposed)
};

// What every variant's forward takes besides its inputs and parameter.
template <typename T, typename index_t>
struct TileForwardArgs {
  TileLayoutView<acc_t<T>, index_t> layout;  // windows of destinations
  int64_t heads, channels;
  T* out;          // [num_dst, H, C] contiguous
  acc_t<T>* lse;   // [num_dst, H]
};

// What every variant's backward takes besides its inputs, parameter and gradients.
template <typename T, typename index_t>
struct TileBackwardArgs {
  TileLayoutView<acc_t<T>, index_t> layout;      // windows of destinations (their rows' grads)
  TileLayoutView<acc_t<T>, index_t> transposed;  // windows of sources (the values', their rows')
  const T* out;        // [num_dst, H, C] contiguous
  const T* grad_out;   // [num_dst, H, C] contiguous
  const acc_t<T>* lse; // [num_dst, H]
  int64_t heads, channels;
  acc_t<T>* delta;     // [num_dst, H] scratch: D, written by the rows' pass, read by the sources'
};

// Each variant's inputs (its feature rows, then its parameter) and gradient outputs (contiguous),
// the same in its forward's and backward's arguments.
template <typename T>
struct TransformerTileInputs {
  NodeRows<T> query;       // [num_dst, H, C]
  NodeRows<T> key, value;  // [num_src, H, C]
  double scale;
};
template <typename T>
struct TransformerTileGrads {  // rows: dQ; sources: dK, dV
  T *grad_query, *grad_key, *grad_value;
};

template <typename T>
struct GatTileInputs {
  NodeRows<T> x;      // [num_src, H, C]: the values
  NodeRows<T> a_src;  // [num_src, H]
  NodeRows<T> a_dst;  // [num_dst, H]; data null: no destination term
  double negative_slope;
};
template <typename T>
struct GatTileGrads {  // rows: d a_dst; sources: dx, d a_src
  T *grad_x, *grad_a_src;
  T* grad_a_dst;  // null without a_dst
};

template <typename T>
struct GatV2TileInputs {
  NodeRows<T> x_src;  // [num_src, H, C]: the values
  NodeRows<T> x_dst;  // [num_dst, H, C]
  NodeRows<T> att;    // [H, C] contiguous (row 0)
  double negative_slope;
};
template <typename T>
struct GatV2TileGrads {  // rows: d x_dst and d att; sources: d x_src
  T *grad_x_src, *grad_x_dst, *grad_att;
  // [num_windows of the forward layout, H, C] scratch: each (window, head) of the rows' pass
  // writes its rows' share of d att there; the kernels then sum it over the windows in window
  // order (no atomics: the same d att for any thread count or schedule).
  acc_t<T>* att_partial;
};

// A variant's forward and backward arguments: the shared ones and its inputs (and gradients).
template <template <typename> class Inputs, typename T, typename index_t>
struct TileForward : TileForwardArgs<T, index_t>, Inputs<T> {};
template <template <typename> class Inputs, template <typename> class Grads, typename T,
          typename index_t>
struct TileBackward : TileBackwardArgs<T, index_t>, Inputs<T>, Grads<T> {};

template <typename T, typename index_t>
using TileAttentionForward = TileForward<TransformerTileInputs, T, index_t>;
template <typename T, typename index_t>
using TileAttentionBackward = TileBackward<TransformerTileInputs, TransformerTileGrads, T, index_t>;
template <typename T, typename index_t>
using GatTileForward = TileForward<GatTileInputs, T, index_t>;
template <typename T, typename index_t>
using GatTileBackward = TileBackward<GatTileInputs, GatTileGrads, T, index_t>;
template <typename T, typename index_t>
using GatV2TileForward = TileForward<GatV2TileInputs, T, index_t>;
template <typename T, typename index_t>
using GatV2TileBackward = TileBackward<GatV2TileInputs, GatV2TileGrads, T, index_t>;

}  // namespace iognn

// The tile layout of a destination-major CSR: the one format the block-sparse (Tensor Core) paths
// share. Built on the host here (the device twin: kernels/cuda/tile_layout.h, same arrays bit for
// bit); the arrays are what the device kernels read.
//
// Layout:
//   - Destinations are cut into row windows of kTileRows = 16 rows (the last window may have
//     fewer). Without a row order window w holds rows [16 w, min(16 w + 16, num_dst)); with one
//     (row_order [num_dst], a permutation of the rows) it holds rows row_order[16 w .. 16 w + 15].
//     Row r of a tile is the r-th row of its window. A reordering thus only changes which rows
//     share a window: the CSR, the features and the outputs keep their order (a kernel writes
//     the result of tile row r of window w to row row_order[16 w + r]).
//   - A window's condensed columns are the sorted distinct sources (original ids) its rows' edges
//     touch. They are cut into tiles of kTileCols = 8 consecutive condensed columns; the window's
//     last tile is padded with -1. A window without edges has no tiles.
//   - window_ptr [num_windows + 1] (int64): window w owns tiles [window_ptr[w], window_ptr[w + 1]).
//   - tile_cols [num_tiles * 8] (the CSR's index type): the source id of each tile column, -1 for
//     padding.
//   - tile_bitmap [num_tiles * 4] (uint32 words, stored as int32 by the binding): the 16 x 8 bits
//     of which (row, column) pairs of the tile hold at least one edge. Bit b = 8 r + c of the 128
//     is bit (b % 32) of word b / 32, so row r of the tile is byte r of the 16 bytes (little
//     endian): a thread that owns one row reads one byte, and word k holds rows 4k .. 4k + 3.
//   - edge_slot [num_edges] (int64): for CSR position p, the slot t * 128 + 8 r + c of the tile t,
//     row r and column c that hold its (destination, source) pair. Duplicate edges share a slot.
// Duplicate edges (same destination and source) set one bit: the bitmap records the distinct
// pairs; multiplicities and edge values stay in the CSR (edge_slot maps them onto the tiles).
//
// Fill = distinct (dst, src) pairs / (num_tiles * 128): 1.0 when every tile is dense.
//
// Cost: O(E log d) with d a window's edge count (a sort of each window's columns, then one binary
// search per edge). Windows are built in parallel (OpenMP); the result does not depend on the
// thread count.
//
// Errors: ValueError for a rowptr that does not start at 0, decreases or does not end at
// num_edges; IndexError for a column outside [0, num_src); for row_order, IndexError for an entry
// outside [0, num_dst) and ValueError for an entry that repeats (not a permutation).
#pragma once

#include <cstdint>

namespace iognn {

inline constexpr int64_t kTileRows = 16;
inline constexpr int64_t kTileCols = 8;
inline constexpr int64_t kTileSlots = kTileRows * kTileCols;  // (row, column) slots of a tile
inline constexpr int64_t kTileWords = kTileSlots / 32;

inline int64_t num_tile_windows(int64_t num_dst) { return (num_dst + kTileRows - 1) / kTileRows; }

// Validates the CSR (col has num_edges entries) and, when not null, row_order [num_dst]; throws
// the errors above. count_tiles calls it; the device build calls it on host copies to name the
// fault its own check found.
template <typename index_t>
void check_tile_input(const index_t* rowptr, const index_t* col, int64_t num_dst, int64_t num_src,
                      int64_t num_edges, const index_t* row_order);

// Pass 1: validates the input (check_tile_input) and writes window_ptr [num_windows + 1] (the
// prefix sum of the windows' tile counts). The tile count is window_ptr[num_windows].
// row_order: null for the identity order.
template <typename index_t>
void count_tiles(const index_t* rowptr, const index_t* col, int64_t num_dst, int64_t num_src,
                 int64_t num_edges, const index_t* row_order, int64_t* window_ptr);

// Pass 2: given count_tiles' window_ptr (and the same row_order), writes tile_cols
// [num_tiles * 8], tile_bitmap [num_tiles * 4] and edge_slot [num_edges]; returns the number of
// distinct (dst, src) pairs.
template <typename index_t>
int64_t fill_tiles(const index_t* rowptr, const index_t* col, int64_t num_dst,
                   const index_t* row_order, const int64_t* window_ptr, index_t* tile_cols,
                   uint32_t* tile_bitmap, int64_t* edge_slot);

}  // namespace iognn

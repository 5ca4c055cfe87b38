// The tile layout of a destination-major CSR: the one format the block-sparse (Tensor Core) paths
// share. Built on the host here; the arrays are what the device kernels read.
//
// Layout:
//   - Destinations are cut into row windows of kTileRows = 16 consecutive rows (the last window may
//     have fewer). Window w covers rows [16 w, min(16 w + 16, num_dst)).
//   - A window's condensed columns are the sorted distinct sources its rows' edges touch. They
//     are cut into tiles of kTileCols = 8 consecutive condensed columns; the window's last tile is
//     padded with -1. A window without edges has no tiles.
//   - window_ptr [num_windows + 1] (int64): window w owns tiles [window_ptr[w], window_ptr[w + 1]).
//   - tile_cols [num_tiles * 8] (the CSR's index type): the source id of each tile column, -1 for
//     padding.
//   - tile_bitmap [num_tiles * 4] (uint32 words, stored as int32 by the binding): the 16 x 8 bits
//     of which (row, column) pairs of the tile hold at least one edge. Bit b = 8 r + c of the 128
//     is bit (b % 32) of word b / 32, so row r of the tile is byte r of the 16 bytes (little
//     endian): a thread that owns one row reads one byte, and word k holds rows 4k .. 4k + 3.
// Duplicate edges (same destination and source) set one bit: the bitmap records the distinct
// pairs; multiplicities and edge values stay in the CSR.
//
// Fill = distinct (dst, src) pairs / (num_tiles * 128): 1.0 when every tile is dense.
//
// Cost: O(E log d) with d a window's edge count (a sort of each window's columns, then one binary
// search per edge). Windows are built in parallel (OpenMP); the result does not depend on the
// thread count.
//
// Errors: ValueError for a rowptr that does not start at 0, decreases or does not end at
// num_edges; IndexError for a column outside [0, num_src).
#pragma once

#include <cstdint>

namespace iognn {

inline constexpr int64_t kTileRows = 16;
inline constexpr int64_t kTileCols = 8;
inline constexpr int64_t kTileWords = kTileRows * kTileCols / 32;

inline int64_t num_tile_windows(int64_t num_dst) { return (num_dst + kTileRows - 1) / kTileRows; }

// Pass 1: validates the CSR (col has num_edges entries) and writes window_ptr [num_windows + 1]
// (the prefix sum of the windows' tile counts). The tile count is window_ptr[num_windows].
template <typename index_t>
void count_tiles(const index_t* rowptr, const index_t* col, int64_t num_dst, int64_t num_src,
                 int64_t num_edges, int64_t* window_ptr);

// Pass 2: given count_tiles' window_ptr, writes tile_cols [num_tiles * 8] and
// tile_bitmap [num_tiles * 4]; returns the number of distinct (dst, src) pairs.
template <typename index_t>
int64_t fill_tiles(const index_t* rowptr, const index_t* col, int64_t num_dst,
                   const int64_t* window_ptr, index_t* tile_cols, uint32_t* tile_bitmap);

}  // namespace iognn

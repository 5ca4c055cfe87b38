// The tile layout (core/tiles.h) built on a CUDA device from a device CSR: the host builder's
// arrays bit for bit, for any thread schedule.
//
// Method (every output is a function of sort keys, so the build is deterministic):
//   1. validate the CSR and row_order into a device flag (no wait), and invert row_order;
//   2. key every CSR position p by (window, source, row in window) of its pair, the window and row
//      from the position of p's row in row_order, and radix-sort the keys with p as the value;
//   3. the first key of each (window, source) run is a condensed column: count them per window
//      (window_ptr from the tile counts) and number them (scans); the first key of each full
//      key run is a distinct pair (num_pairs);
//   4. one synchronisation reads the tile count, num_pairs and the flag (a bad input is then named
//      by the host check on host copies: the error path only);
//   5. one pass over the sorted keys writes edge_slot, tile_cols (the first key of each column
//      run) and the bitmap bits (atomicOr of the first key of each pair run: OR is order-free).
// Cost: a radix sort of E 64-bit keys (bits: windows + sources + 4) and a few scans; device
// scratch about 8 + 8 + 8 + 2 sizeof(index) bytes per edge and 20 bytes per destination.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/cuda/neighbor_sample.h"  // DeviceArena

namespace iognn::cuda {

// The layout's arrays, in blocks of the arena (null for an empty array), and its counts.
template <typename index_t>
struct DeviceTileLayout {
  int64_t* window_ptr = nullptr;    // [num_windows + 1]
  index_t* tile_cols = nullptr;     // [num_tiles * 8]
  uint32_t* tile_bitmap = nullptr;  // [num_tiles * 4]
  int64_t* edge_slot = nullptr;     // [num_edges]
  int64_t num_tiles = 0, num_pairs = 0;
};

// Builds the layout of the device CSR (rowptr, col) with windows by row_order (null: identity),
// queued on `stream`, with one host synchronisation. Throws core/tiles.h's errors for a bad input
// and ValueError when (windows, sources, row) do not fit a 64-bit sort key.
template <typename index_t>
DeviceTileLayout<index_t> build_tile_layout_cuda(const index_t* rowptr, const index_t* col,
                                                 const index_t* row_order, int64_t num_dst,
                                                 int64_t num_src, int64_t num_edges,
                                                 DeviceArena& arena, cudaStream_t stream);

}  // namespace iognn::cuda

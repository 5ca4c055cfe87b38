// iognn::tile_layout's argument checks and output tuple, shared by its CPU (binding/tiles.cpp) and
// CUDA (binding/cuda/tiles.cpp) implementations so that both reject the same inputs with the same
// messages. The contents (a valid CSR, row_order a permutation) are checked by the builders.
#pragma once

#include <ATen/ATen.h>

#include <optional>
#include <tuple>

#include "binding/utils.h"

namespace iognn::torch_ext {

inline constexpr const char* kTileLayout = "iognn::tile_layout";

// (window_ptr, tile_cols, tile_bitmap, edge_slot, num_pairs)
using TileLayoutOutputs = std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, int64_t>;

// Checks the arguments' shapes, dtypes and devices; returns num_dst.
inline int64_t check_tile_layout_args(const at::Tensor& rowptr, const at::Tensor& col,
                                      int64_t num_src, const std::optional<at::Tensor>& row_order) {
  check_index_vector(rowptr, kTileLayout, "rowptr");
  check_index_vector(col, kTileLayout, "col");
  check_same_index_dtype(rowptr, col, kTileLayout, "col");
  check_device(col, rowptr, kTileLayout, "col", "rowptr");
  TORCH_CHECK_VALUE(rowptr.numel() >= 1, kTileLayout,
                    ": rowptr must have num_dst + 1 >= 1 entries, got none");
  TORCH_CHECK_VALUE(num_src >= 0, kTileLayout, ": num_src must be >= 0, got ", num_src);
  const int64_t num_dst = rowptr.numel() - 1;
  if (row_order) {
    check_index_vector(*row_order, kTileLayout, "row_order", num_dst);
    check_same_index_dtype(rowptr, *row_order, kTileLayout, "row_order");
    check_device(*row_order, rowptr, kTileLayout, "row_order", "rowptr");
  }
  return num_dst;
}

}  // namespace iognn::torch_ext

// iognn::tile_layout: schema and host implementation (core: core/tiles.h).
//   tile_layout(rowptr, col, num_src) -> (window_ptr, tile_cols, tile_bitmap, num_pairs)
//     rowptr [num_dst + 1], col [E]: a destination-major CSR (int32/int64, one dtype, contiguous).
//     window_ptr: int64 [num_windows + 1]; tile_cols: col's dtype [num_tiles, 8], -1 padded;
//     tile_bitmap: int32 [num_tiles, 4], the 16 x 8 bits of each tile (bit 8 r + c of the 128 is
//     row r, column c); num_pairs: the distinct (dst, src) pairs, which the bitmaps count.
// Host tensors only: the Python side (iognn.graph.tile_layout) copies a device graph's CSR over.
#include <ATen/ATen.h>
#include <torch/library.h>

#include <tuple>

#include "binding/utils.h"
#include "core/tiles.h"

namespace iognn::torch_ext {
namespace {

constexpr const char* kTileLayout = "iognn::tile_layout";

std::tuple<at::Tensor, at::Tensor, at::Tensor, int64_t> tile_layout_cpu(const at::Tensor& rowptr,
                                                                        const at::Tensor& col,
                                                                        int64_t num_src) {
  check_index_vector(rowptr, kTileLayout, "rowptr");
  check_index_vector(col, kTileLayout, "col");
  check_same_index_dtype(rowptr, col, kTileLayout, "col");
  TORCH_CHECK_VALUE(rowptr.numel() >= 1, kTileLayout,
                    ": rowptr must have num_dst + 1 >= 1 entries, got none");
  TORCH_CHECK_VALUE(num_src >= 0, kTileLayout, ": num_src must be >= 0, got ", num_src);
  const int64_t num_dst = rowptr.numel() - 1;
  at::Tensor window_ptr =
      at::empty({num_tile_windows(num_dst) + 1}, rowptr.options().dtype(at::kLong));
  at::Tensor tile_cols, tile_bitmap;
  int64_t num_pairs = 0;
  dispatch_index(rowptr.scalar_type(), kTileLayout, [&](auto tag) {
    using I = typename decltype(tag)::type;
    translate_errors([&] {
      count_tiles<I>(cptr<I>(rowptr), cptr<I>(col), num_dst, num_src, col.numel(),
                     ptr<int64_t>(window_ptr));
    });
    const int64_t num_tiles = window_ptr[-1].item<int64_t>();
    tile_cols = at::empty({num_tiles, kTileCols}, col.options());
    tile_bitmap = at::empty({num_tiles, kTileWords}, rowptr.options().dtype(at::kInt));
    translate_errors([&] {
      num_pairs = fill_tiles<I>(cptr<I>(rowptr), cptr<I>(col), num_dst, cptr<int64_t>(window_ptr),
                                ptr<I>(tile_cols), ptr<uint32_t>(tile_bitmap));
    });
  });
  return {window_ptr, tile_cols, tile_bitmap, num_pairs};
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(iognn, m) {
  m.def("tile_layout(Tensor rowptr, Tensor col, int num_src) -> (Tensor, Tensor, Tensor, int)");
}

TORCH_LIBRARY_IMPL(iognn, CPU, m) { m.impl("tile_layout", &tile_layout_cpu); }

}  // namespace iognn::torch_ext

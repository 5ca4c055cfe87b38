// iognn::tile_layout: schema and host implementation (core: core/tiles.h; the CUDA implementation:
// binding/cuda/tiles.cpp, the same arrays bit for bit).
//   tile_layout(rowptr, col, num_src, row_order=None)
//       -> (window_ptr, tile_cols, tile_bitmap, edge_slot, num_pairs)
//     rowptr [num_dst + 1], col [E]: a destination-major CSR (int32/int64, one dtype, contiguous).
//     row_order: None, or [num_dst] in the same dtype, a permutation of the rows: window w holds
//     rows row_order[16 w .. 16 w + 15] (None: rows 16 w .. 16 w + 15).
//     window_ptr: int64 [num_windows + 1]; tile_cols: col's dtype [num_tiles, 8], -1 padded;
//     tile_bitmap: int32 [num_tiles, 4], the 16 x 8 bits of each tile (bit 8 r + c of the 128 is
//     row r, column c); edge_slot: int64 [E], the slot t * 128 + 8 r + c of each CSR position's
//     pair; num_pairs: the distinct (dst, src) pairs, which the bitmaps count.
#include <ATen/ATen.h>
#include <torch/library.h>

#include "binding/tiles.h"
#include "binding/utils.h"
#include "core/tiles.h"

namespace iognn::torch_ext {
namespace {

TileLayoutOutputs tile_layout_cpu(const at::Tensor& rowptr, const at::Tensor& col,
                                  int64_t num_src, const std::optional<at::Tensor>& row_order) {
  const int64_t num_dst = check_tile_layout_args(rowptr, col, num_src, row_order);
  at::Tensor window_ptr =
      at::empty({num_tile_windows(num_dst) + 1}, rowptr.options().dtype(at::kLong));
  at::Tensor edge_slot = at::empty({col.numel()}, rowptr.options().dtype(at::kLong));
  at::Tensor tile_cols, tile_bitmap;
  int64_t num_pairs = 0;
  dispatch_index(rowptr.scalar_type(), kTileLayout, [&](auto tag) {
    using I = typename decltype(tag)::type;
    const I* order = optional_cptr<I>(row_order);
    translate_errors([&] {
      count_tiles<I>(cptr<I>(rowptr), cptr<I>(col), num_dst, num_src, col.numel(), order,
                     ptr<int64_t>(window_ptr));
    });
    const int64_t num_tiles = window_ptr[-1].item<int64_t>();
    tile_cols = at::empty({num_tiles, kTileCols}, col.options());
    tile_bitmap = at::empty({num_tiles, kTileWords}, rowptr.options().dtype(at::kInt));
    translate_errors([&] {
      num_pairs = fill_tiles<I>(cptr<I>(rowptr), cptr<I>(col), num_dst, order,
                                cptr<int64_t>(window_ptr), ptr<I>(tile_cols),
                                ptr<uint32_t>(tile_bitmap), ptr<int64_t>(edge_slot));
    });
  });
  return {window_ptr, tile_cols, tile_bitmap, edge_slot, num_pairs};
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(iognn, m) {
  m.def("tile_layout(Tensor rowptr, Tensor col, int num_src, Tensor? row_order=None) -> "
        "(Tensor, Tensor, Tensor, Tensor, int)");
}

TORCH_LIBRARY_IMPL(iognn, CPU, m) { m.impl("tile_layout", &tile_layout_cpu); }

}  // namespace iognn::torch_ext

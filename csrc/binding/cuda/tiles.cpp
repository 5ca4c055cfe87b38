// iognn::tile_layout on CUDA tensors: the device build of kernels/cuda/tile_layout.h, queued on the
// current stream of rowptr's device, with its outputs and scratch from PyTorch's caching allocator
// (binding/cuda/torch_arena.h). The same arrays as the host implementation (binding/tiles.cpp),
// bit for bit, with one synchronisation (the tile count); the same errors.
#include <ATen/ATen.h>
#include <torch/library.h>

#include "binding/cuda/device_scope.h"
#include "binding/cuda/torch_arena.h"
#include "binding/tiles.h"
#include "binding/utils.h"
#include "core/tiles.h"
#include "kernels/cuda/tile_layout.h"

namespace iognn::torch_ext {
namespace {

TileLayoutOutputs tile_layout_cuda(const at::Tensor& rowptr, const at::Tensor& col,
                                   int64_t num_src, const std::optional<at::Tensor>& row_order) {
  const int64_t num_dst = check_tile_layout_args(rowptr, col, num_src, row_order);
  const DeviceScope scope(rowptr);
  TorchArena arena(rowptr);
  const at::Tensor int64_like = at::empty({0}, rowptr.options().dtype(at::kLong));
  const at::Tensor int32_like = at::empty({0}, rowptr.options().dtype(at::kInt));
  TileLayoutOutputs out;
  dispatch_index(rowptr.scalar_type(), kTileLayout, [&](auto tag) {
    using I = typename decltype(tag)::type;
    const cuda::DeviceTileLayout<I> built = translate_errors([&] {
      return cuda::build_tile_layout_cuda<I>(cptr<I>(rowptr), cptr<I>(col),
                                             optional_cptr<I>(row_order), num_dst, num_src,
                                             col.numel(), arena, scope.stream);
    });
    const int64_t tiles = built.num_tiles;
    out = {arena.tensor(built.window_ptr, num_tile_windows(num_dst) + 1, int64_like),
           arena.tensor(built.tile_cols, tiles * kTileCols, col).view({tiles, kTileCols}),
           arena.tensor(built.tile_bitmap, tiles * kTileWords, int32_like).view({tiles, kTileWords}),
           arena.tensor(built.edge_slot, col.numel(), int64_like), built.num_pairs};
  });
  return out;
}

}  // namespace

TORCH_LIBRARY_IMPL(iognn, CUDA, m) { m.impl("tile_layout", &tile_layout_cuda); }

}  // namespace iognn::torch_ext

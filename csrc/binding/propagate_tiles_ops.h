// The tile-path ops of the propagate family (contract: kernels/propagate_types.h, "The tile
// path"), written once for every backend like propagate_ops.h; schemas in binding/propagate.cpp.
//
//   propagate_tile_values(ptr, edge_slot, num_tiles, weight?, perm?, target?, deg_ptr?, dtype)
//       -> vals [num_tiles * 128] in dtype (the accumulation dtype: float32 or float64)
//   propagate_tiles(window_ptr, tile_cols, row_order?, vals, x, bias?, num_rows)
//       -> out [num_rows, F] in x's dtype
//
// The layout's contents (window_ptr offsets, column ids, slots) are trusted: iognn.graph.tile_layout
// built them from a validated Graph. A Backend provides tile_values<acc, I> and tile_spmm<T, I>
// (static, taking its Scope and the argument structs below).
#pragma once

#include <ATen/ATen.h>
#include <torch/library.h>

#include <optional>

#include "binding/utils.h"
#include "core/tiles.h"

namespace iognn::torch_ext::propagate {

template <typename acc, typename I>
struct TileValuesArgs {
  const I* ptr;
  const int64_t* edge_slot;
  const acc* weight;  // nullable (1)
  const I *perm, *target, *deg_ptr;  // nullable
  int64_t num_rows;
  acc* vals;
};

template <typename T, typename I>
struct TileSpmmArgs {
  const int64_t* window_ptr;
  const I *tile_cols, *row_order;  // row_order nullable (identity)
  const acc_t<T>* vals;
  const T* x;
  int64_t x_stride, num_rows, F;
  const T* bias;  // nullable
  T* out;
};

template <class Backend>
struct PropagateTileOps {
  using OptTensor = std::optional<at::Tensor>;

  static at::Tensor values(const at::Tensor& ptr, const at::Tensor& edge_slot, int64_t num_tiles,
                           const OptTensor& weight, const OptTensor& perm,
                           const OptTensor& target, const OptTensor& deg_ptr,
                           at::ScalarType dtype) {
    constexpr const char* op = "iognn::propagate_tile_values";
    TORCH_CHECK_VALUE(dtype == at::kFloat || dtype == at::kDouble, op,
                      ": dtype must be float32 or float64 (an accumulation dtype), got ", dtype);
    TORCH_CHECK_VALUE(num_tiles >= 0, op, ": num_tiles must be >= 0, got ", num_tiles);
    at::Tensor vals = at::zeros({num_tiles * kTileRows * kTileCols}, ptr.options().dtype(dtype));
    if constexpr (!is_meta_v<Backend>) {
      check_index_vector(ptr, op, "ptr");
      TORCH_CHECK_VALUE(ptr.numel() >= 1, op, ": ptr must have num_rows + 1 >= 1 entries");
      TORCH_CHECK_TYPE(edge_slot.scalar_type() == at::kLong, op, ": edge_slot must be int64, got ",
                       edge_slot.scalar_type());
      check_dim(edge_slot, 1, op, "edge_slot");
      check_device(edge_slot, ptr, op, "edge_slot", "ptr");
      const int64_t E = edge_slot.numel();
      if (weight) {
        check_dim(*weight, 1, op, "weight");
        check_size(*weight, 0, E, op, "weight", "entries (one per edge)");
        check_dtype(*weight, dtype, op, "weight");
        check_device(*weight, ptr, op, "weight", "ptr");
      }
      for (const auto& [t, name] : {std::pair{&perm, "perm"}, std::pair{&target, "target"}}) {
        if (!*t) continue;
        check_index_vector(**t, op, name, E);
        check_same_index_dtype(ptr, **t, op, name);
        check_device(**t, ptr, op, name, "ptr");
      }
      if (deg_ptr) {
        check_index_vector(*deg_ptr, op, "deg_ptr");
        check_same_index_dtype(ptr, *deg_ptr, op, "deg_ptr");
        check_device(*deg_ptr, ptr, op, "deg_ptr", "ptr");
      }
      if (E == 0) return vals;
      const typename Backend::Scope scope(ptr);
      const OptTensor w = weight ? OptTensor(weight->contiguous()) : std::nullopt;
      dispatch_index(ptr.scalar_type(), op, [&](auto it) {
        using I = typename decltype(it)::type;
        auto run = [&](auto at) {
          using acc = typename decltype(at)::type;
          Backend::template tile_values<acc, I>(
              scope, TileValuesArgs<acc, I>{cptr<I>(ptr), cptr<int64_t>(edge_slot),
                                            optional_cptr<acc>(w), optional_cptr<I>(perm),
                                            optional_cptr<I>(target), optional_cptr<I>(deg_ptr),
                                            ptr.numel() - 1, ::iognn::torch_ext::ptr<acc>(vals)});
        };
        if (dtype == at::kFloat) run(type_tag<float>{});
        else run(type_tag<double>{});
      });
    }
    return vals;
  }

  static at::Tensor spmm(const at::Tensor& window_ptr, const at::Tensor& tile_cols,
                         const OptTensor& row_order, const at::Tensor& vals,
                         const at::Tensor& x_in, const OptTensor& bias_in, int64_t num_rows) {
    constexpr const char* op = "iognn::propagate_tiles";
    TORCH_CHECK_VALUE(num_rows >= 0, op, ": num_rows must be >= 0, got ", num_rows);
    check_dim(x_in, 2, op, "x");
    at::Tensor out = at::empty_symint({num_rows, x_in.sym_size(1)}, x_in.options());
    if constexpr (!is_meta_v<Backend>) {
      TORCH_CHECK_TYPE(window_ptr.scalar_type() == at::kLong, op,
                       ": window_ptr must be int64, got ", window_ptr.scalar_type());
      check_dim(window_ptr, 1, op, "window_ptr");
      check_size(window_ptr, 0, num_tile_windows(num_rows) + 1, op, "window_ptr",
                 "entries (one per row window, plus one)");
      check_dim(tile_cols, 2, op, "tile_cols");
      check_size(tile_cols, 1, kTileCols, op, "tile_cols", "columns");
      dispatch_index(tile_cols.scalar_type(), op, [](auto) {});
      TORCH_CHECK_VALUE(tile_cols.is_contiguous(), op, ": tile_cols must be contiguous");
      if (row_order) {
        check_index_vector(*row_order, op, "row_order", num_rows);
        check_same_index_dtype(tile_cols, *row_order, op, "row_order");
      }
      check_dim(vals, 1, op, "vals");
      check_size(vals, 0, tile_cols.size(0) * kTileRows * kTileCols, op, "vals",
                 "entries (128 per tile)");
      check_dtype(vals, acc_dtype(x_in.scalar_type()), op, "vals");
      TORCH_CHECK_VALUE(vals.is_contiguous(), op, ": vals must be contiguous");
      for (const auto& [t, name] : {std::pair{&window_ptr, "window_ptr"},
                                    std::pair{&tile_cols, "tile_cols"}, std::pair{&vals, "vals"}})
        check_device(*t, x_in, op, name, "x");
      if (row_order) check_device(*row_order, x_in, op, "row_order", "x");
      if (bias_in) {
        check_dim(*bias_in, 1, op, "bias");
        check_size(*bias_in, 0, x_in.size(1), op, "bias", "entries (one per feature of x)");
        check_dtype(*bias_in, x_in.scalar_type(), op, "bias");
        check_device(*bias_in, x_in, op, "bias", "x");
      }
      if (out.numel() == 0) return out;
      const typename Backend::Scope scope(x_in);
      const at::Tensor x = last_dim_contiguous(x_in);
      const OptTensor bias = bias_in ? OptTensor(bias_in->contiguous()) : std::nullopt;
      dispatch_float_index(x.scalar_type(), tile_cols.scalar_type(), op, [&](auto ft, auto it) {
        using T = typename decltype(ft)::type;
        using I = typename decltype(it)::type;
        Backend::template tile_spmm<T, I>(
            scope, TileSpmmArgs<T, I>{cptr<int64_t>(window_ptr), cptr<I>(tile_cols),
                                      optional_cptr<I>(row_order), cptr<acc_t<T>>(vals),
                                      cptr<T>(x), x.stride(0), num_rows, x.size(1),
                                      optional_cptr<T>(bias), ptr<T>(out)});
      });
    }
    return out;
  }
};

template <class Backend>
void register_propagate_tiles(torch::Library& m) {
  m.impl("propagate_tile_values", &PropagateTileOps<Backend>::values);
  m.impl("propagate_tiles", &PropagateTileOps<Backend>::spmm);
}

}  // namespace iognn::torch_ext::propagate

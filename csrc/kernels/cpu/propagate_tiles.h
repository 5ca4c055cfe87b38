// Propagate over the tile layout, host kernels: the reference twins of
// kernels/cuda/propagate_tiles.h (contract: kernels/propagate_types.h, "The tile path").
#pragma once

#include <cstdint>

#include "core/numeric.h"

namespace iognn::cpu {

// vals [num_tiles * 128] (zeroed by the caller) += the weight of every position p of the walked
// CSR (ptr [num_rows + 1]): weight[perm ? perm[p] : p] (1 when weight is null), divided by the
// in-degree of target(p) when deg_ptr is given (deg_ptr[i + 1] - deg_ptr[i]; target(p) = target[p],
// or the walked row itself when target is null). One pass per walked row, in CSR order.
template <typename acc, typename index_t>
void tile_values(const index_t* ptr, const int64_t* edge_slot, const acc* weight,
                 const index_t* perm, const index_t* target, const index_t* deg_ptr,
                 int64_t num_rows, acc* vals);

// out [num_rows, F] = the tile product (row_order null: identity), plus bias [F] when given.
template <typename T, typename index_t>
void tile_spmm(const int64_t* window_ptr, const index_t* tile_cols, const index_t* row_order,
               const acc_t<T>* vals, const T* x, int64_t x_stride, int64_t num_rows, int64_t F,
               const T* bias, T* out);

}  // namespace iognn::cpu

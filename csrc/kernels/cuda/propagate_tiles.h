// Propagate over the tile layout, CUDA kernels (contract: kernels/propagate_types.h, "The tile
// path"; host twins: kernels/cpu/propagate_tiles.h). Torch-free, asynchronous on `stream`, no
// allocation, no synchronisation.
//
// tile_spmm runs one warp per (row window, 64 or 128 output features) on the Tensor Cores: per
// step the warp stages a 16 x K block of values (K = 8 tf32 columns, or 16 fp16 / bf16 columns =
// two tiles) and the K gathered source rows in shared memory, then issues one MMA per 16
// features, accumulating in fp32 registers. Every output row is written once by its window's warp (no
// atomics; the steps run in tile order: deterministic). fp32 inputs run as TF32 (10-bit
// mantissa): the caller decides whether the user allows that.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "core/numeric.h"

namespace iognn::cuda {

// vals [num_tiles * 128], zeroed by the caller: see cpu::tile_values (one thread per walked row).
template <typename acc, typename index_t>
void tile_values(const index_t* ptr, const int64_t* edge_slot, const acc* weight,
                 const index_t* perm, const index_t* target, const index_t* deg_ptr,
                 int64_t num_rows, acc* vals, cudaStream_t stream);

// out [num_rows, F] (contiguous) from x [*, F] with row stride x_stride; T is float (TF32),
// half_t or bf16_t.
template <typename T, typename index_t>
void tile_spmm(const int64_t* window_ptr, const index_t* tile_cols, const index_t* row_order,
               const float* vals, const T* x, int64_t x_stride, int64_t num_rows, int64_t F,
               const T* bias, T* out, cudaStream_t stream);

}  // namespace iognn::cuda

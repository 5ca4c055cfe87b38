// Propagate (SpMM) family: the contract both backends implement.
//
//   out[i, :] = sum_{p in row i} w[p] * x[col[p], :]          (reduce = sum)
//   out[i, :] = (1 / deg(i)) * sum_{p in row i} w[p] * x[...]  (reduce = mean; 0 for an empty row)
//   ... + bias[:]                                             (optional, fused: a layer's bias)
//
// w is an optional per-CSR-position weight (nullptr means 1) stored in the accumulation type
// (fp32 for fp16/bf16/fp32 features, fp64 for fp64). GCN normalisation is a weight computed once
// per graph by the caller. Every output row is produced by one thread in CSR order: deterministic.
// Shapes: x [num_src, F] with row stride x_stride (feature stride 1); out and grads contiguous.
//
// The family's places:
//   contract (this file)           kernels/propagate_types.h
//   host kernels                   kernels/cpu/propagate.{h,cpp}
//   device kernels                 kernels/cuda/propagate.h (API),
//                                  kernels/cuda/propagate_kernels.cuh on the shared row schedule
//                                  kernels/cuda/csr_schedule.cuh
//   binding                        binding/propagate_ops.h (op bodies, both backends),
//                                  binding/propagate.cpp (schemas, host backend),
//                                  binding/cuda/propagate.cpp (device backend),
//                                  binding/meta.cpp (Meta kernels: the outputs' shapes),
//                                  binding/autograd/propagate.cpp (autograd formula)
//   Python and tests               python/iognn/ops/propagate.py (wrapper);
//                                  tests/python/test_propagate{,_cuda}.py,
//                                  tests/cpp/test_cpu_kernels.cpp
//
// The tile path (block-sparse, Tensor Cores on a GPU) computes the same sums over the graph's tile
// layout (core/tiles.h: row windows of 16 destinations, 8-wide tiles of condensed source columns):
//
//   tile_values:  vals[slot(p)] += w[p] * scale(target(p))   for every walked CSR position p
//   tile_spmm:    out[row_order[16 w + r], :] = sum_{t in window w, c} vals[t, r, c] * x[cols[t, c], :]
//                                              (+ bias[:])
//
// vals is [num_tiles, 16, 8] in the accumulation type, 0 where a tile holds no edge; duplicate
// edges add into one slot, in CSR order (one thread per walked row: deterministic). The row scale
// (1 / deg for mean) is folded into the values, so one tile SpMM serves the forward (the CSR's
// layout) and backward_x (the transposed CSR's layout, values w[csc2csr[q]] / deg(row[q])).
// backward_weight stays on the CSR kernels. Places: kernels/cpu/propagate_tiles.{h,cpp} (host
// twin), kernels/cuda/propagate_tiles.{h,cu} (Tensor Cores: TF32 for fp32, fp16 / bf16, fp32
// accumulation), the same binding files as above, python/iognn/ops/propagate_tiles.py (autograd
// and the path choice), tests/python/test_propagate_tiles{,_cuda}.py.
#pragma once

namespace iognn {

enum class PropagateReduce : int { kSum = 0, kMean = 1 };

}  // namespace iognn

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
#pragma once

namespace iognn {

enum class PropagateReduce : int { kSum = 0, kMean = 1 };

}  // namespace iognn

// Propagate (SpMM) family, host kernels.
//
//   out[i, :] = sum_{p in row i} w[p] * x[col[p], :]          (reduce = sum)
//   out[i, :] = (1 / deg(i)) * sum_{p in row i} w[p] * x[...]  (reduce = mean; 0 for an empty row)
//   ... + bias[:]                                             (optional, fused: a layer's bias)
//
// w is an optional per-CSR-position weight (nullptr means 1) stored in the accumulation type
// (fp32 for fp16/bf16/fp32 features, fp64 for fp64). GCN normalisation is a weight computed once per
// graph by the caller. Every output row is produced by one thread in CSR order: deterministic.
// Shapes: x [num_src, F] with row stride x_stride (feature stride 1); out and grads contiguous.
#pragma once

#include <cstdint>

#include "core/numeric.h"

namespace iognn::cpu {

enum class PropagateReduce : int { kSum = 0, kMean = 1 };

template <typename T, typename index_t>
void propagate_forward(const index_t* rowptr, const index_t* col, const acc_t<T>* weight,
                       const T* x, int64_t x_stride, int64_t num_dst, int64_t F,
                       PropagateReduce reduce, const T* bias, T* out);

// grad_x = A^T grad_out, gathered over the transposed CSR (no atomics).
template <typename T, typename index_t>
void propagate_backward_x(const index_t* colptr, const index_t* row, const index_t* csc2csr,
                          const index_t* rowptr, const acc_t<T>* weight, const T* grad_out,
                          int64_t num_src, int64_t F, PropagateReduce reduce, T* grad_x);

// grad_w[p] = <grad_out[i], x[col[p]]> (divided by deg(i) for mean): a sampled dense-dense product.
template <typename T, typename index_t>
void propagate_backward_weight(const index_t* rowptr, const index_t* col, const T* grad_out,
                               const T* x, int64_t x_stride, int64_t num_dst, int64_t F,
                               PropagateReduce reduce, acc_t<T>* grad_w);

}  // namespace iognn::cpu

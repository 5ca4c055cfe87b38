// Propagate (SpMM) family, host kernels (contract: kernels/propagate_types.h).
#pragma once

#include <cstdint>

#include "core/numeric.h"
#include "kernels/propagate_types.h"

namespace iognn::cpu {

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

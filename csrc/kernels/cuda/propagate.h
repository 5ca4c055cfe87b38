// Propagate (SpMM family), CUDA kernels: the device twins of kernels/cpu/propagate.h, on raw device
// pointers and a stream (torch-free). Same contract (kernels/propagate_types.h):
//
//   forward:          out[i, :] = scale_i * sum_{p in row i} w[p] * x[col[p], :] (+ bias[:])
//   backward_x:       grad_x[j, :] = sum_{q in column j} scale_{row[q]} * w[csc2csr[q]] * grad_out[row[q], :]
//   backward_weight:  grad_w[p] = scale_i * <grad_out[i, :], x[col[p], :]>
//
// scale_i = 1 / deg(i) for reduce = mean (rows without edges give 0), 1 for sum; w = nullptr means 1.
// x has row stride x_stride (feature stride 1); out, grad_x and grad_out are contiguous [rows, F].
//
// Rows run on the shared CSR schedule (csr_schedule.cuh): a row of at most the plan's heavy degree
// is summed by one group of lanes in CSR order (bit-identical to the host kernels: products are
// not fused into the adds); a longer row is cut into fixed segments summed into the workspace and
// merged in segment order. No atomics: results are bit-identical run to run. max_degree is the
// longest row of the offsets walked (rowptr for forward and backward_weight, colptr for
// backward_x) when the caller knows it, else -1; a call's workspace query and launch must get the
// same value. With no heavy row a call is one kernel launch.
//
// All launches are asynchronous on `stream`; nothing here allocates or synchronises.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "core/numeric.h"
#include "kernels/propagate_types.h"

namespace iognn::cuda {

// Workspace bytes of the two gathers (forward, backward_x) over num_rows rows of num_edges edges,
// and of the sampled dense-dense product (backward_weight); 0 when no row can be heavy.
template <typename T>
size_t propagate_gather_workspace(int64_t num_rows, int64_t num_edges, int64_t max_degree,
                                  int64_t F);
template <typename T>
size_t propagate_sddmm_workspace(int64_t num_rows, int64_t num_edges, int64_t max_degree);

// out [num_dst, F]. bias [F] (nullable) is added to every row, in the accumulation type before the
// one rounding.
template <typename T, typename index_t>
void propagate_forward(const index_t* rowptr, const index_t* col, const acc_t<T>* weight,
                       const T* x, int64_t x_stride, int64_t num_dst, int64_t num_edges,
                       int64_t max_degree, int64_t F, PropagateReduce reduce, const T* bias, T* out,
                       void* workspace, size_t workspace_bytes, cudaStream_t stream);

// grad_x [num_src, F], gathered over the transposed CSR (colptr, row); max_degree is colptr's.
template <typename T, typename index_t>
void propagate_backward_x(const index_t* colptr, const index_t* row, const index_t* csc2csr,
                          const index_t* rowptr, const acc_t<T>* weight, const T* grad_out,
                          int64_t num_src, int64_t num_edges, int64_t max_degree, int64_t F,
                          PropagateReduce reduce, T* grad_x, void* workspace,
                          size_t workspace_bytes, cudaStream_t stream);

// grad_w [E] (CSR order), a sampled dense-dense product; max_degree is rowptr's.
template <typename T, typename index_t>
void propagate_backward_weight(const index_t* rowptr, const index_t* col, const T* grad_out,
                               const T* x, int64_t x_stride, int64_t num_dst, int64_t num_edges,
                               int64_t max_degree, int64_t F, PropagateReduce reduce,
                               acc_t<T>* grad_w, void* workspace, size_t workspace_bytes,
                               cudaStream_t stream);

}  // namespace iognn::cuda

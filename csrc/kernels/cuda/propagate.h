// Propagate (SpMM family), CUDA kernels: the device twins of kernels/cpu/propagate.h, on raw device
// pointers and a stream (torch-free). Same contracts as the host kernels:
//
//   forward:          out[i, :] = scale_i * sum_{p in row i} w[p] * x[col[p], :] (+ bias[:])
//   backward_x:       grad_x[j, :] = sum_{q in column j} scale_{row[q]} * w[csc2csr[q]] * grad_out[row[q], :]
//   backward_weight:  grad_w[p] = scale_i * <grad_out[i, :], x[col[p], :]>
//
// scale_i = 1 / deg(i) for reduce = mean (rows without edges give 0), 1 for sum; w = nullptr means 1.
// x has row stride x_stride (feature stride 1); out, grad_x and grad_out are contiguous [rows, F].
//
// Determinism: every output element is accumulated by one thread in CSR order, except rows of a
// RowSchedule's heavy list, whose CSR range is cut into fixed segments; each segment is summed by a
// block (each group of lanes over a fixed contiguous sub-range, groups merged in order through
// shared memory) into `partials`, and the segments of a row are then added in order. No atomics:
// results are bit-identical run to run (for a given F, dtype and schedule).
//
// All launches are asynchronous on `stream`; nothing here allocates or synchronises.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <limits>

#include "core/numeric.h"
#include "kernels/cpu/propagate.h"  // PropagateReduce, shared with the host kernels

namespace iognn::cuda {

using PropagateReduce = ::iognn::cpu::PropagateReduce;

// Rows with more than kHeavyRowEdges edges are "heavy": instead of one group of lanes walking the
// whole row, the row is cut into segments of kSegmentEdges edges, each summed by a whole block.
inline constexpr int64_t kHeavyRowEdges = 256;
inline constexpr int64_t kSegmentEdges = 2048;

// The heavy rows of one CSR (offsets with num_rows + 1 entries) and their segments, as device
// arrays of int64. Built once per graph by the caller (the binding does it with ATen; see
// binding/cuda/propagate_schedule.cpp):
//   heavy_rows[h]       the h-th heavy row (increasing), h < num_heavy
//   segment_ptr[h]      first segment of heavy row h; segment_ptr[num_heavy] = num_segments
//   segment_row[s]      row of segment s
//   segment_begin/end   CSR range of segment s: [offsets[row] + k * kSegmentEdges, ...) clipped to
//                       the row, k the segment's rank within its row
// The default value has no heavy rows and heavy_threshold = max: every row takes the light path,
// which is correct for any graph (only slower on rows with very many edges).
struct RowSchedule {
  int64_t heavy_threshold = std::numeric_limits<int64_t>::max();
  int64_t num_heavy = 0;
  int64_t num_segments = 0;
  const int64_t* heavy_rows = nullptr;
  const int64_t* segment_ptr = nullptr;
  const int64_t* segment_row = nullptr;
  const int64_t* segment_begin = nullptr;
  const int64_t* segment_end = nullptr;
};

// Elements of the scratch buffer `partials` (of acc_t<T>) the gather kernels need for a schedule.
inline int64_t propagate_partials_size(const RowSchedule& s, int64_t F) { return s.num_segments * F; }

// out [num_dst, F]. partials: propagate_partials_size(schedule, F) elements (nullptr when 0).
// bias [F] (nullable) is added to every row, in the accumulation type before the one rounding.
template <typename T, typename index_t>
void propagate_forward(const index_t* rowptr, const index_t* col, const acc_t<T>* weight,
                       const T* x, int64_t x_stride, int64_t num_dst, int64_t F,
                       PropagateReduce reduce, const RowSchedule& schedule, acc_t<T>* partials,
                       const T* bias, T* out, cudaStream_t stream);

// grad_x [num_src, F], gathered over the transposed CSR (colptr, row); schedule is colptr's.
template <typename T, typename index_t>
void propagate_backward_x(const index_t* colptr, const index_t* row, const index_t* csc2csr,
                          const index_t* rowptr, const acc_t<T>* weight, const T* grad_out,
                          int64_t num_src, int64_t F, PropagateReduce reduce,
                          const RowSchedule& schedule, acc_t<T>* partials, T* grad_x,
                          cudaStream_t stream);

// grad_w [E] (CSR order), a sampled dense-dense product; schedule is rowptr's.
template <typename T, typename index_t>
void propagate_backward_weight(const index_t* rowptr, const index_t* col, const T* grad_out,
                               const T* x, int64_t x_stride, int64_t num_dst, int64_t F,
                               PropagateReduce reduce, const RowSchedule& schedule,
                               acc_t<T>* grad_w, cudaStream_t stream);

}  // namespace iognn::cuda

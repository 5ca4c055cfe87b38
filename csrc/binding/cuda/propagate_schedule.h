// The row schedule of a CSR for the CUDA propagate kernels (its heavy rows and their segments,
// kernels/cuda/propagate.h), built on first use and cached per offsets tensor (rowptr for the
// forward and backward_weight, colptr for backward_x).
//
// Building reads back how many rows are heavy (one sync); later calls on the same graph hit the
// cache and never synchronise. A graph built on the device needs no readback when it has no heavy
// row: its build measured the longest rows and recorded the empty schedule (note_max_degree). While the current stream captures a CUDA graph nothing is built:
// an uncached graph runs with the empty schedule (correct, slower on very heavy rows). A captured
// graph reads the schedule's tables whenever it replays, so a schedule used by a capture is pinned:
// kept for the life of the process, never evicted. Otherwise at most kScheduleCapacity schedules
// are kept, least recently used first out (an evicted schedule's memory returns to PyTorch's
// allocator).
//
// Identity. The cache is keyed by data pointer and sizes, and every entry also holds a weak
// reference to the offsets tensor's storage and its version counter: an entry is used only while
// that storage is alive, is the same storage object and has not been modified in place, so a freed
// storage whose memory now holds another graph is never mistaken for the old one. (Inference
// tensors have no version counter: in-place edits of one go unseen.)
#pragma once

#include <ATen/ATen.h>
#include <c10/util/intrusive_ptr.h>

#include <memory>

#include "kernels/cuda/propagate.h"

namespace iognn::torch_ext::cuda_schedule {

inline constexpr size_t kScheduleCapacity = 32;

// True while the current stream is capturing a CUDA graph (nothing may synchronise then).
bool stream_is_capturing();

// Heavy rows and segments of one CSR as int64 device tensors, and the kernels' view of them.
struct RowScheduleTensors {
  at::Tensor heavy_rows, segment_ptr, segment_row, segment_begin, segment_end;
  iognn::cuda::RowSchedule view;
};

// The schedule of `offsets` (num_rows + 1 entries, nnz edges): cached, or built now (one sync);
// the empty schedule while capturing.
std::shared_ptr<const RowScheduleTensors> row_schedule(const at::Tensor& offsets, int64_t nnz);

// Tells the cache that no row of `offsets` has more than max_degree edges. When that makes every
// row light, the empty schedule is cached for `offsets` now, so its first propagate reads nothing
// back. The CUDA graph build calls this with the degrees it measures anyway.
void note_max_degree(const at::Tensor& offsets, int64_t nnz, int64_t max_degree);

}  // namespace iognn::torch_ext::cuda_schedule

// Plans of the CUDA propagate ops: what is worth computing once per graph and then reusing.
//
// - The row schedule of a CSR (its heavy rows and their segments, kernels/cuda/propagate.h), cached
//   per offsets tensor (rowptr for the forward and backward_weight, colptr for backward_x).
// - A Plan per (graph, direction, dtype, device, stream): the cuSPARSE edge values that do not
//   depend on the call (all ones; 1/deg per edge for mean) and, per feature width F, the backend
//   decision and the prepared cuSPARSE products of those constant values (descriptor bound to the
//   values, persistent workspace holding cuSPARSE's preprocessing).
//
// Both are built on first use, which may synchronise the device (the schedule reads how many rows
// are heavy; the auto planner times both backends with CUDA events). Later calls hit the caches: no
// sync. While the current stream is being captured into a CUDA graph nothing is built and nothing
// is timed: an uncached graph runs the own kernels with an empty schedule (correct, slower on very
// heavy rows), an undecided width the own kernels. A captured graph reads the plan's buffers when
// it replays, so replays need the plan (and schedule) still cached: at most kCacheCapacity graphs
// per process (an evicted plan's memory is returned to PyTorch's allocator).
//
// Identity. The caches are keyed by data pointer and sizes, and every entry also stores a weak
// reference to the storage of each graph tensor its contents depend on, plus that tensor's version
// counter. An entry is used only if each storage is still alive, is the same storage object and
// has not been modified in place since; a freed storage whose memory now holds another graph is
// therefore never mistaken for the old one. Limitation: a graph tensor of an inference tensor
// (torch.inference_mode) has no version counter, so in-place edits of such a tensor go unseen.
// Both caches are process-wide LRUs of kCacheCapacity entries guarded by a mutex.
#pragma once

#include <ATen/ATen.h>
#include <c10/util/intrusive_ptr.h>
#include <cuda_runtime.h>

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "kernels/cuda/propagate.h"
#include "kernels/cuda/propagate_cusparse.h"

namespace iognn::torch_ext::cuda_plan {

inline constexpr size_t kCacheCapacity = 32;

// IOGNN_PROPAGATE_BACKEND, read on every call: own (default) | auto | cusparse; anything else is a
// ValueError naming the variable.
enum class BackendRequest { kAuto, kOwn, kCusparse };
BackendRequest requested_backend();

enum class Backend { kOwn, kCusparse };
enum class Direction { kForward, kBackwardX };
Direction parse_direction(c10::string_view direction, const char* op);

// True while the current stream is capturing a CUDA graph (nothing may synchronise then).
bool stream_is_capturing();

// A weak, version-checked reference to one tensor (see Identity above).
class TensorIdentity {
 public:
  explicit TensorIdentity(const at::Tensor& t);
  bool matches(const at::Tensor& t) const;

 private:
  c10::weak_intrusive_ptr<c10::StorageImpl> storage_;
  const void* data_;
  int64_t numel_;
  int64_t version_;  // -1 for inference tensors
};

// Heavy rows and segments of one CSR as int64 device tensors, and the kernels' view of them.
// longest_row: the most entries of one row (nnz, an upper bound, when nnz <= kHeavyRowEdges: tiny
// graphs read nothing back), or -1 when unknown (the empty schedule of a capture).
struct RowScheduleTensors {
  at::Tensor heavy_rows, segment_ptr, segment_row, segment_begin, segment_end;
  iognn::cuda::RowSchedule view;
  int64_t longest_row = -1;
};

// The schedule of `offsets` (num_rows + 1 entries, nnz edges): cached, or built now (one sync);
// an empty schedule while capturing.
std::shared_ptr<const RowScheduleTensors> row_schedule(const at::Tensor& offsets, int64_t nnz);

// The backend of one width in auto mode: made by timing both on the first call, or set through
// propagate_plan_set (an explicit choice, or one read back from the on-disk plan cache).
struct Decision {
  bool made = false;
  Backend choice = Backend::kOwn;
  std::string why;  // "timed: own 0.1200 ms, cusparse 0.1500 ms", "not timed: ...", "set: ..."
};

// The constant edge values of unweighted calls: all ones (sum; also mean of 16-bit features, whose
// 1/deg is applied in float32 after the product) or the 1/deg of each edge's row (mean).
enum class EdgeValues { kOnes = 0, kMeanScale = 1 };

// A cuSPARSE product bound to constant edge values, preprocessed into its own workspace. The
// preprocess contract asks later SpMM calls for the same parameters, the handle included; a call
// from another thread (another PyTorch handle) preprocesses again first.
struct PreparedSpmm {
  std::unique_ptr<iognn::cuda::CsrSpmm> spmm;
  at::Tensor workspace;             // A's active buffer: used by nothing else, never modified by us
  cusparseHandle_t handle = nullptr;  // the handle of the last preprocess
};

// Everything cached for one feature width F.
struct WidthPlan {
  PreparedSpmm prepared[2];    // by EdgeValues, built on first need
  std::string cusparse_error;  // set when a cuSPARSE call failed: the own kernels from then on
  Decision decision;
};

// Everything cached for one graph direction, dtype and stream.
struct Plan {
  std::mutex mutex;       // held while a call sets up or runs this plan (shared descriptors/buffers)
  at::Tensor ones;        // [nnz] ones in the features' dtype (built on first need)
  at::Tensor edge_scale;  // [nnz] 1/deg of the row each edge is summed into (float32/float64 mean)
  std::map<int64_t, WidthPlan> widths;  // by F
};

// A plan is per stream: its workspaces are used by one stream at a time, and everything it
// allocates belongs to that stream for PyTorch's caching allocator.
struct PlanKey {
  int device;
  cudaStream_t stream;
  Direction direction;
  at::ScalarType dtype;
  const void* offsets;
  int64_t rows, cols, nnz;  // the sparse matrix walked: rows x cols with nnz entries
  bool operator==(const PlanKey& o) const {
    return device == o.device && stream == o.stream && direction == o.direction &&
           dtype == o.dtype && offsets == o.offsets && rows == o.rows && cols == o.cols &&
           nnz == o.nnz;
  }
};

// The plan of `key` whose graph tensors are `graph` (validated as described above); created
// empty when missing or stale.
std::shared_ptr<Plan> find_or_create_plan(const PlanKey& key, const std::vector<at::Tensor>& graph);
// The plan of `key` if one exists and is valid for `graph`, else null (never creates one).
std::shared_ptr<Plan> find_plan(const PlanKey& key, const std::vector<at::Tensor>& graph);

// Mean time in milliseconds of `reps` runs of fn on the current stream, after one warm-up run,
// measured with CUDA events (synchronises).
double time_ms(const std::function<void()>& fn, int reps);

}  // namespace iognn::torch_ext::cuda_plan

#include "binding/cuda/propagate_schedule.h"

#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGraphsC10Utils.h>

#include <list>
#include <mutex>
#include <tuple>

namespace iognn::torch_ext::cuda_schedule {
namespace {

int64_t version_of(const at::Tensor& t) { return t.is_inference() ? -1 : int64_t(t._version()); }

// A weak, version-checked reference to the offsets tensor of a cached schedule.
class TensorIdentity {
 public:
  explicit TensorIdentity(const at::Tensor& t)
      : storage_(t.storage().getWeakStorageImpl()),
        data_(t.const_data_ptr()),
        numel_(t.numel()),
        version_(version_of(t)) {}

  // A live weak reference keeps the StorageImpl object itself allocated, so no other storage can
  // sit at the same address while this one is alive; an expired one never matches.
  bool matches(const at::Tensor& t) const {
    return !storage_.expired() &&
           storage_._unsafe_get_target() == t.storage().unsafeGetStorageImpl() &&
           data_ == t.const_data_ptr() && numel_ == t.numel() && version_ == version_of(t);
  }

 private:
  c10::weak_intrusive_ptr<c10::StorageImpl> storage_;
  const void* data_;
  int64_t numel_;
  int64_t version_;  // -1 for inference tensors
};

struct Key {
  int device;
  const void* offsets;
  int64_t rows, nnz;
  bool operator==(const Key& o) const {
    return std::tie(device, offsets, rows, nnz) == std::tie(o.device, o.offsets, o.rows, o.nnz);
  }
};

// A process-wide LRU of schedules, most recently used first. It is deliberately never destroyed:
// its entries own CUDA memory, which must not be released after the CUDA runtime has been torn
// down at exit.
class ScheduleCache {
 public:
  // The valid entry of key (pinned from now on when `pin`: a capture reads it), or null.
  std::shared_ptr<const RowScheduleTensors> find(const Key& key, const at::Tensor& offsets,
                                                 bool pin) {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto it = entries_.begin(); it != entries_.end(); ++it) {
      if (!(it->key == key)) continue;
      if (!it->id.matches(offsets)) {  // same pointer and sizes, another (or edited) tensor
        if (it->pinned) return nullptr;  // a capture still reads its tables: keep them
        entries_.erase(it);
        return nullptr;
      }
      it->pinned = it->pinned || pin;
      entries_.splice(entries_.begin(), entries_, it);
      return it->value;
    }
    return nullptr;
  }

  void insert(const Key& key, const at::Tensor& offsets,
              std::shared_ptr<const RowScheduleTensors> value) {
    std::lock_guard<std::mutex> lock(mutex_);
    entries_.push_front(Entry{key, TensorIdentity(offsets), std::move(value), false});
    size_t unpinned = 0;
    for (const auto& e : entries_) unpinned += !e.pinned;
    for (auto it = entries_.end(); unpinned > kScheduleCapacity && it != entries_.begin();) {
      --it;
      if (it->pinned) continue;
      it = entries_.erase(it);
      --unpinned;
    }
  }

 private:
  struct Entry {
    Key key;
    TensorIdentity id;
    std::shared_ptr<const RowScheduleTensors> value;
    bool pinned;  // read by a CUDA-graph capture: never evicted
  };
  std::mutex mutex_;
  std::list<Entry> entries_;
};

ScheduleCache& cache() {
  static auto* instance = new ScheduleCache();
  return *instance;
}

std::shared_ptr<const RowScheduleTensors> build(const at::Tensor& offsets, int64_t nnz) {
  using iognn::cuda::kHeavyRowEdges;
  using iognn::cuda::kSegmentEdges;
  auto s = std::make_shared<RowScheduleTensors>();
  s->view.heavy_threshold = kHeavyRowEdges;
  if (nnz <= kHeavyRowEdges) return s;  // no row can be heavy: nothing to read back
  const at::Tensor off = offsets.to(at::kLong);
  const at::Tensor deg = off.slice(0, 1) - off.slice(0, 0, -1);
  // The longest row first: on most graphs no row is heavy, and a maximum is the cheapest readback.
  if (deg.max().item<int64_t>() <= kHeavyRowEdges) return s;  // synchronises
  s->heavy_rows = at::nonzero(deg > kHeavyRowEdges).view(-1);  // synchronises
  const int64_t num_heavy = s->heavy_rows.numel();
  const at::Tensor segments = at::floor_divide(deg.index_select(0, s->heavy_rows) +
                                                   (kSegmentEdges - 1),
                                               kSegmentEdges);
  s->segment_ptr = at::cat({at::zeros({1}, off.options()), segments.cumsum(0)});
  const int64_t num_segments = s->segment_ptr[num_heavy].item<int64_t>();  // synchronises
  // The (repeats, output_size) overload: a plain int64 second argument would select the
  // (self, repeats) overload and repeat each count num_segments times instead.
  const at::Tensor heavy_of_segment =
      at::repeat_interleave(segments, std::optional<int64_t>(num_segments));
  const at::Tensor rank = at::arange(num_segments, off.options()) -
                          s->segment_ptr.index_select(0, heavy_of_segment);
  s->segment_row = s->heavy_rows.index_select(0, heavy_of_segment);
  s->segment_begin = off.index_select(0, s->segment_row) + rank * kSegmentEdges;
  s->segment_end = at::minimum(s->segment_begin + kSegmentEdges,
                               off.index_select(0, s->segment_row + 1));
  // The tables above were computed asynchronously: finish them before another stream may read them.
  at::cuda::getCurrentCUDAStream().synchronize();
  auto& v = s->view;
  v.num_heavy = num_heavy;
  v.num_segments = num_segments;
  v.heavy_rows = s->heavy_rows.const_data_ptr<int64_t>();
  v.segment_ptr = s->segment_ptr.const_data_ptr<int64_t>();
  v.segment_row = s->segment_row.const_data_ptr<int64_t>();
  v.segment_begin = s->segment_begin.const_data_ptr<int64_t>();
  v.segment_end = s->segment_end.const_data_ptr<int64_t>();
  return s;
}

}  // namespace

bool stream_is_capturing() {
  return c10::cuda::currentStreamCaptureStatusMayInitCtx() != c10::cuda::CaptureStatus::None;
}

std::shared_ptr<const RowScheduleTensors> row_schedule(const at::Tensor& offsets, int64_t nnz) {
  const Key key{offsets.get_device(), offsets.const_data_ptr(), offsets.numel() - 1, nnz};
  const bool capturing = stream_is_capturing();
  auto s = cache().find(key, offsets, capturing);
  if (!s) {
    if (capturing) return std::make_shared<const RowScheduleTensors>();
    s = build(offsets, nnz);  // outside the cache lock: it synchronises
    cache().insert(key, offsets, s);
  }
  // The tables are shared by all streams: tell the caching allocator that this stream reads them,
  // so that an eviction cannot recycle their memory while this stream's kernels still run.
  if (s->view.num_heavy > 0) {
    const auto stream = at::cuda::getCurrentCUDAStream();
    for (const at::Tensor* t : {&s->heavy_rows, &s->segment_ptr, &s->segment_row,
                                &s->segment_begin, &s->segment_end})
      t->record_stream(stream);
  }
  return s;
}

void note_max_degree(const at::Tensor& offsets, int64_t nnz, int64_t max_degree) {
  if (max_degree > iognn::cuda::kHeavyRowEdges) return;  // built on first use, as usual
  const Key key{offsets.get_device(), offsets.const_data_ptr(), offsets.numel() - 1, nnz};
  if (cache().find(key, offsets, false)) return;
  auto s = std::make_shared<RowScheduleTensors>();
  s->view.heavy_threshold = iognn::cuda::kHeavyRowEdges;
  cache().insert(key, offsets, std::move(s));
}

}  // namespace iognn::torch_ext::cuda_schedule

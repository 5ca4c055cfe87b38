#include "binding/cuda/propagate_plan.h"

#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDAGraphsC10Utils.h>

#include <cstdlib>
#include <list>
#include <tuple>

#include "binding/propagate_checks.h"

namespace iognn::torch_ext::cuda_plan {
namespace {

// A bounded LRU map from Key to shared entries, each stored with the identities of the tensors
// it was built from; a stale entry (an identity that no longer matches) is dropped on lookup.
template <typename Key, typename Value>
class LruCache {
 public:
  std::shared_ptr<Value> find(const Key& key, const std::vector<at::Tensor>& tensors) {
    std::lock_guard<std::mutex> lock(mutex_);
    return find_locked(key, tensors);
  }

  // The valid entry of key, or make() inserted as the most recent one.
  template <typename Make>
  std::shared_ptr<Value> find_or_insert(const Key& key, const std::vector<at::Tensor>& tensors,
                                        Make&& make) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (auto hit = find_locked(key, tensors)) return hit;
    Entry e{key, {}, make()};
    for (const auto& t : tensors) e.ids.emplace_back(t);
    entries_.push_front(std::move(e));
    if (entries_.size() > kCacheCapacity) entries_.pop_back();
    return entries_.front().value;
  }

 private:
  struct Entry {
    Key key;
    std::vector<TensorIdentity> ids;
    std::shared_ptr<Value> value;
  };

  bool valid(const Entry& e, const std::vector<at::Tensor>& tensors) const {
    if (e.ids.size() != tensors.size()) return false;
    for (size_t i = 0; i < tensors.size(); ++i)
      if (!e.ids[i].matches(tensors[i])) return false;
    return true;
  }

  std::shared_ptr<Value> find_locked(const Key& key, const std::vector<at::Tensor>& tensors) {
    for (auto it = entries_.begin(); it != entries_.end(); ++it) {
      if (!(it->key == key)) continue;
      if (!valid(*it, tensors)) {  // same pointer and sizes, another (or edited) tensor
        entries_.erase(it);
        return nullptr;
      }
      entries_.splice(entries_.begin(), entries_, it);
      return it->value;
    }
    return nullptr;
  }

  std::mutex mutex_;
  std::list<Entry> entries_;  // most recently used first; at most kCacheCapacity entries
};

struct ScheduleKey {
  int device;
  const void* offsets;
  int64_t rows, nnz;
  bool operator==(const ScheduleKey& o) const {
    return std::tie(device, offsets, rows, nnz) == std::tie(o.device, o.offsets, o.rows, o.nnz);
  }
};

// The caches live for the whole process and are deliberately never destroyed: their entries own
// CUDA memory and cuSPARSE descriptors, which must not be released after the CUDA runtime has
// been torn down at exit.
LruCache<ScheduleKey, const RowScheduleTensors>& schedules() {
  static auto* cache = new LruCache<ScheduleKey, const RowScheduleTensors>();
  return *cache;
}
LruCache<PlanKey, Plan>& plans() {
  static auto* cache = new LruCache<PlanKey, Plan>();
  return *cache;
}

std::shared_ptr<const RowScheduleTensors> build_schedule(const at::Tensor& offsets, int64_t nnz) {
  using iognn::cuda::kHeavyRowEdges;
  using iognn::cuda::kSegmentEdges;
  auto s = std::make_shared<RowScheduleTensors>();
  s->view.heavy_threshold = kHeavyRowEdges;
  s->longest_row = nnz;
  if (nnz <= kHeavyRowEdges) return s;  // no row can be heavy: nothing to read back
  const at::Tensor off = offsets.to(at::kLong);
  const at::Tensor deg = off.slice(0, 1) - off.slice(0, 0, -1);
  s->longest_row = deg.max().item<int64_t>();  // synchronises
  if (s->longest_row <= kHeavyRowEdges) return s;  // no heavy row
  s->heavy_rows = at::nonzero(deg > kHeavyRowEdges).view(-1);  // synchronises
  const int64_t num_heavy = s->heavy_rows.numel();
  if (num_heavy == 0) return s;
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

int64_t version_of(const at::Tensor& t) { return t.is_inference() ? -1 : int64_t(t._version()); }

}  // namespace

BackendRequest requested_backend() {
  const char* env = std::getenv("IOGNN_PROPAGATE_BACKEND");
  const std::string v = env ? env : "";
  // Default: the own kernels. The cuSPARSE path stays opt-in (cusparse, or auto, which times it)
  // until tests/python/test_cusparse_probe_cuda.py has cleared it on the GPU machine: the earlier
  // version failed there with a sticky "operation not supported on global/shared address space".
  if (v.empty() || v == "own") return BackendRequest::kOwn;
  if (v == "auto") return BackendRequest::kAuto;
  if (v == "cusparse") return BackendRequest::kCusparse;
  TORCH_CHECK_VALUE(false, "IOGNN_PROPAGATE_BACKEND must be 'auto', 'own' or 'cusparse', got '",
                    v, "'");
}

Direction parse_direction(c10::string_view direction, const char* op) {
  return parse_plan_direction(direction, op) ? Direction::kForward : Direction::kBackwardX;
}

bool stream_is_capturing() {
  return c10::cuda::currentStreamCaptureStatusMayInitCtx() != c10::cuda::CaptureStatus::None;
}

TensorIdentity::TensorIdentity(const at::Tensor& t)
    : storage_(t.storage().getWeakStorageImpl()),
      data_(t.const_data_ptr()),
      numel_(t.numel()),
      version_(version_of(t)) {}

bool TensorIdentity::matches(const at::Tensor& t) const {
  // A live weak reference keeps the StorageImpl object itself allocated, so no other storage can
  // sit at the same address while this one is alive; an expired one never matches.
  return !storage_.expired() && storage_._unsafe_get_target() == t.storage().unsafeGetStorageImpl() &&
         data_ == t.const_data_ptr() && numel_ == t.numel() && version_ == version_of(t);
}

std::shared_ptr<const RowScheduleTensors> row_schedule(const at::Tensor& offsets, int64_t nnz) {
  const ScheduleKey key{offsets.get_device(), offsets.const_data_ptr(), offsets.numel() - 1, nnz};
  auto s = schedules().find(key, {offsets});
  if (!s) {
    if (stream_is_capturing()) return std::make_shared<const RowScheduleTensors>();
    // Built outside the cache lock (it synchronises); a concurrent builder's copy is equivalent.
    auto built = build_schedule(offsets, nnz);
    s = schedules().find_or_insert(key, {offsets}, [&] { return built; });
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

std::shared_ptr<Plan> find_or_create_plan(const PlanKey& key, const std::vector<at::Tensor>& graph) {
  return plans().find_or_insert(key, graph, [] { return std::make_shared<Plan>(); });
}

std::shared_ptr<Plan> find_plan(const PlanKey& key, const std::vector<at::Tensor>& graph) {
  return plans().find(key, graph);
}

double time_ms(const std::function<void()>& fn, int reps) {
  const auto stream = at::cuda::getCurrentCUDAStream();
  fn();
  at::cuda::CUDAEvent start(cudaEventDefault), stop(cudaEventDefault);
  start.record(stream);
  for (int r = 0; r < reps; ++r) fn();
  stop.record(stream);
  stop.synchronize();
  return double(start.elapsed_time(stop)) / reps;
}

}  // namespace iognn::torch_ext::cuda_plan

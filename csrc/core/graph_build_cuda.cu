// Device construction of the CSR / transposed CSR (see graph_cuda.h for the contract and graph.h
// for the layout). The result equals build_graph_cpu's bit for bit because both compute the same
// stable orders:
//   augmented list : kept input edges in input order (a stable compaction), then loops 0..L-1;
//   CSR            : a stable radix sort of the augmented ids by the packed key (dst, src), i.e.
//                    rows by destination, sorted by (source, augmented id) within a row;
//   transposed CSR : a stable radix sort of the CSR positions by source, i.e. rows by source,
//                    sorted by CSR position (hence by (destination, id)) within a row.
// Sort keys use only the bits that cover the node counts (begin_bit = 0, end_bit = bits(num_src) +
// bits(num_dst)), packed into 32 bits when they fit. Offsets are lower bounds in the sorted keys,
// so each output element is written by exactly one thread; the only atomics are integer min/max/add
// whose results do not depend on their order.
#include <cub/block/block_reduce.cuh>
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_select.cuh>
#include <thrust/iterator/counting_iterator.h>

#include <algorithm>
#include <cstdint>
#include <cuda/functional>
#include <type_traits>
#include <utility>

#include "core/cuda_check.h"
#include "core/error.h"
#include "core/graph_cuda.h"

namespace iognn::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = int64_t(1) << 16;  // grid-stride loops cover the rest
constexpr size_t kAlign = 256;                      // alignment of every workspace slice

// Launches kernel(n, args...) over a 1-D grid-stride range of n items (nothing when n == 0).
template <typename... Params, typename... Args>
void launch(const char* name, void (*kernel)(int64_t, Params...), int64_t n, cudaStream_t stream,
            Args&&... args) {
  if (n <= 0) return;
  const int64_t blocks = std::min<int64_t>((n + kThreads - 1) / kThreads, kMaxBlocks);
  kernel<<<unsigned(blocks), kThreads, 0, stream>>>(n, std::forward<Args>(args)...);
  IOGNN_CUDA_CHECK_LAUNCH(name);
}

#define IOGNN_GRID_STRIDE(i, n)                                                   \
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < (n);       \
       i += int64_t(gridDim.x) * blockDim.x)

// Number of bits that represent every value in [0, n): 0 for n <= 1.
int bits_for(int64_t n) {
  int b = 0;
  while (b < 63 && (int64_t(1) << b) < n) ++b;
  return b;
}

size_t align_up(size_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }

// Hands out consecutive aligned slices of a workspace; with a null base it only measures.
class Slicer {
 public:
  explicit Slicer(void* base) : base_(static_cast<char*>(base)) {}
  template <typename T>
  T* take(int64_t count) {
    const size_t offset = used_;
    used_ += align_up(size_t(count) * sizeof(T));
    return base_ ? reinterpret_cast<T*>(base_ + offset) : nullptr;
  }
  void* take_bytes(size_t bytes) { return take<char>(int64_t(bytes)); }
  size_t used() const { return used_; }

 private:
  char* base_;
  size_t used_ = 0;
};

void check_workspace(const char* fn, const void* workspace, size_t have, size_t need) {
  IOGNN_CHECK(need == 0 || workspace != nullptr, ValueError, fn, ": the workspace is null");
  IOGNN_CHECK(reinterpret_cast<uintptr_t>(workspace) % kAlign == 0, ValueError, fn,
              ": the workspace must be ", kAlign, "-byte aligned");
  IOGNN_CHECK(have >= need, ValueError, fn, ": the workspace has ", have, " bytes, ", need,
              " are needed");
}

// ---- plan: validation + self-loop count ---------------------------------------------------------

struct PlanStatus {
  unsigned long long first_bad;  // 2k + row of the first out-of-range index, ~0 when none
  unsigned long long num_loops;  // input edges with source == destination
  long long bad_value;           // the index at first_bad
};

__global__ void validate_kernel(int64_t n, EdgeIndexView ei, int64_t num_src, int64_t num_dst,
                                PlanStatus* status) {
  using BlockReduce = cub::BlockReduce<unsigned long long, kThreads>;
  __shared__ typename BlockReduce::TempStorage temp;
  unsigned long long first_bad = ~0ull, loops = 0;
  IOGNN_GRID_STRIDE(k, n) {
    const int64_t s = ei.src(k), d = ei.dst(k);
    // Source before destination within an edge, as plan_graph checks them.
    if (s < 0 || s >= num_src) {
      first_bad = std::min(first_bad, 2ull * k);
    } else if (d < 0 || d >= num_dst) {
      first_bad = std::min(first_bad, 2ull * k + 1);
    }
    loops += (s == d);
  }
  first_bad = BlockReduce(temp).Reduce(first_bad, ::cuda::minimum<>{});
  __syncthreads();  // temp is reused
  loops = BlockReduce(temp).Sum(loops);
  if (threadIdx.x == 0) {
    if (first_bad != ~0ull) atomicMin(&status->first_bad, first_bad);
    if (loops != 0) atomicAdd(&status->num_loops, loops);
  }
}

// One thread: fetch the offending index so that a single copy brings back the whole report.
__global__ void fetch_bad_value_kernel(EdgeIndexView ei, PlanStatus* status) {
  const unsigned long long bad = status->first_bad;
  if (bad == ~0ull) return;
  const int64_t k = int64_t(bad >> 1);
  status->bad_value = (bad & 1) ? ei.dst(k) : ei.src(k);
}

// ---- build --------------------------------------------------------------------------------------

// Selects the input edges that survive self-loop removal.
struct IsNotSelfLoop {
  EdgeIndexView ei;
  __device__ bool operator()(int64_t k) const { return ei.src(k) != ei.dst(k); }
};

// Augmented edge a: a kept input edge (a < num_kept; input id edge_map[a], or a itself when every
// input edge is kept) or the loop of node a - num_kept. Writes its packed (dst, src) key, its id as
// the sort value, and edge_map (-1 for loops; kAddRemaining then raises it to the last input loop).
template <typename index_t, typename key_t>
__global__ void augmented_keys_kernel(int64_t n, EdgeIndexView ei, int64_t num_kept,
                                      bool keep_all, int src_bits, index_t* edge_map, key_t* keys,
                                      index_t* ids) {
  IOGNN_GRID_STRIDE(a, n) {
    int64_t s, d;
    if (a < num_kept) {
      const int64_t k = keep_all ? a : int64_t(edge_map[a]);
      if (keep_all) edge_map[a] = index_t(a);
      s = ei.src(k);
      d = ei.dst(k);
    } else {
      s = d = a - num_kept;
      edge_map[a] = index_t(-1);
    }
    keys[a] = key_t((uint64_t(d) << src_bits) | uint64_t(s));
    ids[a] = index_t(a);
  }
}

__device__ void atomic_max(int32_t* p, int32_t v) { atomicMax(p, v); }
__device__ void atomic_max(int64_t* p, int64_t v) {
  atomicMax(reinterpret_cast<long long*>(p), static_cast<long long>(v));
}

// kAddRemaining: the loop of node i keeps the id of its last input loop (the largest k).
template <typename index_t>
__global__ void last_input_loop_kernel(int64_t n, EdgeIndexView ei, index_t* loop_edge_map) {
  IOGNN_GRID_STRIDE(k, n) {
    const int64_t s = ei.src(k);
    if (s == ei.dst(k)) atomic_max(loop_edge_map + s, index_t(k));
  }
}

// ptr[i] = number of sorted keys below (i << shift), for i < n - 1; ptr[n - 1] = num_keys.
template <typename key_t, typename index_t>
__global__ void offsets_kernel(int64_t n, const key_t* sorted, int64_t num_keys, int shift,
                               index_t* ptr) {
  IOGNN_GRID_STRIDE(i, n) {
    if (i == n - 1) {
      ptr[i] = index_t(num_keys);
      continue;
    }
    const uint64_t target = uint64_t(i) << shift;
    int64_t lo = 0, hi = num_keys;
    while (lo < hi) {
      const int64_t mid = lo + (hi - lo) / 2;
      if (uint64_t(sorted[mid]) < target) lo = mid + 1;
      else hi = mid;
    }
    ptr[i] = index_t(lo);
  }
}

// Source of every CSR position (col; also the transposed sort's keys) and the identity positions.
template <typename key_t, typename index_t>
__global__ void csr_sources_kernel(int64_t n, const key_t* csr_keys, uint64_t src_mask,
                                   index_t* col, index_t* positions) {
  IOGNN_GRID_STRIDE(p, n) {
    col[p] = index_t(uint64_t(csr_keys[p]) & src_mask);
    positions[p] = index_t(p);
  }
}

// Final col and row: both read from the CSR keys (the transposed sort reused col/row as scratch).
template <typename key_t, typename index_t>
__global__ void col_row_kernel(int64_t n, const key_t* csr_keys, const index_t* csc2csr,
                               int src_bits, index_t* col, index_t* row) {
  const uint64_t src_mask = (uint64_t(1) << src_bits) - 1;
  IOGNN_GRID_STRIDE(p, n) {
    col[p] = index_t(uint64_t(csr_keys[p]) & src_mask);
    row[p] = index_t(uint64_t(csr_keys[csc2csr[p]]) >> src_bits);
  }
}

// Workspace of a build: the CSR key double buffer, the alternate value buffer of both sorts, the
// compaction's count and CUB's temporary storage. The same code measures (null base) and carves.
template <typename index_t, typename key_t>
struct BuildWorkspace {
  using ukey_t = std::make_unsigned_t<index_t>;  // transposed keys: sources stored in col/row

  key_t* keys[2];
  index_t* values_alt;
  int64_t* num_selected;
  void* temp;
  size_t temp_bytes = 0;
  size_t total_bytes;

  BuildWorkspace(void* base, const GraphSizes& sz, SelfLoops loops, int src_bits, int dst_bits) {
    const int64_t E = sz.num_edges;
    Slicer slicer(base);
    keys[0] = slicer.take<key_t>(E);
    keys[1] = slicer.take<key_t>(E);
    values_alt = slicer.take<index_t>(E);
    num_selected = slicer.take<int64_t>(1);
    // CUB's temporary storage: the largest need of the three device-wide algorithms.
    if (loops != SelfLoops::kKeep && sz.num_input_edges > 0) {
      size_t bytes = 0;
      IOGNN_CUDA_CHECK(cub::DeviceSelect::If(nullptr, bytes, thrust::counting_iterator<int64_t>(0),
                                             static_cast<index_t*>(nullptr), num_selected,
                                             sz.num_input_edges, IsNotSelfLoop{}, nullptr));
      temp_bytes = std::max(temp_bytes, bytes);
    }
    if (E > 0) {
      size_t bytes = 0;
      cub::DoubleBuffer<key_t> k(nullptr, nullptr);
      cub::DoubleBuffer<index_t> v(nullptr, nullptr);
      IOGNN_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, bytes, k, v, E, 0,
                                                       src_bits + dst_bits, nullptr));
      temp_bytes = std::max(temp_bytes, bytes);
      cub::DoubleBuffer<ukey_t> tk(nullptr, nullptr);
      IOGNN_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, bytes, tk, v, E, 0, src_bits,
                                                       nullptr));
      temp_bytes = std::max(temp_bytes, bytes);
    }
    temp = slicer.take_bytes(temp_bytes);
    total_bytes = slicer.used();
  }
};

// Key type of the CSR sort: 32 bits when the packed (dst, src) pair fits, else 64.
template <typename Fn>
void with_key_type(int key_bits, Fn&& fn) {
  if (key_bits <= 32) fn(uint32_t{});
  else fn(uint64_t{});
}

template <typename index_t, typename key_t>
void build(const EdgeIndexView& ei, const GraphSizes& sz, SelfLoops loops,
           const GraphArrays<index_t>& out, BuildWorkspace<index_t, key_t>& ws, int src_bits,
           int dst_bits, cudaStream_t stream) {
  using ukey_t = typename BuildWorkspace<index_t, key_t>::ukey_t;
  const int64_t E = sz.num_edges;
  const int64_t num_kept = E - sz.num_loops;

  // 1. The augmented edge list (in PyG's order) as packed keys, with edge_map.
  if (loops != SelfLoops::kKeep && sz.num_input_edges > 0) {
    IOGNN_CUDA_CHECK(cub::DeviceSelect::If(ws.temp, ws.temp_bytes,
                                           thrust::counting_iterator<int64_t>(0), out.edge_map,
                                           ws.num_selected, sz.num_input_edges, IsNotSelfLoop{ei},
                                           stream));
  }
  launch("augmented_keys_kernel", augmented_keys_kernel<index_t, key_t>, E, stream, ei, num_kept,
         loops == SelfLoops::kKeep, src_bits, out.edge_map, ws.keys[0], out.eid);
  if (loops == SelfLoops::kAddRemaining)
    launch("last_input_loop_kernel", last_input_loop_kernel<index_t>, sz.num_input_edges, stream,
           ei, out.edge_map + num_kept);

  // 2. CSR: stable sort of the ids by (dst, src); eid = the sorted ids.
  cub::DoubleBuffer<key_t> keys(ws.keys[0], ws.keys[1]);
  cub::DoubleBuffer<index_t> ids(out.eid, ws.values_alt);
  if (E > 0) {
    IOGNN_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(ws.temp, ws.temp_bytes, keys, ids, E, 0,
                                                     src_bits + dst_bits, stream));
    if (ids.Current() != out.eid)
      IOGNN_CUDA_CHECK(cudaMemcpyAsync(out.eid, ids.Current(), E * sizeof(index_t),
                                       cudaMemcpyDeviceToDevice, stream));
  }
  const key_t* csr_keys = keys.Current();
  launch("offsets_kernel(rowptr)", offsets_kernel<key_t, index_t>, sz.num_dst + 1, stream,
         csr_keys, E, src_bits, out.rowptr);

  // 3. Transposed CSR: stable sort of the CSR positions by source; col and row serve as the key
  //    double buffer and are rewritten from the CSR keys afterwards.
  launch("csr_sources_kernel", csr_sources_kernel<key_t, index_t>, E, stream, csr_keys,
         (uint64_t(1) << src_bits) - 1, out.col, out.csc2csr);
  cub::DoubleBuffer<ukey_t> sources(reinterpret_cast<ukey_t*>(out.col),
                                    reinterpret_cast<ukey_t*>(out.row));
  cub::DoubleBuffer<index_t> positions(out.csc2csr, ws.values_alt);
  if (E > 0) {
    IOGNN_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(ws.temp, ws.temp_bytes, sources, positions,
                                                     E, 0, src_bits, stream));
    if (positions.Current() != out.csc2csr)
      IOGNN_CUDA_CHECK(cudaMemcpyAsync(out.csc2csr, positions.Current(), E * sizeof(index_t),
                                       cudaMemcpyDeviceToDevice, stream));
  }
  launch("offsets_kernel(colptr)", offsets_kernel<ukey_t, index_t>, sz.num_src + 1, stream,
         sources.Current(), E, 0, out.colptr);
  launch("col_row_kernel", col_row_kernel<key_t, index_t>, E, stream, csr_keys, out.csc2csr,
         src_bits, out.col, out.row);
}

}  // namespace

size_t plan_graph_workspace_bytes() { return align_up(sizeof(PlanStatus)); }

GraphSizes plan_graph_cuda(const EdgeIndexView& ei, int64_t num_src, int64_t num_dst,
                           SelfLoops loops, void* workspace, size_t workspace_bytes,
                           cudaStream_t stream) {
  check_graph_sizes(num_src, num_dst, ei.num_edges);
  IOGNN_CHECK(bits_for(num_src) + bits_for(num_dst) <= 64, ValueError,
              "the CUDA graph build needs num_src * num_dst <= 2^64, got ", num_src, " x ",
              num_dst, " nodes (build this graph on the CPU)");
  check_workspace("plan_graph_cuda", workspace, workspace_bytes, plan_graph_workspace_bytes());
  PlanStatus host{~0ull, 0, 0};
  if (ei.num_edges > 0) {
    auto* status = static_cast<PlanStatus*>(workspace);
    IOGNN_CUDA_CHECK(cudaMemcpyAsync(status, &host, sizeof host, cudaMemcpyHostToDevice, stream));
    launch("validate_kernel", validate_kernel, ei.num_edges, stream, ei, num_src, num_dst, status);
    fetch_bad_value_kernel<<<1, 1, 0, stream>>>(ei, status);
    IOGNN_CUDA_CHECK_LAUNCH("fetch_bad_value_kernel");
    IOGNN_CUDA_CHECK(cudaMemcpyAsync(&host, status, sizeof host, cudaMemcpyDeviceToHost, stream));
    IOGNN_CUDA_CHECK(cudaStreamSynchronize(stream));
  }
  if (host.first_bad != ~0ull)
    throw_edge_out_of_range(int(host.first_bad & 1), int64_t(host.first_bad >> 1),
                            int64_t(host.bad_value), num_src, num_dst);
  return graph_sizes(num_src, num_dst, ei.num_edges, int64_t(host.num_loops), loops);
}

template <typename index_t>
size_t build_graph_workspace_bytes(const GraphSizes& sz, SelfLoops loops) {
  const int src_bits = bits_for(sz.num_src), dst_bits = bits_for(sz.num_dst);
  size_t bytes = 0;
  with_key_type(src_bits + dst_bits, [&](auto key) {
    bytes = BuildWorkspace<index_t, decltype(key)>(nullptr, sz, loops, src_bits, dst_bits)
                .total_bytes;
  });
  return bytes;
}

template <typename index_t>
void build_graph_cuda(const EdgeIndexView& ei, const GraphSizes& sz, SelfLoops loops,
                      const GraphArrays<index_t>& out, void* workspace, size_t workspace_bytes,
                      cudaStream_t stream) {
  const int src_bits = bits_for(sz.num_src), dst_bits = bits_for(sz.num_dst);
  with_key_type(src_bits + dst_bits, [&](auto key) {
    using key_t = decltype(key);
    const size_t need = BuildWorkspace<index_t, key_t>(nullptr, sz, loops, src_bits, dst_bits)
                            .total_bytes;
    check_workspace("build_graph_cuda", workspace, workspace_bytes, need);
    BuildWorkspace<index_t, key_t> ws(workspace, sz, loops, src_bits, dst_bits);
    build<index_t, key_t>(ei, sz, loops, out, ws, src_bits, dst_bits, stream);
  });
}

#define IOGNN_INSTANTIATE(index_t)                                                           \
  template size_t build_graph_workspace_bytes<index_t>(const GraphSizes&, SelfLoops);        \
  template void build_graph_cuda<index_t>(const EdgeIndexView&, const GraphSizes&, SelfLoops, \
                                          const GraphArrays<index_t>&, void*, size_t,        \
                                          cudaStream_t);
IOGNN_INSTANTIATE(int32_t)
IOGNN_INSTANTIATE(int64_t)
#undef IOGNN_INSTANTIATE

}  // namespace iognn::cuda

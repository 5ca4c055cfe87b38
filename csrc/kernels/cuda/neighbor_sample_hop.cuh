// The building blocks of a hop of the CUDA neighbour samplers (kernels/cuda/neighbor_sample.cu,
// the homogeneous one, describes the hop): the key table, the error words and their report, the
// hop's kernels (seeds, sizes, publish, draw, first occurrence, assign, rehash), and DeviceCall,
// the host steps a sampler call takes with its arena and stream (allocations, scans, reads back,
// key tables, the host checks of what the device flagged). Internal to the samplers' translation
// units: each has its own copy.
#pragma once

#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/transform_iterator.h>

#include <algorithm>
#include <cub/device/device_scan.cuh>
#include <cstdint>
#include <limits>
#include <vector>

#include "core/cuda_check.h"
#include "kernels/cuda/neighbor_sample.h"
#include "kernels/cuda/neighbor_sample_draws.cuh"
#include "kernels/sampler_checks.h"
#include "kernels/sampler_types.h"

namespace iognn::cuda {
namespace {

using namespace sampler_detail;

constexpr int kThreads = 256;
constexpr int kWarpsPerBlock = kThreads / kWarp;
constexpr int64_t kMaxBlocks = int64_t(1) << 20;  // grid-stride loops cover the rest
// Key spaces up to this many keys get a dense table (one fill per call), larger ones a hash.
constexpr int64_t kDenseKeys = int64_t(1) << 24;
// Output buffers are first sized for the fan-outs' bound on the sample, at most this many
// entries; they grow (doubling) past it.
constexpr int64_t kInitialCapacity = int64_t(1) << 22;

using word_t = unsigned long long;
// Key table words: kEmpty (no id yet), kPending | e (first seen at edge e of the running hop),
// or a local id given by an earlier hop or the seeds (below kPending). atomicMin keeps a given id
// over a claim, the first edge among claims, and the first position of a duplicated seed.
constexpr word_t kEmpty = ~word_t(0);
constexpr word_t kPending = word_t(1) << 62;
constexpr word_t kNone = ~word_t(0);  // no error recorded

// The device's error words: the first offending index of each check, kNone when none.
struct Status {
  word_t bad_seed;       // seed position out of range
  word_t bad_frontier;   // frontier index (of the hop) with bad colptr entries, weights or rows
  word_t bad_edge;       // hop edge whose row value is out of range
  word_t overflow_edge;  // hop edge whose new local id does not fit index_t
  long long colptr_first, colptr_last;
};

// What the host reads after each wait (gathered by the publish kernel, copied in one transfer).
struct Report {
  Status status;
  long long hop_edges;  // edges of the hop whose sizes were just scanned
  long long new_nodes;  // new nodes of the hop before it
};

// A padded hop's frontier: local ids [first, first + count), known only on the device.
struct Cursor {
  long long first, count;
};

// Key -> word. Dense: the key is the slot. Hashed: open addressing with linear probing, keys
// inserted by compare-and-swap, at most half full.
struct KeyTable {
  word_t* values = nullptr;
  word_t* keys = nullptr;  // null when dense
  int64_t capacity = 0;    // slots; a power of two when hashed

  __device__ int64_t slot(word_t key) const {
    if (!keys) return int64_t(key);
    const word_t mask = word_t(capacity - 1);
    for (word_t s = mix64(key) & mask;; s = (s + 1) & mask) {
      const word_t prev = atomicCAS(keys + s, kEmpty, key);
      if (prev == kEmpty || prev == key) return int64_t(s);
    }
  }
};

__device__ __forceinline__ word_t node_key(int64_t tree, int64_t node, int64_t num_nodes) {
  return word_t(tree) * word_t(num_nodes) + word_t(node);
}

// The graph and the options, as every hop kernel reads them (device pointers). num_nodes: the
// nodes row's values index (and node_time's); colptr's nodes too unless num_dst says otherwise.
template <typename index_t>
struct Graph {
  const index_t* colptr;
  const index_t* row;
  int64_t num_nodes, num_edges;
  const double* weight;
  const int64_t* node_time;
  const int64_t* edge_time;
  const int64_t* tree_time;  // seed time of every tree (temporal sampling)
  bool replace, disjoint, last;
  uint64_t rng_seed;
  int64_t num_dst = -1;  // colptr's nodes (a heterogeneous edge type's destinations), or -1
  const int64_t* device_rng_seed = nullptr;  // padded sampling: the key, read by the draws

  __device__ bool temporal() const { return node_time || edge_time; }
  __device__ int64_t destinations() const { return num_dst < 0 ? num_nodes : num_dst; }
};

// The population a node samples from with fan-out k: 'last' keeps at most k eligible positions.
__host__ __device__ inline int64_t cut_population(int64_t eligible, int64_t k, bool last) {
  return last && k >= 0 && eligible > k ? k : eligible;
}

__device__ __forceinline__ int64_t global_warp() {
  return (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / kWarp;
}
__device__ __forceinline__ int64_t warp_stride() { return int64_t(gridDim.x) * blockDim.x / kWarp; }
__device__ __forceinline__ int64_t global_thread() {
  return int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ int64_t thread_stride() { return int64_t(gridDim.x) * blockDim.x; }

// A seed set placed among its node type's nodes (num_nodes of them, node_time their times or
// null): seed i takes local id first_local + i and grows tree first_tree + i, whose time is
// seeds.seed_time[i], else its node time.
template <typename index_t>
struct SeedSet {
  HeteroSeeds<index_t> seeds;  // (its node_type unused)
  int64_t num_nodes;
  const int64_t* node_time;
  int64_t first_local = 0, first_tree = 0;
};

// The seeds' local ids, trees, trees' times (temporal sampling) and table entries; a seed out of
// range records its tree.
template <typename index_t>
__device__ void enter_seeds(const SeedSet<index_t>& set, bool disjoint, KeyTable table,
                            index_t* node, index_t* batch, int64_t* tree_time, Status* status) {
  const HeteroSeeds<index_t>& seeds = set.seeds;
  for (int64_t i = global_thread(); i < seeds.num_seeds; i += thread_stride()) {
    const int64_t s = seeds.seed[i], local = set.first_local + i, tree = set.first_tree + i;
    const bool valid = s >= 0 && s < set.num_nodes;
    node[local] = index_t(s);
    if (batch) batch[local] = index_t(tree);
    if (tree_time)
      tree_time[tree] = seeds.seed_time ? seeds.seed_time[i] : valid ? set.node_time[s] : 0;
    if (!valid) {
      atomicMin(&status->bad_seed, word_t(tree));
      continue;
    }
    atomicMin(table.values + table.slot(node_key(disjoint ? tree : 0, s, set.num_nodes)),
              word_t(local));
  }
}

// The seeds: local ids 0 .. num_seeds - 1, their table entries and trees' times; colptr's ends.
template <typename index_t>
__global__ void __launch_bounds__(kThreads)
    seed_kernel(Graph<index_t> g, const index_t* seed, int64_t num_seeds, const int64_t* seed_time,
                KeyTable table, index_t* node, index_t* batch, int64_t* tree_time,
                Status* status) {
  if (global_thread() == 0) {
    status->colptr_first = (long long)g.colptr[0];
    status->colptr_last = (long long)g.colptr[g.num_nodes];
  }
  const SeedSet<index_t> set{{0, seed, num_seeds, seed_time}, g.num_nodes, g.node_time};
  enter_seeds(set, g.disjoint, table, node, batch, tree_time, status);
}

// Re-enters local ids [0, count) into a new (larger) hashed table.
template <typename index_t>
__global__ void __launch_bounds__(kThreads)
    rehash_kernel(const index_t* node, const index_t* batch, int64_t count, int64_t num_nodes,
                  KeyTable table) {
  for (int64_t l = global_thread(); l < count; l += thread_stride()) {
    const word_t key = node_key(batch ? int64_t(batch[l]) : 0, int64_t(node[l]), num_nodes);
    atomicMin(table.values + table.slot(key), word_t(l));
  }
}

// Population (counts[i] = sample size, populations[i] = before the 'last' cut) of frontier entry
// i < count, local id first + i; entries count .. bound get 0. count is *device_count when given;
// first and count are the cursor's when given (padded sampling).
template <typename index_t>
__global__ void __launch_bounds__(kThreads)
    sizes_kernel(Graph<index_t> g, const index_t* node, const index_t* batch, int64_t first,
                 int64_t bound, const long long* device_count, int64_t count, int64_t k,
                 long long* counts, long long* populations, Status* status,
                 const Cursor* cursor = nullptr) {
  if (device_count) count = *device_count;
  if (cursor) {
    first = cursor->first;
    count = cursor->count;
  }
  const int lane = lane_id();
  for (int64_t i = global_warp(); i <= bound; i += warp_stride()) {
    long long population = 0;
    bool bad = false;
    const int64_t v = i < count ? int64_t(node[first + i]) : -1;
    if (v >= 0 && v < g.destinations()) {  // (a seed out of range: the seed check reports it)
      const int64_t lo = g.colptr[v], hi = g.colptr[v + 1];
      bad = !(0 <= lo && lo <= hi && hi <= g.num_edges);
      if (!bad && g.weight) {
        for (int64_t p = lo + lane; p < hi; p += kWarp) {
          const double w = g.weight[p];
          bad |= !(isfinite(w) && w >= 0);
          population += w > 0;
        }
      } else if (!bad && g.temporal()) {
        const int64_t seed_time = g.tree_time[int64_t(batch[first + i])];
        for (int64_t p = lo + lane; p < hi; p += kWarp) {
          int64_t t = 0;
          if (g.node_time) {
            const int64_t u = g.row[p];
            if (u < 0 || u >= g.num_nodes) {
              bad = true;
              continue;
            }
            t = g.node_time[u];
          } else {
            t = g.edge_time[p];
          }
          population += t <= seed_time;
        }
      } else if (!bad && lane == 0) {
        population = hi - lo;
      }
      population = warp_sum(population);
      bad = __any_sync(kFullMask, bad);
    }
    if (lane == 0) {
      populations[i] = bad ? 0 : population;
      counts[i] = bad ? 0 : sample_size(cut_population(population, k, g.last), k, g.replace);
      if (bad) atomicMin(&status->bad_frontier, word_t(i));
    }
  }
}

__global__ void publish_kernel(Status* status, const long long* hop_edges,
                               const long long* new_nodes, Report* report) {
  report->status = *status;
  report->hop_edges = hop_edges ? *hop_edges : 0;
  report->new_nodes = new_nodes ? *new_nodes : 0;
  status->bad_frontier = status->bad_edge = status->overflow_edge = kNone;
}

// Writes the sampled positions of frontier node v (local id `local`) into out[0 .. m).
template <typename index_t>
__device__ void draw_node(const Graph<index_t>& g, int64_t lo, int64_t hi, int64_t population,
                          int64_t m, int64_t k, int64_t tree, uint64_t local, index_t* out) {
  const bool replace = g.replace;
  if (g.weight) {
    if (k < 0 || (!replace && k >= population)) {
      compact(lo, hi, [&](int64_t p) { return g.weight[p] > 0; }, out);
    } else if (replace) {
      if (population > 0) weighted_with_replacement(g.weight, lo, hi - lo, k, g.rng_seed, local, out);
    } else {
      weighted_without_replacement(g.weight, lo, hi - lo, k, g.rng_seed, local, out);
    }
  } else if (g.temporal()) {
    TemporalPopulation filter{g.node_time, g.edge_time, g.tree_time[tree]};
    const int64_t size = cut_population(population, k, g.last);
    if (m > 0 && size < population) filter.cut_to_most_recent(g.row, lo, hi, k);
    const auto in = [&](int64_t p) { return filter.contains(g.row, p); };
    if (k < 0 || (!replace && k >= size)) {
      compact(lo, hi, in, out);
    } else {
      draw_uniform(size, k, replace, g.rng_seed, local, 0, out);
      __syncwarp();
      population_positions(lo, hi, in, m, out);
    }
  } else {
    draw_uniform(hi - lo, k, replace, g.rng_seed, local, lo, out);
  }
}

// The draws of frontier entries i < count (local id first + i) into edge[offsets[i] ..), their
// col entries, and each sampled neighbour's claim (slot_of[e]: its table slot, -1 for a row value
// out of range). With a cursor (padded sampling) count is a bound and the cursor has the frontier.
template <typename index_t>
__global__ void __launch_bounds__(kThreads)
    draw_kernel(Graph<index_t> g, const index_t* node, const index_t* batch, int64_t first,
                int64_t count, int64_t k, const long long* offsets, const long long* populations,
                index_t* edge, index_t* col, KeyTable table, long long* slot_of, Status* status,
                const Cursor* cursor = nullptr) {
  if (cursor) {
    first = cursor->first;
    count = min(count, int64_t(cursor->count));
  }
  if (g.device_rng_seed) g.rng_seed = uint64_t(*g.device_rng_seed);
  const int lane = lane_id();
  for (int64_t i = global_warp(); i < count; i += warp_stride()) {
    const int64_t v = node[first + i];
    const int64_t lo = g.colptr[v], hi = g.colptr[v + 1];
    const int64_t begin = offsets[i], m = offsets[i + 1] - begin;
    const int64_t tree = g.disjoint ? int64_t(batch[first + i]) : 0;
    draw_node(g, lo, hi, populations[i], m, k, tree, uint64_t(first + i), edge + begin);
    __syncwarp();
    for (int64_t e = begin + lane; e < begin + m; e += kWarp) {
      col[e] = index_t(first + i);
      const int64_t u = g.row[int64_t(edge[e])];
      if (u < 0 || u >= g.num_nodes) {
        atomicMin(&status->bad_edge, word_t(e));
        slot_of[e] = -1;
        continue;
      }
      const int64_t s = table.slot(node_key(tree, u, g.num_nodes));
      slot_of[e] = s;
      atomicMin(table.values + s, kPending | word_t(e));
    }
  }
}

// 1 for the hop edges that are their key's first occurrence (the claim they won), else 0.
// (hop_edges is a bound when device_hop_edges, the count, is given.)
struct FirstOccurrence {
  const long long* slot_of;
  const word_t* values;
  int64_t hop_edges;
  const long long* device_hop_edges = nullptr;
  __host__ __device__ long long operator()(int64_t e) const {
    if (e >= hop_edges || (device_hop_edges && e >= *device_hop_edges) || slot_of[e] < 0)
      return 0;
    return values[slot_of[e]] == (kPending | word_t(e)) ? 1 : 0;
  }
};

// row[e] of every hop edge; node / batch of the new local ids next_id + new_rank[e]. A new node's
// tree is its frontier node's: col_batch[col[e]] (batch when null: the frontier's nodes are the
// new nodes' type). With a cursor (padded sampling) hop_edges is a bound, the count is
// *device_hop_edges and next_id follows the cursor's frontier.
template <typename index_t>
__global__ void __launch_bounds__(kThreads)
    assign_kernel(Graph<index_t> g, const index_t* edge, const index_t* col, index_t* row_out,
                  int64_t hop_edges, const long long* slot_of, const long long* new_rank,
                  KeyTable table, int64_t next_id, index_t* node, index_t* batch,
                  Status* status, const index_t* col_batch = nullptr,
                  const long long* device_hop_edges = nullptr, const Cursor* cursor = nullptr) {
  if (!col_batch) col_batch = batch;
  if (cursor) {
    hop_edges = min(hop_edges, int64_t(*device_hop_edges));
    next_id = cursor->first + cursor->count;
  }
  for (int64_t e = global_thread(); e < hop_edges; e += thread_stride()) {
    const long long s = slot_of[e];
    if (s < 0) continue;
    // Pending, or already the id its first edge's thread writes below: both give the same id.
    const word_t word = *static_cast<volatile word_t*>(table.values + s);
    int64_t local = int64_t(word);
    if (word & kPending) {
      const int64_t first_edge = int64_t(word & ~kPending);
      local = next_id + new_rank[first_edge];
      if (first_edge == e) {
        node[local] = g.row[int64_t(edge[e])];
        if (batch) batch[local] = col_batch[int64_t(col[e])];
        if (local > int64_t(std::numeric_limits<index_t>::max()))
          atomicMin(&status->overflow_edge, word_t(e));
        table.values[s] = word_t(local);
      }
    }
    row_out[e] = index_t(local);
  }
}

int grid_for(int64_t items, int64_t per_block) {
  return int(std::max<int64_t>(1, std::min(kMaxBlocks, (items + per_block - 1) / per_block)));
}

// An upper bound on the sample's edges from the fan-outs (capped), or 0 with a fan-out of -1.
int64_t edge_bound(int64_t num_seeds, const std::vector<int64_t>& fan_outs) {
  int64_t frontier = num_seeds, edges = 0;
  for (const int64_t k : fan_outs) {
    if (k < 0) return 0;
    frontier = k == 0 || frontier <= kInitialCapacity / k ? frontier * k : kInitialCapacity;
    edges = std::min(kInitialCapacity, edges + frontier);
  }
  return edges;
}

template <typename T>
struct Buffer {
  T* data = nullptr;
  int64_t capacity = 0;
};

// One sampler call's device side: its arena and stream, and the host steps every sampler takes
// with them.
class DeviceCall {
 protected:
  DeviceCall(DeviceArena& arena, cudaStream_t stream) : arena_(arena), stream_(stream) {}

  template <typename T>
  T* allocate(int64_t count) {
    return count > 0 ? static_cast<T*>(arena_.allocate(size_t(count) * sizeof(T))) : nullptr;
  }

  // Room for `needed` entries, keeping the first `used`.
  template <typename T>
  void reserve(Buffer<T>& b, int64_t used, int64_t needed) {
    if (needed <= b.capacity) return;
    const int64_t capacity = std::max(needed, 2 * b.capacity);
    T* data = allocate<T>(capacity);
    if (used > 0)
      IOGNN_CUDA_CHECK(cudaMemcpyAsync(data, b.data, size_t(used) * sizeof(T),
                                       cudaMemcpyDeviceToDevice, stream_));
    if (b.data) arena_.release(b.data);
    b = {data, capacity};
  }

  // A table of `keys` keys for a sample of up to `max_nodes` nodes: dense over the whole key
  // space when it is small, else hashed with at least twice as many slots.
  KeyTable make_key_table(int64_t keys, int64_t max_nodes) {
    KeyTable t;
    if (keys <= kDenseKeys) {
      t.capacity = keys;
    } else {
      t.capacity = 1024;
      while (t.capacity < 2 * max_nodes) t.capacity *= 2;
      t.keys = allocate<word_t>(t.capacity);
      IOGNN_CUDA_CHECK(cudaMemsetAsync(t.keys, 0xFF, size_t(t.capacity) * sizeof(word_t), stream_));
    }
    t.values = allocate<word_t>(t.capacity);
    if (t.values)
      IOGNN_CUDA_CHECK(
          cudaMemsetAsync(t.values, 0xFF, size_t(t.capacity) * sizeof(word_t), stream_));
    return t;
  }

  // Before a hop that may bring the sample to max_nodes nodes (num_local so far: their ids
  // `node` among num_nodes nodes, their trees `batch` with disjoint).
  template <typename index_t>
  void grow_key_table(KeyTable& table, int64_t keys, int64_t num_local, int64_t max_nodes,
                      const index_t* node, const index_t* batch, int64_t num_nodes) {
    if (!table.keys || 2 * max_nodes <= table.capacity) return;
    const KeyTable old = table;
    table = make_key_table(keys, std::max(max_nodes, table.capacity));
    arena_.release(old.keys);
    arena_.release(old.values);
    rehash_kernel<<<grid_for(num_local, kThreads), kThreads, 0, stream_>>>(
        node, batch, num_local, num_nodes, table);
    IOGNN_CUDA_CHECK_LAUNCH("neighbor_sample rehash_kernel");
  }

  template <typename Input>
  void exclusive_sum(Input in, long long* out, int64_t n) {
    size_t bytes = 0;
    IOGNN_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(nullptr, bytes, in, out, n, stream_));
    void* temp = allocate<char>(std::max<int64_t>(int64_t(bytes), 1));  // null would only size
    IOGNN_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(temp, bytes, in, out, n, stream_));
  }

  template <typename T>
  std::vector<T> read(const T* p, int64_t n) {
    std::vector<T> host(size_t(std::max<int64_t>(n, 0)));
    if (n > 0) {
      IOGNN_CUDA_CHECK(
          cudaMemcpyAsync(host.data(), p, size_t(n) * sizeof(T), cudaMemcpyDeviceToHost, stream_));
      IOGNN_CUDA_CHECK(cudaStreamSynchronize(stream_));
    }
    return host;
  }
  template <typename T>
  T read(const T* p) {
    return read(p, 1)[0];
  }

  // The host kernel's errors of a hop's relabelling (edge: the hop's first CSC position), in its
  // order: a row value out of range, then a local id past int32.
  template <typename index_t>
  void raise_relabel_errors(const Status& s, const CscNames& names, const Graph<index_t>& g,
                            const index_t* edge) {
    if (s.bad_edge < s.overflow_edge) {
      const int64_t p = read(edge + int64_t(s.bad_edge));
      check_sample_neighbor(names, p, int64_t(read(g.row + p)), g.num_nodes);
    }
    if constexpr (sizeof(index_t) < sizeof(int64_t))  // only int32 ids can overflow
      if (s.overflow_edge != kNone)
        check_sample_local_id<index_t>(names, int64_t(std::numeric_limits<index_t>::max()) + 1);
  }

  // The host kernel's checks of a frontier node, in its order: colptr entries, then weights or
  // (node times) row values of its in-edges.
  template <typename index_t>
  void check_frontier_node(const CscNames& names, const Graph<index_t>& g, int64_t v) {
    const std::vector<index_t> ends = read(g.colptr + v, 2);
    const int64_t lo = ends[0], hi = ends[1];
    check_sample_colptr_range(names, v, lo, hi, g.num_edges);
    if (g.weight) {
      const std::vector<double> w = read(g.weight + lo, hi - lo);
      for (int64_t j = 0; j < hi - lo; ++j) check_sample_weight(names, lo + j, w[size_t(j)]);
    }
    if (g.node_time) {
      const std::vector<index_t> u = read(g.row + lo, hi - lo);
      for (int64_t j = 0; j < hi - lo; ++j)
        check_sample_neighbor(names, lo + j, int64_t(u[size_t(j)]), g.num_nodes);
    }
  }

  DeviceArena& arena_;
  cudaStream_t stream_;
};

}  // namespace
}  // namespace iognn::cuda

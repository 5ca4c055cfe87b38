// Neighbour sampling on a CUDA device (kernels/cuda/neighbor_sample.h; contract:
// kernels/sampler_types.h). A hop, on the caller's stream:
//   sizes    one warp per frontier node: its population (in-degree, positive weights or eligible
//            in-edges) and sample size, checking its colptr entries and its weights or times;
//   scan     exclusive sum of the sample sizes (cub): every node's slice of the hop's edges;
//   publish  one thread gathers the hop's edge count, the previous hop's new-node count and the
//            error words into one report, which the host copies back (its one wait of the hop);
//   draw     one warp per frontier node: its draws (neighbor_sample_draws.cuh) into its slice, its
//            col entries, and the claim of each sampled neighbour's key in the key table: the
//            key's first hop edge (atomicMin);
//   scan     exclusive sum over the hop's edges of "first occurrence of its key" (cub): the new
//            local ids in edge order, the ids the host kernel gives;
//   assign   one thread per edge: row[e], node (and batch) of every new id, the table entries.
// A hop's frontier is the previous hop's new nodes, which the device counts before the host knows
// them: the sizes kernel runs over an upper bound (the previous hop's edge count) and reads the
// count on the device. So the host waits once per hop, and once more for the last hop's new nodes.
//
// Padded sampling (kernels/sampler_types.h) runs the same kernels over the hops' capacities, with
// each hop's frontier (first local id, count) in a device cursor that a one-thread kernel advances,
// the hop's edge count read from its scan, and the key from a device scalar: no host wait at all.
//
// Errors: the kernels record the first offending seed, frontier node or edge (atomicMin of its
// index); the host, after the wait that reports it, reads that one item back and raises the host
// kernel's error through the same checks (kernels/sampler_checks.h), in the host kernel's order.
#include "kernels/cuda/neighbor_sample.h"

#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/transform_iterator.h>

#include <algorithm>
#include <cub/device/device_scan.cuh>
#include <cstdint>
#include <exception>
#include <limits>
#include <vector>

#include "core/cuda_check.h"
#include "core/error.h"
#include "kernels/cuda/neighbor_sample_draws.cuh"
#include "kernels/sampler_checks.h"

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

// The graph and the options, as every hop kernel reads them (device pointers).
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
  const int64_t* device_rng_seed;  // padded sampling: the key, read by the draws (else null)

  __device__ bool temporal() const { return node_time || edge_time; }
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

// The seeds: local ids 0 .. num_seeds - 1, their table entries and trees' times; colptr's ends.
template <typename index_t>
__global__ void __launch_bounds__(kThreads)
    seed_kernel(Graph<index_t> g, const index_t* seed, int64_t num_seeds, const int64_t* seed_time,
                KeyTable table, index_t* node, index_t* batch, int64_t* tree_time,
                Status* status, Cursor* cursor, long long* num_seed_nodes) {
  if (global_thread() == 0) {
    status->colptr_first = (long long)g.colptr[0];
    status->colptr_last = (long long)g.colptr[g.num_nodes];
    if (cursor) *cursor = {0, num_seeds};
    if (num_seed_nodes) *num_seed_nodes = num_seeds;
  }
  for (int64_t i = global_thread(); i < num_seeds; i += thread_stride()) {
    const int64_t s = seed[i];
    const bool valid = s >= 0 && s < g.num_nodes;
    node[i] = index_t(s);
    if (batch) batch[i] = index_t(i);
    if (tree_time) tree_time[i] = seed_time ? seed_time[i] : valid ? g.node_time[s] : 0;
    if (!valid) {
      atomicMin(&status->bad_seed, word_t(i));
      continue;
    }
    atomicMin(table.values + table.slot(node_key(g.disjoint ? i : 0, s, g.num_nodes)), word_t(i));
  }
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
                 int64_t bound, const long long* device_count, int64_t count, const Cursor* cursor,
                 int64_t k, long long* counts, long long* populations, Status* status) {
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
    if (v >= 0 && v < g.num_nodes) {  // (a seed out of range: the seed check reports it)
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
                int64_t count, const Cursor* cursor, int64_t k, const long long* offsets,
                const long long* populations, index_t* edge, index_t* col, KeyTable table,
                long long* slot_of, Status* status) {
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
  const long long* device_hop_edges;
  __host__ __device__ long long operator()(int64_t e) const {
    if (e >= hop_edges || (device_hop_edges && e >= *device_hop_edges) || slot_of[e] < 0)
      return 0;
    return values[slot_of[e]] == (kPending | word_t(e)) ? 1 : 0;
  }
};

// row[e] of every hop edge; node / batch of the new local ids next_id + new_rank[e]. With a cursor
// (padded sampling) hop_edges is a bound, the count is *device_hop_edges and next_id follows the
// cursor's frontier.
template <typename index_t>
__global__ void __launch_bounds__(kThreads)
    assign_kernel(Graph<index_t> g, const index_t* edge, const index_t* col, index_t* row_out,
                  int64_t hop_edges, const long long* device_hop_edges, const Cursor* cursor,
                  const long long* slot_of, const long long* new_rank, KeyTable table,
                  int64_t next_id, index_t* node, index_t* batch, Status* status) {
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
        if (batch) batch[local] = batch[int64_t(col[e])];
        if (local > int64_t(std::numeric_limits<index_t>::max()))
          atomicMin(&status->overflow_edge, word_t(e));
        table.values[s] = word_t(local);
      }
    }
    row_out[e] = index_t(local);
  }
}

// Padded sampling, after hop h: the next frontier (the hop's new nodes) and the hop's counts.
__global__ void advance_kernel(Cursor* cursor, const long long* hop_edges, const long long* new_nodes,
                               long long* num_new_nodes, long long* num_hop_edges) {
  const Cursor c = cursor[0];
  cursor[1] = {c.first + c.count, *new_nodes};
  *num_new_nodes = *new_nodes;
  *num_hop_edges = *hop_edges;
}

// Padded sampling's end: the first failed check's code into the caller's error word.
__global__ void fold_errors_kernel(const Status* status, unsigned long long* error) {
  const word_t code = status->bad_seed != kNone       ? word_t(kPaddedBadSeed)
                      : status->bad_frontier != kNone ? word_t(kPaddedBadGraph)
                      : status->bad_edge != kNone     ? word_t(kPaddedBadNeighbor)
                                                      : kNone;
  if (code != kNone) atomicMin(error, code);
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

template <typename index_t>
class DeviceSampler {
 public:
  DeviceSampler(const SampleGraph<index_t>& graph, const std::vector<int64_t>& fan_outs,
                const NeighborSampleOptions& options, DeviceArena& arena, cudaStream_t stream)
      : names_(graph_names(graph.num_nodes)), seed_(graph.seed), num_seeds_(graph.num_seeds),
        fan_outs_(fan_outs), options_(options), arena_(arena), stream_(stream) {
    g_ = Graph<index_t>{graph.colptr,
                        graph.row,
                        graph.num_nodes,
                        graph.num_edges,
                        options.weight,
                        options.node_time,
                        options.edge_time,
                        nullptr,
                        options.replace,
                        options.disjoint,
                        options.temporal_strategy == TemporalStrategy::kLast,
                        options.rng_seed,
                        nullptr};
  }

  DeviceSubgraph<index_t> run() {
    report_ = allocate<Report>(1);
    status_ = allocate<Status>(1);
    IOGNN_CUDA_CHECK(cudaMemsetAsync(status_, 0xFF, sizeof(Status), stream_));
    const int64_t edges = edge_bound(num_seeds_, fan_outs_);
    reserve(node_, 0, num_seeds_ + edges);
    if (g_.disjoint) reserve(batch_, 0, num_seeds_ + edges);
    for (Buffer<index_t>* b : {&edge_, &col_, &row_}) reserve(*b, 0, edges);
    make_table(num_seeds_ + edges);
    int64_t* tree_time = nullptr;
    if (g_.node_time || g_.edge_time) tree_time = allocate<int64_t>(num_seeds_);
    g_.tree_time = tree_time;
    seed_kernel<<<grid_for(num_seeds_, kThreads), kThreads, 0, stream_>>>(
        g_, seed_, num_seeds_, options_.seed_time, table_, node_.data, batch_.data, tree_time,
        status_, nullptr, nullptr);
    IOGNN_CUDA_CHECK_LAUNCH("neighbor_sample seed_kernel");

    DeviceSubgraph<index_t> out;
    out.num_sampled_nodes.push_back(num_seeds_);
    int64_t first = 0, num_local = num_seeds_, num_edges = 0, bound = num_seeds_;
    const long long* new_count = nullptr;  // the previous hop's new nodes, on the device
    int64_t previous_edges = -1;           // first edge of the previous hop (-1: none)
    for (size_t h = 0; h < fan_outs_.size(); ++h) {
      const int64_t k = fan_outs_[h];
      long long* counts = allocate<long long>(bound + 1);
      long long* offsets = allocate<long long>(bound + 1);
      long long* populations = allocate<long long>(bound + 1);
      sizes_kernel<<<grid_for(bound + 1, kWarpsPerBlock), kThreads, 0, stream_>>>(
          g_, node_.data, batch_.data, first, bound, new_count, num_seeds_, nullptr, k, counts,
          populations, status_);
      IOGNN_CUDA_CHECK_LAUNCH("neighbor_sample sizes_kernel");
      exclusive_sum(counts, offsets, bound + 1);
      const Report r = wait_for_report(offsets + bound, new_count);
      raise_errors(r, h == 0, previous_edges, first);
      if (h > 0) {
        out.num_sampled_nodes.push_back(r.new_nodes);
        num_local = first + r.new_nodes;
      }
      const int64_t count = num_local - first, hop_edges = r.hop_edges;
      reserve(node_, num_local, num_local + hop_edges);
      if (g_.disjoint) reserve(batch_, num_local, num_local + hop_edges);
      for (Buffer<index_t>* b : {&edge_, &col_, &row_}) reserve(*b, num_edges, num_edges + hop_edges);
      grow_table(num_local, num_local + hop_edges);

      long long* slot_of = allocate<long long>(hop_edges);
      long long* new_rank = allocate<long long>(hop_edges + 1);
      if (count > 0 && hop_edges > 0) {
        draw_kernel<<<grid_for(count, kWarpsPerBlock), kThreads, 0, stream_>>>(
            g_, node_.data, batch_.data, first, count, nullptr, k, offsets, populations,
            edge_.data + num_edges, col_.data + num_edges, table_, slot_of, status_);
        IOGNN_CUDA_CHECK_LAUNCH("neighbor_sample draw_kernel");
      }
      exclusive_sum(thrust::make_transform_iterator(
                        thrust::counting_iterator<int64_t>(0),
                        FirstOccurrence{slot_of, table_.values, hop_edges, nullptr}),
                    new_rank, hop_edges + 1);
      if (hop_edges > 0) {
        assign_kernel<<<grid_for(hop_edges, kThreads), kThreads, 0, stream_>>>(
            g_, edge_.data + num_edges, col_.data + num_edges, row_.data + num_edges, hop_edges,
            nullptr, nullptr, slot_of, new_rank, table_, num_local, node_.data, batch_.data,
            status_);
        IOGNN_CUDA_CHECK_LAUNCH("neighbor_sample assign_kernel");
      }
      out.num_sampled_edges.push_back(hop_edges);
      new_count = new_rank + hop_edges;
      previous_edges = num_edges;
      num_edges += hop_edges;
      first = num_local;
      bound = hop_edges;
    }
    const Report r = wait_for_report(nullptr, new_count);
    raise_errors(r, fan_outs_.empty(), previous_edges, -1);
    if (!fan_outs_.empty()) {
      out.num_sampled_nodes.push_back(r.new_nodes);
      num_local = first + r.new_nodes;
    }
    out.row = num_edges ? row_.data : nullptr;
    out.col = num_edges ? col_.data : nullptr;
    out.edge = num_edges ? edge_.data : nullptr;
    out.node = num_local ? node_.data : nullptr;
    out.batch = num_local ? batch_.data : nullptr;
    out.num_edges = num_edges;
    out.num_nodes = num_local;
    return out;
  }

  // The padded sample (kernels/sampler_types.h): the hops above over their capacities, with no
  // host wait; errors go to *error.
  DeviceSubgraph<index_t> run_padded(const int64_t* device_rng_seed, unsigned long long* error) {
    const std::vector<int64_t> caps = padded_hop_capacities(
        names_.op, num_seeds_, fan_outs_, int64_t(std::numeric_limits<index_t>::max()));
    int64_t edge_cap = 0;
    for (const int64_t c : caps) edge_cap += c;
    const int64_t node_cap = num_seeds_ + edge_cap, hops = int64_t(caps.size());
    g_.device_rng_seed = device_rng_seed;
    status_ = allocate<Status>(1);
    IOGNN_CUDA_CHECK(cudaMemsetAsync(status_, 0xFF, sizeof(Status), stream_));
    reserve(node_, 0, node_cap);
    if (g_.disjoint) reserve(batch_, 0, node_cap);
    for (Buffer<index_t>* b : {&edge_, &col_, &row_}) reserve(*b, 0, edge_cap);
    for (Buffer<index_t>* b : {&node_, &batch_, &edge_, &col_, &row_})  // -1 where unused
      if (b->data)
        IOGNN_CUDA_CHECK(cudaMemsetAsync(b->data, 0xFF, size_t(b->capacity) * sizeof(index_t),
                                         stream_));
    make_table(node_cap);
    int64_t* tree_time = nullptr;
    if (g_.node_time || g_.edge_time) tree_time = allocate<int64_t>(num_seeds_);
    g_.tree_time = tree_time;
    Cursor* cursors = allocate<Cursor>(hops + 1);
    long long* counts_out = allocate<long long>(2 * hops + 1);  // nodes per hop, then edges
    seed_kernel<<<grid_for(num_seeds_, kThreads), kThreads, 0, stream_>>>(
        g_, seed_, num_seeds_, options_.seed_time, table_, node_.data, batch_.data, tree_time,
        status_, cursors, counts_out);
    IOGNN_CUDA_CHECK_LAUNCH("neighbor_sample_padded seed_kernel");

    int64_t base = 0, bound = num_seeds_;  // the hop's first edge slot; its frontier's capacity
    for (int64_t h = 0; h < hops; ++h) {
      const int64_t k = fan_outs_[size_t(h)], cap = caps[size_t(h)];
      long long* counts = allocate<long long>(bound + 1);
      long long* offsets = allocate<long long>(bound + 1);
      long long* populations = allocate<long long>(bound + 1);
      sizes_kernel<<<grid_for(bound + 1, kWarpsPerBlock), kThreads, 0, stream_>>>(
          g_, node_.data, batch_.data, 0, bound, nullptr, 0, cursors + h, k, counts, populations,
          status_);
      IOGNN_CUDA_CHECK_LAUNCH("neighbor_sample_padded sizes_kernel");
      exclusive_sum(counts, offsets, bound + 1);
      const long long* hop_edges = offsets + bound;
      long long* slot_of = allocate<long long>(cap);
      long long* new_rank = allocate<long long>(cap + 1);
      if (bound > 0 && cap > 0) {
        draw_kernel<<<grid_for(bound, kWarpsPerBlock), kThreads, 0, stream_>>>(
            g_, node_.data, batch_.data, 0, bound, cursors + h, k, offsets, populations,
            edge_.data + base, col_.data + base, table_, slot_of, status_);
        IOGNN_CUDA_CHECK_LAUNCH("neighbor_sample_padded draw_kernel");
      }
      exclusive_sum(thrust::make_transform_iterator(
                        thrust::counting_iterator<int64_t>(0),
                        FirstOccurrence{slot_of, table_.values, cap, hop_edges}),
                    new_rank, cap + 1);
      if (cap > 0) {
        assign_kernel<<<grid_for(cap, kThreads), kThreads, 0, stream_>>>(
            g_, edge_.data + base, col_.data + base, row_.data + base, cap, hop_edges,
            cursors + h, slot_of, new_rank, table_, 0, node_.data, batch_.data, status_);
        IOGNN_CUDA_CHECK_LAUNCH("neighbor_sample_padded assign_kernel");
      }
      advance_kernel<<<1, 1, 0, stream_>>>(cursors + h, hop_edges, new_rank + cap,
                                           counts_out + h + 1, counts_out + hops + 1 + h);
      IOGNN_CUDA_CHECK_LAUNCH("neighbor_sample_padded advance_kernel");
      base += cap;
      bound = cap;
    }
    fold_errors_kernel<<<1, 1, 0, stream_>>>(status_, error);
    IOGNN_CUDA_CHECK_LAUNCH("neighbor_sample_padded fold_errors_kernel");

    DeviceSubgraph<index_t> out;
    out.row = row_.data;
    out.col = col_.data;
    out.edge = edge_.data;
    out.node = node_.data;
    out.batch = batch_.data;
    out.num_edges = edge_cap;
    out.num_nodes = node_cap;
    out.device_counts = counts_out;
    return out;
  }

 private:
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

  // A table for a sample of up to `max_nodes` nodes: dense over the whole key space when it is
  // small, else hashed with at least twice as many slots.
  void make_table(int64_t max_nodes) {
    const int64_t keys = (g_.disjoint ? num_seeds_ : 1) * g_.num_nodes;
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
    table_ = t;
  }

  // Before a hop that may bring the sample to max_nodes nodes (num_local so far).
  void grow_table(int64_t num_local, int64_t max_nodes) {
    if (!table_.keys || 2 * max_nodes <= table_.capacity) return;
    const KeyTable old = table_;
    make_table(std::max(max_nodes, table_.capacity));
    arena_.release(old.keys);
    arena_.release(old.values);
    rehash_kernel<<<grid_for(num_local, kThreads), kThreads, 0, stream_>>>(
        node_.data, batch_.data, num_local, g_.num_nodes, table_);
    IOGNN_CUDA_CHECK_LAUNCH("neighbor_sample rehash_kernel");
  }

  template <typename Input>
  void exclusive_sum(Input in, long long* out, int64_t n) {
    size_t bytes = 0;
    IOGNN_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(nullptr, bytes, in, out, n, stream_));
    void* temp = allocate<char>(std::max<int64_t>(int64_t(bytes), 1));  // null would only size
    IOGNN_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(temp, bytes, in, out, n, stream_));
  }

  Report wait_for_report(const long long* hop_edges, const long long* new_nodes) {
    publish_kernel<<<1, 1, 0, stream_>>>(status_, hop_edges, new_nodes, report_);
    IOGNN_CUDA_CHECK_LAUNCH("neighbor_sample publish_kernel");
    return read(report_);
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

  // Raises the error a report names, as the host kernel would: the seed checks (first wait
  // only), the previous hop's relabelling (from its first edge), then the hop's frontier entry
  // (frontier_first >= 0: its first local id).
  void raise_errors(const Report& r, bool seeds, int64_t previous_edges, int64_t frontier_first) {
    const Status& s = r.status;
    if (seeds) {
      check_sample_colptr_ends(names_, s.colptr_first, s.colptr_last, g_.num_edges);
      if (s.bad_seed != kNone)
        check_sample_seed(names_.op, "seed", int64_t(s.bad_seed),
                          int64_t(read(seed_ + s.bad_seed)), g_.num_nodes, names_.src_nodes);
    }
    if (previous_edges >= 0 && s.bad_edge < s.overflow_edge) {
      const int64_t p = read(edge_.data + previous_edges + int64_t(s.bad_edge));
      check_sample_neighbor(names_, p, int64_t(read(g_.row + p)), g_.num_nodes);
    }
    if constexpr (sizeof(index_t) < sizeof(int64_t))  // only int32 ids can overflow
      if (previous_edges >= 0 && s.overflow_edge != kNone)
        check_sample_local_id<index_t>(names_, int64_t(std::numeric_limits<index_t>::max()) + 1);
    if (frontier_first >= 0 && s.bad_frontier != kNone)
      check_frontier_node(int64_t(read(node_.data + frontier_first + int64_t(s.bad_frontier))));
    IOGNN_CHECK(s.bad_seed == kNone && s.bad_edge == kNone && s.overflow_edge == kNone &&
                    (frontier_first < 0 || s.bad_frontier == kNone),
                DeviceError, "neighbor_sample: a device check failed that its host check passes");
  }

  // The host kernel's checks of a frontier node, in its order: colptr entries, then weights or
  // (node times) row values of its in-edges.
  void check_frontier_node(int64_t v) {
    const std::vector<index_t> ends = read(g_.colptr + v, 2);
    const int64_t lo = ends[0], hi = ends[1];
    check_sample_colptr_range(names_, v, lo, hi, g_.num_edges);
    if (g_.weight) {
      const std::vector<double> w = read(g_.weight + lo, hi - lo);
      for (int64_t j = 0; j < hi - lo; ++j) check_sample_weight(names_, lo + j, w[size_t(j)]);
    }
    if (g_.node_time) {
      const std::vector<index_t> u = read(g_.row + lo, hi - lo);
      for (int64_t j = 0; j < hi - lo; ++j)
        check_sample_neighbor(names_, lo + j, int64_t(u[size_t(j)]), g_.num_nodes);
    }
  }

  const CscNames names_;  // the homogeneous op's, as the host kernel's errors name the inputs
  Graph<index_t> g_;
  const index_t* seed_;
  int64_t num_seeds_;
  const std::vector<int64_t>& fan_outs_;
  const NeighborSampleOptions& options_;
  DeviceArena& arena_;
  cudaStream_t stream_;
  Status* status_ = nullptr;
  Report* report_ = nullptr;  // device
  KeyTable table_;
  Buffer<index_t> node_, batch_, edge_, col_, row_;
};

// The checks that need no device data pass (fan-outs, temporal options, key space).
bool host_checks_pass(const CscNames& names, int64_t num_nodes, int64_t num_seeds,
                      const std::vector<int64_t>& fan_outs, const NeighborSampleOptions& options) {
  try {
    check_sample_fan_outs(names.op, "num_neighbors", fan_outs);
    check_sample_temporal_options(options);
    check_sample_key_space(names.op, num_nodes, options.disjoint ? num_seeds : 1);
    return true;
  } catch (const std::exception&) {
    return false;
  }
}

}  // namespace

template <typename index_t>
DeviceSubgraph<index_t> neighbor_sample(const SampleGraph<index_t>& graph,
                                        const std::vector<int64_t>& num_neighbors,
                                        const NeighborSampleOptions& options, DeviceArena& arena,
                                        cudaStream_t stream) {
  const int64_t num_nodes = graph.num_nodes, num_seeds = graph.num_seeds;
  check_sample_num_nodes(num_nodes);
  const CscNames names = graph_names(num_nodes);
  if (!host_checks_pass(names, num_nodes, num_seeds, num_neighbors, options)) {
    // One of them raises, but the host kernel checks colptr's ends and the seeds before some of
    // them: read those back and check everything in the host kernel's order.
    std::vector<index_t> ends(2), seeds(static_cast<size_t>(num_seeds));
    IOGNN_CUDA_CHECK(cudaMemcpyAsync(&ends[0], graph.colptr, sizeof(index_t),
                                     cudaMemcpyDeviceToHost, stream));
    IOGNN_CUDA_CHECK(cudaMemcpyAsync(&ends[1], graph.colptr + num_nodes, sizeof(index_t),
                                     cudaMemcpyDeviceToHost, stream));
    if (num_seeds > 0)
      IOGNN_CUDA_CHECK(cudaMemcpyAsync(seeds.data(), graph.seed,
                                       size_t(num_seeds) * sizeof(index_t),
                                       cudaMemcpyDeviceToHost, stream));
    IOGNN_CUDA_CHECK(cudaStreamSynchronize(stream));
    check_sample_arguments(names, int64_t(ends[0]), int64_t(ends[1]), num_nodes, graph.num_edges,
                           seeds.data(), num_seeds, num_neighbors, options);
  }
  return DeviceSampler<index_t>(graph, num_neighbors, options, arena, stream).run();
}

template <typename index_t>
DeviceSubgraph<index_t> neighbor_sample_padded(const SampleGraph<index_t>& graph,
                                               const std::vector<int64_t>& num_neighbors,
                                               const NeighborSampleOptions& options,
                                               const int64_t* device_rng_seed,
                                               unsigned long long* error, DeviceArena& arena,
                                               cudaStream_t stream) {
  const int64_t num_nodes = graph.num_nodes;
  check_sample_num_nodes(num_nodes);
  const CscNames names = graph_names(num_nodes);
  check_sample_fan_outs(names.op, "num_neighbors", num_neighbors);
  check_sample_temporal_options(options);
  check_sample_key_space(names.op, num_nodes, options.disjoint ? graph.num_seeds : 1);
  return DeviceSampler<index_t>(graph, num_neighbors, options, arena, stream)
      .run_padded(device_rng_seed, error);
}

template DeviceSubgraph<int32_t> neighbor_sample<int32_t>(const SampleGraph<int32_t>&,
                                                          const std::vector<int64_t>&,
                                                          const NeighborSampleOptions&,
                                                          DeviceArena&, cudaStream_t);
template DeviceSubgraph<int64_t> neighbor_sample<int64_t>(const SampleGraph<int64_t>&,
                                                          const std::vector<int64_t>&,
                                                          const NeighborSampleOptions&,
                                                          DeviceArena&, cudaStream_t);
#define IOGNN_INSTANTIATE_PADDED(index_t)                                                     \
  template DeviceSubgraph<index_t> neighbor_sample_padded<index_t>(                           \
      const SampleGraph<index_t>&, const std::vector<int64_t>&, const NeighborSampleOptions&, \
      const int64_t*, unsigned long long*, DeviceArena&, cudaStream_t);
IOGNN_INSTANTIATE_PADDED(int32_t)
IOGNN_INSTANTIATE_PADDED(int64_t)
#undef IOGNN_INSTANTIATE_PADDED

}  // namespace iognn::cuda

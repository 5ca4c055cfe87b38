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
#include "kernels/cuda/neighbor_sample_hop.cuh"
#include "kernels/sampler_checks.h"

namespace iognn::cuda {
namespace {

using namespace sampler_detail;

// Padded sampling: the seeds' frontier and count (before the seed kernel's table entries matter).
__global__ void start_padded_kernel(Cursor* cursor, long long* num_seed_nodes, int64_t num_seeds) {
  *cursor = {0, num_seeds};
  *num_seed_nodes = num_seeds;
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

template <typename index_t>
class DeviceSampler : DeviceCall {
 public:
  DeviceSampler(const SampleGraph<index_t>& graph, const std::vector<int64_t>& fan_outs,
                const NeighborSampleOptions& options, DeviceArena& arena, cudaStream_t stream)
      : DeviceCall(arena, stream), names_(graph_names(graph.num_nodes)), seed_(graph.seed),
        num_seeds_(graph.num_seeds), fan_outs_(fan_outs), options_(options) {
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
                        options.rng_seed};
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
        status_);
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
          g_, node_.data, batch_.data, first, bound, new_count, num_seeds_, k, counts,
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
            g_, node_.data, batch_.data, first, count, k, offsets, populations,
            edge_.data + num_edges, col_.data + num_edges, table_, slot_of, status_);
        IOGNN_CUDA_CHECK_LAUNCH("neighbor_sample draw_kernel");
      }
      exclusive_sum(thrust::make_transform_iterator(
                        thrust::counting_iterator<int64_t>(0),
                        FirstOccurrence{slot_of, table_.values, hop_edges}),
                    new_rank, hop_edges + 1);
      if (hop_edges > 0) {
        assign_kernel<<<grid_for(hop_edges, kThreads), kThreads, 0, stream_>>>(
            g_, edge_.data + num_edges, col_.data + num_edges, row_.data + num_edges, hop_edges,
            slot_of, new_rank, table_, num_local, node_.data, batch_.data, status_);
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
    start_padded_kernel<<<1, 1, 0, stream_>>>(cursors, counts_out, num_seeds_);
    IOGNN_CUDA_CHECK_LAUNCH("neighbor_sample_padded start_padded_kernel");
    seed_kernel<<<grid_for(num_seeds_, kThreads), kThreads, 0, stream_>>>(
        g_, seed_, num_seeds_, options_.seed_time, table_, node_.data, batch_.data, tree_time,
        status_);
    IOGNN_CUDA_CHECK_LAUNCH("neighbor_sample_padded seed_kernel");

    int64_t base = 0, bound = num_seeds_;  // the hop's first edge slot; its frontier's capacity
    for (int64_t h = 0; h < hops; ++h) {
      const int64_t k = fan_outs_[size_t(h)], cap = caps[size_t(h)];
      long long* counts = allocate<long long>(bound + 1);
      long long* offsets = allocate<long long>(bound + 1);
      long long* populations = allocate<long long>(bound + 1);
      sizes_kernel<<<grid_for(bound + 1, kWarpsPerBlock), kThreads, 0, stream_>>>(
          g_, node_.data, batch_.data, 0, bound, nullptr, 0, k, counts, populations, status_,
          cursors + h);
      IOGNN_CUDA_CHECK_LAUNCH("neighbor_sample_padded sizes_kernel");
      exclusive_sum(counts, offsets, bound + 1);
      const long long* hop_edges = offsets + bound;
      long long* slot_of = allocate<long long>(cap);
      long long* new_rank = allocate<long long>(cap + 1);
      if (bound > 0 && cap > 0) {
        draw_kernel<<<grid_for(bound, kWarpsPerBlock), kThreads, 0, stream_>>>(
            g_, node_.data, batch_.data, 0, bound, k, offsets, populations, edge_.data + base,
            col_.data + base, table_, slot_of, status_, cursors + h);
        IOGNN_CUDA_CHECK_LAUNCH("neighbor_sample_padded draw_kernel");
      }
      exclusive_sum(thrust::make_transform_iterator(
                        thrust::counting_iterator<int64_t>(0),
                        FirstOccurrence{slot_of, table_.values, cap, hop_edges}),
                    new_rank, cap + 1);
      if (cap > 0) {
        assign_kernel<<<grid_for(cap, kThreads), kThreads, 0, stream_>>>(
            g_, edge_.data + base, col_.data + base, row_.data + base, cap, slot_of, new_rank,
            table_, 0, node_.data, batch_.data, status_, static_cast<const index_t*>(nullptr),
            hop_edges, cursors + h);
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

    DeviceSubgraph<index_t> out{row_.data, col_.data, edge_.data, node_.data, batch_.data,
                                edge_cap, node_cap};
    out.device_counts = counts_out;
    return out;
  }

 private:
  // The key table: dense or hashed (make_key_table), over (seed, node) keys with disjoint.
  int64_t num_keys() const { return (g_.disjoint ? num_seeds_ : 1) * g_.num_nodes; }
  void make_table(int64_t max_nodes) { table_ = make_key_table(num_keys(), max_nodes); }
  void grow_table(int64_t num_local, int64_t max_nodes) {
    grow_key_table(table_, num_keys(), num_local, max_nodes, node_.data, batch_.data,
                   g_.num_nodes);
  }

  Report wait_for_report(const long long* hop_edges, const long long* new_nodes) {
    publish_kernel<<<1, 1, 0, stream_>>>(status_, hop_edges, new_nodes, report_);
    IOGNN_CUDA_CHECK_LAUNCH("neighbor_sample publish_kernel");
    return read(report_);
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
    if (previous_edges >= 0) raise_relabel_errors(s, names_, g_, edge_.data + previous_edges);
    if (frontier_first >= 0 && s.bad_frontier != kNone)
      check_frontier_node(names_, g_,
                          int64_t(read(node_.data + frontier_first + int64_t(s.bad_frontier))));
    IOGNN_CHECK(s.bad_seed == kNone && s.bad_edge == kNone && s.overflow_edge == kNone &&
                    (frontier_first < 0 || s.bad_frontier == kNone),
                DeviceError, "neighbor_sample: a device check failed that its host check passes");
  }

  const CscNames names_;  // the homogeneous op's, as the host kernel's errors name the inputs
  Graph<index_t> g_;
  const index_t* seed_;
  int64_t num_seeds_;
  const std::vector<int64_t>& fan_outs_;
  const NeighborSampleOptions& options_;
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

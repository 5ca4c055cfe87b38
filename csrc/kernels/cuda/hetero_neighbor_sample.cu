// Heterogeneous neighbour sampling on a CUDA device (kernels/cuda/hetero_neighbor_sample.h;
// contract: kernels/sampler_types.h), built from the homogeneous kernel's hop (kernels/cuda/
// neighbor_sample_hop.cuh; neighbor_sample.cu describes it). Every node type has its key table and
// its node / batch buffers; every edge type its Graph (its CSC, its source type's node count and
// times, its destination type's node count, its generator key) and its edge buffers. A hop, on
// the caller's stream:
//   sizes, scan   for every edge type, over its destination type's frontier: the nodes of that
//                 type the previous hop found, counted on the device (the host has a bound);
//   publish       a report per edge type (its hop edges, its error words), node type (its new
//                 nodes of the previous hop) and the seeds, copied back in the hop's one wait;
//   draw, scan, assign   for every edge type in order, into its source type's table, as the
//                 homogeneous hop: a key's first occurrence takes the next id of its type, after
//                 the ids the previous hops gave (on the host) and those this hop's earlier edge
//                 types gave (on the device, where the scan starts), so a type's ids come by edge
//                 type, then in edge order, as the host kernel gives them.
// Errors come in the host kernel's order: colptr's ends and the seeds at the first wait; a hop's
// relabelling errors, by edge type, at the next wait; a frontier error of edge type t, found
// before its hop's draws, after one more wait that checks the relabelling of the hop's edge types
// before t.
#include "kernels/cuda/hetero_neighbor_sample.h"

#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/transform_iterator.h>

#include <algorithm>
#include <cstdint>
#include <exception>
#include <utility>
#include <vector>

#include "core/cuda_check.h"
#include "core/error.h"
#include "kernels/cuda/neighbor_sample_hop.cuh"
#include "kernels/hetero_sampler_checks.h"
#include "kernels/sampler_draws.h"

namespace iognn::cuda {
namespace {

using namespace hetero_sampling;

// colptr's ends (colptr [num_dst + 1]), which the host kernel checks first.
template <typename index_t>
__global__ void colptr_ends_kernel(const index_t* colptr, int64_t num_dst, Status* status) {
  status->colptr_first = (long long)colptr[0];
  status->colptr_last = (long long)colptr[num_dst];
}

// One seed set's seeds, into its node type's table, node and batch buffers.
template <typename index_t>
__global__ void __launch_bounds__(kThreads)
    seed_set_kernel(SeedSet<index_t> set, bool disjoint, KeyTable table, index_t* node,
                    index_t* batch, int64_t* tree_time, Status* status) {
  enter_seeds(set, disjoint, table, node, batch, tree_time, status);
}

// The scan input that numbers an edge type's new nodes after those the hop's earlier edge types
// gave its source type: entry 0 is their count (*before, on the device; null: none), entry e + 1
// edge e's first-occurrence flag. Its exclusive sum, from entry 1 on, is new_rank.
struct AfterEarlierEdgeTypes {
  const long long* before;
  FirstOccurrence first;
  __host__ __device__ long long operator()(int64_t e) const {
    if (e == 0) return before ? *before : 0;
    return first(e - 1);
  }
};

// A node type's sample so far.
template <typename index_t>
struct NodeType {
  Buffer<index_t> node, batch;
  KeyTable table;
  int64_t keys = 0;       // the table's key space: its nodes, or (tree, node) pairs with disjoint
  int64_t first = 0;      // the frontier: local ids first ..
  int64_t num_local = 0;  // .. num_local, which the host knows after the hop's wait
  int64_t bound = 0;      // the frontier's size at most, before the wait
  const long long* frontier_size = nullptr;  // the frontier's size on the device (null: the host's)
  const long long* new_ids = nullptr;  // the ids the running hop gave so far (device; null: none)
};

// An edge type's sample so far, and its running hop's sizes.
template <typename index_t>
struct EdgeType {
  Graph<index_t> g;
  size_t src, dst;
  Buffer<index_t> edge, col, row;
  int64_t num_edges = 0;
  int64_t hop_first = 0;  // the first edge of the last hop that drew
  long long* offsets = nullptr;
  long long* populations = nullptr;
  int64_t bound = 0, hop_edges = 0;
};

template <typename index_t>
class HeteroDeviceSampler : DeviceCall {
 public:
  HeteroDeviceSampler(const std::vector<int64_t>& num_nodes,
                      const std::vector<HeteroEdgeType<index_t>>& edge_types,
                      const std::vector<HeteroSeeds<index_t>>& seeds,
                      const std::vector<std::vector<int64_t>>& fan_outs,
                      const HeteroSampleOptions& options, DeviceArena& arena, cudaStream_t stream)
      : DeviceCall(arena, stream), num_nodes_(num_nodes), edge_types_(edge_types), seeds_(seeds),
        fan_outs_(fan_outs), options_(options) {}

  HeteroDeviceSubgraph<index_t> run() {
    names_ = checked_names();
    start();
    HeteroDeviceSubgraph<index_t> out;
    out.nodes.resize(nodes_.size());
    out.edges.resize(edges_.size());
    for (size_t n = 0; n < nodes_.size(); ++n)
      out.nodes[n].num_sampled_nodes.push_back(nodes_[n].num_local);
    const int64_t hops = num_hops_of(fan_outs_);
    for (int64_t h = 0; h < hops; ++h) {
      for (size_t t = 0; t < edges_.size(); ++t) size_frontier(t, fan_outs_[t][size_t(h)]);
      const std::vector<Report> r = wait_for_reports();
      if (h == 0) raise_up_front_errors(r);
      raise_relabel_errors(r, edges_.size());
      if (h > 0) found_nodes(r, out);
      make_room(r);
      size_t bad = 0;  // the first edge type with a frontier error (none: edges_.size())
      while (bad < edges_.size() && r[bad].status.bad_frontier == kNone) ++bad;
      for (size_t t = 0; t < edges_.size(); ++t) {
        if (t == bad) raise_frontier_error(t, r[t].status);
        sample_edge_type(t, fan_outs_[t][size_t(h)]);
        out.edges[t].num_sampled_edges.push_back(edges_[t].hop_edges);
      }
      end_hop();
    }
    const std::vector<Report> r = wait_for_reports();
    if (hops == 0) raise_up_front_errors(r);
    raise_relabel_errors(r, edges_.size());
    if (hops > 0) found_nodes(r, out);
    for (size_t n = 0; n < nodes_.size(); ++n) {
      const NodeType<index_t>& type = nodes_[n];
      out.nodes[n].node = type.num_local ? type.node.data : nullptr;
      out.nodes[n].batch = type.num_local ? type.batch.data : nullptr;
      out.nodes[n].num_nodes = type.num_local;
    }
    for (size_t t = 0; t < edges_.size(); ++t) {
      const EdgeType<index_t>& et = edges_[t];
      out.edges[t].row = et.num_edges ? et.row.data : nullptr;
      out.edges[t].col = et.num_edges ? et.col.data : nullptr;
      out.edges[t].edge = et.num_edges ? et.edge.data : nullptr;
      out.edges[t].num_edges = et.num_edges;
    }
    return out;
  }

 private:
  // The host kernel's checks before the first hop. Those of the graph's data run on the device
  // (reported at the first wait), unless another check fails: then all run here, in the host
  // kernel's order, on colptr's ends and the seeds read back.
  std::vector<CscNames> checked_names() {
    try {
      return check_arguments(
          num_nodes_, edge_types_, seeds_, fan_outs_, options_,
          [&](size_t t) { return std::pair<int64_t, int64_t>(0, edge_types_[t].num_edges); },
          [](size_t, int64_t) { return 0; });  // (fails only where every seed would)
    } catch (const std::exception&) {
      std::vector<std::vector<index_t>> seeds;
      for (const HeteroSeeds<index_t>& set : seeds_) seeds.push_back(read(set.seed, set.num_seeds));
      return check_arguments(
          num_nodes_, edge_types_, seeds_, fan_outs_, options_,
          [&](size_t t) {
            const HeteroEdgeType<index_t>& et = edge_types_[t];
            const int64_t last = num_nodes_[size_t(et.dst_type)];
            return std::pair<int64_t, int64_t>(read(et.colptr), read(et.colptr + last));
          },
          [&](size_t s, int64_t i) { return seeds[s][size_t(i)]; });
    }
  }

  // The error words, the tables, the seeds, colptr's ends and the edge types' graphs.
  void start() {
    const size_t num_types = num_nodes_.size(), num_edge_types = edge_types_.size();
    num_reports_ = int64_t(std::max(num_edge_types + 1, num_types));
    status_ = allocate<Status>(num_reports_);
    reports_ = allocate<Report>(num_reports_);
    IOGNN_CUDA_CHECK(
        cudaMemsetAsync(status_, 0xFF, size_t(num_reports_) * sizeof(Status), stream_));
    int64_t num_trees = 0;
    nodes_.resize(num_types);
    for (const HeteroSeeds<index_t>& set : seeds_) {
      nodes_[size_t(set.node_type)].num_local += set.num_seeds;
      num_trees += set.num_seeds;
    }
    const bool disjoint = options_.disjoint;
    int64_t* tree_time = any_time(edge_types_, options_) ? allocate<int64_t>(num_trees) : nullptr;
    for (size_t n = 0; n < num_types; ++n) {
      NodeType<index_t>& type = nodes_[n];
      reserve(type.node, 0, type.num_local);
      if (disjoint) reserve(type.batch, 0, type.num_local);
      type.keys = (disjoint ? num_trees : 1) * num_nodes_[n];
      type.table = make_key_table(type.keys, type.num_local);
      type.bound = type.num_local;
    }
    for (size_t t = 0; t < num_edge_types; ++t) {
      const HeteroEdgeType<index_t>& et = edge_types_[t];
      const size_t src = size_t(et.src_type), dst = size_t(et.dst_type);
      const Graph<index_t> g{et.colptr,
                             et.row,
                             num_nodes_[src],
                             et.num_edges,
                             et.weight,
                             node_time(src),
                             et.edge_time,
                             tree_time,
                             options_.replace,
                             disjoint,
                             options_.temporal_strategy == TemporalStrategy::kLast,
                             edge_type_key(options_.rng_seed, uint64_t(t)),
                             num_nodes_[dst]};
      edges_.push_back({g, src, dst});
      colptr_ends_kernel<<<1, 1, 0, stream_>>>(et.colptr, num_nodes_[dst], status_ + t);
      IOGNN_CUDA_CHECK_LAUNCH("hetero_neighbor_sample colptr_ends_kernel");
    }
    std::vector<int64_t> entered(num_types, 0);  // seeds entered per node type
    int64_t first_tree = 0;
    for (const HeteroSeeds<index_t>& set : seeds_) {
      const size_t n = size_t(set.node_type);
      NodeType<index_t>& type = nodes_[n];
      const SeedSet<index_t> placed{set, num_nodes_[n], node_time(n), entered[n], first_tree};
      if (set.num_seeds > 0) {
        seed_set_kernel<<<grid_for(set.num_seeds, kThreads), kThreads, 0, stream_>>>(
            placed, disjoint, type.table, type.node.data, type.batch.data, tree_time,
            status_ + num_edge_types);
        IOGNN_CUDA_CHECK_LAUNCH("hetero_neighbor_sample seed_set_kernel");
      }
      entered[n] += set.num_seeds;
      first_tree += set.num_seeds;
    }
  }

  const int64_t* node_time(size_t n) const {
    return options_.node_time.empty() ? nullptr : options_.node_time[n];
  }

  // Edge type t's sample sizes over its destination type's frontier, and their prefix sums.
  void size_frontier(size_t t, int64_t k) {
    EdgeType<index_t>& et = edges_[t];
    const NodeType<index_t>& dst = nodes_[et.dst];
    et.bound = dst.bound;
    long long* counts = allocate<long long>(et.bound + 1);
    et.offsets = allocate<long long>(et.bound + 1);
    et.populations = allocate<long long>(et.bound + 1);
    sizes_kernel<<<grid_for(et.bound + 1, kWarpsPerBlock), kThreads, 0, stream_>>>(
        et.g, dst.node.data, dst.batch.data, dst.first, et.bound, dst.frontier_size,
        dst.num_local - dst.first, k, counts, et.populations, status_ + t);
    IOGNN_CUDA_CHECK_LAUNCH("hetero_neighbor_sample sizes_kernel");
    exclusive_sum(counts, et.offsets, et.bound + 1);
  }

  // Report i: the error words of edge type i (i == the number of edge types: of the seeds), its
  // hop edges, and node type i's frontier size. The host's wait.
  std::vector<Report> wait_for_reports() {
    for (int64_t i = 0; i < num_reports_; ++i) {
      const size_t j = size_t(i);
      const long long* hop_edges =
          j < edges_.size() ? edges_[j].offsets + edges_[j].bound : nullptr;
      const long long* new_nodes = j < nodes_.size() ? nodes_[j].frontier_size : nullptr;
      publish_kernel<<<1, 1, 0, stream_>>>(status_ + i, hop_edges, new_nodes, reports_ + i);
      IOGNN_CUDA_CHECK_LAUNCH("hetero_neighbor_sample publish_kernel");
    }
    return read(reports_, num_reports_);
  }

  // The node types' nodes found by the hop before the reports' wait.
  void found_nodes(const std::vector<Report>& r, HeteroDeviceSubgraph<index_t>& out) {
    for (size_t n = 0; n < nodes_.size(); ++n) {
      out.nodes[n].num_sampled_nodes.push_back(r[n].new_nodes);
      nodes_[n].num_local = nodes_[n].first + r[n].new_nodes;
    }
  }

  // Room for every node a hop may find and every edge it samples.
  void make_room(const std::vector<Report>& r) {
    std::vector<int64_t> max_nodes;
    for (const NodeType<index_t>& type : nodes_) max_nodes.push_back(type.num_local);
    for (size_t t = 0; t < edges_.size(); ++t) {
      EdgeType<index_t>& et = edges_[t];
      et.hop_edges = r[t].hop_edges;
      max_nodes[et.src] += et.hop_edges;
      for (Buffer<index_t>* b : {&et.edge, &et.col, &et.row})
        reserve(*b, et.num_edges, et.num_edges + et.hop_edges);
    }
    for (size_t n = 0; n < nodes_.size(); ++n) {
      NodeType<index_t>& type = nodes_[n];
      reserve(type.node, type.num_local, max_nodes[n]);
      if (options_.disjoint) reserve(type.batch, type.num_local, max_nodes[n]);
      grow_key_table(type.table, type.keys, type.num_local, max_nodes[n], type.node.data,
                     type.batch.data, num_nodes_[n]);
    }
  }

  // Edge type t's draws, claims and relabelling of its running hop (fan-out k).
  void sample_edge_type(size_t t, int64_t k) {
    EdgeType<index_t>& et = edges_[t];
    NodeType<index_t>& src = nodes_[et.src];
    const NodeType<index_t>& dst = nodes_[et.dst];
    const int64_t count = dst.num_local - dst.first, hop_edges = et.hop_edges;
    const int64_t at = et.num_edges;
    long long* slot_of = allocate<long long>(hop_edges);
    long long* ranks = allocate<long long>(hop_edges + 2);
    if (count > 0 && hop_edges > 0) {
      draw_kernel<<<grid_for(count, kWarpsPerBlock), kThreads, 0, stream_>>>(
          et.g, dst.node.data, dst.batch.data, dst.first, count, k, et.offsets, et.populations,
          et.edge.data + at, et.col.data + at, src.table, slot_of, status_ + t);
      IOGNN_CUDA_CHECK_LAUNCH("hetero_neighbor_sample draw_kernel");
    }
    exclusive_sum(thrust::make_transform_iterator(
                      thrust::counting_iterator<int64_t>(0),
                      AfterEarlierEdgeTypes{src.new_ids,
                                            FirstOccurrence{slot_of, src.table.values, hop_edges}}),
                  ranks, hop_edges + 2);
    const long long* new_rank = ranks + 1;
    if (hop_edges > 0) {
      assign_kernel<<<grid_for(hop_edges, kThreads), kThreads, 0, stream_>>>(
          et.g, et.edge.data + at, et.col.data + at, et.row.data + at, hop_edges, slot_of,
          new_rank, src.table, src.num_local, src.node.data, src.batch.data, status_ + t,
          dst.batch.data);
      IOGNN_CUDA_CHECK_LAUNCH("hetero_neighbor_sample assign_kernel");
    }
    src.new_ids = new_rank + hop_edges;
    et.hop_first = at;
    et.num_edges += hop_edges;
  }

  // The next hop's frontiers: each node type's nodes this hop found (bounded by the edges that
  // could find them).
  void end_hop() {
    for (NodeType<index_t>& type : nodes_) {
      type.first = type.num_local;
      type.frontier_size = type.new_ids;
      type.new_ids = nullptr;
      type.bound = 0;
    }
    for (const EdgeType<index_t>& et : edges_) nodes_[et.src].bound += et.hop_edges;
  }

  // colptr's ends (every edge type's, in order), then the first seed out of range.
  void raise_up_front_errors(const std::vector<Report>& r) {
    for (size_t t = 0; t < edges_.size(); ++t)
      check_sample_colptr_ends(names_[t], r[t].status.colptr_first, r[t].status.colptr_last,
                               edges_[t].g.num_edges);
    const word_t bad = r[edges_.size()].status.bad_seed;  // a tree
    if (bad == kNone) return;
    int64_t first_tree = 0;
    for (size_t s = 0; s < seeds_.size(); ++s) {
      const HeteroSeeds<index_t>& set = seeds_[s];
      const int64_t i = int64_t(bad) - first_tree;
      if (i < set.num_seeds) {
        const int64_t seed = read(set.seed + i);
        check_seed_set(s, set.node_type, num_nodes_[size_t(set.node_type)], i, i + 1,
                       [&](int64_t) { return seed; });
        break;
      }
      first_tree += set.num_seeds;
    }
    device_check_failed();
  }

  // The relabelling errors of the last hop that drew, of edge types [0, end), in order.
  void raise_relabel_errors(const std::vector<Report>& r, size_t end) {
    for (size_t t = 0; t < end; ++t) {
      const Status& s = r[t].status;
      if (s.bad_edge == kNone && s.overflow_edge == kNone) continue;
      const EdgeType<index_t>& et = edges_[t];
      DeviceCall::raise_relabel_errors(s, names_[t], et.g, et.edge.data + et.hop_first);
      device_check_failed();
    }
  }

  // Edge type t's frontier error (s: the hop's report), after the relabelling errors of the edge
  // types the host kernel samples before it.
  void raise_frontier_error(size_t t, const Status& s) {
    raise_relabel_errors(wait_for_reports(), t);
    const NodeType<index_t>& dst = nodes_[edges_[t].dst];
    check_frontier_node(names_[t], edges_[t].g,
                        int64_t(read(dst.node.data + dst.first + int64_t(s.bad_frontier))));
    device_check_failed();
  }

  [[noreturn]] static void device_check_failed() {
    throw DeviceError(detail::concat(kOp, ": a device check failed that its host check passes"));
  }

  const std::vector<int64_t>& num_nodes_;
  const std::vector<HeteroEdgeType<index_t>>& edge_types_;
  const std::vector<HeteroSeeds<index_t>>& seeds_;
  const std::vector<std::vector<int64_t>>& fan_outs_;
  const HeteroSampleOptions& options_;
  std::vector<CscNames> names_;  // every edge type's, as the host kernel's errors name them
  std::vector<NodeType<index_t>> nodes_;
  std::vector<EdgeType<index_t>> edges_;
  int64_t num_reports_ = 0;
  Status* status_ = nullptr;  // device, one per report
  Report* reports_ = nullptr;  // device
};

}  // namespace

template <typename index_t>
HeteroDeviceSubgraph<index_t> hetero_neighbor_sample(
    const std::vector<int64_t>& num_nodes, const std::vector<HeteroEdgeType<index_t>>& edge_types,
    const std::vector<HeteroSeeds<index_t>>& seeds,
    const std::vector<std::vector<int64_t>>& num_neighbors, const HeteroSampleOptions& options,
    DeviceArena& arena, cudaStream_t stream) {
  return HeteroDeviceSampler<index_t>(num_nodes, edge_types, seeds, num_neighbors, options, arena,
                                      stream)
      .run();
}

#define IOGNN_INSTANTIATE(I)                                                                 \
  template HeteroDeviceSubgraph<I> hetero_neighbor_sample<I>(                               \
      const std::vector<int64_t>&, const std::vector<HeteroEdgeType<I>>&,                   \
      const std::vector<HeteroSeeds<I>>&, const std::vector<std::vector<int64_t>>&,         \
      const HeteroSampleOptions&, DeviceArena&, cudaStream_t);
IOGNN_INSTANTIATE(int32_t)
IOGNN_INSTANTIATE(int64_t)
#undef IOGNN_INSTANTIATE

}  // namespace iognn::cuda

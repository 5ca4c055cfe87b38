// Heterogeneous neighbour sampling, host kernel (contract: kernels/sampler_types.h): each hop runs
// the passes of kernels/cpu/neighbor_draws.h on every edge type's CSC in turn, the frontier being
// its destination type's nodes found by the previous hop, the neighbours relabelled among its
// source type's nodes.
#include "kernels/cpu/hetero_neighbor_sample.h"

#include <cstdint>
#include <string>
#include <vector>

#include "core/error.h"
#include "kernels/cpu/neighbor_draws.h"
#include "kernels/sampler_checks.h"

namespace iognn::cpu {
namespace {

constexpr const char* kOp = "hetero_neighbor_sample";

int64_t num_hops_of(const std::vector<std::vector<int64_t>>& num_neighbors) {
  return num_neighbors.empty() ? 0 : int64_t(num_neighbors[0].size());
}

// "node type 2 (30 nodes)", as errors name the nodes an id indexes.
std::string node_type_nodes(int64_t node_type, int64_t count) {
  return detail::concat("node type ", node_type, " (", count, " nodes)");
}

// Checks the node counts, and each edge type's node types and colptr's ends; returns the names
// each edge type's errors give its tensors (its index in the op's lists).
template <typename index_t>
std::vector<CscNames> checked_edge_types(const std::vector<int64_t>& num_nodes,
                                         const std::vector<HeteroEdgeType<index_t>>& edge_types) {
  const int64_t num_types = int64_t(num_nodes.size());
  for (int64_t n = 0; n < num_types; ++n)
    IOGNN_CHECK(num_nodes[size_t(n)] >= 0, ValueError, kOp, ": num_nodes[", n,
                "] must be >= 0, got ", num_nodes[size_t(n)]);
  std::vector<CscNames> names;
  for (size_t t = 0; t < edge_types.size(); ++t) {
    const HeteroEdgeType<index_t>& et = edge_types[t];
    IOGNN_CHECK(0 <= et.src_type && et.src_type < num_types && 0 <= et.dst_type &&
                    et.dst_type < num_types,
                ValueError, kOp, ": edge_types[", t, "] = (", et.src_type, ", ", et.dst_type,
                ") names a node type outside [0, ", num_types, ")");
    const std::string i = "[" + std::to_string(t) + "]";
    names.push_back({kOp, "colptrs" + i, "rows" + i, "weights" + i,
                     node_type_nodes(et.src_type, num_nodes[size_t(et.src_type)]),
                     "colptrs/rows/seeds"});
    const int64_t last = num_nodes[size_t(et.dst_type)];
    check_sample_colptr_ends(names.back(), int64_t(et.colptr[0]), int64_t(et.colptr[last]),
                             et.num_edges);
  }
  return names;
}

template <typename index_t>
void check_seeds_and_fan_outs(const std::vector<int64_t>& num_nodes,
                              const std::vector<HeteroSeeds<index_t>>& seeds,
                              const std::vector<std::vector<int64_t>>& num_neighbors,
                              size_t num_edge_types) {
  const int64_t num_types = int64_t(num_nodes.size());
  IOGNN_CHECK(num_neighbors.size() == num_edge_types, ValueError, kOp,
              ": num_neighbors must hold one list per edge type (", num_edge_types, "), got ",
              num_neighbors.size());
  const size_t hops = size_t(num_hops_of(num_neighbors));
  for (size_t t = 0; t < num_neighbors.size(); ++t) {
    IOGNN_CHECK(num_neighbors[t].size() == hops, ValueError, kOp, ": num_neighbors[", t,
                "] has ", num_neighbors[t].size(), " hops, num_neighbors[0] ", hops,
                " (every edge type needs the same number of hops)");
    check_sample_fan_outs(kOp, "num_neighbors[" + std::to_string(t) + "]", num_neighbors[t]);
  }
  for (size_t s = 0; s < seeds.size(); ++s) {
    const HeteroSeeds<index_t>& set = seeds[s];
    IOGNN_CHECK(0 <= set.node_type && set.node_type < num_types, ValueError, kOp, ": seed_types[",
                s, "] = ", set.node_type, " is not a node type (", num_types, " of them)");
    const int64_t n = num_nodes[size_t(set.node_type)];
    const std::string name = "seeds[" + std::to_string(s) + "]";
    const std::string nodes = node_type_nodes(set.node_type, n);
    for (int64_t i = 0; i < set.num_seeds; ++i)
      check_sample_seed(kOp, name, i, int64_t(set.seed[i]), n, nodes);
  }
}

// Checks the temporal options and returns the seed time of every tree (empty without times).
template <typename index_t>
std::vector<int64_t> tree_seed_times(const std::vector<int64_t>& num_nodes,
                                     const std::vector<HeteroEdgeType<index_t>>& edge_types,
                                     const std::vector<HeteroSeeds<index_t>>& seeds,
                                     const HeteroSampleOptions& options) {
  const auto& node_time = options.node_time;
  IOGNN_CHECK(node_time.empty() || node_time.size() == num_nodes.size(), ValueError, kOp,
              ": node_times must be empty or hold one entry per node type (", num_nodes.size(),
              "), got ", node_time.size());
  bool any_node_time = false, any_edge_time = false, any_weight = false;
  for (const int64_t* t : node_time) any_node_time |= t != nullptr;
  for (const auto& et : edge_types) {
    any_edge_time |= et.edge_time != nullptr;
    any_weight |= et.weight != nullptr;
  }
  bool any_seed_time = false;
  for (const auto& set : seeds) any_seed_time |= set.seed_time != nullptr;
  check_sample_temporal_inputs(kOp, kListInputs,
                               {any_weight, any_node_time, any_edge_time, any_seed_time},
                               options.disjoint);
  std::vector<int64_t> seed_time;
  if (!any_node_time && !any_edge_time) return seed_time;
  for (size_t s = 0; s < seeds.size(); ++s) {
    const HeteroSeeds<index_t>& set = seeds[s];
    const int64_t* own = any_node_time ? node_time[size_t(set.node_type)] : nullptr;
    IOGNN_CHECK(set.seed_time || own, ValueError, kOp, ": seed_times[", s,
                "] is needed: node type ", set.node_type, " has no node times to take it from");
    for (int64_t i = 0; i < set.num_seeds; ++i)
      seed_time.push_back(set.seed_time ? set.seed_time[i] : own[set.seed[i]]);
  }
  return seed_time;
}

}  // namespace

template <typename index_t>
HeteroSampledSubgraph<index_t> hetero_neighbor_sample(
    const std::vector<int64_t>& num_nodes, const std::vector<HeteroEdgeType<index_t>>& edge_types,
    const std::vector<HeteroSeeds<index_t>>& seeds,
    const std::vector<std::vector<int64_t>>& num_neighbors, const HeteroSampleOptions& options) {
  using namespace sampling;
  const std::vector<CscNames> names = checked_edge_types(num_nodes, edge_types);
  check_seeds_and_fan_outs(num_nodes, seeds, num_neighbors, edge_types.size());
  const std::vector<int64_t> seed_time = tree_seed_times(num_nodes, edge_types, seeds, options);
  const bool disjoint = options.disjoint;
  const size_t num_types = num_nodes.size(), num_edge_types = edge_types.size();
  int64_t num_trees = 0;
  for (const auto& set : seeds) num_trees += set.num_seeds;

  HeteroSampledSubgraph<index_t> out;
  out.nodes.resize(num_types);
  out.edges.resize(num_edge_types);
  std::vector<LocalIds<index_t>> ids;  // one per node type
  ids.reserve(num_types);
  for (size_t n = 0; n < num_types; ++n) {
    check_sample_key_space(kOp, num_nodes[n], disjoint ? num_trees : 1);
    ids.emplace_back(num_nodes[n], disjoint ? num_trees : 1);
  }
  int64_t tree = 0;
  for (const auto& set : seeds) {
    SampledNodes<index_t>& nodes = out.nodes[size_t(set.node_type)];
    const int64_t n = num_nodes[size_t(set.node_type)];
    for (int64_t i = 0; i < set.num_seeds; ++i, ++tree) {
      ids[size_t(set.node_type)].insert(disjoint ? tree * n + set.seed[i] : int64_t(set.seed[i]),
                                        int64_t(nodes.node.size()));
      nodes.node.push_back(set.seed[i]);
      if (disjoint) nodes.batch.push_back(index_t(tree));
    }
  }
  for (auto& nodes : out.nodes) nodes.num_sampled_nodes.push_back(int64_t(nodes.node.size()));

  // Reserved up front: graphs refer to names, filters to graphs.
  std::vector<CscView<index_t>> graphs;
  std::vector<TemporalFilter<index_t>> filters;
  graphs.reserve(num_edge_types);
  filters.reserve(num_edge_types);
  for (size_t t = 0; t < num_edge_types; ++t) {
    const HeteroEdgeType<index_t>& et = edge_types[t];
    graphs.push_back({et.colptr, et.row, num_nodes[size_t(et.src_type)], et.num_edges, et.weight,
                      &names[t]});
    const int64_t* node_time =
        options.node_time.empty() ? nullptr : options.node_time[size_t(et.src_type)];
    filters.emplace_back(graphs.back(), node_time, et.edge_time, seed_time,
                         options.temporal_strategy);
  }

  // The frontier of node type n: its local ids [begin[n], end[n]) found by the previous hop.
  std::vector<int64_t> begin(num_types, 0), end(num_types, 0);
  for (int64_t h = 0, hops = num_hops_of(num_neighbors); h < hops; ++h) {
    for (size_t n = 0; n < num_types; ++n) end[n] = int64_t(out.nodes[n].node.size());
    for (size_t t = 0; t < num_edge_types; ++t) {
      const size_t src = size_t(edge_types[t].src_type), dst = size_t(edge_types[t].dst_type);
      SampledEdges<index_t>& edges = out.edges[t];
      SampledNodes<index_t>& frontier = out.nodes[dst];
      SampledNodes<index_t>& found = out.nodes[src];
      const int64_t first_edge = int64_t(edges.edge.size());
      const int64_t hop_edges = sample_frontier(
          graphs[t], filters[t], frontier.node, frontier.batch, begin[dst], end[dst],
          num_neighbors[t][size_t(h)], options.replace,
          edge_type_key(options.rng_seed, uint64_t(t)), edges.edge, edges.col);
      relabel_neighbors(graphs[t], edges.edge, edges.col, first_edge, disjoint, frontier.batch,
                        SourceNodes<index_t>{ids[src], found.node, found.batch}, edges.row);
      edges.num_sampled_edges.push_back(hop_edges);
    }
    for (size_t n = 0; n < num_types; ++n) {
      out.nodes[n].num_sampled_nodes.push_back(int64_t(out.nodes[n].node.size()) - end[n]);
      begin[n] = end[n];
    }
  }
  return out;
}

#define IOGNN_INSTANTIATE(I)                                                                 \
  template HeteroSampledSubgraph<I> hetero_neighbor_sample<I>(                              \
      const std::vector<int64_t>&, const std::vector<HeteroEdgeType<I>>&,                   \
      const std::vector<HeteroSeeds<I>>&, const std::vector<std::vector<int64_t>>&,         \
      const HeteroSampleOptions&);
IOGNN_INSTANTIATE(int32_t)
IOGNN_INSTANTIATE(int64_t)
#undef IOGNN_INSTANTIATE

}  // namespace iognn::cpu

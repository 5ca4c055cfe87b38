// Heterogeneous neighbour sampling, host kernel (contract: kernels/sampler_types.h): each hop runs
// the passes of kernels/cpu/neighbor_draws.h on every edge type's CSC in turn, the frontier being
// its destination type's nodes found by the previous hop, the neighbours relabelled among its
// source type's nodes.
#include "kernels/cpu/hetero_neighbor_sample.h"

#include <cstdint>
#include <utility>
#include <vector>

#include "kernels/cpu/neighbor_draws.h"
#include "kernels/hetero_sampler_checks.h"

namespace iognn::cpu {
namespace {

using namespace hetero_sampling;

// The seed time of every tree (the arguments checked; empty without times).
template <typename index_t>
std::vector<int64_t> tree_seed_times(const std::vector<HeteroEdgeType<index_t>>& edge_types,
                                     const std::vector<HeteroSeeds<index_t>>& seeds,
                                     const HeteroSampleOptions& options) {
  std::vector<int64_t> seed_time;
  if (!any_time(edge_types, options)) return seed_time;
  for (const HeteroSeeds<index_t>& set : seeds) {
    const int64_t* own =
        options.node_time.empty() ? nullptr : options.node_time[size_t(set.node_type)];
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
  const std::vector<CscNames> names = check_arguments(
      num_nodes, edge_types, seeds, num_neighbors, options,
      [&](size_t t) {
        const HeteroEdgeType<index_t>& et = edge_types[t];
        return std::pair<int64_t, int64_t>(et.colptr[0], et.colptr[num_nodes[size_t(et.dst_type)]]);
      },
      [&](size_t s, int64_t i) { return seeds[s].seed[i]; });
  const std::vector<int64_t> seed_time = tree_seed_times(edge_types, seeds, options);
  const bool disjoint = options.disjoint;
  const size_t num_types = num_nodes.size(), num_edge_types = edge_types.size();
  int64_t num_trees = 0;
  for (const auto& set : seeds) num_trees += set.num_seeds;

  HeteroSampledSubgraph<index_t> out;
  out.nodes.resize(num_types);
  out.edges.resize(num_edge_types);
  std::vector<LocalIds<index_t>> ids;  // one per node type
  ids.reserve(num_types);
  for (size_t n = 0; n < num_types; ++n) ids.emplace_back(num_nodes[n], disjoint ? num_trees : 1);
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

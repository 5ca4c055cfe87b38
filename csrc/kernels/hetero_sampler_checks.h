// The heterogeneous neighbour sampler's checks before its first hop (contract:
// kernels/sampler_types.h), shared by its host kernel (kernels/cpu/hetero_neighbor_sample.cpp) and
// the CUDA kernel's host side (kernels/cuda/hetero_neighbor_sample.cu), so that both raise the same
// errors in the same order. The checks of the graph's data (colptr's ends, the seeds) read it
// through callables: the host kernel reads its inputs, the CUDA kernel reads back device data.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "kernels/sampler_checks.h"
#include "kernels/sampler_types.h"

namespace iognn::hetero_sampling {

inline constexpr const char* kOp = "hetero_neighbor_sample";

inline int64_t num_hops_of(const std::vector<std::vector<int64_t>>& num_neighbors) {
  return num_neighbors.empty() ? 0 : int64_t(num_neighbors[0].size());
}

// "node type 2 (30 nodes)", as errors name the nodes an id indexes.
inline std::string node_type_nodes(int64_t node_type, int64_t count) {
  return detail::concat("node type ", node_type, " (", count, " nodes)");
}

// Seeds [begin, end) of seed set s (seed_at(i): its i-th), of a node type of num_nodes nodes.
template <typename SeedAt>
void check_seed_set(size_t s, int64_t node_type, int64_t num_nodes, int64_t begin, int64_t end,
                    SeedAt seed_at) {
  const std::string name = "seeds[" + std::to_string(s) + "]";
  const std::string nodes = node_type_nodes(node_type, num_nodes);
  for (int64_t i = begin; i < end; ++i)
    check_sample_seed(kOp, name, i, int64_t(seed_at(i)), num_nodes, nodes);
}

// Whether the call samples temporally: some node type has node times or some edge type edge times.
template <typename index_t>
bool any_time(const std::vector<HeteroEdgeType<index_t>>& edge_types,
              const HeteroSampleOptions& options) {
  for (const int64_t* t : options.node_time)
    if (t) return true;
  for (const auto& et : edge_types)
    if (et.edge_time) return true;
  return false;
}

// Checks the temporal options: the node time list's size, the inputs' combination, and a source
// for every tree's seed time.
template <typename index_t>
void check_temporal_options(const std::vector<int64_t>& num_nodes,
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
  if (!any_node_time && !any_edge_time) return;
  for (size_t s = 0; s < seeds.size(); ++s) {
    const HeteroSeeds<index_t>& set = seeds[s];
    const int64_t* own = any_node_time ? node_time[size_t(set.node_type)] : nullptr;
    IOGNN_CHECK(set.seed_time || own, ValueError, kOp, ": seed_times[", s,
                "] is needed: node type ", set.node_type, " has no node times to take it from");
  }
}

// The host kernel's checks before its first hop, in its order: the node counts; each edge type's
// node types and colptr's ends (colptr_ends(t): its colptr[0] and colptr[num_nodes[dst]]); the
// fan-outs; the seed types and the seeds (seed_at(s, i): seeds[s][i]); the temporal options; the
// key spaces. Returns the names each edge type's errors give its tensors (its index in the op's
// lists).
template <typename index_t, typename ColptrEnds, typename SeedAt>
std::vector<CscNames> check_arguments(const std::vector<int64_t>& num_nodes,
                                      const std::vector<HeteroEdgeType<index_t>>& edge_types,
                                      const std::vector<HeteroSeeds<index_t>>& seeds,
                                      const std::vector<std::vector<int64_t>>& num_neighbors,
                                      const HeteroSampleOptions& options, ColptrEnds colptr_ends,
                                      SeedAt seed_at) {
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
    const std::pair<int64_t, int64_t> ends = colptr_ends(t);
    check_sample_colptr_ends(names.back(), ends.first, ends.second, et.num_edges);
  }

  IOGNN_CHECK(num_neighbors.size() == edge_types.size(), ValueError, kOp,
              ": num_neighbors must hold one list per edge type (", edge_types.size(), "), got ",
              num_neighbors.size());
  const size_t hops = size_t(num_hops_of(num_neighbors));
  for (size_t t = 0; t < num_neighbors.size(); ++t) {
    IOGNN_CHECK(num_neighbors[t].size() == hops, ValueError, kOp, ": num_neighbors[", t,
                "] has ", num_neighbors[t].size(), " hops, num_neighbors[0] ", hops,
                " (every edge type needs the same number of hops)");
    check_sample_fan_outs(kOp, "num_neighbors[" + std::to_string(t) + "]", num_neighbors[t]);
  }
  int64_t num_trees = 0;
  for (size_t s = 0; s < seeds.size(); ++s) {
    const HeteroSeeds<index_t>& set = seeds[s];
    IOGNN_CHECK(0 <= set.node_type && set.node_type < num_types, ValueError, kOp, ": seed_types[",
                s, "] = ", set.node_type, " is not a node type (", num_types, " of them)");
    check_seed_set(s, set.node_type, num_nodes[size_t(set.node_type)], 0, set.num_seeds,
                   [&](int64_t i) { return seed_at(s, i); });
    num_trees += set.num_seeds;
  }

  check_temporal_options(num_nodes, edge_types, seeds, options);
  for (const int64_t n : num_nodes)
    check_sample_key_space(kOp, n, options.disjoint ? num_trees : 1);
  return names;
}

}  // namespace iognn::hetero_sampling

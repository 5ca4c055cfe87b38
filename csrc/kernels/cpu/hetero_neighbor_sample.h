// Heterogeneous neighbour sampling, host kernel (contract: kernels/sampler_types.h).
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/sampler_types.h"

namespace iognn::cpu {

// num_nodes: one count per node type; edge_types: the CSC of each edge type; seeds: the seed sets
// in tree order; num_neighbors[t]: edge type t's fan-out per hop (every edge type with the same
// number of hops; -1: every neighbour). Throws IndexError / ValueError naming the argument.
template <typename index_t>
HeteroSampledSubgraph<index_t> hetero_neighbor_sample(
    const std::vector<int64_t>& num_nodes, const std::vector<HeteroEdgeType<index_t>>& edge_types,
    const std::vector<HeteroSeeds<index_t>>& seeds,
    const std::vector<std::vector<int64_t>>& num_neighbors, const HeteroSampleOptions& options);

}  // namespace iognn::cpu

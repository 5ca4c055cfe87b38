// Neighbour sampling, host kernel (contract: kernels/sampler_types.h).
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/sampler_types.h"

namespace iognn::cpu {

// colptr has num_nodes + 1 entries, row num_edges, seed num_seeds; num_neighbors holds one
// fan-out per hop (-1: every neighbour). Throws IndexError / ValueError naming the argument.
template <typename index_t>
SampledSubgraph<index_t> neighbor_sample(const index_t* colptr, int64_t num_nodes,
                                         const index_t* row, int64_t num_edges,
                                         const index_t* seed, int64_t num_seeds,
                                         const std::vector<int64_t>& num_neighbors,
                                         const NeighborSampleOptions& options);

}  // namespace iognn::cpu

// Heterogeneous neighbour sampling on a CUDA device (contract: kernels/sampler_types.h): the host
// kernel's results (kernels/cpu/hetero_neighbor_sample.h) computed on the device, hop by hop on
// `stream`, with one host synchronisation per hop and one at the end, bit for bit where the
// homogeneous CUDA kernel's are (kernels/cuda/neighbor_sample.h: all but weighted sampling without
// replacement, whose keys may differ from the host's in the last place).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <vector>

#include "kernels/cuda/neighbor_sample.h"
#include "kernels/sampler_types.h"

namespace iognn::cuda {

// The outputs, in blocks of the arena: nodes[n] holds node type n's node, batch (with disjoint),
// num_nodes and num_sampled_nodes; edges[t] edge type t's row, col, edge, num_edges and
// num_sampled_edges (the other fields unset). A pointer is null when its count is 0.
template <typename index_t>
struct HeteroDeviceSubgraph {
  std::vector<DeviceSubgraph<index_t>> nodes, edges;
};

// The host kernel's arguments, their pointers (colptr, row, weight, edge_time, seed, seed_time,
// options.node_time) in device memory. Errors are thrown as the host kernel throws them (same
// types, same messages), after the synchronisation that reports them.
template <typename index_t>
HeteroDeviceSubgraph<index_t> hetero_neighbor_sample(
    const std::vector<int64_t>& num_nodes, const std::vector<HeteroEdgeType<index_t>>& edge_types,
    const std::vector<HeteroSeeds<index_t>>& seeds,
    const std::vector<std::vector<int64_t>>& num_neighbors, const HeteroSampleOptions& options,
    DeviceArena& arena, cudaStream_t stream);

}  // namespace iognn::cuda

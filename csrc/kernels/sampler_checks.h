// The neighbour sampler's checks and their messages (contract: kernels/sampler_types.h), shared by
// the host kernel and the CUDA kernel's host side (which runs them on host copies of what its
// device checks flagged), so that both backends raise the same errors for the same inputs.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "core/error.h"
#include "kernels/sampler_types.h"

namespace iognn {

inline void check_sample_num_nodes(int64_t num_nodes) {
  IOGNN_CHECK(num_nodes >= 0, ValueError, "neighbor_sample: colptr must have at least one entry");
}

inline void check_sample_fan_outs(const std::vector<int64_t>& num_neighbors) {
  for (size_t h = 0; h < num_neighbors.size(); ++h)
    IOGNN_CHECK(num_neighbors[h] >= -1, ValueError, "neighbor_sample: num_neighbors[", h,
                "] must be >= 0, or -1 for every neighbour, got ", num_neighbors[h]);
}

inline void check_sample_seed(int64_t i, int64_t seed, int64_t num_nodes) {
  IOGNN_CHECK(seed >= 0 && seed < num_nodes, IndexError, "neighbor_sample: seed[", i, "] = ", seed,
              " is out of range for a graph of ", num_nodes, " nodes");
}

inline void check_sample_temporal_options(const NeighborSampleOptions& options) {
  const bool temporal = options.node_time || options.edge_time;
  IOGNN_CHECK(!(options.node_time && options.edge_time), ValueError,
              "neighbor_sample: give node_time or edge_time, not both");
  IOGNN_CHECK(temporal || !options.seed_time, ValueError,
              "neighbor_sample: seed_time needs node_time or edge_time");
  IOGNN_CHECK(!options.edge_time || options.seed_time, ValueError,
              "neighbor_sample: edge_time needs seed_time (one time per seed)");
  IOGNN_CHECK(!temporal || options.disjoint, ValueError,
              "neighbor_sample: temporal sampling (node_time / edge_time) needs disjoint=True");
  IOGNN_CHECK(!temporal || !options.weight, ValueError,
              "neighbor_sample: weighted temporal sampling (weight with node_time / edge_time) is "
              "not supported");
}

// Local ids are kept per key: a global node id, or tree * num_nodes + node with disjoint.
inline void check_sample_key_space(int64_t num_nodes, int64_t num_trees) {
  IOGNN_CHECK(num_nodes == 0 || num_trees <= std::numeric_limits<int64_t>::max() / num_nodes,
              ValueError, "neighbor_sample: disjoint sampling of ", num_trees, " seeds on ",
              num_nodes, " nodes exceeds the 64-bit (seed, node) key space");
}

inline void check_sample_colptr_ends(int64_t colptr_first, int64_t colptr_last, int64_t num_edges) {
  IOGNN_CHECK(colptr_first == 0 && colptr_last == num_edges, ValueError,
              "neighbor_sample: colptr must start at 0 and end at the number of entries of row (",
              num_edges, "), got ", colptr_first, " and ", colptr_last);
}

// The checks made before the first hop, in their order: colptr's ends (colptr[0], colptr[N]),
// the fan-outs, the seeds (host pointer), the temporal options, the key space.
template <typename index_t>
void check_sample_arguments(int64_t colptr_first, int64_t colptr_last, int64_t num_nodes,
                            int64_t num_edges, const index_t* seed, int64_t num_seeds,
                            const std::vector<int64_t>& num_neighbors,
                            const NeighborSampleOptions& options) {
  check_sample_colptr_ends(colptr_first, colptr_last, num_edges);
  check_sample_fan_outs(num_neighbors);
  for (int64_t i = 0; i < num_seeds; ++i) check_sample_seed(i, int64_t(seed[i]), num_nodes);
  check_sample_temporal_options(options);
  check_sample_key_space(num_nodes, options.disjoint ? num_seeds : 1);
}

// The in-edge range [lo, hi) of node v, as a hop reads it.
inline void check_sample_colptr_range(int64_t v, int64_t lo, int64_t hi, int64_t num_edges) {
  IOGNN_CHECK(0 <= lo && lo <= hi && hi <= num_edges, ValueError,
              "neighbor_sample: colptr must be non-decreasing within [0, ", num_edges,
              "], but colptr[", v, "] = ", lo, " and colptr[", v + 1, "] = ", hi);
}

inline void check_sample_weight(int64_t p, double w) {
  IOGNN_CHECK(std::isfinite(w) && w >= 0, ValueError, "neighbor_sample: weight[", p, "] = ", w,
              " must be finite and >= 0");
}

// row[p] = u, checked against the node count.
inline int64_t check_sample_neighbor(int64_t p, int64_t u, int64_t num_nodes) {
  IOGNN_CHECK(u >= 0 && u < num_nodes, IndexError, "neighbor_sample: row[", p, "] = ", u,
              " is out of range for a graph of ", num_nodes, " nodes");
  return u;
}

// A new node about to take local id `next`.
template <typename index_t>
void check_sample_local_id(int64_t next) {
  IOGNN_CHECK(next <= int64_t(std::numeric_limits<index_t>::max()), ValueError,
              "neighbor_sample: the sample has more nodes than int32 local ids can number; "
              "use int64 colptr/row/seed");
}

}  // namespace iognn

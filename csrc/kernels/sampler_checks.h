// The neighbour samplers' checks and their messages (contract: kernels/sampler_types.h), shared by
// the homogeneous host kernel, the heterogeneous host kernel (which checks each edge type's CSC
// under that edge type's names) and the CUDA kernel's host side (which runs them on host copies of
// what its device checks flagged), so that every backend and op raises the same errors for the same
// inputs, naming the argument.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "core/error.h"
#include "kernels/sampler_types.h"

namespace iognn {

// How errors name the inputs of the CSC being sampled: the homogeneous op's graph
// ("neighbor_sample: row[3] = 9 is out of range for a graph of 5 nodes"), or one edge type's of
// the heterogeneous op ("hetero_neighbor_sample: rows[1][3] = 9 is out of range for node type 0
// (5 nodes)").
struct CscNames {
  std::string op;  // the kernel, as its errors start
  std::string colptr, row, weight;
  std::string src_nodes;   // what row's values index
  std::string index_args;  // the index inputs an int32 overflow asks to widen
};

// The homogeneous op's names, for a graph of num_nodes nodes.
inline CscNames graph_names(int64_t num_nodes) {
  return {"neighbor_sample", "colptr", "row", "weight",
          detail::concat("a graph of ", num_nodes, " nodes"), "colptr/row/seed"};
}

// How an op names its optional inputs: the homogeneous op's tensors, or the heterogeneous op's
// lists of them (one per edge, node type or seed set); `need` agrees with them.
struct OptionalInputNames {
  const char* weight;
  const char* node_time;
  const char* edge_time;
  const char* seed_time;
  const char* need;
};
inline constexpr OptionalInputNames kTensorInputs{"weight", "node_time", "edge_time", "seed_time",
                                                  "needs"};
inline constexpr OptionalInputNames kListInputs{"weights", "node_times", "edge_times",
                                                "seed_times", "need"};

// Which optional inputs a call gives (for the lists: whether any entry is given).
struct GivenInputs {
  bool weight, node_time, edge_time, seed_time;
};

inline void check_sample_num_nodes(int64_t num_nodes) {
  IOGNN_CHECK(num_nodes >= 0, ValueError, "neighbor_sample: colptr must have at least one entry");
}

// `name`: the fan-out list, e.g. "num_neighbors" or the heterogeneous op's "num_neighbors[2]".
inline void check_sample_fan_outs(const std::string& op, const std::string& name,
                                  const std::vector<int64_t>& fan_outs) {
  for (size_t h = 0; h < fan_outs.size(); ++h)
    IOGNN_CHECK(fan_outs[h] >= -1, ValueError, op, ": ", name, "[", h,
                "] must be >= 0, or -1 for every neighbour, got ", fan_outs[h]);
}

// Padded sampling's per-hop edge capacities (kernels/sampler_types.h): cap[h] = cap[h - 1] * k_h,
// cap[-1] = num_seeds. Every fan-out must be >= 0, and every buffer must fit `max_index` ids.
inline std::vector<int64_t> padded_hop_capacities(const std::string& op, int64_t num_seeds,
                                                  const std::vector<int64_t>& fan_outs,
                                                  int64_t max_index) {
  check_sample_fan_outs(op, "num_neighbors", fan_outs);
  std::vector<int64_t> caps;
  int64_t frontier = num_seeds, total = num_seeds;
  for (size_t h = 0; h < fan_outs.size(); ++h) {
    const int64_t k = fan_outs[h];
    IOGNN_CHECK(k >= 0, ValueError, op, ": padded sampling needs every fan-out >= 0 (its buffers "
                "are sized by them), got num_neighbors[", h, "] = -1");
    IOGNN_CHECK(k == 0 || frontier <= (max_index - total) / k, ValueError, op,
                ": the padded sample of ", num_seeds, " seeds with these fan-outs needs more than ",
                max_index, " ids (use int64 indices, fewer seeds or smaller fan-outs)");
    frontier *= k;
    total += frontier;
    caps.push_back(frontier);
  }
  return caps;
}

// The codes a padded device sample folds into its caller's error word (the smallest wins).
enum PaddedSampleError : int64_t {
  kPaddedBadSeed = 1,      // a seed out of range
  kPaddedBadGraph = 2,     // a frontier node's colptr entries, weights or times
  kPaddedBadNeighbor = 3,  // a sampled row value out of range
};

// seeds[i] = seed, among `nodes` (num_nodes of them).
inline void check_sample_seed(const std::string& op, const std::string& seeds, int64_t i,
                              int64_t seed, int64_t num_nodes, const std::string& nodes) {
  IOGNN_CHECK(seed >= 0 && seed < num_nodes, IndexError, op, ": ", seeds, "[", i, "] = ", seed,
              " is out of range for ", nodes);
}

// The optional inputs' combination: one kind of time, seed times with it, disjoint trees, no
// weights.
inline void check_sample_temporal_inputs(const std::string& op, const OptionalInputNames& names,
                                         const GivenInputs& given, bool disjoint) {
  const bool temporal = given.node_time || given.edge_time;
  IOGNN_CHECK(!(given.node_time && given.edge_time), ValueError, op, ": give ", names.node_time,
              " or ", names.edge_time, ", not both");
  IOGNN_CHECK(temporal || !given.seed_time, ValueError, op, ": ", names.seed_time, " ", names.need,
              " ", names.node_time, " or ", names.edge_time);
  IOGNN_CHECK(!given.edge_time || given.seed_time, ValueError, op, ": ", names.edge_time, " ",
              names.need, " ", names.seed_time, " (one time per seed)");
  IOGNN_CHECK(!temporal || disjoint, ValueError, op, ": temporal sampling (", names.node_time,
              " / ", names.edge_time, ") needs disjoint=True");
  IOGNN_CHECK(!temporal || !given.weight, ValueError, op, ": weighted temporal sampling (",
              names.weight, " with ", names.node_time, " / ", names.edge_time,
              ") is not supported");
}

// The homogeneous op's options.
inline void check_sample_temporal_options(const NeighborSampleOptions& options) {
  check_sample_temporal_inputs(
      "neighbor_sample", kTensorInputs,
      {options.weight != nullptr, options.node_time != nullptr, options.edge_time != nullptr,
       options.seed_time != nullptr},
      options.disjoint);
}

// Local ids are kept per key: a global node id, or tree * num_nodes + node with disjoint.
inline void check_sample_key_space(const std::string& op, int64_t num_nodes, int64_t num_trees) {
  IOGNN_CHECK(num_nodes == 0 || num_trees <= std::numeric_limits<int64_t>::max() / num_nodes,
              ValueError, op, ": disjoint sampling of ", num_trees, " seeds on ", num_nodes,
              " nodes exceeds the 64-bit (seed, node) key space");
}

inline void check_sample_colptr_ends(const CscNames& names, int64_t colptr_first,
                                     int64_t colptr_last, int64_t num_edges) {
  IOGNN_CHECK(colptr_first == 0 && colptr_last == num_edges, ValueError, names.op, ": ",
              names.colptr, " must start at 0 and end at the number of entries of ", names.row,
              " (", num_edges, "), got ", colptr_first, " and ", colptr_last);
}

// The homogeneous op's checks made before the first hop, in their order: colptr's ends
// (colptr[0], colptr[N]), the fan-outs, the seeds (host pointer), the temporal options, the key
// space.
template <typename index_t>
void check_sample_arguments(const CscNames& names, int64_t colptr_first, int64_t colptr_last,
                            int64_t num_nodes, int64_t num_edges, const index_t* seed,
                            int64_t num_seeds, const std::vector<int64_t>& num_neighbors,
                            const NeighborSampleOptions& options) {
  check_sample_colptr_ends(names, colptr_first, colptr_last, num_edges);
  check_sample_fan_outs(names.op, "num_neighbors", num_neighbors);
  for (int64_t i = 0; i < num_seeds; ++i)
    check_sample_seed(names.op, "seed", i, int64_t(seed[i]), num_nodes, names.src_nodes);
  check_sample_temporal_options(options);
  check_sample_key_space(names.op, num_nodes, options.disjoint ? num_seeds : 1);
}

// The in-edge range [lo, hi) of node v, as a hop reads it.
inline void check_sample_colptr_range(const CscNames& names, int64_t v, int64_t lo, int64_t hi,
                                      int64_t num_edges) {
  IOGNN_CHECK(0 <= lo && lo <= hi && hi <= num_edges, ValueError, names.op, ": ", names.colptr,
              " must be non-decreasing within [0, ", num_edges, "], but ", names.colptr, "[", v,
              "] = ", lo, " and ", names.colptr, "[", v + 1, "] = ", hi);
}

inline void check_sample_weight(const CscNames& names, int64_t p, double w) {
  IOGNN_CHECK(std::isfinite(w) && w >= 0, ValueError, names.op, ": ", names.weight, "[", p,
              "] = ", w, " must be finite and >= 0");
}

// The error of a row value out of range, kept out of line so that the check inlines cheaply into
// the host kernels' hot loops.
[[noreturn, gnu::noinline, gnu::cold]] inline void throw_sample_neighbor_out_of_range(
    const CscNames& names, int64_t p, int64_t u) {
  throw IndexError(detail::concat(names.op, ": ", names.row, "[", p, "] = ", u,
                                  " is out of range for ", names.src_nodes));
}

// row[p] = u, checked against the source node count.
inline int64_t check_sample_neighbor(const CscNames& names, int64_t p, int64_t u, int64_t num_src) {
  if (!(u >= 0 && u < num_src)) throw_sample_neighbor_out_of_range(names, p, u);
  return u;
}

// A new node about to take local id `next`.
template <typename index_t>
void check_sample_local_id(const CscNames& names, int64_t next) {
  IOGNN_CHECK(next <= int64_t(std::numeric_limits<index_t>::max()), ValueError, names.op,
              ": the sample has more nodes than int32 local ids can number; use int64 ",
              names.index_args);
}

}  // namespace iognn

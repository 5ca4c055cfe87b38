// Graph construction: from a [2, E] edge index to the destination-major CSR, the source-major
// transposed CSR and the permutation between them, with PyG's self-loop rules folded in.
//
// Conventions (PyG's): edge_index[0] is the source j, edge_index[1] the target i; messages flow
// j -> i and every op aggregates over the in-edges of a target (a CSR row).
//
// Self-loop handling builds an *augmented* edge list in exactly PyG's order, so that attention
// weights and edge attributes line up with what PyG returns:
//   kKeep          : the input edges, unchanged (E' = E).
//   kAddRemaining  : GCN's add_remaining_self_loops: non-loop edges in input order, then one loop per
//                    node 0..L-1 (L = min(num_src, num_dst)). A node that already had loops keeps the
//                    value of its last input loop (edge_map points at it), others get the fill value.
//   kReplace       : GAT's remove_self_loops + add_self_loops: non-loop edges in input order, then one
//                    fresh loop per node 0..L-1 (edge_map = -1 for all of them).
//
// Arrays produced (index_t = int32_t when every count fits, int64_t otherwise):
//   rowptr  [num_dst + 1]   CSR offsets by destination
//   col     [E']            source of each CSR position; rows sorted by (source, augmented id)
//   eid     [E']            augmented edge id of each CSR position
//   colptr  [num_src + 1]   transposed-CSR offsets by source
//   row     [E']            destination of each transposed position; sorted by (destination, id)
//   csc2csr [E']            CSR position of each transposed position
//   edge_map[E']            input edge id of each augmented edge, -1 for an added loop
// Duplicate edges are kept (never coalesced), as in PyG's edge_index path.
#pragma once

#include <cstdint>

#include "core/numeric.h"  // IOGNN_HD: the view below is read by host and device code

namespace iognn {

enum class SelfLoops : int { kKeep = 0, kAddRemaining = 1, kReplace = 2 };

// Read-only view of a [2, E] integer edge index with arbitrary element strides (host or device
// memory: the accessors are callable from both).
struct EdgeIndexView {
  const void* data = nullptr;
  bool is_int64 = true;
  int64_t num_edges = 0;
  int64_t stride_row = 0;   // elements between edge_index[0][k] and edge_index[1][k]
  int64_t stride_edge = 1;  // elements between edge_index[r][k] and edge_index[r][k+1]

  IOGNN_HD int64_t src(int64_t k) const { return at(k * stride_edge); }
  IOGNN_HD int64_t dst(int64_t k) const { return at(stride_row + k * stride_edge); }

 private:
  IOGNN_HD int64_t at(int64_t off) const {
    return is_int64 ? static_cast<const int64_t*>(data)[off]
                    : static_cast<const int32_t*>(data)[off];
  }
};

struct GraphSizes {
  int64_t num_src = 0;
  int64_t num_dst = 0;
  int64_t num_input_edges = 0;
  int64_t num_edges = 0;  // E' after self-loop handling
  int64_t num_loops = 0;  // loops appended (L, or 0 for kKeep)
  // True when every count and id fits in int32 (the graph is then stored with int32 indices).
  bool fits_int32() const;
};

template <typename index_t>
struct GraphArrays {
  index_t* rowptr;
  index_t* col;
  index_t* eid;
  index_t* colptr;
  index_t* row;
  index_t* csc2csr;
  index_t* edge_map;
};

// Largest source and destination index + 1 (0 for an empty edge list). Throws IndexError on a
// negative index.
void infer_num_nodes(const EdgeIndexView& ei, int64_t* num_src, int64_t* num_dst);

// Validates every index against (num_src, num_dst) and counts the augmented edges. Throws
// IndexError naming the first offending edge, ValueError on negative sizes.
GraphSizes plan_graph(const EdgeIndexView& ei, int64_t num_src, int64_t num_dst, SelfLoops loops);

// Pieces of plan_graph shared with the CUDA build (graph_cuda.h), so both report alike:
// ValueError on a negative size or edge count.
void check_graph_sizes(int64_t num_src, int64_t num_dst, int64_t num_edges);
// IndexError for edge_index[row][k] = value, out of range for (num_src, num_dst).
[[noreturn]] void throw_edge_out_of_range(int row, int64_t k, int64_t value, int64_t num_src,
                                          int64_t num_dst);
// Sizes of a validated graph whose input has `num_input_loops` self-loops.
GraphSizes graph_sizes(int64_t num_src, int64_t num_dst, int64_t num_input_edges,
                       int64_t num_input_loops, SelfLoops loops);

// Fills the arrays of a planned graph on the host. Deterministic; O(E' + num_src + num_dst).
template <typename index_t>
void build_graph_cpu(const EdgeIndexView& ei, const GraphSizes& sizes, SelfLoops loops,
                     const GraphArrays<index_t>& out);

// Degree statistics of a built graph (host arrays). col/row may be null: `symmetric` is then false.
struct GraphStats {
  int64_t max_in_degree = 0;
  int64_t max_out_degree = 0;
  double mean_in_degree = 0;
  int64_t p50_in_degree = 0;  // exact percentiles, from a degree histogram (no sorting, no quantile)
  int64_t p90_in_degree = 0;
  int64_t p99_in_degree = 0;
  int64_t num_isolated_dst = 0;  // destinations with no in-edge
  bool symmetric = false;        // square and the edge multiset equals its transpose
  // in_degree_log2_buckets[b]: destinations with in-degree d, 2^(b-1) <= d < 2^b (b=0: d=0).
  static constexpr int kBuckets = 40;
  int64_t in_degree_log2_buckets[kBuckets] = {};
};

template <typename index_t>
GraphStats compute_graph_stats(const index_t* rowptr, int64_t num_dst, const index_t* colptr,
                               int64_t num_src, const index_t* col, const index_t* row);

}  // namespace iognn

// Graph partitioning for multi-GPU full-graph training (docs/distributed.md): the node-to-part
// assignments (seeded balanced random, METIS) and each part's local layout, the graph one rank
// holds and the plan of the rows it exchanges with the others.
//
// Conventions (PyG's): edge_index[0] is the source, edge_index[1] the destination. parts[v] in
// [0, num_parts) is the part (rank) owning node v. Part r holds every edge whose destination it
// owns, so an owned node's aggregation is complete locally; duplicate edges and self-loops are kept.
//   - halo of r: the sources of r's edges that r does not own;
//   - boundary of r: owned nodes with at least one cut edge, in either direction (a cut edge joins
//     two parts); interior: owned nodes with none, whose rows need no halo row.
//   - local ids of r: [0, num_interior) interior, [num_interior, num_owned) boundary,
//     [num_owned, num_owned + num_halo) halo. Interior and boundary are each in ascending global id;
//     the halo is grouped by owning part (ascending), each group in its owner's local order, so the
//     rows a part sends to r are a contiguous, already ordered run of its boundary.
// A part may own no node (a given or METIS assignment can leave one empty).
//
// Errors: IndexError for an edge endpoint outside [0, num_nodes); ValueError for a bad size, a part
// id outside [0, num_parts), or (METIS) a graph its index type cannot hold.
#pragma once

#include <cstdint>
#include <vector>

#include "core/graph.h"

namespace iognn {

// Sizes of one part's layout (the lengths of its PartArrays).
struct PartSizes {
  int64_t num_owned = 0;
  int64_t num_interior = 0;
  int64_t num_halo = 0;
  int64_t num_edges = 0;  // input edges whose destination the part owns
  int64_t num_sent = 0;   // owned rows sent per exchange, summed over the receiving parts
};

// Caller-allocated outputs of one part (all int64, sizes from PartSizes).
struct PartArrays {
  int64_t* owned_nodes;  // [num_owned]   global id of each owned local id
  int64_t* halo_nodes;   // [num_halo]    global id of each halo local id (minus num_owned)
  int64_t* edge_src;     // [num_edges]   local source, sorted by destination (stable)
  int64_t* edge_dst;     // [num_edges]   local destination, non-decreasing
  int64_t* edge_ids;     // [num_edges]   position of the edge in the input edge_index
  int64_t* in_degree;    // [num_owned + num_halo]  global in-degree (input edges into the node)
  int64_t* send_index;   // [num_sent]    local ids of the rows sent, grouped by receiver ascending,
                         //               group q in q's halo order
  int64_t* send_counts;  // [num_parts]   rows sent to each part (0 for itself)
  int64_t* recv_counts;  // [num_parts]   halo rows owned by each part (0 for itself)
};

// The layouts of all parts of one assignment. The constructor makes the global passes (O(N + E),
// plus O(num_parts * N) to order the halos); fill() then writes one part (O(N + E_r)) and may run
// for different parts concurrently. `edges` and `parts` must outlive the object.
class PartitionLayout {
 public:
  PartitionLayout(const EdgeIndexView& edges, int64_t num_nodes, const int64_t* parts,
                  int64_t num_parts);

  int64_t num_parts() const { return num_parts_; }
  const PartSizes& sizes(int64_t part) const { return sizes_[size_t(part)]; }
  // Input edges whose endpoints lie in different parts (duplicates counted).
  int64_t edge_cut() const { return edge_cut_; }
  // Identifies (num_nodes, num_parts, parts, the edge multiset): independent of edge order.
  uint64_t fingerprint() const { return fingerprint_; }

  void fill(int64_t part, const PartArrays& out) const;

 private:
  EdgeIndexView edges_;
  int64_t num_nodes_;
  const int64_t* parts_;
  int64_t num_parts_;
  int64_t edge_cut_ = 0;
  uint64_t fingerprint_ = 0;
  std::vector<int64_t> in_degree_;   // [N] global in-degree
  std::vector<int64_t> local_id_;    // [N] local id of each node in its owner
  std::vector<int64_t> order_;       // [N] nodes by (owner, local id)
  std::vector<int64_t> part_begin_;  // [P + 1] each part's range in order_
  std::vector<int64_t> part_edges_;  // [E] edge ids grouped by destination part, input order within
  std::vector<int64_t> part_edge_begin_;           // [P + 1]
  std::vector<std::vector<int64_t>> halo_;         // per part: global ids in local halo order
  std::vector<std::vector<int64_t>> halo_group_;   // per part: [P + 1] halo offsets by owner
  std::vector<PartSizes> sizes_;
};

// Balanced seeded random assignment: parts[v] for v < num_nodes, part sizes differing by at most
// one; a pure function of (num_nodes, num_parts, seed). Needs 1 <= num_parts <= num_nodes.
void random_partition(int64_t num_nodes, int64_t num_parts, uint64_t seed, int64_t* parts);

// The symmetrised simple graph METIS reads: for each node its distinct neighbours other than
// itself (ascending), over both directions of every edge, as CSR (xadj [N + 1], adjncy).
// index_t is the METIS index type (int32 or int64); ValueError if the graph does not fit it.
template <typename index_t>
void symmetric_adjacency(const EdgeIndexView& edges, int64_t num_nodes, std::vector<index_t>* xadj,
                         std::vector<index_t>* adjncy);

// True when the build links libmetis (IOGNN_HAS_METIS).
bool has_metis();

// METIS_PartGraphKway on the symmetric_adjacency of the edges, seeded with `seed` (< 2^31), into
// parts[num_nodes]. num_parts == 1 gives all zeros without calling METIS. ValueError when the build
// has no METIS; std::runtime_error when METIS reports an error.
void metis_partition(const EdgeIndexView& edges, int64_t num_nodes, int64_t num_parts,
                     int64_t seed, int64_t* parts);

}  // namespace iognn

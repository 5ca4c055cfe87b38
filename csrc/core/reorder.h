// Node orderings for locality: Reverse Cuthill-McKee (RCM, makes the adjacency banded), degree sort,
// breadth-first search and the grouping of a node-to-part assignment (METIS partition order), one
// graph or a batch of graphs in one call, and the bandwidth an ordering achieves. The dense path
// (docs/dense.md) packs graphs whose band is narrow into fixed-size block-tridiagonal tiles.
//
// Conventions:
//   - Edges are read through an EdgeIndexView (graph.h). RCM and BFS order the undirected view:
//     direction, self-loops and duplicate edges do not change their order. The degree sort counts
//     every edge as given (a node's in-degree plus its out-degree; a self-loop counts twice).
//   - A permutation is perm[new position] = old node id, as scipy's reverse_cuthill_mckee returns
//     it: A[perm][:, perm] is the reordered adjacency.
//   - A batch is given by graph_ptr [num_graphs + 1] (PyG's Batch.ptr): graph g owns the nodes
//     [graph_ptr[g], graph_ptr[g + 1]). Every edge must join two nodes of one graph; each graph is
//     ordered within its own range, so perm maps a graph's positions to the same graph's nodes.
//     graph_ptr == nullptr means one graph of all num_nodes nodes.
//
// RCM's order (deterministic, independent of the thread count): per graph, connected components in
// the order of their smallest node id; inside a component, a Cuthill-McKee breadth-first search
// from a pseudo-peripheral node (George and Liu's iteration, started at the component's node of
// least degree), visiting each node's unvisited neighbours by increasing (degree, id); the
// component's visit order is then reversed. Degrees count distinct neighbours other than the node
// itself. Graphs are ordered in parallel (OpenMP).
//
// The other orders, as deterministic: the degree sort puts each graph's nodes by decreasing
// in + out degree, ties by increasing id. BFS visits each graph's components in the order of their
// smallest node id, each from that node, and a node's unvisited neighbours by increasing id. The
// part order puts nodes by increasing part, within a part by increasing id.
//
// Errors: IndexError for an edge endpoint outside [0, num_nodes); ValueError for a bad graph_ptr,
// an edge joining two graphs, or a perm that is not a permutation.
#pragma once

#include <cstdint>

#include "core/graph.h"

namespace iognn {

// RCM permutation of the graphs of a batch into perm[num_nodes].
template <typename index_t>
void reverse_cuthill_mckee(const EdgeIndexView& edges, int64_t num_nodes,
                           const int64_t* graph_ptr, int64_t num_graphs, index_t* perm);

// Degree-sort permutation (decreasing in + out degree, ties by id) of the graphs of a batch.
template <typename index_t>
void degree_order(const EdgeIndexView& edges, int64_t num_nodes, const int64_t* graph_ptr,
                  int64_t num_graphs, index_t* perm);

// Breadth-first permutation (components by smallest id, neighbours by id) of the graphs of a batch.
template <typename index_t>
void breadth_first_order(const EdgeIndexView& edges, int64_t num_nodes, const int64_t* graph_ptr,
                         int64_t num_graphs, index_t* perm);

// The nodes grouped by part: perm lists part 0's nodes by increasing id, then part 1's, ...;
// parts[v] in [0, num_parts) (a ValueError names the first node outside).
void part_order(const int64_t* parts, int64_t num_nodes, int64_t num_parts, int64_t* perm);

// bandwidth[g] = max |pos(u) - pos(v)| over the edges (u, v) of graph g, where pos is the inverse
// of perm (perm == nullptr: the identity); 0 for a graph without edges.
template <typename index_t>
void graph_bandwidths(const EdgeIndexView& edges, int64_t num_nodes, const index_t* perm,
                      const int64_t* graph_ptr, int64_t num_graphs, int64_t* bandwidth);

}  // namespace iognn

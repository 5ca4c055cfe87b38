// Reverse Cuthill-McKee, degree sort, BFS, part order and bandwidth (see reorder.h for the contract).
#include "core/reorder.h"

#include <algorithm>
#include <cstdlib>
#include <numeric>
#include <vector>

#include "core/error.h"
#include "core/parallel.h"

namespace iognn {
namespace {

// Graphs handed to one OpenMP task: batches hold many small graphs, so one graph per task would
// spend more on scheduling than on ordering.
constexpr int64_t kGraphsPerTask = 16;
// Adjacency rows sorted per OpenMP task: below a few tasks' worth the threads cost more than the
// sorting.
constexpr int64_t kRowsPerTask = 1 << 14;

// The batch's graph offsets, checked; {0, num_nodes} when there is no graph_ptr.
std::vector<int64_t> checked_graph_ptr(const int64_t* graph_ptr, int64_t num_graphs,
                                       int64_t num_nodes) {
  IOGNN_CHECK(num_nodes >= 0, ValueError, "num_nodes must be >= 0, got ", num_nodes);
  if (graph_ptr == nullptr) return {0, num_nodes};
  IOGNN_CHECK(num_graphs >= 0, ValueError, "ptr must have at least one entry");
  IOGNN_CHECK(graph_ptr[0] == 0, ValueError, "ptr[0] must be 0, got ", graph_ptr[0]);
  for (int64_t g = 0; g < num_graphs; ++g)
    IOGNN_CHECK(graph_ptr[g + 1] >= graph_ptr[g], ValueError, "ptr must be non-decreasing, got ptr[",
                g + 1, "] = ", graph_ptr[g + 1], " < ptr[", g, "] = ", graph_ptr[g]);
  IOGNN_CHECK(graph_ptr[num_graphs] == num_nodes, ValueError, "ptr[-1] = ", graph_ptr[num_graphs],
              " must equal num_nodes = ", num_nodes);
  return std::vector<int64_t>(graph_ptr, graph_ptr + num_graphs + 1);
}

// The graph of edge k, after checking that both endpoints are nodes of that one graph.
int64_t edge_graph(const EdgeIndexView& edges, int64_t k, int64_t num_nodes,
                   const std::vector<int64_t>& ptr) {
  const int64_t u = edges.src(k), v = edges.dst(k);
  if (u < 0 || u >= num_nodes) throw_edge_out_of_range(0, k, u, num_nodes, num_nodes);
  if (v < 0 || v >= num_nodes) throw_edge_out_of_range(1, k, v, num_nodes, num_nodes);
  if (ptr.size() == 2) return 0;
  const int64_t g = int64_t(std::upper_bound(ptr.begin(), ptr.end(), u) - ptr.begin()) - 1;
  IOGNN_CHECK(v >= ptr[g] && v < ptr[g + 1], ValueError, "edge_index: edge ", k, " joins node ", u,
              " of graph ", g, " to node ", v, " of another graph (ptr gives each graph's nodes; "
              "edges between graphs cannot be reordered per graph)");
  return g;
}

// The order in which a search visits a node's neighbours: Cuthill-McKee's increasing (degree, id),
// or plain BFS's increasing id.
enum class NeighbourOrder { kDegreeThenId, kId };

// The undirected view of the edges: for each node its distinct neighbours other than itself, in
// the order the search visits them.
template <typename index_t>
class UndirectedAdjacency {
 public:
  UndirectedAdjacency(const EdgeIndexView& edges, int64_t num_nodes,
                      const std::vector<int64_t>& ptr, NeighbourOrder order)
      : begin_(num_nodes + 1, 0), degree_(num_nodes, 0) {
    for (int64_t k = 0; k < edges.num_edges; ++k) {
      edge_graph(edges, k, num_nodes, ptr);
      const int64_t u = edges.src(k), v = edges.dst(k);
      if (u == v) continue;
      ++begin_[u + 1];
      ++begin_[v + 1];
    }
    for (int64_t v = 0; v < num_nodes; ++v) begin_[v + 1] += begin_[v];
    neighbours_.resize(size_t(begin_[num_nodes]));
    std::vector<int64_t> cursor(begin_.begin(), begin_.end() - 1);
    for (int64_t k = 0; k < edges.num_edges; ++k) {
      const int64_t u = edges.src(k), v = edges.dst(k);
      if (u == v) continue;
      neighbours_[size_t(cursor[u]++)] = index_t(v);
      neighbours_[size_t(cursor[v]++)] = index_t(u);
    }
    // Duplicates (repeated edges, or u -> v next to v -> u) collapse; degree_ is the distinct count.
    parallel_for(0, num_nodes, kRowsPerTask, [&](int64_t lo, int64_t hi) {
      for (int64_t v = lo; v < hi; ++v) {
        index_t* first = neighbours_.data() + begin_[v];
        std::sort(first, neighbours_.data() + begin_[v + 1]);
        degree_[size_t(v)] = index_t(std::unique(first, neighbours_.data() + begin_[v + 1]) - first);
      }
    });
    if (order == NeighbourOrder::kId) return;
    parallel_for(0, num_nodes, kRowsPerTask, [&](int64_t lo, int64_t hi) {
      for (int64_t v = lo; v < hi; ++v)
        std::sort(neighbours_.data() + begin_[v], neighbours_.data() + begin_[v] + degree_[size_t(v)],
                  [this](index_t a, index_t b) { return precedes(a, b); });
    });
  }

  const index_t* neighbours_begin(index_t v) const { return neighbours_.data() + begin_[v]; }
  const index_t* neighbours_end(index_t v) const { return neighbours_begin(v) + degree_[size_t(v)]; }
  // Cuthill-McKee's visiting order: lower degree first, then lower id.
  bool precedes(index_t a, index_t b) const {
    return degree_[size_t(a)] != degree_[size_t(b)] ? degree_[size_t(a)] < degree_[size_t(b)] : a < b;
  }

 private:
  std::vector<int64_t> begin_;  // row v's slots start at begin_[v]; the first degree_[v] are used
  std::vector<index_t> degree_;
  std::vector<index_t> neighbours_;
};

// Orders the nodes of one graph (one OpenMP task's graphs, one at a time). `stamp` and `placed`
// are shared by all tasks: each graph reads and writes only its own nodes' entries.
template <typename index_t>
class GraphOrderer {
 public:
  GraphOrderer(const UndirectedAdjacency<index_t>& adjacency, std::vector<int64_t>& stamp,
               std::vector<uint8_t>& placed)
      : adjacency_(adjacency), stamp_(stamp), placed_(placed) {}

  // Writes perm[lo, hi) for the graph of nodes [lo, hi).
  void order(int64_t lo, int64_t hi, index_t* perm) {
    int64_t cursor = lo;
    for (int64_t v = lo; v < hi; ++v) {
      if (placed_[size_t(v)]) continue;
      levels_from(index_t(v));  // the component of v
      const index_t root = pseudo_peripheral(least_degree(0));
      cuthill_mckee(root);
      const int64_t size = int64_t(queue_.size());
      for (int64_t i = 0; i < size; ++i) perm[cursor + size - 1 - i] = queue_[size_t(i)];
      cursor += size;
    }
  }

 private:
  struct Levels {
    int64_t depth;          // eccentricity of the root
    size_t last_level;      // queue_ index where the deepest level starts
  };

  // Breadth-first level structure rooted at `root`, its nodes left in queue_ level by level.
  Levels levels_from(index_t root) {
    const int64_t mark = ++bfs_count_;
    queue_.clear();
    queue_.push_back(root);
    stamp_[size_t(root)] = mark;
    size_t level = 0;
    for (int64_t depth = 0;; ++depth) {
      const size_t level_end = queue_.size();
      for (size_t i = level; i < level_end; ++i) {
        const index_t u = queue_[i];
        for (const index_t* w = adjacency_.neighbours_begin(u); w != adjacency_.neighbours_end(u); ++w) {
          if (stamp_[size_t(*w)] == mark) continue;
          stamp_[size_t(*w)] = mark;
          queue_.push_back(*w);
        }
      }
      if (queue_.size() == level_end) return {depth, level};
      level = level_end;
    }
  }

  // The node of least (degree, id) among queue_[from, end).
  index_t least_degree(size_t from) const {
    index_t best = queue_[from];
    for (size_t i = from + 1; i < queue_.size(); ++i)
      if (adjacency_.precedes(queue_[i], best)) best = queue_[i];
    return best;
  }

  // George and Liu: move the root to a least-degree node of its deepest level while that
  // deepens the level structure; the last root is pseudo-peripheral.
  index_t pseudo_peripheral(index_t root) {
    Levels levels = levels_from(root);
    for (;;) {
      const index_t candidate = least_degree(levels.last_level);
      const Levels next = levels_from(candidate);
      if (next.depth <= levels.depth) return root;
      root = candidate;
      levels = next;
    }
  }

  // Cuthill-McKee order of root's component into queue_.
  void cuthill_mckee(index_t root) {
    queue_.clear();
    queue_.push_back(root);
    placed_[size_t(root)] = 1;
    for (size_t i = 0; i < queue_.size(); ++i) {
      const index_t u = queue_[i];
      for (const index_t* w = adjacency_.neighbours_begin(u); w != adjacency_.neighbours_end(u); ++w) {
        if (placed_[size_t(*w)]) continue;
        placed_[size_t(*w)] = 1;
        queue_.push_back(*w);
      }
    }
  }

  const UndirectedAdjacency<index_t>& adjacency_;
  std::vector<int64_t>& stamp_;
  std::vector<uint8_t>& placed_;
  std::vector<index_t> queue_;
  int64_t bfs_count_ = 0;
};

// Breadth-first order of the nodes [lo, hi) of one graph into perm[lo, hi): components from their
// smallest id, neighbours in the adjacency's order (by id). Marks the graph's nodes in `placed`.
template <typename index_t>
void breadth_first(const UndirectedAdjacency<index_t>& adjacency, int64_t lo, int64_t hi,
                   std::vector<uint8_t>& placed, index_t* perm) {
  // perm[lo, hi) is the queue: a node's position is the order in which it was reached.
  int64_t tail = lo;
  for (int64_t v = lo; v < hi; ++v) {
    if (placed[size_t(v)]) continue;
    placed[size_t(v)] = 1;
    perm[tail++] = index_t(v);
    for (int64_t head = tail - 1; head < tail; ++head) {
      const index_t u = perm[head];
      for (const index_t* w = adjacency.neighbours_begin(u); w != adjacency.neighbours_end(u); ++w) {
        if (placed[size_t(*w)]) continue;
        placed[size_t(*w)] = 1;
        perm[tail++] = *w;
      }
    }
  }
}

}  // namespace

template <typename index_t>
void degree_order(const EdgeIndexView& edges, int64_t num_nodes, const int64_t* graph_ptr,
                  int64_t num_graphs, index_t* perm) {
  const std::vector<int64_t> ptr = checked_graph_ptr(graph_ptr, num_graphs, num_nodes);
  std::vector<int64_t> degree(size_t(num_nodes), 0);
  for (int64_t k = 0; k < edges.num_edges; ++k) {
    edge_graph(edges, k, num_nodes, ptr);
    ++degree[size_t(edges.src(k))];
    ++degree[size_t(edges.dst(k))];
  }
  parallel_for(0, int64_t(ptr.size()) - 1, kGraphsPerTask, [&](int64_t lo, int64_t hi) {
    for (int64_t g = lo; g < hi; ++g) {
      index_t* first = perm + ptr[g];
      std::iota(first, perm + ptr[g + 1], index_t(ptr[g]));
      // (degree, id) is a total order, so an unstable sort is deterministic.
      std::sort(first, perm + ptr[g + 1], [&degree](index_t a, index_t b) {
        const int64_t da = degree[size_t(a)], db = degree[size_t(b)];
        return da != db ? da > db : a < b;
      });
    }
  });
}

template <typename index_t>
void breadth_first_order(const EdgeIndexView& edges, int64_t num_nodes, const int64_t* graph_ptr,
                         int64_t num_graphs, index_t* perm) {
  const std::vector<int64_t> ptr = checked_graph_ptr(graph_ptr, num_graphs, num_nodes);
  const UndirectedAdjacency<index_t> adjacency(edges, num_nodes, ptr, NeighbourOrder::kId);
  std::vector<uint8_t> placed(size_t(num_nodes), 0);
  parallel_for(0, int64_t(ptr.size()) - 1, kGraphsPerTask, [&](int64_t lo, int64_t hi) {
    for (int64_t g = lo; g < hi; ++g) breadth_first(adjacency, ptr[g], ptr[g + 1], placed, perm);
  });
}

void part_order(const int64_t* parts, int64_t num_nodes, int64_t num_parts, int64_t* perm) {
  IOGNN_CHECK(num_nodes >= 0, ValueError, "num_nodes must be >= 0, got ", num_nodes);
  IOGNN_CHECK(num_parts >= 1, ValueError, "num_parts must be >= 1, got ", num_parts);
  // A counting sort: part sizes, their offsets, then each node at its part's next slot.
  std::vector<int64_t> offset(size_t(num_parts) + 1, 0);
  for (int64_t v = 0; v < num_nodes; ++v) {
    IOGNN_CHECK(parts[v] >= 0 && parts[v] < num_parts, ValueError, "parts[", v, "] = ", parts[v],
                " is outside [0, num_parts = ", num_parts, ")");
    ++offset[size_t(parts[v]) + 1];
  }
  std::partial_sum(offset.begin(), offset.end(), offset.begin());
  for (int64_t v = 0; v < num_nodes; ++v) perm[offset[size_t(parts[v])]++] = v;
}

template <typename index_t>
void reverse_cuthill_mckee(const EdgeIndexView& edges, int64_t num_nodes,
                           const int64_t* graph_ptr, int64_t num_graphs, index_t* perm) {
  const std::vector<int64_t> ptr = checked_graph_ptr(graph_ptr, num_graphs, num_nodes);
  const UndirectedAdjacency<index_t> adjacency(edges, num_nodes, ptr,
                                               NeighbourOrder::kDegreeThenId);
  std::vector<int64_t> stamp(size_t(num_nodes), 0);
  std::vector<uint8_t> placed(size_t(num_nodes), 0);
  parallel_for(0, int64_t(ptr.size()) - 1, kGraphsPerTask, [&](int64_t lo, int64_t hi) {
    GraphOrderer<index_t> orderer(adjacency, stamp, placed);
    for (int64_t g = lo; g < hi; ++g) orderer.order(ptr[g], ptr[g + 1], perm);
  });
}

template <typename index_t>
void graph_bandwidths(const EdgeIndexView& edges, int64_t num_nodes, const index_t* perm,
                      const int64_t* graph_ptr, int64_t num_graphs, int64_t* bandwidth) {
  const std::vector<int64_t> ptr = checked_graph_ptr(graph_ptr, num_graphs, num_nodes);
  std::vector<int64_t> position(size_t(num_nodes), -1);
  for (int64_t i = 0; i < num_nodes; ++i) {
    const int64_t v = perm ? int64_t(perm[i]) : i;
    IOGNN_CHECK(v >= 0 && v < num_nodes && position[size_t(v)] < 0, ValueError,
                "perm is not a permutation of ", num_nodes, " nodes: perm[", i, "] = ", v,
                v >= 0 && v < num_nodes ? " appears twice" : " is out of range");
    position[size_t(v)] = i;
  }
  std::fill(bandwidth, bandwidth + ptr.size() - 1, int64_t(0));
  for (int64_t k = 0; k < edges.num_edges; ++k) {
    const int64_t g = edge_graph(edges, k, num_nodes, ptr);
    const int64_t span = std::abs(position[size_t(edges.src(k))] - position[size_t(edges.dst(k))]);
    bandwidth[g] = std::max(bandwidth[g], span);
  }
}

#define IOGNN_INSTANTIATE_REORDER(I)                                                          \
  template void degree_order<I>(const EdgeIndexView&, int64_t, const int64_t*, int64_t, I*);  \
  template void breadth_first_order<I>(const EdgeIndexView&, int64_t, const int64_t*, int64_t, \
                                       I*);                                                   \
  template void reverse_cuthill_mckee<I>(const EdgeIndexView&, int64_t, const int64_t*,       \
                                         int64_t, I*);                                        \
  template void graph_bandwidths<I>(const EdgeIndexView&, int64_t, const I*, const int64_t*, \
                                    int64_t, int64_t*);
IOGNN_INSTANTIATE_REORDER(int32_t)
IOGNN_INSTANTIATE_REORDER(int64_t)
#undef IOGNN_INSTANTIATE_REORDER

}  // namespace iognn

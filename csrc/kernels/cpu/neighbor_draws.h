// Neighbour sampling, host side: the per-node draws and the three passes of one hop over one CSC
// (contract: kernels/sampler_types.h). Internal to the host kernels: the homogeneous sampler
// (neighbor_sample.cpp) runs them on its graph, the heterogeneous one (hetero_neighbor_sample.cpp)
// on each edge type's CSC, so both sample a frontier node with the same code.
//
// A hop runs in three passes over its frontier: sample sizes and their prefix sums (checking the
// frontier's colptr entries, and its weights or times when there are any), the draws (in parallel:
// every frontier node writes its own slice, and its draws depend on its local id only), and the
// relabelling (sequential: ids are given in the order nodes are first seen).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "core/parallel.h"
#include "kernels/sampler_checks.h"
#include "kernels/sampler_draws.h"

namespace iognn::cpu::sampling {

// One CSC: the in-neighbours of destination node v are row[colptr[v] .. colptr[v + 1]), ids of the
// num_src source nodes; weight (or nullptr) one per entry of row; `names` name them in errors.
template <typename index_t>
struct CscView {
  const index_t* colptr;
  const index_t* row;
  int64_t num_src;
  int64_t num_edges;
  const double* weight;
  const CscNames* names;
};

// Floyd's method keeps a set of the positions taken so far: the slice itself is scanned while it
// is short, a hash set serves longer ones.
constexpr int64_t kScanLimit = 64;

// Writes the sampled CSC positions of a frontier node (in-neighbours at [begin, begin + degree))
// into out[0 .. sample_size).
template <typename index_t>
void sample_node(int64_t begin, int64_t degree, int64_t k, bool replace, uint64_t rng_seed,
                 uint64_t local, index_t* out) {
  if (k < 0 || (!replace && k >= degree)) {
    for (int64_t j = 0; j < degree; ++j) out[j] = index_t(begin + j);
  } else if (replace) {
    if (degree == 0) return;
    for (int64_t d = 0; d < k; ++d)
      out[d] = index_t(begin + uniform_below(rng_seed, local, uint64_t(d), degree));
  } else {
    // Floyd: for j = degree - k .. degree - 1, take t uniform in [0, j], or j itself when t is
    // already taken; every k-subset comes out equally likely.
    std::unordered_set<int64_t> taken;
    if (k > kScanLimit) taken.reserve(size_t(k));
    for (int64_t d = 0; d < k; ++d) {
      const int64_t j = degree - k + d;
      int64_t t = uniform_below(rng_seed, local, uint64_t(d), j + 1);
      const bool seen = k > kScanLimit ? taken.count(t) > 0
                                       : std::find(out, out + d, index_t(begin + t)) != out + d;
      if (seen) t = j;
      if (k > kScanLimit) taken.insert(t);
      out[d] = index_t(begin + t);
    }
  }
}

// The number of positive weights among weight[lo, hi), checking that each is finite and >= 0.
inline int64_t count_positive_weights(const double* weight, int64_t lo, int64_t hi,
                                      const CscNames& names) {
  int64_t positive = 0;
  for (int64_t p = lo; p < hi; ++p) {
    check_sample_weight(names, p, weight[p]);
    positive += weight[p] > 0;
  }
  return positive;
}

// Scratch space of one thread for weighted and temporal draws, reused across its frontier nodes.
struct DrawScratch {
  std::vector<double> prefix;                    // running sums of a node's weights
  std::vector<std::pair<double, int64_t>> keys;  // (exponential key, position) per positive weight
  std::vector<int64_t> eligible;                 // a node's eligible positions (temporal)
};

// The weighted counterpart of sample_node (weights already checked; `positive` of them > 0):
//   k < 0 or (k >= positive without replacement)  every positive-weight position, in CSC order;
//   with replacement     k independent draws, position j with probability w[j] / sum(w);
//   without replacement  k distinct positions drawn one after another, each with probability
//                        proportional to its weight among those left (torch.multinomial's
//                        distribution, which pyg-lib uses): the k smallest exponential keys
//                        E_j / w[j], E_j ~ Exp(1), in increasing key order (the draw order).
template <typename index_t>
void sample_node_weighted(const double* weight, int64_t begin, int64_t degree, int64_t positive,
                          int64_t k, bool replace, uint64_t rng_seed, uint64_t local,
                          DrawScratch& scratch, index_t* out) {
  const double* w = weight + begin;
  if (k < 0 || (!replace && k >= positive)) {
    for (int64_t j = 0, o = 0; j < degree; ++j)
      if (w[j] > 0) out[o++] = index_t(begin + j);
  } else if (replace) {
    if (positive == 0) return;
    scratch.prefix.resize(size_t(degree));
    double total = 0;
    int64_t last_positive = 0;
    for (int64_t j = 0; j < degree; ++j) {
      total += w[j];
      scratch.prefix[size_t(j)] = total;
      if (w[j] > 0) last_positive = j;
    }
    // The first running sum above u is a positive weight's; u rounding up to the total would
    // find none, and takes the last positive weight instead.
    for (int64_t d = 0; d < k; ++d) {
      const double u = unit_interval(rng_seed, local, uint64_t(d)) * total;
      const int64_t j =
          std::upper_bound(scratch.prefix.begin(), scratch.prefix.end(), u) - scratch.prefix.begin();
      out[d] = index_t(begin + (j < degree ? j : last_positive));
    }
  } else {
    scratch.keys.clear();
    for (int64_t j = 0; j < degree; ++j)
      if (w[j] > 0)
        scratch.keys.emplace_back(-std::log1p(-unit_interval(rng_seed, local, uint64_t(j))) / w[j],
                                  j);
    std::partial_sort(scratch.keys.begin(), scratch.keys.begin() + k, scratch.keys.end());
    for (int64_t d = 0; d < k; ++d) out[d] = index_t(begin + scratch.keys[size_t(d)].second);
  }
}

// row[p], checked against the source node count.
template <typename index_t>
int64_t neighbor_at(const CscView<index_t>& g, int64_t p) {
  return check_sample_neighbor(*g.names, p, int64_t(g.row[p]), g.num_src);
}

// Which in-edge positions each tree may sample (contract: kernels/sampler_types.h): those whose
// time (the neighbour's node time, or the edge's time) is <= the tree's seed time. Inactive (no
// filter) when given neither time.
template <typename index_t>
class TemporalFilter {
 public:
  // node_time: one per source node; edge_time: one per position; seed_time: one per tree.
  TemporalFilter(const CscView<index_t>& g, const int64_t* node_time, const int64_t* edge_time,
                 const std::vector<int64_t>& seed_time, TemporalStrategy strategy)
      : graph_(g), node_time_(node_time), edge_time_(edge_time), seed_time_(seed_time),
        last_(strategy == TemporalStrategy::kLast) {}

  bool active() const { return node_time_ || edge_time_; }

  // How many positions of [lo, hi) tree `tree` may sample with fan-out k.
  int64_t population(int64_t lo, int64_t hi, int64_t tree, int64_t k) const {
    int64_t eligible = 0;
    for (int64_t p = lo; p < hi; ++p) eligible += time_at(p) <= seed_time_[size_t(tree)];
    return last_ && k >= 0 ? std::min(eligible, k) : eligible;
  }

  // Writes that population's positions, in CSC order, into `out`.
  void positions(int64_t lo, int64_t hi, int64_t tree, int64_t k, std::vector<int64_t>& out) const {
    out.clear();
    for (int64_t p = lo; p < hi; ++p)
      if (time_at(p) <= seed_time_[size_t(tree)]) out.push_back(p);
    if (!last_ || k < 0 || int64_t(out.size()) <= k) return;
    // The k most recent: the largest times, a tie going to the later position.
    const auto more_recent = [&](int64_t a, int64_t b) {
      const int64_t ta = time_at(a), tb = time_at(b);
      return ta != tb ? ta > tb : a > b;
    };
    std::nth_element(out.begin(), out.begin() + k, out.end(), more_recent);
    out.resize(size_t(k));
    std::sort(out.begin(), out.end());
  }

 private:
  int64_t time_at(int64_t p) const {
    return edge_time_ ? edge_time_[p] : node_time_[neighbor_at(graph_, p)];
  }

  const CscView<index_t>& graph_;
  const int64_t* node_time_;
  const int64_t* edge_time_;
  const std::vector<int64_t>& seed_time_;
  bool last_;
};

// The temporal counterpart of sample_node: the draws of sample_node over the population's
// positions (population.size() of them).
template <typename index_t>
void sample_node_temporal(const std::vector<int64_t>& population, int64_t k, bool replace,
                          uint64_t rng_seed, uint64_t local, index_t* out) {
  const int64_t size = int64_t(population.size());
  sample_node<index_t>(0, size, k, replace, rng_seed, local, out);
  for (int64_t d = 0, n = sample_size(size, k, replace); d < n; ++d)
    out[d] = index_t(population[size_t(out[d])]);
}

// Key -> local id, where a key is a global node id, or tree * num_nodes + node with disjoint.
// A dense table while the key space is small (one fill per call, no hashing), a hash map beyond.
template <typename index_t>
class LocalIds {
 public:
  // The key space is checked first (check_sample_key_space).
  LocalIds(int64_t num_nodes, int64_t num_trees) {
    const int64_t keys = num_trees * num_nodes;
    if (keys <= kDenseKeys) dense_.assign(size_t(keys), -1);
    dense_mode_ = keys <= kDenseKeys;
  }

  // The local id of `key`, or `next` (recorded) when it has none yet; second: whether it was new.
  std::pair<int64_t, bool> insert(int64_t key, int64_t next) {
    if (dense_mode_) {
      index_t& slot = dense_[size_t(key)];
      if (slot >= 0) return {slot, false};
      slot = index_t(next);
      return {next, true};
    }
    const auto [it, inserted] = sparse_.try_emplace(key, next);
    return {it->second, inserted};
  }

 private:
  static constexpr int64_t kDenseKeys = int64_t(1) << 22;
  bool dense_mode_ = true;
  std::vector<index_t> dense_;
  std::unordered_map<int64_t, int64_t> sparse_;
};

// A hop's passes 1 and 2 over the frontier nodes [begin, end) of `node` (their global ids among
// the CSC's destination nodes, already checked; `batch` their trees, read by temporal filters):
// the sample sizes (checking colptr, and the weights or times read), then the draws of each
// frontier node i, keyed by (rng_seed, i), into its own slice, appended to `edge` (CSC positions)
// with `col` = i. Returns the hop's edge count.
template <typename index_t>
int64_t sample_frontier(const CscView<index_t>& g, const TemporalFilter<index_t>& temporal,
                        const std::vector<index_t>& node, const std::vector<index_t>& batch,
                        int64_t begin, int64_t end, int64_t k, bool replace, uint64_t rng_seed,
                        std::vector<index_t>& edge, std::vector<index_t>& col) {
  const index_t* colptr = g.colptr;
  const double* weight = g.weight;
  const bool timed = temporal.active();
  std::vector<int64_t> offsets(size_t(end - begin + 1), 0);
  std::vector<int64_t> positives(weight ? size_t(end - begin) : 0, 0);  // with weights only
  // Pass 1: sample sizes, checking the colptr entries of the frontier.
  for (int64_t i = begin; i < end; ++i) {
    const int64_t v = node[size_t(i)];
    const int64_t lo = colptr[v], hi = colptr[v + 1];
    check_sample_colptr_range(*g.names, v, lo, hi, g.num_edges);
    int64_t population = hi - lo;
    if (weight)
      population = positives[size_t(i - begin)] =
          count_positive_weights(weight, lo, hi, *g.names);
    if (timed) population = temporal.population(lo, hi, batch[size_t(i)], k);
    offsets[size_t(i - begin + 1)] = offsets[size_t(i - begin)] + sample_size(population, k, replace);
  }
  const int64_t first_edge = int64_t(edge.size());
  const int64_t hop_edges = offsets.back();
  edge.resize(size_t(first_edge + hop_edges));
  col.resize(size_t(first_edge + hop_edges));
  // Pass 2: the draws, each frontier node into its own slice. One loop per kind of draw, so that
  // the uniform loop carries no branch of the others.
  const auto draw_all = [&](auto&& draw) {
    parallel_for(begin, end, 64, [&](int64_t lo, int64_t hi) {
      DrawScratch scratch;
      for (int64_t i = lo; i < hi; ++i) {
        const int64_t v = node[size_t(i)];
        const int64_t slice = first_edge + offsets[size_t(i - begin)];
        const int64_t slice_end = first_edge + offsets[size_t(i - begin + 1)];
        draw(i, int64_t(colptr[v]), int64_t(colptr[v + 1]), scratch, edge.data() + slice);
        std::fill(col.begin() + slice, col.begin() + slice_end, index_t(i));
      }
    });
  };
  if (weight) {
    draw_all([&](int64_t i, int64_t lo, int64_t hi, DrawScratch& scratch, index_t* slice) {
      sample_node_weighted<index_t>(weight, lo, hi - lo, positives[size_t(i - begin)], k, replace,
                                    rng_seed, uint64_t(i), scratch, slice);
    });
  } else if (timed) {
    draw_all([&](int64_t i, int64_t lo, int64_t hi, DrawScratch& scratch, index_t* slice) {
      temporal.positions(lo, hi, batch[size_t(i)], k, scratch.eligible);
      sample_node_temporal<index_t>(scratch.eligible, k, replace, rng_seed, uint64_t(i), slice);
    });
  } else {
    draw_all([&](int64_t i, int64_t lo, int64_t hi, DrawScratch&, index_t* slice) {
      sample_node<index_t>(lo, hi - lo, k, replace, rng_seed, uint64_t(i), slice);
    });
  }
  return hop_edges;
}

// Where pass 3 puts the sampled neighbours: the source nodes' local ids and their records.
template <typename index_t>
struct SourceNodes {
  LocalIds<index_t>& ids;
  std::vector<index_t>& node;   // global id per local id
  std::vector<index_t>& batch;  // tree per local id (disjoint only)
};

// A hop's pass 3: relabels the neighbours of the edges [first_edge, edge.size()) in edge order,
// a new (tree, node) taking the next local id of `src`; the tree of edge e is col_batch[col[e]]
// with disjoint. Writes row[e] = the neighbour's local id. The neighbours' global ids are gathered
// in parallel first (the CSC's random reads), so the sequential part reads them in order; they
// are checked there, in edge order, as the ids are given.
template <typename index_t>
void relabel_neighbors(const CscView<index_t>& g, const std::vector<index_t>& edge,
                       const std::vector<index_t>& col, int64_t first_edge, bool disjoint,
                       const std::vector<index_t>& col_batch, SourceNodes<index_t> src,
                       std::vector<index_t>& row) {
  const int64_t num_src = g.num_src;
  const int64_t num_edges = int64_t(edge.size());
  row.resize(size_t(num_edges));
  parallel_for(first_edge, num_edges, 4096, [&](int64_t lo, int64_t hi) {
    for (int64_t e = lo; e < hi; ++e) row[size_t(e)] = g.row[edge[size_t(e)]];
  });
  for (int64_t e = first_edge; e < num_edges; ++e) {
    const int64_t u = check_sample_neighbor(*g.names, int64_t(edge[size_t(e)]),
                                            int64_t(row[size_t(e)]), num_src);
    const int64_t tree = disjoint ? int64_t(col_batch[size_t(col[size_t(e)])]) : 0;
    const int64_t next = int64_t(src.node.size());
    const auto [local, is_new] = src.ids.insert(tree * num_src + u, next);
    if (is_new) {
      check_sample_local_id<index_t>(*g.names, next);
      src.node.push_back(index_t(u));
      if (disjoint) src.batch.push_back(index_t(tree));
    }
    row[size_t(e)] = index_t(local);
  }
}

}  // namespace iognn::cpu::sampling

// Reverse Cuthill-McKee and graph bandwidths (core/reorder.h): permutation validity, known orders,
// bandwidth on shuffled paths, grids and trees, batches, degenerate graphs, both index types and
// the errors; the degree sort, BFS and part order on known cases.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/reorder.h"
#include "expect_error.h"

namespace iognn::test {
namespace {

using Edges = std::vector<std::pair<int64_t, int64_t>>;

// A [2, E] edge index in row-major storage of index_t, and the core's view of it.
template <typename index_t>
struct EdgeIndex {
  explicit EdgeIndex(const Edges& edges) : data(2 * edges.size()) {
    for (size_t k = 0; k < edges.size(); ++k) {
      data[k] = index_t(edges[k].first);
      data[edges.size() + k] = index_t(edges[k].second);
    }
  }
  EdgeIndexView view() const {
    EdgeIndexView v;
    v.data = data.data();
    v.is_int64 = sizeof(index_t) == 8;
    v.num_edges = int64_t(data.size() / 2);
    v.stride_row = v.num_edges;
    return v;
  }
  std::vector<index_t> data;
};

template <typename index_t = int64_t>
std::vector<index_t> rcm(const Edges& edges, int64_t n, const std::vector<int64_t>& ptr = {}) {
  std::vector<index_t> perm(size_t(std::max<int64_t>(n, 0)), index_t(-1));
  reverse_cuthill_mckee<index_t>(EdgeIndex<index_t>(edges).view(), n,
                                 ptr.empty() ? nullptr : ptr.data(), int64_t(ptr.size()) - 1,
                                 perm.data());
  return perm;
}

std::vector<int64_t> bandwidths(const Edges& edges, int64_t n, const std::vector<int64_t>* perm,
                                const std::vector<int64_t>& ptr = {}) {
  std::vector<int64_t> out(ptr.empty() ? 1 : ptr.size() - 1, -1);
  graph_bandwidths<int64_t>(EdgeIndex<int64_t>(edges).view(), n, perm ? perm->data() : nullptr,
                            ptr.empty() ? nullptr : ptr.data(), int64_t(ptr.size()) - 1,
                            out.data());
  return out;
}

int64_t bandwidth(const Edges& edges, int64_t n, const std::vector<int64_t>* perm = nullptr) {
  return bandwidths(edges, n, perm)[0];
}

void expect_permutation(const std::vector<int64_t>& perm, int64_t lo, int64_t hi) {
  std::vector<int64_t> sorted(perm.begin() + lo, perm.begin() + hi);
  std::sort(sorted.begin(), sorted.end());
  for (int64_t i = lo; i < hi; ++i) EXPECT_EQ(sorted[size_t(i - lo)], i);
}

// The edges with node v renamed relabel[v].
Edges relabelled(const Edges& edges, const std::vector<int64_t>& relabel) {
  Edges out;
  for (auto [u, v] : edges) out.push_back({relabel[size_t(u)], relabel[size_t(v)]});
  return out;
}

std::vector<int64_t> shuffled_ids(int64_t n, uint32_t seed) {
  std::vector<int64_t> ids(static_cast<size_t>(n));
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), std::mt19937(seed));
  return ids;
}

Edges path(int64_t n) {
  Edges e;
  for (int64_t v = 0; v + 1 < n; ++v) e.push_back({v, v + 1});
  return e;
}

Edges grid(int64_t rows, int64_t cols) {
  Edges e;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      if (c + 1 < cols) e.push_back({r * cols + c, r * cols + c + 1});
      if (r + 1 < rows) e.push_back({r * cols + c, (r + 1) * cols + c});
    }
  return e;
}

// A random tree: node v > 0 hangs under a uniformly drawn earlier node.
Edges random_tree(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  Edges e;
  for (int64_t v = 1; v < n; ++v) e.push_back({int64_t(rng() % uint32_t(v)), v});
  return e;
}

TEST(Rcm, PathFromItsEndIsReversed) {
  // Node 0 is the path's end of least id, so Cuthill-McKee runs 0, 1, 2, 3 and RCM reverses it.
  EXPECT_EQ(rcm(path(4), 4), (std::vector<int64_t>{3, 2, 1, 0}));
}

TEST(Rcm, StarPutsTheCentreLast) {
  // Leaves have degree 1: the search starts at leaf 1, reaches the centre 0, then leaves 2, 3, 4.
  const Edges star = {{0, 1}, {0, 2}, {0, 3}, {0, 4}};
  EXPECT_EQ(rcm(star, 5), (std::vector<int64_t>{4, 3, 2, 0, 1}));
}

TEST(Rcm, NeighboursByIncreasingDegree) {
  // 0 - 1, then 1 - 2 and 1 - 3 where 2 (degree 3) leads on to 4 and 5 and 3 is a leaf: the search
  // starts at the leaf 0 (pseudo-peripheral) and visits 1's neighbour 3 before 2, against id order.
  const Edges g = {{0, 1}, {1, 2}, {1, 3}, {2, 4}, {2, 5}};
  const std::vector<int64_t> perm = rcm(g, 6);
  EXPECT_EQ(perm, (std::vector<int64_t>{5, 4, 2, 3, 1, 0}));
  EXPECT_EQ(bandwidth(g, 6, &perm), 2);
}

TEST(Rcm, ShuffledPathsHaveBandwidthOne) {
  for (int64_t n : {2, 3, 17, 100}) {
    const Edges edges = relabelled(path(n), shuffled_ids(n, uint32_t(n)));
    const std::vector<int64_t> perm = rcm(edges, n);
    expect_permutation(perm, 0, n);
    EXPECT_EQ(bandwidth(edges, n, &perm), 1) << n;
  }
}

TEST(Rcm, ShuffledGridsAreAsNarrowAsTheirRowOrder) {
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{3, 3}, {5, 8}, {12, 7}, {20, 20}}) {
    const int64_t n = rows * cols;
    const Edges edges = relabelled(grid(rows, cols), shuffled_ids(n, uint32_t(n)));
    const std::vector<int64_t> perm = rcm(edges, n);
    expect_permutation(perm, 0, n);
    // Row-major order along the longer side has bandwidth min(rows, cols); RCM's levels from a
    // corner are anti-diagonals of at most min(rows, cols) nodes, so it comes within one of that.
    EXPECT_LE(bandwidth(edges, n, &perm), std::min(rows, cols) + 1) << rows << "x" << cols;
    EXPECT_LE(bandwidth(edges, n, &perm), bandwidth(edges, n));
  }
}

TEST(Rcm, ShuffledTreesAreNeverWiderThanTheirInputOrder) {
  for (uint32_t seed = 0; seed < 20; ++seed) {
    const int64_t n = 5 + seed * 7;
    const Edges edges = relabelled(random_tree(n, seed), shuffled_ids(n, seed + 100));
    const std::vector<int64_t> perm = rcm(edges, n);
    expect_permutation(perm, 0, n);
    EXPECT_LE(bandwidth(edges, n, &perm), bandwidth(edges, n)) << "seed " << seed;
  }
}

TEST(Rcm, ComponentsInOrderOfTheirSmallestId) {
  // Components {0, 2} and {1, 3}, then the isolated node 4.
  const Edges g = {{2, 0}, {3, 1}};
  EXPECT_EQ(rcm(g, 5), (std::vector<int64_t>{2, 0, 3, 1, 4}));
}

TEST(Rcm, IsolatedNodesKeepTheirOrder) {
  EXPECT_EQ(rcm({}, 4), (std::vector<int64_t>{0, 1, 2, 3}));
}

TEST(Rcm, EmptyGraph) {
  EXPECT_TRUE(rcm({}, 0).empty());
  EXPECT_EQ(bandwidth({}, 0), 0);
  EXPECT_TRUE(rcm({}, 0, {0}).empty());
}

TEST(Rcm, SelfLoopsDuplicatesAndDirectionDoNotChangeTheOrder) {
  const int64_t n = 30;
  const Edges base = relabelled(random_tree(n, 7), shuffled_ids(n, 8));
  Edges noisy = base;
  for (auto [u, v] : base) {
    noisy.push_back({v, u});  // reversed copy
    noisy.push_back({u, v});  // duplicate
  }
  for (int64_t v = 0; v < n; v += 3) noisy.push_back({v, v});
  EXPECT_EQ(rcm(noisy, n), rcm(base, n));
}

TEST(Rcm, Int32AndInt64Agree) {
  const int64_t n = 60;
  const Edges edges = relabelled(grid(6, 10), shuffled_ids(n, 3));
  const std::vector<int32_t> narrow = rcm<int32_t>(edges, n);
  const std::vector<int64_t> wide = rcm<int64_t>(edges, n);
  EXPECT_TRUE(std::equal(narrow.begin(), narrow.end(), wide.begin()));
}

TEST(Rcm, BatchOrdersEachGraphWithinItsRange) {
  // Graph 0: a shuffled path on nodes [0, 6); graph 1: no nodes; graph 2: a shuffled grid on
  // [6, 18); graph 3: one isolated node 18.
  const Edges p = relabelled(path(6), shuffled_ids(6, 1));
  const Edges g = relabelled(grid(3, 4), shuffled_ids(12, 2));
  Edges batch = p;
  for (auto [u, v] : g) batch.push_back({u + 6, v + 6});
  const std::vector<int64_t> ptr = {0, 6, 6, 18, 19};
  const std::vector<int64_t> perm = rcm(batch, 19, ptr);
  for (size_t g_id = 0; g_id + 1 < ptr.size(); ++g_id) expect_permutation(perm, ptr[g_id], ptr[g_id + 1]);
  // Each graph is ordered as it would be alone, shifted to its range.
  const std::vector<int64_t> alone_p = rcm(p, 6), alone_g = rcm(g, 12);
  for (int64_t i = 0; i < 6; ++i) EXPECT_EQ(perm[size_t(i)], alone_p[size_t(i)]);
  for (int64_t i = 0; i < 12; ++i) EXPECT_EQ(perm[size_t(6 + i)], alone_g[size_t(i)] + 6);
  EXPECT_EQ(perm[18], 18);
  const std::vector<int64_t> widths = bandwidths(batch, 19, &perm, ptr);
  EXPECT_EQ(widths, (std::vector<int64_t>{1, 0, bandwidths(g, 12, &alone_g)[0], 0}));
}

TEST(Rcm, ManyGraphsMatchOneAtATime) {
  // Enough graphs for several OpenMP tasks; the result must not depend on how they are split.
  Edges batch;
  std::vector<int64_t> ptr = {0};
  std::vector<std::vector<int64_t>> alone;
  for (uint32_t g = 0; g < 100; ++g) {
    const int64_t n = 1 + int64_t(g % 13);
    const Edges tree = relabelled(random_tree(n, g), shuffled_ids(n, g + 1));
    for (auto [u, v] : tree) batch.push_back({u + ptr.back(), v + ptr.back()});
    alone.push_back(rcm(tree, n));
    ptr.push_back(ptr.back() + n);
  }
  const std::vector<int64_t> perm = rcm(batch, ptr.back(), ptr);
  for (size_t g = 0; g < alone.size(); ++g)
    for (size_t i = 0; i < alone[g].size(); ++i)
      EXPECT_EQ(perm[size_t(ptr[g]) + i], alone[g][i] + ptr[g]);
}

TEST(Rcm, Errors) {
  const auto run = [&](const Edges& edges, int64_t n, const std::vector<int64_t>& ptr) {
    return [edges, n, ptr] { rcm(edges, n, ptr); };
  };
  expect_error<IndexError>(run({{0, 3}}, 3, {}), "edge_index[1][0] = 3");
  expect_error<IndexError>(run({{-1, 0}}, 3, {}), "edge_index[0][0] = -1");
  expect_error<ValueError>(run({{0, 2}}, 3, {0, 2, 3}), "edge_index: edge 0 joins node 0");
  expect_error<ValueError>(run({}, 3, {1, 3}), "ptr[0] must be 0");
  expect_error<ValueError>(run({}, 3, {0, 2, 1, 3}), "ptr must be non-decreasing");
  expect_error<ValueError>(run({}, 3, {0, 2}), "must equal num_nodes = 3");
  expect_error<ValueError>(run({}, -1, {}), "num_nodes must be >= 0");
  const std::vector<int64_t> twice = {0, 0, 1}, outside = {0, 1, 5};
  expect_error<ValueError>([&] { bandwidth({}, 3, &twice); }, "perm[1] = 0 appears twice");
  expect_error<ValueError>([&] { bandwidth({}, 3, &outside); }, "perm[2] = 5 is out of range");
}

// The degree sort or BFS order (`order`: degree_order or breadth_first_order) of the edges.
template <typename index_t = int64_t>
std::vector<index_t> other_order(void (*order)(const EdgeIndexView&, int64_t, const int64_t*,
                                               int64_t, index_t*),
                                 const Edges& edges, int64_t n, const std::vector<int64_t>& ptr = {}) {
  std::vector<index_t> perm(size_t(n), index_t(-1));
  order(EdgeIndex<index_t>(edges).view(), n, ptr.empty() ? nullptr : ptr.data(),
        int64_t(ptr.size()) - 1, perm.data());
  return perm;
}

TEST(DegreeOrder, KnownOrdersAndBatch) {
  // Degrees 2, 3, 1, 3 (the self-loop counts twice), 1, 0; ties by id.
  const Edges edges = {{0, 1}, {1, 2}, {1, 3}, {3, 3}, {4, 0}};
  EXPECT_EQ(other_order(degree_order<int64_t>, edges, 6), (std::vector<int64_t>{1, 3, 0, 2, 4, 5}));
  EXPECT_EQ(other_order(degree_order<int32_t>, edges, 6), (std::vector<int32_t>{1, 3, 0, 2, 4, 5}));
  // Two graphs {0, 1, 2} and {3, 4}: each sorted within its range.
  EXPECT_EQ(other_order(degree_order<int64_t>, {{2, 0}, {2, 1}, {4, 3}, {4, 4}}, 5, {0, 3, 5}),
            (std::vector<int64_t>{2, 0, 1, 4, 3}));
  EXPECT_TRUE(other_order(degree_order<int64_t>, {}, 0).empty());
}

TEST(BreadthFirstOrder, KnownOrdersAndBatch) {
  EXPECT_EQ(other_order(breadth_first_order<int64_t>, {{0, 1}, {1, 2}, {1, 3}, {3, 3}, {4, 0}}, 6),
            (std::vector<int64_t>{0, 1, 4, 2, 3, 5}));
  // Components by smallest id, direction and duplicates ignored.
  EXPECT_EQ(other_order(breadth_first_order<int32_t>, {{2, 0}, {3, 1}, {0, 2}}, 5),
            (std::vector<int32_t>{0, 2, 1, 3, 4}));
  EXPECT_EQ(other_order(breadth_first_order<int64_t>, {{2, 1}, {0, 2}, {4, 3}}, 5, {0, 3, 5}),
            (std::vector<int64_t>{0, 2, 1, 3, 4}));
  const auto run = [] { other_order(breadth_first_order<int64_t>, {{0, 2}}, 3, {0, 2, 3}); };
  expect_error<ValueError>(run, "edge_index: edge 0 joins node 0");
}

TEST(PartOrder, GroupsByPartThenId) {
  const std::vector<int64_t> parts = {1, 0, 2, 0, 1};
  std::vector<int64_t> perm(parts.size(), -1);
  part_order(parts.data(), 5, 3, perm.data());
  EXPECT_EQ(perm, (std::vector<int64_t>{1, 3, 0, 4, 2}));
  const std::vector<int64_t> outside = {0, 3};
  expect_error<ValueError>([&] { part_order(outside.data(), 2, 3, perm.data()); },
                           "parts[1] = 3 is outside [0, num_parts = 3)");
  expect_error<ValueError>([&] { part_order(parts.data(), 5, 0, perm.data()); },
                           "num_parts must be >= 1");
}

}  // namespace
}  // namespace iognn::test

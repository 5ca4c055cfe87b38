// Host neighbour sampler (kernels/cpu/neighbor_sample.h) on hand-checked graphs: full
// neighbourhoods in CSC order, relabelling order, disjoint trees, duplicate seeds, no repeats
// without replacement, repeats with it, uniformity, determinism, and the argument errors; weighted
// sampling (zero weights, equal weights against uniform statistics, determinism, bad weights).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <set>
#include <string>
#include <vector>

#if defined(_OPENMP)
#include <omp.h>
#endif

#include "core/error.h"
#include "kernels/cpu/neighbor_sample.h"

namespace iognn::test {
namespace {

template <typename I>
struct Csc {
  std::vector<I> colptr, row;
  int64_t num_nodes() const { return int64_t(colptr.size()) - 1; }
};

// In-neighbours: 0 <- {1, 2, 3}, 1 <- {0, 4}, 2 <- {1}, 3 <- {}, 4 <- {4 (a self-loop), 0}.
template <typename I>
Csc<I> small_graph() {
  return {{0, 3, 5, 6, 6, 8}, {1, 2, 3, 0, 4, 1, 4, 0}};
}

// Node 0 has `degree` in-neighbours 1 .. degree; the others have none.
Csc<int64_t> star(int64_t degree) {
  Csc<int64_t> g;
  g.colptr.assign(size_t(degree + 2), degree);
  g.colptr[0] = 0;
  for (int64_t u = 1; u <= degree; ++u) g.row.push_back(u);
  return g;
}

template <typename I>
SampledSubgraph<I> sample(const Csc<I>& g, const std::vector<I>& seeds,
                          const std::vector<int64_t>& fanouts, bool replace = false,
                          bool disjoint = false, uint64_t rng_seed = 0,
                          const std::vector<double>* weight = nullptr) {
  return cpu::neighbor_sample<I>(
      g.colptr.data(), g.num_nodes(), g.row.data(), int64_t(g.row.size()), seeds.data(),
      int64_t(seeds.size()), fanouts,
      NeighborSampleOptions{replace, disjoint, rng_seed, weight ? weight->data() : nullptr});
}


using Vec = std::vector<int64_t>;

template <typename I>
Vec widen(const std::vector<I>& v) {
  return Vec(v.begin(), v.end());
}

// Node 0 of star(degree) sampled with `weight`: the positions of one draw of k.
Vec weighted_draw(const Csc<int64_t>& g, const std::vector<double>& weight, int64_t k, bool replace,
                  uint64_t rng_seed) {
  return widen(sample<int64_t>(g, {0}, {k}, replace, false, rng_seed, &weight).edge);
}

template <typename I>
void expect_two_full_hops_from_node_0() {
  const auto s = sample<I>(small_graph<I>(), {0}, {-1, -1});
  // Hop 1: node 0's in-neighbours 1, 2, 3 become local ids 1, 2, 3. Hop 2: node 1's 0 (seen: id 0)
  // and 4 (new: id 4), node 2's 1 (seen), node 3 has none.
  EXPECT_EQ(widen(s.node), (Vec{0, 1, 2, 3, 4}));
  EXPECT_EQ(widen(s.row), (Vec{1, 2, 3, 0, 4, 1}));
  EXPECT_EQ(widen(s.col), (Vec{0, 0, 0, 1, 1, 2}));
  EXPECT_EQ(widen(s.edge), (Vec{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(s.num_sampled_nodes, (Vec{1, 3, 1}));
  EXPECT_EQ(s.num_sampled_edges, (Vec{3, 3}));
  EXPECT_TRUE(s.batch.empty());
}

TEST(NeighborSample, AllNeighboursInCscOrderInt64) { expect_two_full_hops_from_node_0<int64_t>(); }
TEST(NeighborSample, AllNeighboursInCscOrderInt32) { expect_two_full_hops_from_node_0<int32_t>(); }

TEST(NeighborSample, FanOutAtLeastTheDegreeTakesEveryNeighbourWithoutReplacement) {
  const auto all = sample<int64_t>(small_graph<int64_t>(), {0, 4}, {-1});
  const auto big = sample<int64_t>(small_graph<int64_t>(), {0, 4}, {3}, false, false, 99);
  EXPECT_EQ(widen(big.edge), widen(all.edge));
  EXPECT_EQ(widen(big.edge), (Vec{0, 1, 2, 6, 7}));
  // Node 4's self-loop maps onto its own (seed) id.
  EXPECT_EQ(widen(all.row), (Vec{2, 3, 4, 1, 0}));
}

TEST(NeighborSample, SeedsComeFirstAndNeighboursTakeTheSeedsIds) {
  const auto s = sample<int64_t>(small_graph<int64_t>(), {0, 1}, {-1});
  EXPECT_EQ(widen(s.node), (Vec{0, 1, 2, 3, 4}));
  EXPECT_EQ(widen(s.row), (Vec{1, 2, 3, 0, 4}));
  EXPECT_EQ(widen(s.col), (Vec{0, 0, 0, 1, 1}));
  EXPECT_EQ(s.num_sampled_nodes, (Vec{2, 3}));
}

TEST(NeighborSample, DuplicateSeedsKeepTheirPositionsAndNeighboursTakeTheFirst) {
  const auto s = sample<int64_t>(small_graph<int64_t>(), {0, 1, 0}, {-1});
  EXPECT_EQ(widen(s.node), (Vec{0, 1, 0, 2, 3, 4}));
  EXPECT_EQ(widen(s.row), (Vec{1, 3, 4, 0, 5, 1, 3, 4}));
  EXPECT_EQ(widen(s.col), (Vec{0, 0, 0, 1, 1, 2, 2, 2}));
  EXPECT_EQ(s.num_sampled_nodes, (Vec{3, 3}));
}

TEST(NeighborSample, DisjointGrowsOneTreePerSeed) {
  const auto s = sample<int64_t>(small_graph<int64_t>(), {0, 1}, {-1, -1}, false, true);
  // Tree 0 (seed 0): 1, 2, 3 at hop 1; tree 1 (seed 1): 0, 4 at hop 1 (0 is new in this tree).
  // Hop 2: tree 0's node 1 finds 0 (its seed, id 0) and 4 (new), its node 2 finds 1 (id 2);
  // tree 1's node 0 finds 1 (its seed, id 1), 2 and 3 (new), its node 4 finds 4 (id 6) and 0 (id 5).
  EXPECT_EQ(widen(s.node), (Vec{0, 1, 1, 2, 3, 0, 4, 4, 2, 3}));
  EXPECT_EQ(widen(s.batch), (Vec{0, 1, 0, 0, 0, 1, 1, 0, 1, 1}));
  EXPECT_EQ(widen(s.row), (Vec{2, 3, 4, 5, 6, 0, 7, 2, 1, 8, 9, 6, 5}));
  EXPECT_EQ(widen(s.col), (Vec{0, 0, 0, 1, 1, 2, 2, 3, 5, 5, 5, 6, 6}));
  EXPECT_EQ(s.num_sampled_nodes, (Vec{2, 5, 3}));
  EXPECT_EQ(s.num_sampled_edges, (Vec{5, 8}));
  for (size_t e = 0; e < s.row.size(); ++e)
    EXPECT_EQ(s.batch[size_t(s.row[e])], s.batch[size_t(s.col[e])]) << "edge " << e;
}

TEST(NeighborSample, IsolatedSeedsAndZeroFanOutSampleNothing) {
  const auto isolated = sample<int64_t>(small_graph<int64_t>(), {3}, {-1, 2});
  EXPECT_EQ(widen(isolated.node), (Vec{3}));
  EXPECT_TRUE(isolated.row.empty());
  EXPECT_EQ(isolated.num_sampled_nodes, (Vec{1, 0, 0}));
  EXPECT_EQ(isolated.num_sampled_edges, (Vec{0, 0}));
  const auto zero = sample<int64_t>(small_graph<int64_t>(), {0}, {0}, true);
  EXPECT_TRUE(zero.edge.empty());
  const auto none = sample<int64_t>(small_graph<int64_t>(), {}, {5});
  EXPECT_EQ(none.num_sampled_nodes, (Vec{0, 0}));
  const auto isolated_replace = sample<int64_t>(small_graph<int64_t>(), {3}, {4}, true);
  EXPECT_TRUE(isolated_replace.edge.empty());
}

TEST(NeighborSample, NoRepeatsWithoutReplacement) {
  const auto g = star(200);
  for (const int64_t k : {1, 10, 64, 65, 150, 199}) {  // both sides of the set's scan limit
    for (uint64_t rng = 0; rng < 20; ++rng) {
      const auto s = sample<int64_t>(g, {0}, {k}, false, false, rng);
      ASSERT_EQ(int64_t(s.edge.size()), k);
      const std::set<int64_t> distinct(s.edge.begin(), s.edge.end());
      EXPECT_EQ(int64_t(distinct.size()), k) << "k=" << k << " rng_seed=" << rng;
      EXPECT_GE(*distinct.begin(), 0);
      EXPECT_LT(*distinct.rbegin(), 200);
      EXPECT_EQ(int64_t(s.node.size()), k + 1);
    }
  }
}

TEST(NeighborSample, ReplacementDrawsKTimesAndRepeats) {
  const auto s = sample<int64_t>(small_graph<int64_t>(), {0}, {50}, true, false, 7);
  ASSERT_EQ(s.edge.size(), 50u);
  const std::set<int64_t> distinct(s.edge.begin(), s.edge.end());
  EXPECT_EQ(distinct, (std::set<int64_t>{0, 1, 2}));  // 50 draws of 3 positions: all, repeated
  // Repeated draws relabel onto one id each: the nodes are listed once, the seed first.
  EXPECT_EQ(s.node.size(), 4u);
  EXPECT_EQ(s.node[0], 0);
  EXPECT_EQ(std::set<int64_t>(s.node.begin(), s.node.end()), (std::set<int64_t>{0, 1, 2, 3}));
  const auto all = sample<int64_t>(small_graph<int64_t>(), {0}, {-1}, true);
  EXPECT_EQ(widen(all.edge), (Vec{0, 1, 2}));
}

TEST(NeighborSample, TwoOfTenIsUniform) {
  const auto g = star(10);
  const int trials = 20000;
  std::vector<int64_t> hits(10, 0);
  for (int t = 0; t < trials; ++t)
    for (const int64_t p : sample<int64_t>(g, {0}, {2}, false, false, uint64_t(t)).edge) ++hits[p];
  // Each position is taken with probability 1/5: 4000 hits, standard deviation about 57.
  for (int p = 0; p < 10; ++p) EXPECT_NEAR(double(hits[p]), 4000.0, 300.0) << "position " << p;
}

// The same rng_seed gives the same sample and another seed another, whatever the thread count.
void expect_deterministic(bool replace, const std::vector<double>* weight) {
  const auto g = star(1000);
  const std::vector<int64_t> seeds(300, 0);  // a frontier long enough to be split across threads
  const auto run = [&](uint64_t rng_seed) {
    return sample<int64_t>(g, seeds, {5, 3}, replace, false, rng_seed, weight);
  };
  const auto a = run(42), b = run(42), c = run(43);
  EXPECT_EQ(a.edge, b.edge);
  EXPECT_EQ(a.row, b.row);
  EXPECT_EQ(a.node, b.node);
  EXPECT_NE(a.edge, c.edge);
#if defined(_OPENMP)
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  const auto serial = run(42);
  omp_set_num_threads(4);
  const auto parallel = run(42);
  omp_set_num_threads(threads);
  EXPECT_EQ(serial.edge, a.edge);
  EXPECT_EQ(parallel.edge, a.edge);
  EXPECT_EQ(parallel.row, a.row);
#endif
}

TEST(NeighborSample, DeterministicBySeedAndThreadCount) { expect_deterministic(false, nullptr); }

template <typename Error>
void expect_error(const std::function<void()>& fn, const std::string& needle) {
  try {
    fn();
    ADD_FAILURE() << "no error; expected one naming " << needle;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(NeighborSample, ErrorsNameTheArgument) {
  const auto g = small_graph<int64_t>();
  expect_error<IndexError>([&] { sample<int64_t>(g, {0, 5}, {1}); }, "seed[1] = 5");
  expect_error<IndexError>([&] { sample<int64_t>(g, {-1}, {1}); }, "seed[0] = -1");
  expect_error<ValueError>([&] { sample<int64_t>(g, {0}, {2, -2}); }, "num_neighbors[1]");
  auto bad_end = g;
  bad_end.colptr.back() = 7;
  expect_error<ValueError>([&] { sample<int64_t>(bad_end, {0}, {1}); }, "colptr");
  auto decreasing = g;
  decreasing.colptr[2] = 2;  // node 1's range [3, 2)
  expect_error<ValueError>([&] { sample<int64_t>(decreasing, {1}, {1}); }, "colptr[1] = 3");
  auto bad_row = g;
  bad_row.row[1] = 9;
  expect_error<IndexError>([&] { sample<int64_t>(bad_row, {0}, {-1}); }, "row[1] = 9");
}

TEST(NeighborSampleWeighted, ZeroWeightsAreNeverDrawn) {
  const auto g = star(8);
  const std::vector<double> weight{0, 2, 0, 1, 0, 0, 3, 0};  // positives at 1, 3, 6
  for (const bool replace : {false, true}) {
    for (uint64_t rng = 0; rng < 200; ++rng) {
      for (const int64_t p : weighted_draw(g, weight, 2, replace, rng))
        EXPECT_TRUE(p == 1 || p == 3 || p == 6) << "position " << p << " replace=" << replace;
    }
  }
  // k at or above the positives without replacement, and k = -1: every positive, in CSC order.
  EXPECT_EQ(weighted_draw(g, weight, 3, false, 5), (Vec{1, 3, 6}));
  EXPECT_EQ(weighted_draw(g, weight, 7, false, 5), (Vec{1, 3, 6}));
  EXPECT_EQ(weighted_draw(g, weight, -1, false, 5), (Vec{1, 3, 6}));
  EXPECT_EQ(weighted_draw(g, weight, -1, true, 5), (Vec{1, 3, 6}));
  // No positive weight: nothing to sample, as for an isolated node.
  const std::vector<double> zeros(8, 0.0);
  for (const bool replace : {false, true}) {
    const auto s = sample<int64_t>(g, {0}, {3}, replace, false, 1, &zeros);
    EXPECT_TRUE(s.edge.empty());
    EXPECT_EQ(s.num_sampled_nodes, (Vec{1, 0}));
  }
}

TEST(NeighborSampleWeighted, EqualWeightsMatchUniformStatistics) {
  const auto g = star(10);
  const std::vector<double> weight(10, 0.25);
  const int trials = 20000;
  std::vector<int64_t> without(10, 0), with(10, 0);
  for (int t = 0; t < trials; ++t) {
    const Vec picked = weighted_draw(g, weight, 2, false, uint64_t(t));
    ASSERT_EQ(picked.size(), 2u);
    EXPECT_NE(picked[0], picked[1]);
    for (const int64_t p : picked) ++without[size_t(p)];
    for (const int64_t p : weighted_draw(g, weight, 2, true, uint64_t(t))) ++with[size_t(p)];
  }
  // Each position is taken with probability 1/5 either way: 4000 hits, standard deviation < 63.
  for (int p = 0; p < 10; ++p) {
    EXPECT_NEAR(double(without[size_t(p)]), 4000.0, 300.0) << "position " << p;
    EXPECT_NEAR(double(with[size_t(p)]), 4000.0, 300.0) << "position " << p;
  }
}

TEST(NeighborSampleWeighted, FollowsTheWeightsWithReplacement) {
  const auto g = star(4);
  const std::vector<double> weight{1, 2, 3, 4};
  const int draws = 40000;
  std::vector<int64_t> hits(4, 0);
  for (const int64_t p : weighted_draw(g, weight, draws, true, 3)) ++hits[size_t(p)];
  for (int p = 0; p < 4; ++p)  // expected draws * (p + 1) / 10; standard deviation < 100
    EXPECT_NEAR(double(hits[size_t(p)]), draws * (p + 1) / 10.0, 500.0) << "position " << p;
}

TEST(NeighborSampleWeighted, DeterministicBySeedAndThreadCount) {
  std::vector<double> weight(1000);
  for (size_t j = 0; j < weight.size(); ++j) weight[j] = double(j % 7);
  for (const bool replace : {false, true}) expect_deterministic(replace, &weight);
}

TEST(NeighborSampleWeighted, BadWeightsNameTheArgument) {
  const auto g = small_graph<int64_t>();
  std::vector<double> weight(8, 1.0);
  weight[1] = -0.5;
  expect_error<ValueError>([&] { sample<int64_t>(g, {0}, {1}, false, false, 0, &weight); },
                           "weight[1] = -0.5");
  weight[1] = std::nan("");
  expect_error<ValueError>([&] { sample<int64_t>(g, {0}, {1}, true, false, 0, &weight); },
                           "weight[1]");
  weight[1] = 1.0;
  weight[6] = INFINITY;  // node 4's range: read only when node 4 is expanded
  EXPECT_NO_THROW(sample<int64_t>(g, {0}, {-1}, false, false, 0, &weight));
  expect_error<ValueError>([&] { sample<int64_t>(g, {4}, {1}, false, false, 0, &weight); },
                           "weight[6]");
}

}  // namespace
}  // namespace iognn::test

// Host neighbour sampler (kernels/cpu/neighbor_sample.h) on hand-checked graphs: full
// neighbourhoods in CSC order, relabelling order, disjoint trees, duplicate seeds, no repeats
// without replacement, repeats with it, uniformity, determinism, and the argument errors; weighted
// sampling (zero weights, equal weights against uniform statistics, determinism, bad weights);
// temporal sampling (nothing later than its tree's seed time, 'last' takes the most recent,
// uniformity over the eligible ones, determinism, the option errors).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "core/error.h"
#include "expect_error.h"
#include "kernels/cpu/neighbor_sample.h"
#include "omp_threads.h"

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
SampledSubgraph<I> sample_with(const Csc<I>& g, const std::vector<I>& seeds,
                               const std::vector<int64_t>& fanouts,
                               const NeighborSampleOptions& options) {
  return cpu::neighbor_sample<I>(g.colptr.data(), g.num_nodes(), g.row.data(),
                                 int64_t(g.row.size()), seeds.data(), int64_t(seeds.size()),
                                 fanouts, options);
}

template <typename I>
SampledSubgraph<I> sample(const Csc<I>& g, const std::vector<I>& seeds,
                          const std::vector<int64_t>& fanouts, bool replace = false,
                          bool disjoint = false, uint64_t rng_seed = 0,
                          const std::vector<double>* weight = nullptr) {
  return sample_with(
      g, seeds, fanouts,
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
void expect_deterministic(NeighborSampleOptions options) {
  const auto g = star(1000);
  const std::vector<int64_t> seeds(300, 0);  // a frontier long enough to be split across threads
  const auto run = [&](uint64_t rng_seed) {
    options.rng_seed = rng_seed;
    return sample_with(g, seeds, {5, 3}, options);
  };
  const auto a = run(42), b = run(42), c = run(43);
  EXPECT_EQ(a.edge, b.edge);
  EXPECT_EQ(a.row, b.row);
  EXPECT_EQ(a.node, b.node);
  EXPECT_NE(a.edge, c.edge);
#if defined(_OPENMP)
  const auto serial = with_omp_threads(1, [&] { return run(42); });
  const auto parallel = with_omp_threads(4, [&] { return run(42); });
  EXPECT_EQ(serial.edge, a.edge);
  EXPECT_EQ(parallel.edge, a.edge);
  EXPECT_EQ(parallel.row, a.row);
#endif
}

TEST(NeighborSample, DeterministicBySeedAndThreadCount) { expect_deterministic({}); }

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
  for (const bool replace : {false, true})
    expect_deterministic({replace, false, 0, weight.data()});
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


// A random graph with random node and edge times, for the temporal invariants.
struct TimedGraph {
  Csc<int64_t> g;
  std::vector<int64_t> node_time, edge_time;
};

TimedGraph timed_graph(int64_t num_nodes, int64_t num_edges) {
  std::mt19937_64 gen(7);
  std::uniform_int_distribution<int64_t> node(0, num_nodes - 1), time(0, 99);
  TimedGraph t;
  std::vector<std::vector<int64_t>> in(static_cast<size_t>(num_nodes));
  for (int64_t e = 0; e < num_edges; ++e) in[size_t(node(gen))].push_back(node(gen));
  t.g.colptr.push_back(0);
  for (const auto& sources : in) {
    t.g.row.insert(t.g.row.end(), sources.begin(), sources.end());
    t.g.colptr.push_back(int64_t(t.g.row.size()));
  }
  for (int64_t v = 0; v < num_nodes; ++v) t.node_time.push_back(time(gen));
  for (int64_t e = 0; e < num_edges; ++e) t.edge_time.push_back(time(gen));
  return t;
}

NeighborSampleOptions temporal_options(const std::vector<int64_t>* node_time,
                                       const std::vector<int64_t>* edge_time,
                                       const std::vector<int64_t>* seed_time,
                                       TemporalStrategy strategy, bool replace = false,
                                       uint64_t rng_seed = 0) {
  NeighborSampleOptions o;
  o.replace = replace;
  o.disjoint = true;
  o.rng_seed = rng_seed;
  o.node_time = node_time ? node_time->data() : nullptr;
  o.edge_time = edge_time ? edge_time->data() : nullptr;
  o.seed_time = seed_time ? seed_time->data() : nullptr;
  o.temporal_strategy = strategy;
  return o;
}

TEST(NeighborSampleTemporal, NothingIsLaterThanItsTreesSeedTime) {
  const auto t = timed_graph(200, 3000);
  std::vector<int64_t> seeds, seed_time;
  for (int64_t i = 0; i < 40; ++i) {
    seeds.push_back((i * 37) % 200);
    seed_time.push_back((i * 13) % 100);
  }
  for (const auto strategy : {TemporalStrategy::kUniform, TemporalStrategy::kLast})
    for (const bool replace : {false, true})
      for (const bool default_seed_time : {false, true}) {
        // Node-level times; the seed times given, or (by default) the seeds' own node times.
        const auto s = sample_with(t.g, seeds, {4, 3, -1},
                                   temporal_options(&t.node_time, nullptr,
                                                    default_seed_time ? nullptr : &seed_time,
                                                    strategy, replace, 5));
        const auto tree_time = [&](int64_t local) {
          const int64_t tree = s.batch[size_t(local)];
          return default_seed_time ? t.node_time[size_t(seeds[size_t(tree)])]
                                   : seed_time[size_t(tree)];
        };
        ASSERT_GT(s.row.size(), seeds.size());
        for (size_t l = seeds.size(); l < s.node.size(); ++l)
          EXPECT_LE(t.node_time[size_t(s.node[l])], tree_time(int64_t(l)));
        for (size_t e = 0; e < s.row.size(); ++e)
          EXPECT_EQ(s.batch[size_t(s.row[e])], s.batch[size_t(s.col[e])]);
        // Edge-level times: every sampled edge's time, against the tree of its frontier node.
        const auto se = sample_with(
            t.g, seeds, {4, 3, -1},
            temporal_options(nullptr, &t.edge_time, &seed_time, strategy, replace, 5));
        ASSERT_GT(se.row.size(), 0u);
        for (size_t e = 0; e < se.row.size(); ++e)
          EXPECT_LE(t.edge_time[size_t(se.edge[e])],
                    seed_time[size_t(se.batch[size_t(se.col[e])])]);
      }
}

// star(10): node 0's in-edges 0 .. 9 (from nodes 1 .. 10) with these times; seed time 9 makes
// every one but position 6 (time 12) eligible, and three positions (1, 3, 8) tie at time 9.
const std::vector<int64_t> kStarTimes{5, 9, 1, 9, 3, 7, 12, 0, 9, 2};

TEST(NeighborSampleTemporal, LastTakesTheMostRecentTiesToTheLaterPosition) {
  const auto g = star(10);
  std::vector<int64_t> node_time{9};  // node 0 (the seed) at time 9, node u at kStarTimes[u - 1]
  node_time.insert(node_time.end(), kStarTimes.begin(), kStarTimes.end());
  const std::vector<int64_t> seed_time{9};
  const auto last = TemporalStrategy::kLast;
  for (const bool replace : {false, true}) {
    const auto by_node = [&](int64_t k) {
      return widen(sample_with(g, Vec{0}, {k},
                               temporal_options(&node_time, nullptr, nullptr, last, replace))
                       .edge);
    };
    const auto by_edge = [&](int64_t k) {
      return widen(sample_with(g, Vec{0}, {k},
                               temporal_options(nullptr, &kStarTimes, &seed_time, last, replace))
                       .edge);
    };
    for (const std::function<Vec(int64_t)>& draw :
         {std::function<Vec(int64_t)>(by_node), std::function<Vec(int64_t)>(by_edge)}) {
      EXPECT_EQ(draw(-1), (Vec{0, 1, 2, 3, 4, 5, 7, 8, 9}));  // every eligible one, CSC order
      if (replace) {  // k draws among the k most recent
        for (const int64_t p : draw(2)) EXPECT_TRUE(p == 3 || p == 8) << p;
        continue;
      }
      EXPECT_EQ(draw(2), (Vec{3, 8}));
      EXPECT_EQ(draw(4), (Vec{1, 3, 5, 8}));
      EXPECT_EQ(draw(0), Vec{});
    }
  }
}

TEST(NeighborSampleTemporal, UniformIsUniformOverTheEligible) {
  const auto g = star(10);
  const std::vector<int64_t> seed_time{9};
  const int trials = 18000;
  std::vector<int64_t> hits(10, 0);
  for (int t = 0; t < trials; ++t)
    for (const int64_t p : sample_with(g, Vec{0}, {3},
                                       temporal_options(nullptr, &kStarTimes, &seed_time,
                                                        TemporalStrategy::kUniform, false,
                                                        uint64_t(t)))
                               .edge)
      ++hits[size_t(p)];
  // 9 eligible positions, 3 taken: each with probability 1/3 (6000 hits, sd about 63).
  for (int p = 0; p < 10; ++p)
    EXPECT_NEAR(double(hits[size_t(p)]), p == 6 ? 0.0 : 6000.0, 400.0) << "position " << p;
}

TEST(NeighborSampleTemporal, DeterministicBySeedAndThreadCount) {
  std::vector<int64_t> edge_time(1000);
  for (size_t p = 0; p < edge_time.size(); ++p) edge_time[p] = int64_t(p % 11);
  const std::vector<int64_t> seed_time(300, 6);
  for (const bool replace : {false, true})
    expect_deterministic(temporal_options(nullptr, &edge_time, &seed_time,
                                          TemporalStrategy::kUniform, replace));
}

TEST(NeighborSampleTemporal, OptionErrorsNameTheArgument) {
  const auto g = small_graph<int64_t>();
  const std::vector<int64_t> node_time(5, 0), edge_time(8, 0), seed_time(1, 0);
  const auto uniform = TemporalStrategy::kUniform;
  const auto expect_value_error = [&](NeighborSampleOptions o, const std::string& needle) {
    expect_error<ValueError>([&] { sample_with(g, Vec{0}, {1}, o); }, needle);
  };
  expect_value_error(temporal_options(&node_time, &edge_time, &seed_time, uniform), "not both");
  expect_value_error(temporal_options(nullptr, nullptr, &seed_time, uniform),
                     "seed_time needs node_time or edge_time");
  expect_value_error(temporal_options(nullptr, &edge_time, nullptr, uniform),
                     "edge_time needs seed_time");
  auto joint = temporal_options(&node_time, nullptr, nullptr, uniform);
  joint.disjoint = false;
  expect_value_error(joint, "disjoint=True");
  const std::vector<double> weight(8, 1.0);
  auto weighted = temporal_options(&node_time, nullptr, nullptr, uniform);
  weighted.weight = weight.data();
  expect_value_error(weighted, "weighted temporal sampling");
  // Node-level times read row[p] before the draws: a bad row value is named there too.
  auto bad_row = g;
  bad_row.row[1] = 9;
  const auto by_node_time = temporal_options(&node_time, nullptr, nullptr, uniform);
  expect_error<IndexError>([&] { sample_with(bad_row, Vec{0}, {1}, by_node_time); }, "row[1] = 9");
}

}  // namespace
}  // namespace iognn::test

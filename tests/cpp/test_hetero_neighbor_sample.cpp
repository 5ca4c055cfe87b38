// Host heterogeneous neighbour sampler (kernels/cpu/hetero_neighbor_sample.h) on hand-checked
// graphs: full neighbourhoods per edge type and hop, per-type relabelling in first-seen order
// (seeds first, then by edge type), a single-type graph matching the homogeneous sampler, disjoint
// trees numbered across the seed sets, fan-out bounds, determinism by seed and thread count,
// temporal node times, and the argument errors.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "core/error.h"
#include "expect_error.h"
#include "kernels/cpu/hetero_neighbor_sample.h"
#include "kernels/cpu/neighbor_sample.h"
#include "omp_threads.h"

namespace iognn::test {
namespace {

using I = int64_t;

struct EdgeCsc {
  int64_t src, dst;
  std::vector<I> colptr, row;
};

// Node types: 0 = paper (3 nodes), 1 = author (3 nodes), 2 = venue (2 nodes, no edges).
// writes (author -> paper): paper 0 <- {0, 1}, paper 1 <- {1}, paper 2 <- {}.
// rev_writes (paper -> author): author 0 <- {0}, author 1 <- {0, 1}, author 2 <- {}.
// cites (paper -> paper): paper 0 <- {2}, paper 1 <- {}, paper 2 <- {}.
std::vector<EdgeCsc> academic() {
  return {{1, 0, {0, 2, 3, 3}, {0, 1, 1}},
          {0, 1, {0, 1, 3, 3}, {0, 0, 1}},
          {0, 0, {0, 1, 1, 1}, {2}}};
}
const std::vector<int64_t> kNumNodes{3, 3, 2};

HeteroSampledSubgraph<I> sample(const std::vector<EdgeCsc>& graph, std::vector<int64_t> num_nodes,
                                const std::vector<std::pair<int64_t, std::vector<I>>>& seeds,
                                const std::vector<std::vector<int64_t>>& fanouts,
                                HeteroSampleOptions options = {}) {
  std::vector<HeteroEdgeType<I>> edge_types;
  for (const EdgeCsc& e : graph)
    edge_types.push_back({e.src, e.dst, e.colptr.data(), e.row.data(), int64_t(e.row.size())});
  std::vector<HeteroSeeds<I>> seed_sets;
  for (const auto& [type, ids] : seeds)
    seed_sets.push_back({type, ids.data(), int64_t(ids.size())});
  return cpu::hetero_neighbor_sample<I>(num_nodes, edge_types, seed_sets, fanouts, options);
}

TEST(HeteroNeighborSample, FullNeighbourhoodsRelabelPerTypeInFirstSeenOrder) {
  const auto out = sample(academic(), kNumNodes, {{0, {0}}}, {{-1, -1}, {-1, -1}, {-1, -1}});
  const auto& paper = out.nodes[0];
  const auto& author = out.nodes[1];
  // Hop 0 from paper 0: writes finds authors 0, 1; cites finds paper 2. Hop 1: from authors 0, 1,
  // rev_writes finds paper 1 (paper 0 keeps its id); from paper 2, writes and cites find nothing.
  EXPECT_EQ(paper.node, (std::vector<I>{0, 2, 1}));
  EXPECT_EQ(paper.num_sampled_nodes, (std::vector<int64_t>{1, 1, 1}));
  EXPECT_EQ(author.node, (std::vector<I>{0, 1}));
  EXPECT_EQ(author.num_sampled_nodes, (std::vector<int64_t>{0, 2, 0}));
  EXPECT_TRUE(out.nodes[2].node.empty());
  EXPECT_EQ(out.nodes[2].num_sampled_nodes, (std::vector<int64_t>{0, 0, 0}));
  const auto& writes = out.edges[0];
  EXPECT_EQ(writes.edge, (std::vector<I>{0, 1}));
  EXPECT_EQ(writes.row, (std::vector<I>{0, 1}));  // author local ids
  EXPECT_EQ(writes.col, (std::vector<I>{0, 0}));  // paper local ids
  EXPECT_EQ(writes.num_sampled_edges, (std::vector<int64_t>{2, 0}));
  const auto& rev = out.edges[1];
  EXPECT_EQ(rev.edge, (std::vector<I>{0, 1, 2}));  // author 0 <- paper 0; author 1 <- 0, 1
  EXPECT_EQ(rev.row, (std::vector<I>{0, 0, 2}));
  EXPECT_EQ(rev.col, (std::vector<I>{0, 1, 1}));
  EXPECT_EQ(rev.num_sampled_edges, (std::vector<int64_t>{0, 3}));
  EXPECT_EQ(out.edges[2].num_sampled_edges, (std::vector<int64_t>{1, 0}));
  EXPECT_EQ(out.edges[2].row, (std::vector<I>{1}));
}

TEST(HeteroNeighborSample, ANodeFoundByTwoEdgeTypesInOneHopKeepsTheFirstId) {
  // Two edge types into paper 0, from authors {2, 1} and {1, 0}: author 1 keeps the first's id.
  const std::vector<EdgeCsc> graph{{1, 0, {0, 2, 2, 2}, {2, 1}}, {1, 0, {0, 2, 2, 2}, {1, 0}}};
  const auto out = sample(graph, kNumNodes, {{0, {0}}}, {{-1}, {-1}});
  EXPECT_EQ(out.nodes[1].node, (std::vector<I>{2, 1, 0}));
  EXPECT_EQ(out.edges[0].row, (std::vector<I>{0, 1}));
  EXPECT_EQ(out.edges[1].row, (std::vector<I>{1, 2}));
}

TEST(HeteroNeighborSample, OneTypeFullNeighbourhoodsMatchTheHomogeneousSampler) {
  const std::vector<I> colptr{0, 3, 5, 6, 6, 8}, row{1, 2, 3, 0, 4, 1, 4, 0};
  const std::vector<I> seeds{0, 3};
  for (const bool disjoint : {false, true}) {
    NeighborSampleOptions options;
    options.disjoint = disjoint;
    const auto homo =
        cpu::neighbor_sample<I>(colptr.data(), 5, row.data(), 8, seeds.data(), 2, {-1, -1}, options);
    HeteroSampleOptions hetero_options;
    hetero_options.disjoint = disjoint;
    const auto out = sample({{0, 0, colptr, row}}, {5}, {{0, seeds}}, {{-1, -1}}, hetero_options);
    EXPECT_EQ(out.nodes[0].node, homo.node);
    EXPECT_EQ(out.nodes[0].batch, homo.batch);
    EXPECT_EQ(out.nodes[0].num_sampled_nodes, homo.num_sampled_nodes);
    EXPECT_EQ(out.edges[0].row, homo.row);
    EXPECT_EQ(out.edges[0].col, homo.col);
    EXPECT_EQ(out.edges[0].edge, homo.edge);
    EXPECT_EQ(out.edges[0].num_sampled_edges, homo.num_sampled_edges);
  }
}

TEST(HeteroNeighborSample, DisjointNumbersTheTreesAcrossTheSeedSets) {
  HeteroSampleOptions options;
  options.disjoint = true;
  // Seed sets: author 1, then papers 0 and 0 (three trees: 0, 1, 2).
  const auto out = sample(academic(), kNumNodes, {{1, {1}}, {0, {0, 0}}}, {{-1}, {-1}, {-1}},
                          options);
  EXPECT_EQ(out.nodes[0].node, (std::vector<I>{0, 0, 0, 1, 2, 2}));
  EXPECT_EQ(out.nodes[0].batch, (std::vector<I>{1, 2, 0, 0, 1, 2}));
  EXPECT_EQ(out.nodes[1].node, (std::vector<I>{1, 0, 1, 0, 1}));
  EXPECT_EQ(out.nodes[1].batch, (std::vector<I>{0, 1, 1, 2, 2}));
}

// A paper with `degree` authors, sampled by two edge types over the same authors.
std::vector<EdgeCsc> star(int64_t degree) {
  EdgeCsc e{1, 0, {0, degree}, {}};
  for (I u = 0; u < degree; ++u) e.row.push_back(u);
  return {e, e};
}

TEST(HeteroNeighborSample, FanOutsBoundEachEdgeTypeAndEdgeTypesDrawIndependently) {
  int same = 0;
  for (uint64_t s = 0; s < 200; ++s) {
    HeteroSampleOptions options;
    options.rng_seed = s;
    const auto out = sample(star(50), {1, 50}, {{0, {0}}}, {{3}, {5}}, options);
    EXPECT_EQ(out.edges[0].edge.size(), 3u);
    EXPECT_EQ(out.edges[1].edge.size(), 5u);
    same += std::equal(out.edges[0].edge.begin(), out.edges[0].edge.end(),
                       out.edges[1].edge.begin());
  }
  EXPECT_LT(same, 5);
}

TEST(HeteroNeighborSample, DeterministicBySeedAndThreadCount) {
  const std::vector<I> seeds(300, 0);
  const auto run = [&](uint64_t rng_seed) {
    HeteroSampleOptions options;
    options.rng_seed = rng_seed;
    return sample(star(1000), {1, 1000}, {{0, seeds}}, {{5}, {2}}, options);
  };
  const auto a = run(7), b = run(7), c = run(8);
  EXPECT_EQ(a.edges[0].edge, b.edges[0].edge);
  EXPECT_EQ(a.nodes[1].node, b.nodes[1].node);
  EXPECT_NE(a.edges[0].edge, c.edges[0].edge);
#if defined(_OPENMP)
  const auto serial = with_omp_threads(1, [&] { return run(7); });
  const auto parallel = with_omp_threads(4, [&] { return run(7); });
  EXPECT_EQ(serial.edges[1].edge, a.edges[1].edge);
  EXPECT_EQ(parallel.edges[1].edge, a.edges[1].edge);
  EXPECT_EQ(parallel.nodes[1].node, a.nodes[1].node);
#endif
}

TEST(HeteroNeighborSample, NodeTimesFilterEachTreeBySeedTime) {
  // Author times 0 .. 49; paper 0 seeded twice, at times 10 and 30.
  std::vector<int64_t> author_time(50), paper_time{0};
  for (int64_t u = 0; u < 50; ++u) author_time[size_t(u)] = u;
  const std::vector<int64_t> seed_time{10, 30};
  HeteroSampleOptions options;
  options.disjoint = true;
  options.node_time = {paper_time.data(), author_time.data()};
  std::vector<HeteroEdgeType<I>> edge_types;
  const auto graph = star(50);
  edge_types.push_back({1, 0, graph[0].colptr.data(), graph[0].row.data(), 50});
  const std::vector<I> seeds{0, 0};
  const std::vector<HeteroSeeds<I>> seed_sets{{0, seeds.data(), 2, seed_time.data()}};
  const auto out = cpu::hetero_neighbor_sample<I>({1, 50}, edge_types, seed_sets, {{-1}}, options);
  const auto& authors = out.nodes[1];
  ASSERT_EQ(authors.node.size(), 11u + 31u);
  for (size_t l = 0; l < authors.node.size(); ++l)
    EXPECT_LE(author_time[size_t(authors.node[l])], seed_time[size_t(authors.batch[l])]);
}

TEST(HeteroNeighborSample, ErrorsNameTheArgument) {
  const auto g = academic();
  const std::vector<std::vector<int64_t>> one{{1}, {1}, {1}};
  expect_error<IndexError>([&] { sample(g, kNumNodes, {{0, {0, 3}}}, one); }, "seeds[0][1] = 3");
  expect_error<ValueError>([&] { sample(g, kNumNodes, {{4, {0}}}, one); }, "seed_types[0] = 4");
  expect_error<ValueError>([&] { sample(g, kNumNodes, {{0, {0}}}, {{1}, {-2}, {1}}); },
                           "num_neighbors[1][0]");
  expect_error<ValueError>([&] { sample(g, kNumNodes, {{0, {0}}}, {{1}, {1, 1}, {1}}); },
                           "num_neighbors[1] has 2 hops");
  auto bad_row = g;
  bad_row[1].row[2] = 7;
  expect_error<IndexError>([&] { sample(bad_row, kNumNodes, {{1, {1}}}, one); }, "rows[1][2] = 7");
  auto bad_end = g;
  bad_end[2].colptr.back() = 2;
  expect_error<ValueError>([&] { sample(bad_end, kNumNodes, {{0, {0}}}, one); }, "colptrs[2]");
  auto bad_type = g;
  bad_type[0].src = 3;
  expect_error<ValueError>([&] { sample(bad_type, kNumNodes, {{0, {0}}}, one); },
                           "edge_types[0] = (3, 0)");
  HeteroSampleOptions timed;
  const std::vector<int64_t> times{0, 0, 0};
  timed.node_time = {times.data(), times.data(), nullptr};
  expect_error<ValueError>([&] { sample(g, kNumNodes, {{0, {0}}}, one, timed); },
                           "needs disjoint=True");
  timed.disjoint = true;
  expect_error<ValueError>([&] { sample(g, kNumNodes, {{2, {0}}}, one, timed); },
                           "seed_times[0] is needed");
}

}  // namespace
}  // namespace iognn::test

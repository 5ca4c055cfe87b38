// Host graph build (graph.h) against the brute-force reference of graph_reference.h, the self-loop
// rules, validation, and compute_graph_stats.
#include <gtest/gtest.h>

#include <limits>
#include <string>

#include "core/error.h"
#include "core/graph.h"
#include "graph_reference.h"

namespace iognn::test {
namespace {

// Invariants that hold whatever the reference says: the two layouts describe the same edges.
void expect_consistent(const ReferenceGraph& g, const std::vector<int64_t>& src,
                       const std::vector<int64_t>& dst, int64_t num_src, int64_t num_dst) {
  const int64_t E = int64_t(g.col.size());
  ASSERT_EQ(g.rowptr.size(), size_t(num_dst + 1));
  ASSERT_EQ(g.colptr.size(), size_t(num_src + 1));
  EXPECT_EQ(g.rowptr.front(), 0);
  EXPECT_EQ(g.rowptr.back(), E);
  EXPECT_EQ(g.colptr.back(), E);
  std::vector<int> seen(E, 0);
  for (int64_t j = 0; j < num_src; ++j) {
    for (int64_t q = g.colptr[j]; q < g.colptr[j + 1]; ++q) {
      const int64_t p = g.csc2csr[q];
      ASSERT_TRUE(p >= 0 && p < E);
      ++seen[p];
      EXPECT_EQ(g.col[p], j);  // transposed row j lists out-edges of source j
      EXPECT_TRUE(g.rowptr[g.row[q]] <= p && p < g.rowptr[g.row[q] + 1]);  // row = its destination
      if (q > g.colptr[j]) EXPECT_LT(g.csc2csr[q - 1], p);  // sorted by CSR position
    }
  }
  for (int64_t p = 0; p < E; ++p) EXPECT_EQ(seen[p], 1) << "csc2csr is not a permutation";
  for (int64_t i = 0; i < num_dst; ++i) {
    for (int64_t p = g.rowptr[i]; p < g.rowptr[i + 1]; ++p) {
      const int64_t k = g.edge_map[g.eid[p]];
      if (k >= 0) {  // an input edge: same endpoints
        EXPECT_EQ(src[k], g.col[p]);
        EXPECT_EQ(dst[k], i);
      } else {  // an added loop
        EXPECT_EQ(g.col[p], i);
      }
      if (p > g.rowptr[i])
        EXPECT_TRUE(g.col[p - 1] < g.col[p] || (g.col[p - 1] == g.col[p] && g.eid[p - 1] < g.eid[p]));
    }
  }
}

struct RandomCase {
  int64_t num_src, num_dst, num_edges;
};

class RandomGraphs : public ::testing::TestWithParam<RandomCase> {};

TEST_P(RandomGraphs, MatchReferenceInEveryModeLayoutAndIndexType) {
  const RandomCase c = GetParam();
  const RandomEdges e = random_edges(c.num_src, c.num_dst, c.num_edges, 42 + c.num_edges);
  for (SelfLoops mode : kSelfLoopModes) {
    SCOPED_TRACE(int(mode));
    const ReferenceGraph want = reference_graph(e.src, e.dst, c.num_src, c.num_dst, mode);
    expect_consistent(want, e.src, e.dst, c.num_src, c.num_dst);
    const EdgeList<int64_t> rows(e.src, e.dst);
    const EdgeList<int32_t> edge_major(e.src, e.dst, /*edge_major=*/true, /*gap=*/3);
    expect_equal(core_graph<int32_t>(rows.view, c.num_src, c.num_dst, mode), want);
    expect_equal(core_graph<int64_t>(rows.view, c.num_src, c.num_dst, mode), want);
    expect_equal(core_graph<int32_t>(edge_major.view, c.num_src, c.num_dst, mode), want);
    expect_equal(core_graph<int64_t>(edge_major.view, c.num_src, c.num_dst, mode), want);
  }
}

INSTANTIATE_TEST_SUITE_P(Sizes, RandomGraphs,
                         ::testing::Values(RandomCase{1, 1, 5}, RandomCase{10, 10, 40},
                                           RandomCase{57, 57, 500}, RandomCase{300, 300, 300},
                                           RandomCase{25, 9, 70}, RandomCase{7, 31, 50},
                                           RandomCase{1000, 1000, 20000}),
                         [](const ::testing::TestParamInfo<RandomCase>& info) {
                           const RandomCase& c = info.param;
                           return std::to_string(c.num_src) + "x" + std::to_string(c.num_dst) +
                                  "_E" + std::to_string(c.num_edges);
                         });

TEST(GraphBuild, AddRemainingKeepsTheLastInputLoop) {
  // Node 1 has loops at input 0 and 2, node 2 at input 4; node 0 has none.
  const std::vector<int64_t> src{1, 0, 1, 2, 2}, dst{1, 2, 1, 0, 2};
  const EdgeList<int64_t> el(src, dst);
  const ReferenceGraph g = core_graph<int32_t>(el.view, 3, 3, SelfLoops::kAddRemaining);
  // Augmented order: non-loop edges 1 and 3, then loops of nodes 0, 1, 2.
  EXPECT_EQ(g.edge_map, (std::vector<int64_t>{1, 3, -1, 2, 4}));
  expect_equal(g, reference_graph(src, dst, 3, 3, SelfLoops::kAddRemaining));
}

TEST(GraphBuild, ReplaceDropsInputLoopsAndAddsFreshOnes) {
  const std::vector<int64_t> src{1, 0, 1, 2}, dst{1, 2, 1, 0};
  const EdgeList<int64_t> el(src, dst);
  const ReferenceGraph g = core_graph<int64_t>(el.view, 3, 3, SelfLoops::kReplace);
  EXPECT_EQ(g.edge_map, (std::vector<int64_t>{1, 3, -1, -1, -1}));
  EXPECT_EQ(g.rowptr, (std::vector<int64_t>{0, 2, 3, 5}));  // row 0: 0->0, 2->0; row 2: 0->2, 2->2
  EXPECT_EQ(g.col, (std::vector<int64_t>{0, 2, 1, 0, 2}));
  EXPECT_EQ(g.eid, (std::vector<int64_t>{2, 1, 3, 0, 4}));
}

TEST(GraphBuild, KeepLeavesEdgesAndDuplicatesAlone) {
  const std::vector<int64_t> src{2, 2, 0, 2}, dst{1, 1, 1, 1};
  const EdgeList<int32_t> el(src, dst);
  const ReferenceGraph g = core_graph<int32_t>(el.view, 3, 3, SelfLoops::kKeep);
  EXPECT_EQ(g.edge_map, (std::vector<int64_t>{0, 1, 2, 3}));
  EXPECT_EQ(g.col, (std::vector<int64_t>{0, 2, 2, 2}));  // sorted by source, ties by id
  EXPECT_EQ(g.eid, (std::vector<int64_t>{2, 0, 1, 3}));
}

TEST(GraphBuild, BipartiteLoopsCoverTheSmallerSide) {
  // 4 sources, 2 destinations: loops on nodes 0 and 1 only; the input loop (1, 1) counts.
  const std::vector<int64_t> src{3, 1, 0}, dst{0, 1, 1};
  const EdgeList<int64_t> el(src, dst);
  const GraphSizes sz = plan_graph(el.view, 4, 2, SelfLoops::kAddRemaining);
  EXPECT_EQ(sz.num_loops, 2);
  EXPECT_EQ(sz.num_edges, 4);
  const ReferenceGraph g = core_graph<int32_t>(el.view, 4, 2, SelfLoops::kAddRemaining);
  EXPECT_EQ(g.edge_map, (std::vector<int64_t>{0, 2, -1, 1}));
  EXPECT_EQ(g.colptr.size(), 5u);
  EXPECT_EQ(g.rowptr.size(), 3u);
  expect_equal(g, reference_graph(src, dst, 4, 2, SelfLoops::kAddRemaining));
}

TEST(GraphBuild, EmptyGraph) {
  const EdgeList<int64_t> el({}, {});
  for (SelfLoops mode : kSelfLoopModes) {
    const ReferenceGraph g = core_graph<int32_t>(el.view, 5, 5, mode);
    const int64_t loops = mode == SelfLoops::kKeep ? 0 : 5;
    EXPECT_EQ(int64_t(g.col.size()), loops);
    EXPECT_EQ(g.rowptr.size(), 6u);
    EXPECT_EQ(g.rowptr.back(), loops);
    expect_equal(g, reference_graph({}, {}, 5, 5, mode));
  }
}

TEST(GraphBuild, ZeroNodes) {
  const EdgeList<int64_t> el({}, {});
  for (SelfLoops mode : kSelfLoopModes) {
    const GraphSizes sz = plan_graph(el.view, 0, 0, mode);
    EXPECT_EQ(sz.num_edges, 0);
    EXPECT_EQ(sz.num_loops, 0);
    const ReferenceGraph g = core_graph<int64_t>(el.view, 0, 0, mode);
    EXPECT_EQ(g.rowptr, std::vector<int64_t>{0});
    EXPECT_EQ(g.colptr, std::vector<int64_t>{0});
    EXPECT_TRUE(g.col.empty());
  }
}

TEST(GraphBuild, Int32AndInt64IndicesAndInputsAgree) {
  const RandomEdges e = random_edges(200, 150, 3000, 7);
  const EdgeList<int32_t> narrow(e.src, e.dst);
  const EdgeList<int64_t> wide(e.src, e.dst, /*edge_major=*/true);
  for (SelfLoops mode : kSelfLoopModes) {
    const ReferenceGraph a = core_graph<int32_t>(narrow.view, 200, 150, mode);
    expect_equal(core_graph<int64_t>(narrow.view, 200, 150, mode), a);
    expect_equal(core_graph<int64_t>(wide.view, 200, 150, mode), a);
  }
}

TEST(GraphSizes, Int32Rule) {
  GraphSizes sz;
  sz.num_src = sz.num_dst = 100;
  sz.num_edges = sz.num_input_edges = 1000;
  EXPECT_TRUE(sz.fits_int32());
  sz.num_edges = int64_t(1) << 31;
  EXPECT_FALSE(sz.fits_int32());
  sz.num_edges = 10;
  sz.num_dst = std::numeric_limits<int32_t>::max();  // rowptr would need num_dst + 1 entries
  EXPECT_FALSE(sz.fits_int32());
}

// ---- validation ------------------------------------------------------------------------------

template <typename Fn>
std::string index_error(Fn&& fn) {
  try {
    fn();
  } catch (const IndexError& e) {
    return e.what();
  }
  ADD_FAILURE() << "no IndexError";
  return {};
}

TEST(GraphValidation, NegativeIndex) {
  const EdgeList<int64_t> el({0, 1, -3}, {1, 2, 0});
  EXPECT_EQ(index_error([&] { plan_graph(el.view, 5, 5, SelfLoops::kKeep); }),
            "edge_index[0][2] = -3 is out of range for 5 source nodes");
  EXPECT_EQ(index_error([&] {
              int64_t s, d;
              infer_num_nodes(el.view, &s, &d);
            }),
            "edge_index[0][2] = -3 is negative");
  const EdgeList<int32_t> dst_neg({0, 1}, {1, -1});
  EXPECT_EQ(index_error([&] { plan_graph(dst_neg.view, 5, 5, SelfLoops::kReplace); }),
            "edge_index[1][1] = -1 is out of range for 5 destination nodes");
}

TEST(GraphValidation, OutOfRangeReportsTheFirstEdgeSourceFirst) {
  // Edge 1 has both ends out of range (the source is reported); edge 2's destination too.
  const EdgeList<int64_t> el({0, 9, 1}, {1, 7, 8});
  EXPECT_EQ(index_error([&] { plan_graph(el.view, 4, 6, SelfLoops::kKeep); }),
            "edge_index[0][1] = 9 is out of range for 4 source nodes");
  const EdgeList<int64_t> bip({3, 0}, {0, 2});
  EXPECT_EQ(index_error([&] { plan_graph(bip.view, 4, 2, SelfLoops::kKeep); }),
            "edge_index[1][1] = 2 is out of range for 2 destination nodes");
}

TEST(GraphValidation, NegativeSizesAreValueErrors) {
  const EdgeList<int64_t> el({}, {});
  EXPECT_THROW(plan_graph(el.view, -1, 3, SelfLoops::kKeep), ValueError);
  EXPECT_THROW(plan_graph(el.view, 3, -2, SelfLoops::kKeep), ValueError);
  EdgeIndexView bad = el.view;
  bad.num_edges = -1;
  EXPECT_THROW(plan_graph(bad, 3, 3, SelfLoops::kKeep), ValueError);
}

TEST(GraphValidation, InferNumNodes) {
  const EdgeList<int32_t> el({4, 0, 2}, {1, 6, 1});
  int64_t s = 0, d = 0;
  infer_num_nodes(el.view, &s, &d);
  EXPECT_EQ(s, 5);
  EXPECT_EQ(d, 7);
  const EdgeList<int32_t> empty({}, {});
  infer_num_nodes(empty.view, &s, &d);
  EXPECT_EQ(s, 0);
  EXPECT_EQ(d, 0);
}

// ---- statistics ------------------------------------------------------------------------------

// Stats of a core-built graph (int32 indices).
GraphStats stats_of(const std::vector<int64_t>& src, const std::vector<int64_t>& dst,
                    int64_t num_src, int64_t num_dst, bool with_arrays = true) {
  const EdgeList<int64_t> el(src, dst);
  const GraphSizes sz = plan_graph(el.view, num_src, num_dst, SelfLoops::kKeep);
  std::vector<int32_t> rowptr(num_dst + 1), colptr(num_src + 1), col(sz.num_edges),
      eid(sz.num_edges), row(sz.num_edges), csc2csr(sz.num_edges), edge_map(sz.num_edges);
  build_graph_cpu<int32_t>(el.view, sz, SelfLoops::kKeep,
                           {rowptr.data(), col.data(), eid.data(), colptr.data(), row.data(),
                            csc2csr.data(), edge_map.data()});
  return compute_graph_stats<int32_t>(rowptr.data(), num_dst, colptr.data(), num_src,
                                      with_arrays ? col.data() : nullptr,
                                      with_arrays ? row.data() : nullptr);
}

TEST(GraphStats, StaircaseDegrees) {
  // Destination i (0..99) receives edges from sources 0..i-1: in-degree i, out-degree 99 - j.
  std::vector<int64_t> src, dst;
  for (int64_t i = 0; i < 100; ++i)
    for (int64_t j = 0; j < i; ++j) {
      src.push_back(j);
      dst.push_back(i);
    }
  const GraphStats st = stats_of(src, dst, 100, 100);
  EXPECT_EQ(st.max_in_degree, 99);
  EXPECT_EQ(st.max_out_degree, 99);
  EXPECT_DOUBLE_EQ(st.mean_in_degree, 49.5);
  // Smallest d with #(deg <= d) >= q * n: #(deg <= d) = d + 1.
  EXPECT_EQ(st.p50_in_degree, 49);
  EXPECT_EQ(st.p90_in_degree, 89);
  EXPECT_EQ(st.p99_in_degree, 98);
  EXPECT_EQ(st.num_isolated_dst, 1);
  const int64_t buckets[] = {1, 1, 2, 4, 8, 16, 32, 36};  // d = 0, 1, [2,4), ..., [64, 128)
  for (int b = 0; b < GraphStats::kBuckets; ++b)
    EXPECT_EQ(st.in_degree_log2_buckets[b], b < 8 ? buckets[b] : 0) << "bucket " << b;
  EXPECT_FALSE(st.symmetric);
}

TEST(GraphStats, PercentilesOnSkewedDegrees) {
  // 10 destinations: nine with one in-edge, one hub with 1000.
  std::vector<int64_t> src, dst;
  for (int64_t i = 0; i < 9; ++i) {
    src.push_back(i);
    dst.push_back(i);
  }
  for (int64_t k = 0; k < 1000; ++k) {
    src.push_back(k % 10);
    dst.push_back(9);
  }
  const GraphStats st = stats_of(src, dst, 10, 10);
  EXPECT_EQ(st.p50_in_degree, 1);
  EXPECT_EQ(st.p90_in_degree, 1);    // 9 of 10 rows have degree <= 1
  EXPECT_EQ(st.p99_in_degree, 1000);  // 9.9 rows needed
  EXPECT_EQ(st.max_in_degree, 1000);
  EXPECT_EQ(st.in_degree_log2_buckets[1], 9);
  EXPECT_EQ(st.in_degree_log2_buckets[10], 1);  // 512 <= 1000 < 1024
  EXPECT_DOUBLE_EQ(st.mean_in_degree, 100.9);
}

TEST(GraphStats, SymmetricFlag) {
  // Undirected (each edge in both directions, a duplicate pair and a loop included).
  const std::vector<int64_t> src{0, 1, 1, 2, 0, 1, 3}, dst{1, 0, 2, 1, 1, 0, 3};
  EXPECT_TRUE(stats_of(src, dst, 4, 4).symmetric);
  EXPECT_FALSE(stats_of(src, dst, 4, 4, /*with_arrays=*/false).symmetric);
  const std::vector<int64_t> dsrc{0, 1, 1, 2, 0}, ddst{1, 0, 2, 1, 1};  // (0,1) twice, (1,0) once
  EXPECT_FALSE(stats_of(dsrc, ddst, 3, 3).symmetric);
  EXPECT_FALSE(stats_of({0}, {0}, 2, 1).symmetric);  // bipartite
}

TEST(GraphStats, EmptyAndZeroNodes) {
  const GraphStats empty = stats_of({}, {}, 4, 4);
  EXPECT_EQ(empty.max_in_degree, 0);
  EXPECT_EQ(empty.num_isolated_dst, 4);
  EXPECT_EQ(empty.in_degree_log2_buckets[0], 4);
  EXPECT_EQ(empty.p99_in_degree, 0);
  const GraphStats none = stats_of({}, {}, 0, 0);
  EXPECT_EQ(none.mean_in_degree, 0.0);
  EXPECT_EQ(none.num_isolated_dst, 0);
}

}  // namespace
}  // namespace iognn::test

// Test helpers for graph construction: random edge lists, a view over them, a brute-force
// reference of graph.h's contract written independently of graph_build.cpp (sorts instead of
// counting sorts, PyG's self-loop rules spelled out edge by edge), and the comparison the host and
// device build tests share.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <tuple>
#include <vector>

#include "core/graph.h"

namespace iognn::test {

// A [2, E] edge index stored in a vector with the given layout: edge-major (stride_row = 1,
// stride_edge = 2 * gap) or row-major (stride_row = E * gap, stride_edge = gap).
template <typename T>
struct EdgeList {
  std::vector<T> storage;
  EdgeIndexView view;

  EdgeList(const std::vector<int64_t>& src, const std::vector<int64_t>& dst, bool edge_major = false,
           int64_t gap = 1) {
    const int64_t E = int64_t(src.size());
    storage.assign(std::max<int64_t>(2 * E * gap, 1), T(-99));
    view.is_int64 = sizeof(T) == 8;
    view.num_edges = E;
    view.stride_row = edge_major ? 1 : E * gap;
    view.stride_edge = edge_major ? 2 * gap : gap;
    for (int64_t k = 0; k < E; ++k) {
      storage[k * view.stride_edge] = T(src[k]);
      storage[view.stride_row + k * view.stride_edge] = T(dst[k]);
    }
    view.data = storage.data();
  }
  EdgeList(const EdgeList&) = delete;
};

struct RandomEdges {
  std::vector<int64_t> src, dst;
};

// num_edges random edges; about `loop_fraction` of them are self-loops (when both sides have nodes).
inline RandomEdges random_edges(int64_t num_src, int64_t num_dst, int64_t num_edges,
                                uint64_t seed, double loop_fraction = 0.1) {
  std::mt19937_64 rng(seed);
  RandomEdges e;
  const int64_t num_loop_nodes = std::min(num_src, num_dst);
  for (int64_t k = 0; k < num_edges; ++k) {
    const bool loop = num_loop_nodes > 0 && std::uniform_real_distribution<>(0, 1)(rng) < loop_fraction;
    const int64_t s = std::uniform_int_distribution<int64_t>(0, num_src - 1)(rng);
    e.src.push_back(loop ? s % num_loop_nodes : s);
    e.dst.push_back(loop ? s % num_loop_nodes
                         : std::uniform_int_distribution<int64_t>(0, num_dst - 1)(rng));
  }
  return e;
}

// The seven arrays as int64 vectors.
struct ReferenceGraph {
  std::vector<int64_t> rowptr, col, eid, colptr, row, csc2csr, edge_map;
};

inline constexpr SelfLoops kSelfLoopModes[] = {SelfLoops::kKeep, SelfLoops::kAddRemaining,
                                               SelfLoops::kReplace};

inline void expect_equal(const ReferenceGraph& got, const ReferenceGraph& want) {
  EXPECT_EQ(got.rowptr, want.rowptr);
  EXPECT_EQ(got.col, want.col);
  EXPECT_EQ(got.eid, want.eid);
  EXPECT_EQ(got.colptr, want.colptr);
  EXPECT_EQ(got.row, want.row);
  EXPECT_EQ(got.csc2csr, want.csc2csr);
  EXPECT_EQ(got.edge_map, want.edge_map);
}

inline ReferenceGraph reference_graph(const std::vector<int64_t>& src,
                                      const std::vector<int64_t>& dst, int64_t num_src,
                                      int64_t num_dst, SelfLoops loops) {
  // Augmented edges (source, destination, input id) in PyG's order.
  std::vector<std::tuple<int64_t, int64_t, int64_t>> aug;
  for (size_t k = 0; k < src.size(); ++k)
    if (loops == SelfLoops::kKeep || src[k] != dst[k]) aug.emplace_back(src[k], dst[k], int64_t(k));
  if (loops != SelfLoops::kKeep) {
    for (int64_t i = 0; i < std::min(num_src, num_dst); ++i) {
      int64_t last = -1;
      if (loops == SelfLoops::kAddRemaining)
        for (size_t k = 0; k < src.size(); ++k)
          if (src[k] == i && dst[k] == i) last = int64_t(k);
      aug.emplace_back(i, i, last);
    }
  }
  const int64_t E = int64_t(aug.size());
  ReferenceGraph g;
  for (const auto& a : aug) g.edge_map.push_back(std::get<2>(a));

  // CSR: (destination, source, augmented id) order.
  std::vector<std::tuple<int64_t, int64_t, int64_t>> csr;
  for (int64_t a = 0; a < E; ++a) csr.emplace_back(std::get<1>(aug[a]), std::get<0>(aug[a]), a);
  std::sort(csr.begin(), csr.end());
  g.rowptr.assign(num_dst + 1, 0);
  for (const auto& [d, s, a] : csr) {
    ++g.rowptr[d + 1];
    g.col.push_back(s);
    g.eid.push_back(a);
  }
  for (int64_t i = 0; i < num_dst; ++i) g.rowptr[i + 1] += g.rowptr[i];

  // Transposed CSR: (source, CSR position) order.
  std::vector<std::pair<int64_t, int64_t>> csc;
  for (int64_t p = 0; p < E; ++p) csc.emplace_back(g.col[p], p);
  std::sort(csc.begin(), csc.end());
  g.colptr.assign(num_src + 1, 0);
  for (const auto& [s, p] : csc) {
    ++g.colptr[s + 1];
    g.csc2csr.push_back(p);
    g.row.push_back(std::get<0>(csr[p]));
  }
  for (int64_t j = 0; j < num_src; ++j) g.colptr[j + 1] += g.colptr[j];
  return g;
}

// Host build of the core (plan + build) into int64 vectors, through index type I.
template <typename I>
ReferenceGraph core_graph(const EdgeIndexView& view, int64_t num_src, int64_t num_dst,
                          SelfLoops loops) {
  const GraphSizes sz = plan_graph(view, num_src, num_dst, loops);
  std::vector<I> rowptr(sz.num_dst + 1), colptr(sz.num_src + 1), col(sz.num_edges),
      eid(sz.num_edges), row(sz.num_edges), csc2csr(sz.num_edges), edge_map(sz.num_edges);
  build_graph_cpu<I>(view, sz, loops,
                     {rowptr.data(), col.data(), eid.data(), colptr.data(), row.data(),
                      csc2csr.data(), edge_map.data()});
  auto wide = [](const std::vector<I>& v) { return std::vector<int64_t>(v.begin(), v.end()); };
  return {wide(rowptr), wide(col), wide(eid), wide(colptr), wide(row), wide(csc2csr), wide(edge_map)};
}

}  // namespace iognn::test

// Using iognn's core from C++ alone (no Python, no torch): build a graph with self-loops added,
// print its CSR and degree statistics, and average neighbour features with propagate_forward.
//
//   cmake -S . -B build/cpp -G Ninja -DIOGNN_BUILD_TESTS=ON && cmake --build build/cpp
//   build/cpp/iognn_graph_example
//
// The core takes raw pointers and sizes; the caller owns every buffer. Errors are exceptions
// (iognn::IndexError, iognn::ValueError), never an exit.
#include <cstdint>
#include <cstdio>
#include <exception>
#include <vector>

#include "core/error.h"
#include "core/graph.h"
#include "kernels/cpu/propagate.h"

namespace {

template <typename T>
void print_array(const char* name, const std::vector<T>& v) {
  std::printf("  %-8s [", name);
  for (size_t i = 0; i < v.size(); ++i) std::printf(i ? ", %lld" : "%lld", (long long)v[i]);
  std::printf("]\n");
}

int run() {
  // A directed 5-node graph as a [2, E] edge index, row-major: row 0 = sources, row 1 = targets.
  // Messages flow source -> target; node 4 has no in-edge; (2, 2) is an existing self-loop.
  const std::vector<int64_t> edge_index = {
      0, 1, 1, 2, 3, 2,  // sources j
      1, 0, 2, 3, 0, 2,  // targets i
  };
  const int64_t num_nodes = 5, num_edges = 6;
  iognn::EdgeIndexView ei;
  ei.data = edge_index.data();
  ei.is_int64 = true;
  ei.num_edges = num_edges;
  ei.stride_row = num_edges;  // from edge_index[0][k] to edge_index[1][k]
  ei.stride_edge = 1;

  // 1. Plan (validates every index, counts the augmented edges), then build. With
  //    kAddRemaining (GCN's rule) every node gets one self-loop; node 2 keeps its own.
  const auto loops = iognn::SelfLoops::kAddRemaining;
  const iognn::GraphSizes sz = iognn::plan_graph(ei, num_nodes, num_nodes, loops);
  std::vector<int32_t> rowptr(sz.num_dst + 1), col(sz.num_edges), eid(sz.num_edges),
      colptr(sz.num_src + 1), row(sz.num_edges), csc2csr(sz.num_edges), edge_map(sz.num_edges);
  iognn::build_graph_cpu<int32_t>(ei, sz, loops,
                                  {rowptr.data(), col.data(), eid.data(), colptr.data(),
                                   row.data(), csc2csr.data(), edge_map.data()});

  std::printf("graph: %lld nodes, %lld input edges, %lld edges with self-loops\n",
              (long long)num_nodes, (long long)sz.num_input_edges, (long long)sz.num_edges);
  std::printf("CSR by destination (row i lists the sources j of edges j -> i):\n");
  print_array("rowptr", rowptr);
  print_array("col", col);
  print_array("eid", eid);
  print_array("edge_map", edge_map);  // input edge of each augmented edge, -1 for an added loop

  // 2. Degree statistics (what iognn uses to pick kernels).
  const iognn::GraphStats st = iognn::compute_graph_stats<int32_t>(
      rowptr.data(), sz.num_dst, colptr.data(), sz.num_src, col.data(), row.data());
  std::printf("stats: max in-degree %lld, max out-degree %lld, mean in-degree %.2f, "
              "p50/p90/p99 %lld/%lld/%lld, symmetric %s\n",
              (long long)st.max_in_degree, (long long)st.max_out_degree, st.mean_in_degree,
              (long long)st.p50_in_degree, (long long)st.p90_in_degree,
              (long long)st.p99_in_degree, st.symmetric ? "yes" : "no");

  // 3. Mean aggregation of 2 features per node: out[i] = mean of x[j] over the in-edges j -> i.
  const int64_t F = 2;
  const std::vector<float> x = {0, 1,  // node 0
                                2, 3,  // node 1
                                4, 5,  // node 2
                                6, 7,  // node 3
                                8, 9};  // node 4
  std::vector<float> out(num_nodes * F);
  iognn::cpu::propagate_forward<float, int32_t>(rowptr.data(), col.data(), /*weight=*/nullptr,
                                                x.data(), /*x_stride=*/F, num_nodes, F,
                                                iognn::PropagateReduce::kMean,
                                                /*bias=*/nullptr, out.data());
  std::printf("mean of in-neighbour features (self included):\n");
  for (int64_t i = 0; i < num_nodes; ++i)
    std::printf("  node %lld: [%.3f, %.3f]\n", (long long)i, out[i * F], out[i * F + 1]);

  // 4. Bad input is an exception naming the argument, and the program carries on.
  const std::vector<int64_t> bad = {0, 7, 1, 0};  // edge 1 has source 7 in a 5-node graph
  iognn::EdgeIndexView bad_ei = ei;
  bad_ei.data = bad.data();
  bad_ei.num_edges = 2;
  bad_ei.stride_row = 2;
  try {
    iognn::plan_graph(bad_ei, num_nodes, num_nodes, loops);
    std::printf("error: the bad edge index was accepted\n");
    return 1;
  } catch (const iognn::IndexError& e) {
    std::printf("rejected as expected: %s\n", e.what());
  }
  return 0;
}

}  // namespace

int main() {
  try {
    return run();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "graph_example failed: %s\n", e.what());
    return 1;
  }
}

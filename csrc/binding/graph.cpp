// iognn::build_graph and iognn::graph_stats: schemas and host implementations.
#include <ATen/ATen.h>
#include <torch/library.h>

#include <algorithm>

#include "binding/graph_build.h"
#include "binding/utils.h"
#include "core/graph.h"

namespace iognn::torch_ext {

SelfLoops check_build_graph_args(const at::Tensor& edge_index, int64_t self_loops) {
  check_edge_index(edge_index, kBuildGraph);
  TORCH_CHECK_VALUE(self_loops >= 0 && self_loops <= 2, kBuildGraph,
                    ": self_loops must be 0 (keep), 1 (add remaining) or 2 (replace), got ",
                    self_loops);
  return static_cast<SelfLoops>(self_loops);
}

EdgeIndexView edge_index_view(const at::Tensor& edge_index) {
  EdgeIndexView v;
  v.data = edge_index.data_ptr();
  v.is_int64 = edge_index.scalar_type() == at::kLong;
  v.num_edges = edge_index.size(1);
  v.stride_row = edge_index.stride(0);
  v.stride_edge = edge_index.stride(1);
  return v;
}

at::ScalarType graph_index_dtype(const GraphSizes& sz, bool force_int64) {
  return (force_int64 || !sz.fits_int32()) ? at::kLong : at::kInt;
}

GraphTensors empty_graph_tensors(const GraphSizes& sz, const at::TensorOptions& opts) {
  return {at::empty({sz.num_dst + 1}, opts), at::empty({sz.num_edges}, opts),
          at::empty({sz.num_edges}, opts),   at::empty({sz.num_src + 1}, opts),
          at::empty({sz.num_edges}, opts),   at::empty({sz.num_edges}, opts),
          at::empty({sz.num_edges}, opts)};
}

BuildGraphOutputs with_max_degrees(GraphTensors graph, int64_t max_in, int64_t max_out) {
  at::Tensor degrees = at::empty({2}, at::TensorOptions().dtype(at::kLong));
  degrees.data_ptr<int64_t>()[0] = max_in;
  degrees.data_ptr<int64_t>()[1] = max_out;
  auto& [rowptr, col, eid, colptr, row, csc2csr, edge_map] = graph;
  return {rowptr, col, eid, colptr, row, csc2csr, edge_map, degrees};
}

void check_deferred_error_word(const at::Tensor& error, const at::Tensor& edge_index) {
  constexpr const char* op = "iognn::build_graph_deferred";
  check_dtype(error, at::kLong, op, "error");
  TORCH_CHECK_VALUE(error.numel() == 1 && error.is_contiguous(), op,
                    ": error must be a contiguous int64 tensor of one entry, got shape ",
                    error.sizes());
  check_device(error, edge_index, op, "error", "edge_index");
}

namespace {

template <typename index_t>
int64_t longest_row(const index_t* offsets, int64_t rows) {
  int64_t longest = 0;
  for (int64_t r = 0; r < rows; ++r)
    longest = std::max<int64_t>(longest, int64_t(offsets[r + 1]) - int64_t(offsets[r]));
  return longest;
}

BuildGraphOutputs build_graph_cpu(const at::Tensor& edge_index, int64_t num_src, int64_t num_dst,
                                  int64_t self_loops, bool force_int64) {
  const SelfLoops mode = check_build_graph_args(edge_index, self_loops);
  const EdgeIndexView view = edge_index_view(edge_index);
  const GraphSizes sz = translate_errors([&] { return plan_graph(view, num_src, num_dst, mode); });
  const at::ScalarType index_dtype = graph_index_dtype(sz, force_int64);
  GraphTensors out = empty_graph_tensors(sz, edge_index.options().dtype(index_dtype));
  dispatch_index(index_dtype, kBuildGraph, [&](auto tag) {
    using I = typename decltype(tag)::type;
    translate_errors([&] { ::iognn::build_graph_cpu<I>(view, sz, mode, graph_arrays<I>(out)); });
  });
  int64_t max_in = 0, max_out = 0;
  dispatch_index(index_dtype, kBuildGraph, [&](auto tag) {
    using I = typename decltype(tag)::type;
    max_in = longest_row(cptr<I>(std::get<0>(out)), sz.num_dst);
    max_out = longest_row(cptr<I>(std::get<3>(out)), sz.num_src);
  });
  return with_max_degrees(std::move(out), max_in, max_out);
}

// On the host a build never has to wait for a device: it raises at once and leaves error alone.
BuildGraphOutputs build_graph_deferred_cpu(const at::Tensor& edge_index, int64_t num_src,
                                           int64_t num_dst, const at::Tensor& error,
                                           bool force_int64) {
  check_deferred_error_word(error, edge_index);
  return build_graph_cpu(edge_index, num_src, num_dst, 0, force_int64);
}

// Degree statistics as a float64 vector: [max_in, max_out, mean_in, p50, p90, p99, isolated_dst,
// log2 buckets...]. Host tensors only: the Python wrapper passes host copies of the two offset
// vectors (num_nodes + 1 entries each), so this is cheap for graphs built on a GPU too.
at::Tensor graph_stats_cpu(const at::Tensor& rowptr, const at::Tensor& colptr) {
  constexpr const char* op = "iognn::graph_stats";
  check_index_vector(rowptr, op, "rowptr");
  check_index_vector(colptr, op, "colptr");
  check_same_index_dtype(rowptr, colptr, op, "colptr");
  TORCH_CHECK_VALUE(rowptr.numel() >= 1 && colptr.numel() >= 1, op,
                    ": rowptr and colptr need at least one entry");
  GraphStats st;
  dispatch_index(rowptr.scalar_type(), op, [&](auto tag) {
    using I = typename decltype(tag)::type;
    st = compute_graph_stats<I>(cptr<I>(rowptr), rowptr.numel() - 1, cptr<I>(colptr),
                                colptr.numel() - 1, nullptr, nullptr);
  });
  at::Tensor out = at::empty({7 + GraphStats::kBuckets}, rowptr.options().dtype(at::kDouble));
  double* o = out.data_ptr<double>();
  o[0] = double(st.max_in_degree);
  o[1] = double(st.max_out_degree);
  o[2] = st.mean_in_degree;
  o[3] = double(st.p50_in_degree);
  o[4] = double(st.p90_in_degree);
  o[5] = double(st.p99_in_degree);
  o[6] = double(st.num_isolated_dst);
  for (int b = 0; b < GraphStats::kBuckets; ++b) o[7 + b] = double(st.in_degree_log2_buckets[b]);
  return out;
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(iognn, m) {
  m.def(
      "build_graph(Tensor edge_index, int num_src, int num_dst, int self_loops=0, "
      "bool force_int64=False) -> (Tensor rowptr, Tensor col, Tensor eid, Tensor colptr, "
      "Tensor row, Tensor csc2csr, Tensor edge_map, Tensor max_degrees)");
  // build_graph with self-loops kept, without waiting for its validation: a bad index is recorded
  // in `error` (int64, one entry, -1 for none; on a device: 2 * edge + row of the first bad
  // index, by atomicMin) and leaves an empty graph; the longest rows come back as -1 (unknown).
  m.def(
      "build_graph_deferred(Tensor edge_index, int num_src, int num_dst, Tensor(a!) error, "
      "bool force_int64=False) -> (Tensor rowptr, Tensor col, Tensor eid, Tensor colptr, "
      "Tensor row, Tensor csc2csr, Tensor edge_map, Tensor max_degrees)");
  m.def("graph_stats(Tensor rowptr, Tensor colptr) -> Tensor");
}

TORCH_LIBRARY_IMPL(iognn, CPU, m) {
  m.impl("build_graph", &build_graph_cpu);
  m.impl("build_graph_deferred", &build_graph_deferred_cpu);
  m.impl("graph_stats", &graph_stats_cpu);
}

}  // namespace iognn::torch_ext

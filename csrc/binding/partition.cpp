// Graph partitioning ops (core: core/partition.h), host tensors only: the Python wrapper
// (iognn.distributed.partition) brings device inputs to the host, since a partition is computed
// once per graph.
//   partition_layout(edge_index, parts, num_parts, ranks=None) -> Tensor[]: kLayoutTensors int64
//       tensors per part of `ranks` (default: every part), in the order given, each in the order
//       of LayoutTensor below; then every part's sizes, int64 [num_parts, kSizeColumns] (SizeColumn
//       below); then one int64 [2] = (edge_cut, fingerprint). parts: int64 [num_nodes]. A rank
//       that builds only its own layout holds its edges, not every part's.
//   random_partition(num_nodes, num_parts, seed) -> int64 [num_nodes]
//   metis_partition(edge_index, num_nodes, num_parts, seed) -> int64 [num_nodes] (libmetis builds)
//   metis_graph(edge_index, num_nodes) -> (xadj, adjncy): the symmetrised simple graph METIS reads,
//       int64 (pymetis's index type), for pymetis
//   has_metis() -> bool
// edge_index: int32/int64 [2, E], any strides.
#include <ATen/ATen.h>
#include <torch/library.h>

#include <cstring>
#include <tuple>
#include <vector>

#include "binding/graph_build.h"
#include "binding/utils.h"
#include "core/parallel.h"
#include "core/partition.h"

namespace iognn::torch_ext {
namespace {

constexpr const char* kPartitionLayout = "iognn::partition_layout";
constexpr const char* kMetisPartition = "iognn::metis_partition";
constexpr const char* kMetisGraph = "iognn::metis_graph";

// Per part: owned_nodes, halo_nodes, edge_index [2, E_r], edge_ids, in_degree, send_index,
// counts [3, P] (send_counts, recv_counts, then num_interior in counts[2][0]; the rest 0).
enum LayoutTensor { kOwned, kHalo, kEdgeIndex, kEdgeIds, kInDegree, kSendIndex, kCounts,
                    kLayoutTensors };
// Per part, the sizes the statistics need without the layouts.
enum SizeColumn { kSizeOwned, kSizeInterior, kSizeHalo, kSizeEdges, kSizeColumns };

void check_host(const at::Tensor& t, const char* op, const char* name) {
  TORCH_CHECK_VALUE(t.device().is_cpu(), op, ": ", name, " must be on the CPU, got ", t.device());
}

std::vector<at::Tensor> partition_layout_cpu(const at::Tensor& edge_index, const at::Tensor& parts,
                                             int64_t num_parts,
                                             at::OptionalIntArrayRef ranks) {
  check_edge_index(edge_index, kPartitionLayout);
  check_host(edge_index, kPartitionLayout, "edge_index");
  check_index_vector(parts, kPartitionLayout, "parts");
  check_dtype(parts, at::kLong, kPartitionLayout, "parts");
  check_host(parts, kPartitionLayout, "parts");
  const PartitionLayout layout = translate_errors([&] {
    return PartitionLayout(edge_index_view(edge_index), parts.numel(), cptr<int64_t>(parts),
                           num_parts);
  });
  std::vector<int64_t> built;
  if (ranks.has_value()) {
    for (int64_t r : *ranks) {
      TORCH_CHECK_VALUE(r >= 0 && r < num_parts, kPartitionLayout, ": ranks must be in [0, ",
                        "num_parts = ", num_parts, "), got ", r);
      built.push_back(r);
    }
  } else {
    for (int64_t r = 0; r < num_parts; ++r) built.push_back(r);
  }
  const auto options = edge_index.options().dtype(at::kLong);
  std::vector<at::Tensor> out;
  std::vector<PartArrays> arrays;
  for (int64_t r : built) {
    const PartSizes& s = layout.sizes(r);
    at::Tensor t[kLayoutTensors] = {
        at::empty({s.num_owned}, options),          at::empty({s.num_halo}, options),
        at::empty({2, s.num_edges}, options),       at::empty({s.num_edges}, options),
        at::empty({s.num_owned + s.num_halo}, options), at::empty({s.num_sent}, options),
        at::zeros({3, num_parts}, options)};
    int64_t* edges = ptr<int64_t>(t[kEdgeIndex]);
    int64_t* counts = ptr<int64_t>(t[kCounts]);
    counts[2 * num_parts] = s.num_interior;
    arrays.push_back({ptr<int64_t>(t[kOwned]), ptr<int64_t>(t[kHalo]), edges, edges + s.num_edges,
                      ptr<int64_t>(t[kEdgeIds]), ptr<int64_t>(t[kInDegree]),
                      ptr<int64_t>(t[kSendIndex]), counts, counts + num_parts});
    out.insert(out.end(), t, t + kLayoutTensors);
  }
  translate_errors([&] {
    parallel_for(0, int64_t(built.size()), 1, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) layout.fill(built[size_t(i)], arrays[size_t(i)]);
    });
  });
  at::Tensor sizes = at::empty({num_parts, kSizeColumns}, options);
  int64_t* size_rows = ptr<int64_t>(sizes);
  for (int64_t r = 0; r < num_parts; ++r) {
    const PartSizes& s = layout.sizes(r);
    int64_t* row = size_rows + r * kSizeColumns;
    row[kSizeOwned] = s.num_owned;
    row[kSizeInterior] = s.num_interior;
    row[kSizeHalo] = s.num_halo;
    row[kSizeEdges] = s.num_edges;
  }
  out.push_back(sizes);
  const uint64_t fingerprint = layout.fingerprint();
  int64_t signed_fingerprint;
  std::memcpy(&signed_fingerprint, &fingerprint, sizeof fingerprint);
  out.push_back(at::tensor({layout.edge_cut(), signed_fingerprint}, options));
  return out;
}

at::Tensor random_partition_cpu(int64_t num_nodes, int64_t num_parts, int64_t seed) {
  at::Tensor parts = at::empty({std::max<int64_t>(num_nodes, 0)}, at::kLong);
  translate_errors([&] { random_partition(num_nodes, num_parts, uint64_t(seed), ptr<int64_t>(parts)); });
  return parts;
}

at::Tensor metis_partition_cpu(const at::Tensor& edge_index, int64_t num_nodes, int64_t num_parts,
                               int64_t seed) {
  check_edge_index(edge_index, kMetisPartition);
  check_host(edge_index, kMetisPartition, "edge_index");
  at::Tensor parts = at::empty({std::max<int64_t>(num_nodes, 0)}, edge_index.options().dtype(at::kLong));
  translate_errors([&] {
    metis_partition(edge_index_view(edge_index), num_nodes, num_parts, seed, ptr<int64_t>(parts));
  });
  return parts;
}

std::tuple<at::Tensor, at::Tensor> metis_graph_cpu(const at::Tensor& edge_index,
                                                   int64_t num_nodes) {
  check_edge_index(edge_index, kMetisGraph);
  check_host(edge_index, kMetisGraph, "edge_index");
  std::vector<int64_t> xadj, adjncy;
  translate_errors(
      [&] { symmetric_adjacency<int64_t>(edge_index_view(edge_index), num_nodes, &xadj, &adjncy); });
  auto to_tensor = [](const std::vector<int64_t>& v) {
    at::Tensor t = at::empty({int64_t(v.size())}, at::kLong);
    std::copy(v.begin(), v.end(), ptr<int64_t>(t));
    return t;
  };
  return {to_tensor(xadj), to_tensor(adjncy)};
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(iognn, m) {
  m.def("partition_layout(Tensor edge_index, Tensor parts, int num_parts, int[]? ranks=None) "
        "-> Tensor[]");
  m.def("metis_partition(Tensor edge_index, int num_nodes, int num_parts, int seed) -> Tensor");
  m.def("metis_graph(Tensor edge_index, int num_nodes) -> (Tensor, Tensor)");
  // No tensor argument, so no dispatch key: one kernel for every backend.
  m.def("random_partition(int num_nodes, int num_parts, int seed) -> Tensor",
        &random_partition_cpu);
  m.def("has_metis() -> bool", [] { return has_metis(); });
}

TORCH_LIBRARY_IMPL(iognn, CPU, m) {
  m.impl("partition_layout", &partition_layout_cpu);
  m.impl("metis_partition", &metis_partition_cpu);
  m.impl("metis_graph", &metis_graph_cpu);
}

}  // namespace iognn::torch_ext

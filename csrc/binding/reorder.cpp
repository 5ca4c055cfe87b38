// iognn::rcm, degree_order, bfs_order, part_order and graph_bandwidth: schemas and host
// implementations (core: core/reorder.h).
//   rcm / degree_order / bfs_order(edge_index, num_nodes, ptr=None) -> perm [num_nodes] in
//       edge_index's dtype, perm[new position] = old node id, each graph of ptr ordered within its
//       own range.
//   part_order(parts, num_parts) -> int64 perm [num_nodes]: nodes grouped by part, by id within.
//   graph_bandwidth(edge_index, num_nodes, perm=None, ptr=None) -> int64 [num_graphs] (one entry
//       without ptr): max |pos(u) - pos(v)| over each graph's edges, pos the inverse of perm.
// edge_index: int32/int64 [2, E], any strides; ptr: int32/int64 [num_graphs + 1] (PyG's
// Batch.ptr); perm: edge_index's dtype. Host tensors only: the Python wrapper (iognn.reorder)
// brings device inputs to the host, since the orderings are computed once per batch and cached.
#include <ATen/ATen.h>
#include <torch/library.h>

#include <optional>

#include "binding/graph_build.h"
#include "binding/utils.h"
#include "core/reorder.h"

namespace iognn::torch_ext {
namespace {

constexpr const char* kPartOrder = "iognn::part_order";
constexpr const char* kGraphBandwidth = "iognn::graph_bandwidth";

// ptr as contiguous int64 (it has num_graphs + 1 entries: the copy is negligible), or nothing.
std::optional<at::Tensor> int64_ptr(const std::optional<at::Tensor>& batch_ptr, const char* op) {
  if (!batch_ptr) return std::nullopt;
  check_index_vector(*batch_ptr, op, "ptr");
  TORCH_CHECK_VALUE(batch_ptr->numel() >= 1, op,
                    ": ptr must have num_graphs + 1 >= 1 entries, got none");
  return batch_ptr->to(at::kLong).contiguous();
}

int64_t num_graphs_of(const std::optional<at::Tensor>& graph_ptr) {
  return graph_ptr ? graph_ptr->numel() - 1 : 1;
}

// The orderings of edges share one signature: Order names its op and runs the core function.
template <typename Order>
at::Tensor order_cpu(const at::Tensor& edge_index, int64_t num_nodes,
                     const std::optional<at::Tensor>& batch_ptr) {
  constexpr const char* op = Order::kName;
  check_edge_index(edge_index, op);
  TORCH_CHECK_VALUE(num_nodes >= 0, op, ": num_nodes must be >= 0, got ", num_nodes);
  const std::optional<at::Tensor> graph_ptr = int64_ptr(batch_ptr, op);
  at::Tensor perm = at::empty({num_nodes}, edge_index.options());
  dispatch_index(edge_index.scalar_type(), op, [&](auto tag) {
    using I = typename decltype(tag)::type;
    translate_errors([&] {
      Order::template run<I>(edge_index_view(edge_index), num_nodes,
                             optional_cptr<int64_t>(graph_ptr), num_graphs_of(graph_ptr),
                             ptr<I>(perm));
    });
  });
  return perm;
}

struct Rcm {
  static constexpr const char* kName = "iognn::rcm";
  template <typename I, typename... Args>
  static void run(Args... args) { reverse_cuthill_mckee<I>(args...); }
};
struct DegreeOrder {
  static constexpr const char* kName = "iognn::degree_order";
  template <typename I, typename... Args>
  static void run(Args... args) { degree_order<I>(args...); }
};
struct BfsOrder {
  static constexpr const char* kName = "iognn::bfs_order";
  template <typename I, typename... Args>
  static void run(Args... args) { breadth_first_order<I>(args...); }
};

at::Tensor part_order_cpu(const at::Tensor& parts, int64_t num_parts) {
  check_index_vector(parts, kPartOrder, "parts");
  TORCH_CHECK_VALUE(num_parts >= 1, kPartOrder, ": num_parts must be >= 1, got ", num_parts);
  const at::Tensor parts64 = parts.to(at::kLong).contiguous();
  at::Tensor perm = at::empty({parts.numel()}, parts64.options());
  translate_errors([&] {
    part_order(cptr<int64_t>(parts64), parts.numel(), num_parts, ptr<int64_t>(perm));
  });
  return perm;
}

at::Tensor graph_bandwidth_cpu(const at::Tensor& edge_index, int64_t num_nodes,
                               const std::optional<at::Tensor>& perm,
                               const std::optional<at::Tensor>& batch_ptr) {
  check_edge_index(edge_index, kGraphBandwidth);
  TORCH_CHECK_VALUE(num_nodes >= 0, kGraphBandwidth, ": num_nodes must be >= 0, got ", num_nodes);
  if (perm) {
    check_index_vector(*perm, kGraphBandwidth, "perm", num_nodes);
    check_same_index_dtype(edge_index, *perm, kGraphBandwidth, "perm");
  }
  const std::optional<at::Tensor> graph_ptr = int64_ptr(batch_ptr, kGraphBandwidth);
  at::Tensor bandwidth = at::empty({num_graphs_of(graph_ptr)}, edge_index.options().dtype(at::kLong));
  dispatch_index(edge_index.scalar_type(), kGraphBandwidth, [&](auto tag) {
    using I = typename decltype(tag)::type;
    translate_errors([&] {
      graph_bandwidths<I>(edge_index_view(edge_index), num_nodes, optional_cptr<I>(perm),
                          optional_cptr<int64_t>(graph_ptr), num_graphs_of(graph_ptr),
                          ptr<int64_t>(bandwidth));
    });
  });
  return bandwidth;
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(iognn, m) {
  m.def("rcm(Tensor edge_index, int num_nodes, Tensor? ptr=None) -> Tensor");
  m.def("degree_order(Tensor edge_index, int num_nodes, Tensor? ptr=None) -> Tensor");
  m.def("bfs_order(Tensor edge_index, int num_nodes, Tensor? ptr=None) -> Tensor");
  m.def("part_order(Tensor parts, int num_parts) -> Tensor");
  m.def("graph_bandwidth(Tensor edge_index, int num_nodes, Tensor? perm=None, Tensor? ptr=None) "
        "-> Tensor");
}

TORCH_LIBRARY_IMPL(iognn, CPU, m) {
  m.impl("rcm", &order_cpu<Rcm>);
  m.impl("degree_order", &order_cpu<DegreeOrder>);
  m.impl("bfs_order", &order_cpu<BfsOrder>);
  m.impl("part_order", &part_order_cpu);
  m.impl("graph_bandwidth", &graph_bandwidth_cpu);
}

}  // namespace iognn::torch_ext

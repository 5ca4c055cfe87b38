// iognn::hetero_neighbor_sample: schema, checks and the host backend (kernel:
// kernels/cpu/hetero_neighbor_sample.h, contract: kernels/sampler_types.h). The schema takes flat
// lists (no dicts): node types are 0 .. len(num_nodes) - 1, edge type t is
// (edge_types[2t] -> edge_types[2t + 1]) with its CSC colptrs[t] [num_nodes[dst] + 1] / rows[t],
// seed set s holds seeds[s], of node type seed_types[s] (trees numbered across the sets in order),
// and num_neighbors is [len(colptrs) * num_hops], edge type t's fan-outs at
// num_neighbors[t * num_hops .. (t + 1) * num_hops). The optional lists are empty or hold one
// entry (None: none) per edge type (weights: float64, edge_times: int64, CSC order), per node type
// (node_times: int64) or per seed set (seed_times: int64). The outputs follow pyg-lib's
// hetero_neighbor_sample with csc=True, flattened the same way:
//   node[n]   node type n's global ids, or [num, 2] (seed position, global id) with disjoint
//   row[t], col[t], edge_id[t]  edge type t's local ids of neighbour (src type) and frontier node
//             (dst type), and its CSC positions
//   num_sampled_nodes [len(num_nodes) * (num_hops + 1)], num_sampled_edges [len(colptrs) * num_hops]
// all index tensors in the graph's one index dtype (int64 when there is no index tensor), on the
// graph's device. CPU and CUDA (kernels/cuda/hetero_neighbor_sample.h; every tensor on the device
// of the first of colptrs, seeds and the optional lists' tensors); no Meta kernel, no autograd
// (as iognn::neighbor_sample).
#include <ATen/ATen.h>
#include <torch/library.h>

#include <initializer_list>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "binding/sampler_tensors.h"
#include "binding/utils.h"
#include "kernels/cpu/hetero_neighbor_sample.h"
#if defined(IOGNN_CUDA_BINDING)
#include "binding/cuda/device_scope.h"
#include "binding/cuda/torch_arena.h"
#include "kernels/cuda/hetero_neighbor_sample.h"
#endif

namespace iognn::torch_ext {
namespace {

constexpr const char* kHeteroNeighborSample = "iognn::hetero_neighbor_sample";

using OptionalTensors = c10::List<std::optional<at::Tensor>>;
using NamedOptionalTensors = std::pair<const OptionalTensors*, const char*>;
using HeteroSampleOutputs =
    std::tuple<std::vector<at::Tensor>, std::vector<at::Tensor>, std::vector<at::Tensor>,
               std::vector<at::Tensor>, std::vector<int64_t>, std::vector<int64_t>>;

std::string indexed(const char* name, size_t i) { return name + ("[" + std::to_string(i) + "]"); }

// An optional list: empty, or one optional 1-D tensor of `dtype` per entry of `sizes`.
std::vector<std::optional<at::Tensor>> check_optional_list(const OptionalTensors& list,
                                                           at::ScalarType dtype,
                                                           const std::vector<int64_t>& sizes,
                                                           const char* name, const char* per,
                                                           const char* what) {
  TORCH_CHECK_VALUE(list.empty() || list.size() == sizes.size(), kHeteroNeighborSample, ": ", name,
                    " must be empty or hold one entry per ", per, " (", sizes.size(), "), got ",
                    list.size());
  std::vector<std::optional<at::Tensor>> out;
  for (size_t i = 0; i < list.size(); ++i) {
    out.push_back(list.get(i));
    check_optional_vector(kHeteroNeighborSample, out.back(), dtype, sizes[i],
                          indexed(name, i).c_str(), what);
  }
  return out;
}

const int64_t* time_at(const std::vector<std::optional<at::Tensor>>& times, size_t i) {
  return times.empty() ? nullptr : optional_cptr<int64_t>(times[i]);
}

// Node type n's outputs: its ids (with disjoint: (tree, id) pairs) and its counts per hop.
void append_node_type(HeteroSampleOutputs& out, at::Tensor node, const at::Tensor& batch,
                      bool disjoint, const std::vector<int64_t>& num_sampled_nodes) {
  std::get<0>(out).push_back(disjoint ? at::stack({batch, node}, 1) : std::move(node));
  std::get<4>(out).insert(std::get<4>(out).end(), num_sampled_nodes.begin(),
                          num_sampled_nodes.end());
}

// Edge type t's outputs and its counts per hop.
void append_edge_type(HeteroSampleOutputs& out, at::Tensor row, at::Tensor col, at::Tensor edge,
                      const std::vector<int64_t>& num_sampled_edges) {
  std::get<1>(out).push_back(std::move(row));
  std::get<2>(out).push_back(std::move(col));
  std::get<3>(out).push_back(std::move(edge));
  std::get<5>(out).insert(std::get<5>(out).end(), num_sampled_edges.begin(),
                          num_sampled_edges.end());
}

// The kernels' arguments (over host or device memory, as the backend's tensors hold them).
template <typename I>
struct HeteroArguments {
  std::vector<int64_t> num_nodes;
  std::vector<HeteroEdgeType<I>> edge_types;
  std::vector<HeteroSeeds<I>> seeds;
  std::vector<std::vector<int64_t>> fan_outs;
  HeteroSampleOptions options;
};

// The host backend: the CPU kernel, its outputs adopted without copies.
struct CpuHeteroSampler {
  static at::Device check_devices(at::TensorList, at::TensorList, at::TensorList,
                                  std::initializer_list<NamedOptionalTensors>) {
    return at::kCPU;
  }
  template <typename I>
  static HeteroSampleOutputs sample(const HeteroArguments<I>& a, const at::TensorOptions& index) {
    HeteroSampledSubgraph<I> s = translate_errors([&] {
      return cpu::hetero_neighbor_sample<I>(a.num_nodes, a.edge_types, a.seeds, a.fan_outs,
                                            a.options);
    });
    HeteroSampleOutputs out;
    for (SampledNodes<I>& nodes : s.nodes)
      append_node_type(out, adopt(std::move(nodes.node), index),
                       adopt(std::move(nodes.batch), index), a.options.disjoint,
                       nodes.num_sampled_nodes);
    for (SampledEdges<I>& edges : s.edges)
      append_edge_type(out, adopt(std::move(edges.row), index), adopt(std::move(edges.col), index),
                       adopt(std::move(edges.edge), index), edges.num_sampled_edges);
    return out;
  }
};

#if defined(IOGNN_CUDA_BINDING)
// The device backend: every input on the device of the first of colptrs, seeds and the optional
// lists' tensors, where it samples (the dispatcher picks it when any input is a CUDA tensor).
struct CudaHeteroSampler {
  static at::Device check_devices(at::TensorList colptrs, at::TensorList rows,
                                  at::TensorList seeds,
                                  std::initializer_list<NamedOptionalTensors> optional) {
    std::vector<std::pair<at::Tensor, std::string>> inputs;
    for (const auto& [list, name] :
         {std::pair{colptrs, "colptrs"}, {rows, "rows"}, {seeds, "seeds"}})
      for (size_t i = 0; i < list.size(); ++i) inputs.emplace_back(list[i], indexed(name, i));
    for (const auto& [list, name] : optional)
      for (size_t i = 0; i < list->size(); ++i)
        if (const std::optional<at::Tensor> t = list->get(i))
          inputs.emplace_back(*t, indexed(name, i));
    TORCH_CHECK(!inputs.empty(), kHeteroNeighborSample, ": no tensor input to sample on");
    // The reference: colptrs[0], else seeds[0] (rows being empty too), else the first optional.
    const size_t ref = !colptrs.empty() || rows.size() >= inputs.size() ? 0 : rows.size();
    for (const auto& [t, name] : inputs)
      check_device(t, inputs[ref].first, kHeteroNeighborSample, name.c_str(),
                   inputs[ref].second.c_str());
    return inputs[ref].first.device();
  }
  template <typename I>
  static HeteroSampleOutputs sample(const HeteroArguments<I>& a, const at::TensorOptions& index) {
    const at::Tensor like = at::empty({0}, index);
    const DeviceScope scope(like);
    TorchArena arena(like);
    cuda::HeteroDeviceSubgraph<I> s = translate_errors([&] {
      return cuda::hetero_neighbor_sample<I>(a.num_nodes, a.edge_types, a.seeds, a.fan_outs,
                                             a.options, arena, scope.stream);
    });
    HeteroSampleOutputs out;
    for (const cuda::DeviceSubgraph<I>& nodes : s.nodes)
      append_node_type(out, arena.tensor(nodes.node, nodes.num_nodes, like),
                       arena.tensor(nodes.batch, a.options.disjoint ? nodes.num_nodes : 0, like),
                       a.options.disjoint, nodes.num_sampled_nodes);
    for (const cuda::DeviceSubgraph<I>& edges : s.edges)
      append_edge_type(out, arena.tensor(edges.row, edges.num_edges, like),
                       arena.tensor(edges.col, edges.num_edges, like),
                       arena.tensor(edges.edge, edges.num_edges, like), edges.num_sampled_edges);
    return out;
  }
};
#endif

// The op: the checks both backends share, then the backend's kernel.
template <class Backend>
HeteroSampleOutputs hetero_neighbor_sample(
    at::IntArrayRef num_nodes, at::IntArrayRef edge_types, at::TensorList colptrs,
    at::TensorList rows, at::IntArrayRef seed_types, at::TensorList seeds,
    at::IntArrayRef num_neighbors, int64_t num_hops, bool replace, bool disjoint,
    int64_t rng_seed, const OptionalTensors& weights, const OptionalTensors& node_times,
    const OptionalTensors& edge_times, const OptionalTensors& seed_times,
    c10::string_view temporal_strategy) {
  const char* op = kHeteroNeighborSample;
  const at::Device device =
      Backend::check_devices(colptrs, rows, seeds,
                             {{&weights, "weights"}, {&node_times, "node_times"},
                              {&edge_times, "edge_times"}, {&seed_times, "seed_times"}});
  const size_t num_types = num_nodes.size(), num_edge_types = colptrs.size();
  TORCH_CHECK_VALUE(rows.size() == num_edge_types && edge_types.size() == 2 * num_edge_types, op,
                    ": colptrs (", num_edge_types, " edge types), rows (", rows.size(),
                    ") and edge_types (", edge_types.size(), " = 2 per edge type) disagree");
  TORCH_CHECK_VALUE(seed_types.size() == seeds.size(), op, ": seed_types (", seed_types.size(),
                    ") must hold one node type per entry of seeds (", seeds.size(), ")");
  TORCH_CHECK_VALUE(num_hops >= 0 && num_neighbors.size() == num_edge_types * size_t(num_hops),
                    op, ": num_neighbors must hold num_hops (", num_hops,
                    ") fan-outs per edge type (", num_edge_types, "), got ", num_neighbors.size());
  // The graph's index dtype: that of its first index tensor.
  const at::Tensor* reference = !colptrs.empty() ? &colptrs[0] : !seeds.empty() ? &seeds[0] : nullptr;
  const at::TensorOptions index_options =
      (reference ? reference->options() : at::TensorOptions().dtype(at::kLong)).device(device);
  std::vector<int64_t> row_sizes, seed_sizes;
  for (size_t t = 0; t < num_edge_types; ++t) {
    const int64_t src = edge_types[2 * t], dst = edge_types[2 * t + 1];
    TORCH_CHECK_VALUE(0 <= src && size_t(src) < num_types && 0 <= dst && size_t(dst) < num_types,
                      op, ": edge_types[", t, "] = (", src, ", ", dst,
                      ") names a node type outside [0, ", num_types, ")");
    check_index_vector(colptrs[t], op, indexed("colptrs", t).c_str(), num_nodes[size_t(dst)] + 1);
    check_index_vector(rows[t], op, indexed("rows", t).c_str());
    check_same_index_dtype(*reference, colptrs[t], op, indexed("colptrs", t).c_str());
    check_same_index_dtype(*reference, rows[t], op, indexed("rows", t).c_str());
    row_sizes.push_back(rows[t].numel());
  }
  for (size_t s = 0; s < seeds.size(); ++s) {
    check_index_vector(seeds[s], op, indexed("seeds", s).c_str());
    check_same_index_dtype(*reference, seeds[s], op, indexed("seeds", s).c_str());
    seed_sizes.push_back(seeds[s].numel());
  }
  const auto weight = check_optional_list(weights, at::kDouble, row_sizes, "weights", "edge type",
                                          "entries (one per entry of its rows)");
  const auto node_time = check_optional_list(node_times, at::kLong, num_nodes.vec(), "node_times",
                                             "node type", "entries (one per node of its type)");
  const auto edge_time = check_optional_list(edge_times, at::kLong, row_sizes, "edge_times",
                                             "edge type", "entries (one per entry of its rows)");
  const auto seed_time = check_optional_list(seed_times, at::kLong, seed_sizes, "seed_times",
                                             "seed set", "entries (one per seed)");
  const auto given = [](const std::vector<std::optional<at::Tensor>>& list) {
    for (const auto& t : list)
      if (t) return true;
    return false;
  };
  check_not_weighted_temporal(op, kListInputs, given(weight), given(node_time) || given(edge_time));
  HeteroSampleOptions options{replace, disjoint, static_cast<uint64_t>(rng_seed), {},
                              parse_temporal_strategy(op, temporal_strategy)};
  for (size_t n = 0; n < node_time.size(); ++n) options.node_time.push_back(time_at(node_time, n));
  std::vector<std::vector<int64_t>> fanouts;
  for (size_t t = 0; t < num_edge_types; ++t)
    fanouts.emplace_back(num_neighbors.begin() + t * num_hops,
                         num_neighbors.begin() + (t + 1) * num_hops);

  HeteroSampleOutputs out;
  dispatch_index(index_options.dtype().toScalarType(), op, [&](auto tag) {
    using I = typename decltype(tag)::type;
    HeteroArguments<I> a{num_nodes.vec(), {}, {}, std::move(fanouts), options};
    for (size_t t = 0; t < num_edge_types; ++t)
      a.edge_types.push_back({edge_types[2 * t], edge_types[2 * t + 1], cptr<I>(colptrs[t]),
                              cptr<I>(rows[t]), rows[t].numel(),
                              weight.empty() ? nullptr : optional_cptr<double>(weight[t]),
                              time_at(edge_time, t)});
    for (size_t s = 0; s < seeds.size(); ++s)
      a.seeds.push_back(
          {seed_types[s], cptr<I>(seeds[s]), seeds[s].numel(), time_at(seed_time, s)});
    out = Backend::template sample<I>(a, index_options);
  });
  return out;
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(iognn, m) {
  m.def(
      "hetero_neighbor_sample(int[] num_nodes, int[] edge_types, Tensor[] colptrs, Tensor[] rows, "
      "int[] seed_types, Tensor[] seeds, int[] num_neighbors, int num_hops, bool replace, "
      "bool disjoint, int rng_seed, Tensor?[] weights, Tensor?[] node_times, "
      "Tensor?[] edge_times, Tensor?[] seed_times, str temporal_strategy='uniform') -> "
      "(Tensor[] node, Tensor[] row, Tensor[] col, Tensor[] edge_id, int[] num_sampled_nodes, "
      "int[] num_sampled_edges)");
}

TORCH_LIBRARY_IMPL(iognn, CPU, m) {
  m.impl("hetero_neighbor_sample", &hetero_neighbor_sample<CpuHeteroSampler>);
}

#if defined(IOGNN_CUDA_BINDING)
TORCH_LIBRARY_IMPL(iognn, CUDA, m) {
  m.impl("hetero_neighbor_sample", &hetero_neighbor_sample<CudaHeteroSampler>);
}
#endif

}  // namespace iognn::torch_ext

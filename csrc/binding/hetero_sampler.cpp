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
// all index tensors in the graph's one index dtype (int64 when there is no index tensor).
// CPU only (a CUDA input raises NotImplementedError); no Meta kernel, no autograd (as
// iognn::neighbor_sample).
#include <ATen/ATen.h>
#include <torch/library.h>

#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "binding/sampler_tensors.h"
#include "binding/utils.h"
#include "kernels/cpu/hetero_neighbor_sample.h"

namespace iognn::torch_ext {
namespace {

constexpr const char* kHeteroNeighborSample = "iognn::hetero_neighbor_sample";

using OptionalTensors = c10::List<std::optional<at::Tensor>>;
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

HeteroSampleOutputs hetero_neighbor_sample_cpu(
    at::IntArrayRef num_nodes, at::IntArrayRef edge_types, at::TensorList colptrs,
    at::TensorList rows, at::IntArrayRef seed_types, at::TensorList seeds,
    at::IntArrayRef num_neighbors, int64_t num_hops, bool replace, bool disjoint,
    int64_t rng_seed, const OptionalTensors& weights, const OptionalTensors& node_times,
    const OptionalTensors& edge_times, const OptionalTensors& seed_times,
    c10::string_view temporal_strategy) {
  const char* op = kHeteroNeighborSample;
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
      reference ? reference->options() : at::TensorOptions().dtype(at::kLong);
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
    std::vector<HeteroEdgeType<I>> graph;
    for (size_t t = 0; t < num_edge_types; ++t)
      graph.push_back({edge_types[2 * t], edge_types[2 * t + 1], cptr<I>(colptrs[t]),
                       cptr<I>(rows[t]), rows[t].numel(),
                       weight.empty() ? nullptr : optional_cptr<double>(weight[t]),
                       time_at(edge_time, t)});
    std::vector<HeteroSeeds<I>> seed_sets;
    for (size_t s = 0; s < seeds.size(); ++s)
      seed_sets.push_back({seed_types[s], cptr<I>(seeds[s]), seeds[s].numel(), time_at(seed_time, s)});
    HeteroSampledSubgraph<I> sample = translate_errors([&] {
      return cpu::hetero_neighbor_sample<I>(num_nodes.vec(), graph, seed_sets, fanouts, options);
    });
    auto& [node, row, col, edge, num_sampled_nodes, num_sampled_edges] = out;
    for (SampledNodes<I>& nodes : sample.nodes) {
      at::Tensor ids = adopt(std::move(nodes.node), index_options);
      if (disjoint) ids = at::stack({adopt(std::move(nodes.batch), index_options), ids}, 1);
      node.push_back(std::move(ids));
      num_sampled_nodes.insert(num_sampled_nodes.end(), nodes.num_sampled_nodes.begin(),
                               nodes.num_sampled_nodes.end());
    }
    for (SampledEdges<I>& edges : sample.edges) {
      row.push_back(adopt(std::move(edges.row), index_options));
      col.push_back(adopt(std::move(edges.col), index_options));
      edge.push_back(adopt(std::move(edges.edge), index_options));
      num_sampled_edges.insert(num_sampled_edges.end(), edges.num_sampled_edges.begin(),
                               edges.num_sampled_edges.end());
    }
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

TORCH_LIBRARY_IMPL(iognn, CPU, m) { m.impl("hetero_neighbor_sample", &hetero_neighbor_sample_cpu); }

#if defined(IOGNN_CUDA_BINDING)
// No device kernel yet: a CUDA input raises NotImplementedError naming the op, and nothing is
// copied to the host behind the caller's back.
TORCH_LIBRARY_IMPL(iognn, CUDA, m) {
  m.impl("hetero_neighbor_sample",
         [](at::IntArrayRef, at::IntArrayRef, at::TensorList colptrs, at::TensorList rows,
            at::IntArrayRef, at::TensorList seeds, at::IntArrayRef, int64_t, bool, bool, int64_t,
            const OptionalTensors& weights, const OptionalTensors& node_times,
            const OptionalTensors& edge_times, const OptionalTensors& seed_times,
            c10::string_view) -> HeteroSampleOutputs {
           for (const at::TensorList list : {colptrs, rows, seeds})
             for (const at::Tensor& t : list)
               if (t.is_cuda()) not_implemented_on(kHeteroNeighborSample, t);
           for (const OptionalTensors* list : {&weights, &node_times, &edge_times, &seed_times})
             for (size_t i = 0; i < list->size(); ++i)
               if (const std::optional<at::Tensor> t = list->get(i); t && t->is_cuda())
                 not_implemented_on(kHeteroNeighborSample, *t);
           TORCH_CHECK_NOT_IMPLEMENTED(false, kHeteroNeighborSample, " has no CUDA kernel");
         });
}
#endif

}  // namespace iognn::torch_ext

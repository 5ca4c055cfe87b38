// iognn::neighbor_sample: schema, checks and backends (kernels: kernels/cpu/neighbor_sample.h and
// kernels/cuda/neighbor_sample.h, contract: kernels/sampler_types.h). The outputs follow pyg-lib's
// neighbor_sample with csc=True:
//   row, col, edge_id [num_sampled_edges]   local ids of neighbour and frontier node; CSC positions
//   node  [num_nodes]     global ids, or [num_nodes, 2] (seed position, global id) with disjoint
//   num_sampled_nodes (num_hops + 1 entries), num_sampled_edges (num_hops entries)
// all index tensors in the graph's index dtype, on the graph's device. rng_seed's 64 bits are the
// generator's key; both backends give the same sample for the same key.
// weight (optional): float64 [len(row)], the edge weights in CSC order (weighted sampling).
// node_time [num_nodes] / edge_time [len(row), CSC order] / seed_time [len(seed)] (optional, int64)
// and temporal_strategy ('uniform' or 'last'): temporal sampling; weight with a time raises
// NotImplementedError, as pyg-lib does.
// CPU and CUDA (every tensor on colptr's device); no Meta kernel (the output sizes depend on the
// graph's data); no autograd (sampling is not differentiable).
#include <ATen/ATen.h>
#include <torch/library.h>

#include <initializer_list>
#include <optional>
#include <tuple>
#include <utility>
#include <vector>

#include "binding/sampler_tensors.h"
#include "binding/utils.h"
#include "kernels/cpu/neighbor_sample.h"
#if defined(IOGNN_CUDA_BINDING)
#include "binding/cuda/device_scope.h"
#include "binding/cuda/torch_arena.h"
#include "kernels/cuda/neighbor_sample.h"
#endif

namespace iognn::torch_ext {
namespace {

constexpr const char* kNeighborSample = "iognn::neighbor_sample";

using SampleOutputs = std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor,
                                 std::vector<int64_t>, std::vector<int64_t>>;

// The checks both backends share (dtypes, ranks, sizes, the options' combination), and the
// kernel options they make (pointers into the tensors: host or device memory).
NeighborSampleOptions checked_options(const at::Tensor& colptr, const at::Tensor& row,
                                      const at::Tensor& seed, bool replace, bool disjoint,
                                      int64_t rng_seed, const std::optional<at::Tensor>& weight,
                                      const std::optional<at::Tensor>& node_time,
                                      const std::optional<at::Tensor>& edge_time,
                                      const std::optional<at::Tensor>& seed_time,
                                      c10::string_view temporal_strategy) {
  check_index_vector(colptr, kNeighborSample, "colptr");
  check_index_vector(row, kNeighborSample, "row");
  check_index_vector(seed, kNeighborSample, "seed");
  check_same_index_dtype(colptr, row, kNeighborSample, "row");
  check_same_index_dtype(colptr, seed, kNeighborSample, "seed");
  TORCH_CHECK_VALUE(colptr.numel() >= 1, kNeighborSample,
                    ": colptr must have num_nodes + 1 >= 1 entries, got none");
  check_optional_vector(kNeighborSample, weight, at::kDouble, row.numel(), "weight",
                        "entries (one per entry of row)");
  check_optional_vector(kNeighborSample, node_time, at::kLong, colptr.numel() - 1, "node_time",
                        "entries (one per node)");
  check_optional_vector(kNeighborSample, edge_time, at::kLong, row.numel(), "edge_time",
                        "entries (one per entry of row)");
  check_optional_vector(kNeighborSample, seed_time, at::kLong, seed.numel(), "seed_time",
                        "entries (one per seed)");
  check_not_weighted_temporal(kNeighborSample, kTensorInputs, weight.has_value(),
                              node_time || edge_time);
  return NeighborSampleOptions{replace,
                               disjoint,
                               static_cast<uint64_t>(rng_seed),
                               optional_cptr<double>(weight),
                               optional_cptr<int64_t>(node_time),
                               optional_cptr<int64_t>(edge_time),
                               optional_cptr<int64_t>(seed_time),
                               parse_temporal_strategy(kNeighborSample, temporal_strategy)};
}

// pyg-lib's node output: the global ids, or (seed position, global id) pairs with disjoint.
at::Tensor node_output(at::Tensor node, const at::Tensor& batch, bool disjoint) {
  return disjoint ? at::stack({batch, node}, 1) : node;
}

// The host backend: the CPU kernel, its outputs adopted without copies.
struct CpuSampler {
  static void check_devices(const at::Tensor&, std::initializer_list<const at::Tensor*>,
                            std::initializer_list<const std::optional<at::Tensor>*>) {}
  static SampleOutputs sample(const at::Tensor& colptr, const at::Tensor& row,
                              const at::Tensor& seed, const std::vector<int64_t>& fanouts,
                              const NeighborSampleOptions& options) {
    const at::TensorOptions index_options = colptr.options();
    SampleOutputs out;
    dispatch_index(colptr.scalar_type(), kNeighborSample, [&](auto tag) {
      using I = typename decltype(tag)::type;
      SampledSubgraph<I> s = translate_errors([&] {
        return cpu::neighbor_sample<I>(cptr<I>(colptr), colptr.numel() - 1, cptr<I>(row),
                                       row.numel(), cptr<I>(seed), seed.numel(), fanouts, options);
      });
      at::Tensor batch = adopt(std::move(s.batch), index_options);
      out = {adopt(std::move(s.row), index_options), adopt(std::move(s.col), index_options),
             node_output(adopt(std::move(s.node), index_options), batch, options.disjoint),
             adopt(std::move(s.edge), index_options), std::move(s.num_sampled_nodes),
             std::move(s.num_sampled_edges)};
    });
    return out;
  }
};

#if defined(IOGNN_CUDA_BINDING)
// The device backend: every input on colptr's device (the dispatcher picks it when any input is
// a CUDA tensor, so colptr itself may be the odd one out).
struct CudaSampler {
  static void check_devices(const at::Tensor& colptr,
                            std::initializer_list<const at::Tensor*> row_and_seed,
                            std::initializer_list<const std::optional<at::Tensor>*> options) {
    const char* names[] = {"row", "seed", "weight", "node_time", "edge_time", "seed_time"};
    int n = 0;
    for (const at::Tensor* t : row_and_seed)
      check_device(*t, colptr, kNeighborSample, names[n++], "colptr");
    for (const std::optional<at::Tensor>* t : options) {
      if (*t) check_device(**t, colptr, kNeighborSample, names[n], "colptr");
      ++n;
    }
  }
  static SampleOutputs sample(const at::Tensor& colptr, const at::Tensor& row,
                              const at::Tensor& seed, const std::vector<int64_t>& fanouts,
                              const NeighborSampleOptions& options) {
    const DeviceScope scope(colptr);
    TorchArena arena(colptr);
    SampleOutputs out;
    dispatch_index(colptr.scalar_type(), kNeighborSample, [&](auto tag) {
      using I = typename decltype(tag)::type;
      cuda::DeviceSubgraph<I> s = translate_errors([&] {
        const cuda::SampleGraph<I> graph{cptr<I>(colptr), colptr.numel() - 1, cptr<I>(row),
                                         row.numel(), cptr<I>(seed), seed.numel()};
        return cuda::neighbor_sample<I>(graph, fanouts, options, arena, scope.stream);
      });
      const bool disjoint = options.disjoint;
      out = {arena.tensor(s.row, s.num_edges, colptr), arena.tensor(s.col, s.num_edges, colptr),
             node_output(arena.tensor(s.node, s.num_nodes, colptr),
                         arena.tensor(s.batch, disjoint ? s.num_nodes : 0, colptr), disjoint),
             arena.tensor(s.edge, s.num_edges, colptr), std::move(s.num_sampled_nodes),
             std::move(s.num_sampled_edges)};
    });
    return out;
  }
};
#endif

// The op: the checks both backends share, then the backend's kernel.
template <class Backend>
SampleOutputs neighbor_sample(const at::Tensor& colptr, const at::Tensor& row,
                              const at::Tensor& seed, at::IntArrayRef num_neighbors, bool replace,
                              bool disjoint, int64_t rng_seed,
                              const std::optional<at::Tensor>& weight,
                              const std::optional<at::Tensor>& node_time,
                              const std::optional<at::Tensor>& edge_time,
                              const std::optional<at::Tensor>& seed_time,
                              c10::string_view temporal_strategy) {
  Backend::check_devices(colptr, {&row, &seed}, {&weight, &node_time, &edge_time, &seed_time});
  const NeighborSampleOptions options =
      checked_options(colptr, row, seed, replace, disjoint, rng_seed, weight, node_time,
                      edge_time, seed_time, temporal_strategy);
  const std::vector<int64_t> fanouts(num_neighbors.begin(), num_neighbors.end());
  return Backend::sample(colptr, row, seed, fanouts, options);
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(iognn, m) {
  m.def(
      "neighbor_sample(Tensor colptr, Tensor row, Tensor seed, int[] num_neighbors, "
      "bool replace=False, bool disjoint=False, int rng_seed=0, Tensor? weight=None, "
      "Tensor? node_time=None, Tensor? edge_time=None, Tensor? seed_time=None, "
      "str temporal_strategy='uniform') -> "
      "(Tensor row, Tensor col, "
      "Tensor node, Tensor edge_id, int[] num_sampled_nodes, int[] num_sampled_edges)");
}

TORCH_LIBRARY_IMPL(iognn, CPU, m) { m.impl("neighbor_sample", &neighbor_sample<CpuSampler>); }

#if defined(IOGNN_CUDA_BINDING)
TORCH_LIBRARY_IMPL(iognn, CUDA, m) { m.impl("neighbor_sample", &neighbor_sample<CudaSampler>); }
#endif

}  // namespace iognn::torch_ext

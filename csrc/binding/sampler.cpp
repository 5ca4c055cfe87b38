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
// iognn::neighbor_sample_padded takes the same inputs, with the key as a one-entry int64 tensor
// (rng_seed) and an int64 error word (error, initialised to -1), and returns the padded layout of
// kernels/sampler_types.h, num_sampled_nodes / num_sampled_edges as int64 tensors. On a device it
// never waits for the host: the first failed check's code (PaddedSampleError) is folded into error.
// On the CPU it raises as neighbor_sample does, and leaves error alone.
// CPU and CUDA (every tensor on colptr's device); no Meta kernel (the output sizes depend on the
// graph's data); no autograd (sampling is not differentiable).
#include <ATen/ATen.h>
#include <torch/library.h>

#include <initializer_list>
#include <limits>
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
using PaddedOutputs = std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor,
                                 at::Tensor>;

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

// The largest id colptr's index dtype holds.
int64_t max_index(const at::Tensor& colptr) {
  return colptr.scalar_type() == at::kInt ? int64_t(std::numeric_limits<int32_t>::max())
                                          : std::numeric_limits<int64_t>::max();
}

// pyg-lib's node output: the global ids, or (seed position, global id) pairs with disjoint.
at::Tensor node_output(at::Tensor node, const at::Tensor& batch, bool disjoint) {
  return disjoint ? at::stack({batch, node}, 1) : node;
}

// The padded layout of an unpadded sample (the host backend's padded op).
PaddedOutputs pad_sample(SampleOutputs sample, const std::vector<int64_t>& caps, int64_t num_seeds) {
  auto& [row, col, node, edge, num_nodes, num_edges] = sample;
  int64_t edge_cap = 0;
  for (const int64_t c : caps) edge_cap += c;
  const auto pad = [](const at::Tensor& t, int64_t size) {
    std::vector<int64_t> shape = t.sizes().vec();
    shape[0] = size;
    at::Tensor out = at::full(shape, -1, t.options());
    out.narrow(0, 0, t.size(0)).copy_(t);
    return out;
  };
  at::Tensor padded[3];
  int n = 0;
  for (const at::Tensor* t : {&row, &col, &edge}) {
    at::Tensor& out = padded[n++] = at::full({edge_cap}, -1, t->options());
    int64_t from = 0, to = 0;
    for (size_t h = 0; h < caps.size(); ++h) {
      out.narrow(0, to, num_edges[h]).copy_(t->narrow(0, from, num_edges[h]));
      from += num_edges[h];
      to += caps[h];
    }
  }
  const at::TensorOptions counts = at::TensorOptions().dtype(at::kLong);
  return {padded[0], padded[1], pad(node, num_seeds + edge_cap), padded[2],
          at::tensor(num_nodes, counts), at::tensor(num_edges, counts)};
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
  static PaddedOutputs sample_padded(const at::Tensor& colptr, const at::Tensor& row,
                                     const at::Tensor& seed, const std::vector<int64_t>& fanouts,
                                     NeighborSampleOptions options, const at::Tensor& rng_seed,
                                     const at::Tensor&) {
    const std::vector<int64_t> caps = translate_errors([&] {
      return padded_hop_capacities(kNeighborSample, seed.numel(), fanouts, max_index(colptr));
    });
    options.rng_seed = static_cast<uint64_t>(rng_seed.item<int64_t>());
    return pad_sample(sample(colptr, row, seed, fanouts, options), caps, seed.numel());
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
  static PaddedOutputs sample_padded(const at::Tensor& colptr, const at::Tensor& row,
                                     const at::Tensor& seed, const std::vector<int64_t>& fanouts,
                                     const NeighborSampleOptions& options,
                                     const at::Tensor& rng_seed, const at::Tensor& error) {
    const DeviceScope scope(colptr);
    TorchArena arena(colptr);
    PaddedOutputs out;
    dispatch_index(colptr.scalar_type(), kNeighborSample, [&](auto tag) {
      using I = typename decltype(tag)::type;
      cuda::DeviceSubgraph<I> s = translate_errors([&] {
        const cuda::SampleGraph<I> graph{cptr<I>(colptr), colptr.numel() - 1, cptr<I>(row),
                                         row.numel(), cptr<I>(seed), seed.numel()};
        return cuda::neighbor_sample_padded<I>(
            graph, fanouts, options, rng_seed.data_ptr<int64_t>(),
            reinterpret_cast<unsigned long long*>(error.data_ptr<int64_t>()), arena,
            scope.stream);
      });
      const int64_t hops = int64_t(fanouts.size());
      const at::Tensor counts = arena.tensor(s.device_counts, 2 * hops + 1, rng_seed);
      out = {arena.tensor(s.row, s.num_edges, colptr), arena.tensor(s.col, s.num_edges, colptr),
             node_output(arena.tensor(s.node, s.num_nodes, colptr),
                         arena.tensor(s.batch, options.disjoint ? s.num_nodes : 0, colptr),
                         options.disjoint),
             arena.tensor(s.edge, s.num_edges, colptr), counts.narrow(0, 0, hops + 1),
             counts.narrow(0, hops + 1, hops)};
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

// A one-entry int64 tensor on colptr's device: the padded op's key and error word.
void check_scalar_input(const at::Tensor& t, const at::Tensor& colptr, const char* name) {
  check_dtype(t, at::kLong, kNeighborSample, name);
  TORCH_CHECK_VALUE(t.numel() == 1 && t.is_contiguous(), kNeighborSample, ": ", name,
                    " must be a contiguous int64 tensor of one entry, got shape ", t.sizes());
  check_device(t, colptr, kNeighborSample, name, "colptr");
}

template <class Backend>
PaddedOutputs neighbor_sample_padded(
    const at::Tensor& colptr, const at::Tensor& row, const at::Tensor& seed,
    at::IntArrayRef num_neighbors, const at::Tensor& rng_seed, const at::Tensor& error,
    bool replace, bool disjoint, const std::optional<at::Tensor>& weight,
    const std::optional<at::Tensor>& node_time, const std::optional<at::Tensor>& edge_time,
    const std::optional<at::Tensor>& seed_time, c10::string_view temporal_strategy) {
  Backend::check_devices(colptr, {&row, &seed}, {&weight, &node_time, &edge_time, &seed_time});
  check_scalar_input(rng_seed, colptr, "rng_seed");
  check_scalar_input(error, colptr, "error");
  const NeighborSampleOptions options =
      checked_options(colptr, row, seed, replace, disjoint, 0, weight, node_time, edge_time,
                      seed_time, temporal_strategy);
  const std::vector<int64_t> fanouts(num_neighbors.begin(), num_neighbors.end());
  return Backend::sample_padded(colptr, row, seed, fanouts, options, rng_seed, error);
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
  m.def(
      "neighbor_sample_padded(Tensor colptr, Tensor row, Tensor seed, int[] num_neighbors, "
      "Tensor rng_seed, Tensor(a!) error, bool replace=False, bool disjoint=False, "
      "Tensor? weight=None, Tensor? node_time=None, Tensor? edge_time=None, "
      "Tensor? seed_time=None, str temporal_strategy='uniform') -> "
      "(Tensor row, Tensor col, Tensor node, Tensor edge_id, Tensor num_sampled_nodes, "
      "Tensor num_sampled_edges)");
}

TORCH_LIBRARY_IMPL(iognn, CPU, m) {
  m.impl("neighbor_sample", &neighbor_sample<CpuSampler>);
  m.impl("neighbor_sample_padded", &neighbor_sample_padded<CpuSampler>);
}

#if defined(IOGNN_CUDA_BINDING)
TORCH_LIBRARY_IMPL(iognn, CUDA, m) {
  m.impl("neighbor_sample", &neighbor_sample<CudaSampler>);
  m.impl("neighbor_sample_padded", &neighbor_sample_padded<CudaSampler>);
}
#endif

}  // namespace iognn::torch_ext

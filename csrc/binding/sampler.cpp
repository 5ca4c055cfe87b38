// iognn::neighbor_sample: schema, checks and the host backend (kernel: kernels/cpu/neighbor_sample.h,
// contract: kernels/sampler_types.h). The outputs follow pyg-lib's neighbor_sample with csc=True:
//   row, col, edge_id [num_sampled_edges]   local ids of neighbour and frontier node; CSC positions
//   node  [num_nodes]     global ids, or [num_nodes, 2] (seed position, global id) with disjoint
//   num_sampled_nodes (num_hops + 1 entries), num_sampled_edges (num_hops entries)
// all index tensors in the graph's index dtype. rng_seed's 64 bits are the generator's key.
// weight (optional): float64 [len(row)], the edge weights in CSC order (weighted sampling).
// node_time [num_nodes] / edge_time [len(row), CSC order] / seed_time [len(seed)] (optional, int64)
// and temporal_strategy ('uniform' or 'last'): temporal sampling; weight with a time raises
// NotImplementedError, as pyg-lib does.
// CPU only: no CUDA kernel yet (a CUDA input raises NotImplementedError); no Meta kernel (the
// output sizes depend on the graph's data); no autograd (sampling is not differentiable).
#include <ATen/ATen.h>
#include <torch/library.h>

#include <optional>
#include <tuple>
#include <vector>

#include "binding/utils.h"
#include "kernels/cpu/neighbor_sample.h"

namespace iognn::torch_ext {
namespace {

constexpr const char* kNeighborSample = "iognn::neighbor_sample";

using SampleOutputs = std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor,
                                 std::vector<int64_t>, std::vector<int64_t>>;

// A 1-D tensor that takes over `values` without copying them.
template <typename T>
at::Tensor adopt(std::vector<T>&& values, const at::TensorOptions& options) {
  if (values.empty()) return at::empty({0}, options);
  auto* owner = new std::vector<T>(std::move(values));
  return at::from_blob(owner->data(), {int64_t(owner->size())},
                       [owner](void*) { delete owner; }, options);
}

// An optional per-node / per-edge / per-seed input: 1-D, of `dtype`, `size` entries, contiguous.
void check_optional_vector(const std::optional<at::Tensor>& t, at::ScalarType dtype, int64_t size,
                           const char* name, const char* what) {
  if (!t) return;
  check_dim(*t, 1, kNeighborSample, name);
  check_dtype(*t, dtype, kNeighborSample, name);
  check_size(*t, 0, size, kNeighborSample, name, what);
  TORCH_CHECK_VALUE(t->is_contiguous(), kNeighborSample, ": ", name, " must be contiguous");
}

TemporalStrategy parse_temporal_strategy(c10::string_view strategy) {
  if (strategy == "uniform") return TemporalStrategy::kUniform;
  TORCH_CHECK_VALUE(strategy == "last", kNeighborSample,
                    ": temporal_strategy must be 'uniform' or 'last', got '", strategy, "'");
  return TemporalStrategy::kLast;
}

SampleOutputs neighbor_sample_cpu(const at::Tensor& colptr, const at::Tensor& row,
                                  const at::Tensor& seed, at::IntArrayRef num_neighbors,
                                  bool replace, bool disjoint, int64_t rng_seed,
                                  const std::optional<at::Tensor>& weight,
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
  check_optional_vector(weight, at::kDouble, row.numel(), "weight",
                        "entries (one per entry of row)");
  check_optional_vector(node_time, at::kLong, colptr.numel() - 1, "node_time",
                        "entries (one per node)");
  check_optional_vector(edge_time, at::kLong, row.numel(), "edge_time",
                        "entries (one per entry of row)");
  check_optional_vector(seed_time, at::kLong, seed.numel(), "seed_time",
                        "entries (one per seed)");
  TORCH_CHECK_NOT_IMPLEMENTED(!(weight && (node_time || edge_time)), kNeighborSample,
                              ": weighted temporal sampling (weight with node_time / edge_time) "
                              "is not supported");
  const NeighborSampleOptions options{replace,
                                      disjoint,
                                      static_cast<uint64_t>(rng_seed),
                                      optional_cptr<double>(weight),
                                      optional_cptr<int64_t>(node_time),
                                      optional_cptr<int64_t>(edge_time),
                                      optional_cptr<int64_t>(seed_time),
                                      parse_temporal_strategy(temporal_strategy)};
  const std::vector<int64_t> fanouts(num_neighbors.begin(), num_neighbors.end());
  const at::TensorOptions index_options = colptr.options();
  SampleOutputs out;
  dispatch_index(colptr.scalar_type(), kNeighborSample, [&](auto tag) {
    using I = typename decltype(tag)::type;
    SampledSubgraph<I> s = translate_errors([&] {
      return cpu::neighbor_sample<I>(cptr<I>(colptr), colptr.numel() - 1, cptr<I>(row),
                                     row.numel(), cptr<I>(seed), seed.numel(), fanouts, options);
    });
    at::Tensor node = adopt(std::move(s.node), index_options);
    if (disjoint) node = at::stack({adopt(std::move(s.batch), index_options), node}, 1);
    out = {adopt(std::move(s.row), index_options), adopt(std::move(s.col), index_options),
           std::move(node), adopt(std::move(s.edge), index_options),
           std::move(s.num_sampled_nodes), std::move(s.num_sampled_edges)};
  });
  return out;
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

TORCH_LIBRARY_IMPL(iognn, CPU, m) { m.impl("neighbor_sample", &neighbor_sample_cpu); }

#if defined(IOGNN_CUDA_BINDING)
// No device kernel yet: a CUDA input raises NotImplementedError naming the op (not the
// dispatcher's generic missing-kernel message), and nothing is copied to the host behind the
// caller's back.
TORCH_LIBRARY_IMPL(iognn, CUDA, m) {
  m.impl("neighbor_sample",
         [](const at::Tensor& colptr, const at::Tensor& row, const at::Tensor& seed,
            at::IntArrayRef, bool, bool, int64_t, const std::optional<at::Tensor>& weight,
            const std::optional<at::Tensor>& node_time,
            const std::optional<at::Tensor>& edge_time,
            const std::optional<at::Tensor>& seed_time, c10::string_view) -> SampleOutputs {
           const at::Tensor* cuda_input = &colptr;  // the first CUDA input, named in the error
           for (const at::Tensor* t : {&colptr, &row, &seed})
             if (t->is_cuda()) {
               cuda_input = t;
               break;
             }
           if (!cuda_input->is_cuda())
             for (const auto* t : {&weight, &node_time, &edge_time, &seed_time})
               if (*t && (*t)->is_cuda()) {
                 cuda_input = &**t;
                 break;
               }
           not_implemented_on(kNeighborSample, *cuda_input);
         });
}
#endif

}  // namespace iognn::torch_ext

// Neighbour sampling, host kernel (contract: kernels/sampler_types.h): each hop runs the passes of
// kernels/cpu/neighbor_draws.h over the frontier, with the graph as the one CSC.
#include "kernels/cpu/neighbor_sample.h"

#include <cstdint>
#include <vector>

#include "kernels/cpu/neighbor_draws.h"
#include "kernels/sampler_checks.h"

namespace iognn::cpu {

template <typename index_t>
SampledSubgraph<index_t> neighbor_sample(const index_t* colptr, int64_t num_nodes,
                                         const index_t* row, int64_t num_edges,
                                         const index_t* seed, int64_t num_seeds,
                                         const std::vector<int64_t>& num_neighbors,
                                         const NeighborSampleOptions& options) {
  using namespace sampling;
  check_sample_num_nodes(num_nodes);
  const CscNames names = graph_names(num_nodes);
  check_sample_arguments(names, int64_t(colptr[0]), int64_t(colptr[num_nodes]), num_nodes,
                         num_edges, seed, num_seeds, num_neighbors, options);
  const bool disjoint = options.disjoint;
  const CscView<index_t> graph{colptr, row, num_nodes, num_edges, options.weight, &names};
  SampledSubgraph<index_t> out;
  LocalIds<index_t> ids(num_nodes, disjoint ? num_seeds : 1);
  out.node.assign(seed, seed + num_seeds);
  for (int64_t i = 0; i < num_seeds; ++i) {
    ids.insert(disjoint ? i * num_nodes + seed[i] : int64_t(seed[i]), i);
    if (disjoint) out.batch.push_back(index_t(i));
  }
  out.num_sampled_nodes.push_back(num_seeds);

  std::vector<int64_t> seed_time;  // one per tree, with temporal sampling
  if (options.node_time || options.edge_time)
    for (int64_t i = 0; i < num_seeds; ++i)
      seed_time.push_back(options.seed_time ? options.seed_time[i] : options.node_time[seed[i]]);
  const TemporalFilter<index_t> temporal(graph, options.node_time, options.edge_time, seed_time,
                                         options.temporal_strategy);
  int64_t begin = 0;  // the frontier: the local ids [begin, end) found by the previous hop
  for (const int64_t k : num_neighbors) {
    const int64_t end = int64_t(out.node.size());
    const int64_t first_edge = int64_t(out.edge.size());
    const int64_t hop_edges =
        sample_frontier(graph, temporal, out.node, out.batch, begin, end, k, options.replace,
                        options.rng_seed, out.edge, out.col);
    relabel_neighbors(graph, out.edge, out.col, first_edge, disjoint, out.batch,
                      SourceNodes<index_t>{ids, out.node, out.batch}, out.row);
    out.num_sampled_nodes.push_back(int64_t(out.node.size()) - end);
    out.num_sampled_edges.push_back(hop_edges);
    begin = end;
  }
  return out;
}

template SampledSubgraph<int32_t> neighbor_sample<int32_t>(const int32_t*, int64_t, const int32_t*,
                                                           int64_t, const int32_t*, int64_t,
                                                           const std::vector<int64_t>&,
                                                           const NeighborSampleOptions&);
template SampledSubgraph<int64_t> neighbor_sample<int64_t>(const int64_t*, int64_t, const int64_t*,
                                                           int64_t, const int64_t*, int64_t,
                                                           const std::vector<int64_t>&,
                                                           const NeighborSampleOptions&);

}  // namespace iognn::cpu

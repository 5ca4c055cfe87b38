// Neighbour sampling family: the contract of the mini-batch path's samplers.
//
// Input: a square graph in CSC form (colptr [N + 1], row [E]: the in-neighbours of node v are
// row[colptr[v] .. colptr[v + 1])), the seeds, one fan-out per hop, and the options below.
// Hop h takes the nodes found by hop h - 1 (the seeds for h = 0) as its frontier and, for each
// frontier node in order, samples k = num_neighbors[h] of its in-neighbour positions:
//   k < 0 or (k >= degree without replacement)  every position, in CSC order;
//   without replacement                         k distinct positions, uniformly (Floyd's method);
//   with replacement                            k independent uniform positions (repeats occur).
// With edge weights (options.weight: finite, >= 0) a zero-weight position is never sampled and the
// population is the node's positive-weight positions:
//   k < 0 or (k >= positives without replacement)  every positive-weight position, in CSC order;
//   without replacement  k distinct positions, drawn in turn with probability proportional to
//                        weight among those left (torch.multinomial's distribution, which pyg-lib
//                        uses; here: the k smallest exponential keys E / w, E ~ Exp(1));
//   with replacement     k independent positions, each with probability w / sum(w).
// pyg-lib differs at the edges: it takes zero-weight positions too when it takes every position
// (k < 0 or k >= degree), and raises when 0 < positives < k < degree or when all weights are 0.
// Temporal sampling (options.node_time or options.edge_time; needs disjoint, as in pyg-lib and PyG,
// which forces it): every tree has a time, seed_time[i] (default node_time[seed[i]]; required with
// edge_time), and a position p of a node in tree i is eligible when its time, node_time[row[p]] or
// edge_time[p], is <= that seed time (the seeds themselves are not filtered). The population is the
// node's eligible positions, in CSC order; with strategy `last` and k >= 0 it is cut to the k most
// recent of them (the largest times, a tie going to the later CSC position: pyg-lib's choice on
// PyG's time-sorted CSC), and the unweighted rules above apply to that population (with
// replacement: k draws among the k most recent, as in pyg-lib). Time-sorted neighbourhoods are not
// required. Weights and times together are rejected, as pyg-lib rejects them.
// Sampled neighbours are relabelled to local ids in the order they are first seen: the seeds take
// 0 .. num_seeds - 1 (each seed position its own id, so a duplicated seed is sampled once per
// position and node[:num_seeds] == seed always; a neighbour equal to a duplicated seed takes the
// first occurrence's id), then each new node the next id. With `disjoint` a local id stands for a
// (seed position, node) pair: every seed grows its own tree and trees share no ids.
//
// Outputs (SampledSubgraph), in the layout pyg-lib's neighbor_sample returns with csc=True:
//   row[e], col[e]   local ids of the sampled neighbour and of the frontier node: messages flow
//                    row -> col; edges are grouped by hop, then by frontier node in order
//   node[l]          global id of local id l;  batch[l]: its seed position (disjoint only)
//   edge[e]          the CSC position sampled (PyG maps it back through its own permutation)
//   num_sampled_nodes[h]  nodes first seen at hop h (entry 0: the seeds), num_hops + 1 entries
//   num_sampled_edges[h]  edges sampled at hop h, num_hops entries
//
// Randomness: draw d of the frontier node with local id l is a pure function of
// (rng_seed, l, d) (kernels/sampler_draws.h: a counter hash, core/counter_rng.h), so a result
// depends on rng_seed only: not on thread count, on how the frontier is split across threads, or
// on the backend (the CUDA kernel gives the host kernel's result; see kernels/cuda/neighbor_sample.h
// for weighted sampling's last-ulp caveat).
// (Weighted sampling without replacement draws one key per in-edge: d is its offset in the node's
// CSC range.)
//
// Validation: seeds, fan-outs, colptr's ends and the temporal options' combination are checked up
// front; colptr's entries and row's values are checked where the sampler reads them (O(sampled
// edges), not O(E), per call), and so are the weights (every in-edge weight of each expanded node,
// as the draws read them all; temporal sampling likewise reads every in-edge's time). Times may be
// any int64 values. Errors name the argument (IndexError: a node id out of range; ValueError:
// anything else).
//
// Heterogeneous graphs (pyg-lib's hetero_neighbor_sample, csc=True): node types 0 .. T - 1, and
// edge types (src_type -> dst_type), each with its CSC over its destination type's nodes (colptr
// [num_nodes[dst_type] + 1]) whose row values are ids of src_type's nodes, and per-edge-type
// weights or edge times as above (node times are per node type). Seeds come in sets, each of one
// node type; with disjoint the trees are numbered across the sets in the order given. Hop h takes,
// for each node type, its nodes first seen at hop h - 1 as its frontier, and for each edge type in
// order samples num_neighbors[edge type][h] in-neighbours (of src_type) of every dst_type frontier
// node, by the rules above (a time filter applies where the neighbour's type has node times or the
// edge type has edge times). Local ids are per node type, in first-seen order: the seeds first,
// then within a hop by edge type in order, then in edge order, as above; a node found at hop h by
// two edge types keeps the first one's id, and frontiers change only between hops. Draw d of a
// frontier node with local id l (in its node type) for edge type t is that of the homogeneous
// sampler keyed by edge_type_key(rng_seed, t) (kernels/sampler_draws.h). Outputs: per node type,
// node / batch / num_sampled_nodes (num_hops + 1 entries); per edge type, row (local ids of
// src_type), col (local ids of dst_type), edge (its CSC positions), num_sampled_edges (num_hops).
//
// Padded sampling (iognn::neighbor_sample_padded): the same sample, laid out in buffers whose
// sizes depend only on the seed count and the fan-outs (every fan-out >= 0), so that a sample can
// be drawn with no host synchronisation and inside a captured CUDA graph. Hop h may sample at most
// cap[h] = cap[h - 1] * k_h edges (cap[-1] = num_seeds: a frontier is at most the previous hop's
// edges), so row / col / edge have sum(cap) entries, hop h's edges at [sum(cap[:h]),
// sum(cap[:h]) + num_sampled_edges[h]), and node (and batch) num_seeds + sum(cap) entries, the
// sample's nodes first; every other entry is -1. num_sampled_nodes / num_sampled_edges are tensors
// on the graph's device, and the generator's key is read from a device scalar, so a replayed
// capture draws a new sample when that scalar changes. On a device, errors are not raised: the
// first failed check's code (PaddedSampleError) is folded into a caller's error word with
// atomicMin, for the caller to check when it synchronises anyway.
//
// There is no Meta kernel: the output sizes depend on the graph's data, not only on the input
// shapes. There is no autograd: sampling is not differentiable.
//
// The family's places:
//   contract (this file)           kernels/sampler_types.h
//   random draws (host and device) kernels/sampler_draws.h
//   checks and their messages      kernels/sampler_checks.h (both ops, both backends, padded
//                                  capacities), kernels/hetero_sampler_checks.h (the hetero op's)
//   host kernels                   kernels/cpu/neighbor_sample.{h,cpp} (homogeneous),
//                                  kernels/cpu/hetero_neighbor_sample.{h,cpp} (heterogeneous),
//                                  kernels/cpu/neighbor_draws.h (their shared draws and passes)
//   device kernels                 kernels/cuda/neighbor_sample.{h,cu} (homogeneous and padded),
//                                  kernels/cuda/hetero_neighbor_sample.{h,cu} (heterogeneous),
//                                  kernels/cuda/neighbor_sample_hop.cuh (their hop kernels),
//                                  kernels/cuda/neighbor_sample_draws.cuh (per-node draws)
//   bindings                       binding/sampler.cpp (schemas, CPU and CUDA, padded op),
//                                  binding/hetero_sampler.cpp (iognn::hetero_neighbor_sample),
//                                  binding/sampler_tensors.h (their tensor checks and outputs),
//                                  binding/cuda/torch_arena.h (device memory of the CUDA kernels)
//   Python                         python/iognn/sampler.py (PyG NeighborSampler subclass),
//                                  python/iognn/loader.py (PyG NeighborLoader, LinkNeighborLoader
//                                  with that sampler), python/iognn/padded_sampler.py (padded)
//   tests                          tests/cpp/test_neighbor_sample.cpp,
//                                  tests/cpp/test_hetero_neighbor_sample.cpp,
//                                  tests/python/test_sampler.py, tests/python/test_sampler_hetero.py,
//                                  tests/python/test_sampler_cuda.py,
//                                  tests/python/test_sampler_hetero_cuda.py (CUDA == CPU),
//                                  tests/python/test_padded_sampler.py
//   timing                         scripts/profile_sampler.py
//   docs                           docs/sampler.md
#pragma once

#include <cstdint>
#include <vector>

namespace iognn {

enum class TemporalStrategy { kUniform, kLast };

struct NeighborSampleOptions {
  bool replace = false;
  bool disjoint = false;
  uint64_t rng_seed = 0;
  // Edge weights in CSC order (one per entry of row), or nullptr for uniform sampling. fp64: it
  // holds fp32 / fp16 / bf16 weights exactly, and the exponential keys keep their resolution.
  const double* weight = nullptr;
  // Temporal sampling (at most one of node_time [num_nodes] / edge_time [num_edges, CSC order]),
  // seed_time [num_seeds] (optional with node_time), and the temporal strategy.
  const int64_t* node_time = nullptr;
  const int64_t* edge_time = nullptr;
  const int64_t* seed_time = nullptr;
  TemporalStrategy temporal_strategy = TemporalStrategy::kUniform;
};

template <typename index_t>
struct SampledSubgraph {
  std::vector<index_t> row, col, edge;  // one entry per sampled edge
  std::vector<index_t> node;            // one entry per local id
  std::vector<index_t> batch;           // one entry per local id with disjoint, else empty
  std::vector<int64_t> num_sampled_nodes, num_sampled_edges;
};

// Heterogeneous sampling's inputs and outputs (see above).
template <typename index_t>
struct HeteroEdgeType {
  int64_t src_type, dst_type;
  const index_t* colptr;  // num_nodes[dst_type] + 1 entries
  const index_t* row;     // num_edges entries, ids of src_type's nodes
  int64_t num_edges;
  const double* weight = nullptr;     // or one per entry of row
  const int64_t* edge_time = nullptr;  // or one per entry of row
};

template <typename index_t>
struct HeteroSeeds {
  int64_t node_type;
  const index_t* seed;
  int64_t num_seeds;
  const int64_t* seed_time = nullptr;  // or one per seed
};

struct HeteroSampleOptions {
  bool replace = false;
  bool disjoint = false;
  uint64_t rng_seed = 0;
  std::vector<const int64_t*> node_time;  // empty, or one per node type (nullptr: no times)
  TemporalStrategy temporal_strategy = TemporalStrategy::kUniform;
};

template <typename index_t>
struct SampledNodes {
  std::vector<index_t> node, batch;  // batch: with disjoint only
  std::vector<int64_t> num_sampled_nodes;
};

template <typename index_t>
struct SampledEdges {
  std::vector<index_t> row, col, edge;
  std::vector<int64_t> num_sampled_edges;
};

template <typename index_t>
struct HeteroSampledSubgraph {
  std::vector<SampledNodes<index_t>> nodes;  // one per node type
  std::vector<SampledEdges<index_t>> edges;  // one per edge type
};

}  // namespace iognn

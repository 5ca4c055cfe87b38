// Neighbour sampling on a CUDA device (contract: kernels/sampler_types.h): the host kernel's
// results (kernels/cpu/neighbor_sample.h), bit for bit for uniform and temporal sampling, computed
// on the device, hop by hop on `stream`, with one host synchronisation per hop and one at the end.
// Weighted sampling draws the same distribution, bit for bit with replacement; without
// replacement its keys use the device's log1p, which may differ from the host's in the last
// place, so a tie or a last-ulp difference may reorder two keys.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/sampler_types.h"

namespace iognn::cuda {

// Device memory for one call, stream-ordered on the call's stream (the binding: PyTorch's caching
// allocator). Blocks not released stay the caller's: the outputs live in them.
class DeviceArena {
 public:
  virtual ~DeviceArena() = default;
  virtual void* allocate(size_t bytes) = 0;  // bytes > 0
  virtual void release(void* block) = 0;     // a block from allocate, no longer used
};

// The outputs, in blocks of the arena: row, col, edge [num_edges], node [num_nodes], batch
// [num_nodes] with disjoint (else null); a pointer is null when its count is 0.
template <typename index_t>
struct DeviceSubgraph {
  index_t* row = nullptr;
  index_t* col = nullptr;
  index_t* edge = nullptr;
  index_t* node = nullptr;
  index_t* batch = nullptr;
  int64_t num_edges = 0, num_nodes = 0;
  std::vector<int64_t> num_sampled_nodes, num_sampled_edges;
  // Padded sampling: num_sampled_nodes (hops + 1 entries) then num_sampled_edges (hops), in a
  // block of the arena; the host vectors above stay empty.
  long long* device_counts = nullptr;
};

// The graph (CSC: colptr [num_nodes + 1], row [num_edges]) and the seeds, in device memory.
template <typename index_t>
struct SampleGraph {
  const index_t* colptr;
  int64_t num_nodes;
  const index_t* row;
  int64_t num_edges;
  const index_t* seed;
  int64_t num_seeds;
};

// options' weight and times are device memory too. Errors are thrown as the host kernel throws
// them (same types, same messages), after the synchronisation that reports them.
template <typename index_t>
DeviceSubgraph<index_t> neighbor_sample(const SampleGraph<index_t>& graph,
                                        const std::vector<int64_t>& num_neighbors,
                                        const NeighborSampleOptions& options, DeviceArena& arena,
                                        cudaStream_t stream);

// The padded sample (kernels/sampler_types.h) on `stream`, with no host synchronisation (and so
// capturable in a CUDA graph): outputs sized by the seed count and the fan-outs, the key read from
// *device_rng_seed (device memory), and the first failed check's PaddedSampleError folded into
// *error (device memory, ~0 for none) with atomicMin. Host-side argument errors (a fan-out of -1,
// capacities beyond index_t, the temporal options) are thrown.
template <typename index_t>
DeviceSubgraph<index_t> neighbor_sample_padded(const SampleGraph<index_t>& graph,
                                               const std::vector<int64_t>& num_neighbors,
                                               const NeighborSampleOptions& options,
                                               const int64_t* device_rng_seed,
                                               unsigned long long* error, DeviceArena& arena,
                                               cudaStream_t stream);

}  // namespace iognn::cuda

// Graph construction on a CUDA device: the twin of plan_graph + build_graph_cpu (graph.h), giving
// the same seven arrays bit for bit (same augmented order, CSR and transposed order, edge_map and
// self-loop rules), for an edge index that lives in device memory.
//
// Usage (all work is queued on `stream`; the core never allocates device memory):
//   1. cap = graph_capacity(num_src, num_dst, num_input_edges, loops): upper-bound sizes (E' is
//      known only after the input's self-loops are counted on the device);
//   2. allocate outputs of the capacity's sizes (GraphArrays, sizes in graph.h) and
//      build_graph_workspace_bytes<index_t>(cap) bytes of device scratch (256-byte aligned);
//   3. sizes = build_graph_cuda<index_t>(ei, cap, loops, out, ws, ws_bytes, s): one cooperative
//      kernel launch and one synchronisation of `stream` (the kernel reports sizes and errors
//      through pinned host memory). The first sizes.num_edges entries of the capacity-sized
//      outputs hold the graph. Deterministic.
// Throws IndexError naming the first offending edge exactly as plan_graph does, ValueError on
// negative sizes or when bits(max(num_src, num_dst)) + bits(E') > 64, DeviceError on every CUDA
// failure (naming the call). Any E' (incl. > 2^31 with int64 indices).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "core/graph.h"

namespace iognn::cuda {

// Sizes of the outputs to allocate: E' as if the input had no self-loops (an upper bound).
GraphSizes graph_capacity(int64_t num_src, int64_t num_dst, int64_t num_input_edges,
                          SelfLoops loops);

// Device scratch bytes of build_graph_cuda (about 44 bytes per edge with int32 indices).
template <typename index_t>
size_t build_graph_workspace_bytes(const GraphSizes& capacity);

// Largest in-degree (CSR row) and out-degree (transposed row) of a built graph.
struct GraphDegrees {
  int64_t max_in = 0, max_out = 0;
};

// Builds the graph into `out` (allocated for `capacity`) and returns its true sizes (and, when
// `degrees` is not null, its largest degrees, measured by the build anyway).
// Deferred (deferred_error: a device word, ~0 for none; loops must be kKeep): no synchronisation
// at all, so the build can run inside a captured CUDA graph. It returns the capacity's sizes and
// degrees of -1 (unknown); on a bad index it leaves an empty graph (zero offsets) and folds the
// index's code (2 * edge + (1 for the destination row)) into *deferred_error with atomicMin.
template <typename index_t>
GraphSizes build_graph_cuda(const EdgeIndexView& ei, const GraphSizes& capacity, SelfLoops loops,
                            const GraphArrays<index_t>& out, void* workspace,
                            size_t workspace_bytes, cudaStream_t stream,
                            GraphDegrees* degrees = nullptr,
                            unsigned long long* deferred_error = nullptr);

}  // namespace iognn::cuda

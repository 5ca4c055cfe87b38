// Graph construction on a CUDA device: the twin of plan_graph + build_graph_cpu (graph.h), giving
// the same seven arrays bit for bit (same augmented order, CSR and transposed order, edge_map and
// self-loop rules), for an edge index that lives in device memory.
//
// Usage (all work is queued on `stream`; the core never allocates device memory):
//   1. plan = plan_graph_cuda(ei, num_src, num_dst, loops, ws, plan_graph_workspace_bytes(), s)
//      validates every index and counts the input self-loops in one pass, then copies 24 bytes back
//      and synchronises `stream` once (the only sync of a build). Throws IndexError naming the first
//      offending edge exactly as plan_graph does, ValueError on negative sizes or on a graph whose
//      node counts need more than 64 key bits together (num_src * num_dst > 2^64).
//   2. allocate the outputs (GraphArrays, sizes in graph.h) and
//      build_graph_workspace_bytes<index_t>(plan) bytes of device scratch (256-byte aligned);
//   3. build_graph_cuda<index_t>(ei, plan, loops, out, ws, ws_bytes, s): no sync, deterministic.
// Every CUDA failure throws DeviceError naming the call. Any E' (incl. > 2^31 with int64 indices).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "core/graph.h"

namespace iognn::cuda {

// Device scratch bytes of plan_graph_cuda.
size_t plan_graph_workspace_bytes();

GraphSizes plan_graph_cuda(const EdgeIndexView& ei, int64_t num_src, int64_t num_dst,
                           SelfLoops loops, void* workspace, size_t workspace_bytes,
                           cudaStream_t stream);

// Device scratch bytes of build_graph_cuda for a planned graph (queries CUB; launches nothing).
template <typename index_t>
size_t build_graph_workspace_bytes(const GraphSizes& sizes, SelfLoops loops);

template <typename index_t>
void build_graph_cuda(const EdgeIndexView& ei, const GraphSizes& sizes, SelfLoops loops,
                      const GraphArrays<index_t>& out, void* workspace, size_t workspace_bytes,
                      cudaStream_t stream);

}  // namespace iognn::cuda

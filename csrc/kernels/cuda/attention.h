// Attention family (GAT, GATv2, Graph Transformer) on a CUDA device: the twin of the host kernels
// in kernels/cpu/{gat,gatv2,transformer}.h, with the same math, the same dropout mask
// (core/dropout_rng.h, keyed by the augmented edge id) and the same outputs:
//   out [num_dst, H, C] (T), lse [num_dst, H] (acc_t<T>), alpha [E', H] (T, augmented edge
//   order, only when requested), and in backward one gradient per input (contiguous, T).
// See kernels/cpu/attention_common.h for the formulas.
//
// Usage: all pointers are device pointers; every launch is queued on `stream`; the kernels never
// allocate, never synchronise (CUDA-graph capturable) and are bit-for-bit deterministic run to run
// (every output element is summed by one thread in a fixed order, no float atomics).
//   1. bytes = <variant>_<forward|backward>_workspace_bytes<T, index_t>(graph, cfg, edge_dim)
//      (host arithmetic only: the graph's sizes are read, its pointers are not);
//   2. a device workspace of that many bytes, 256-byte aligned;
//   3. <variant>_<forward|backward><T, index_t>(graph, cfg, inputs, ..., workspace, bytes, stream).
// Any H >= 1, C >= 1 and edge_dim >= 0; node tensors may have any row stride (their inner
// dimensions dense). Throws ValueError on a bad workspace, DeviceError on a CUDA failure.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "core/numeric.h"
#include "kernels/attention_types.h"

namespace iognn::cuda {

// Graph, config, outputs and each variant's inputs and gradients: kernels/attention_types.h.

// Forward: out, lse and (when out.alpha is set) alpha. Backward: grad_out [num_dst, H, C] and
// grad_alpha [E', H] (or null) contiguous; lse from the forward; fills the gradient of every
// input given (those pointers must be set; a_dst's may be null to skip it).
#define IOGNN_CUDA_ATTENTION_API(name, Inputs, Grads)                                             \
  template <typename T, typename index_t>                                                       \
  size_t name##_forward_workspace_bytes(const AttentionGraph<index_t>& graph,                   \
                                        const AttentionConfig& cfg, int64_t edge_dim);          \
  template <typename T, typename index_t>                                                       \
  void name##_forward(const AttentionGraph<index_t>& graph, const AttentionConfig& cfg,         \
                      const Inputs<T>& in, const AttentionOutputs<T>& out, void* workspace,     \
                      size_t workspace_bytes, cudaStream_t stream);                             \
  template <typename T, typename index_t>                                                       \
  size_t name##_backward_workspace_bytes(const AttentionGraph<index_t>& graph,                  \
                                         const AttentionConfig& cfg, int64_t edge_dim);         \
  template <typename T, typename index_t>                                                       \
  void name##_backward(const AttentionGraph<index_t>& graph, const AttentionConfig& cfg,        \
                       const Inputs<T>& in, const acc_t<T>* lse, const T* grad_out,             \
                       const T* grad_alpha, const Grads<T>& grads, void* workspace,             \
                       size_t workspace_bytes, cudaStream_t stream);

IOGNN_CUDA_ATTENTION_API(gat, GatInputs, GatGrads)
IOGNN_CUDA_ATTENTION_API(gatv2, GatV2Inputs, GatV2Grads)
IOGNN_CUDA_ATTENTION_API(transformer, TransformerInputs, TransformerGrads)
#undef IOGNN_CUDA_ATTENTION_API

}  // namespace iognn::cuda

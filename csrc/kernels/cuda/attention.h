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

namespace iognn::cuda {

// The two CSR layouts of a graph (core/graph.h), in device memory.
template <typename index_t>
struct AttentionGraph {
  const index_t* rowptr;   // [num_dst + 1]
  const index_t* col;      // [E'] source of each CSR position
  const index_t* eid;      // [E'] augmented edge id of each CSR position
  const index_t* colptr;   // [num_src + 1]
  const index_t* row;      // [E'] destination of each transposed position
  const index_t* csc2csr;  // [E'] CSR position of each transposed position
  int64_t num_src;
  int64_t num_dst;
  int64_t num_edges;
};

struct AttentionConfig {
  int64_t heads;     // H >= 1
  int64_t channels;  // C >= 1
  float dropout;     // attention dropout probability in [0, 1); 0 disables it
  uint64_t seed;     // dropout stream, see core/dropout_rng.h
};

// Node tensor [N, H, C] (or [N, H] with C = 1): element (n, h, c) at n * row_stride + h * C + c.
template <typename T>
struct NodeRows {
  const T* data = nullptr;
  int64_t row_stride = 0;
};

// Edge features [E', De] in augmented edge order: given when dim > 0 (data may then be null only
// when E' = 0), absent when dim = 0.
template <typename T>
struct EdgeRows {
  const T* data = nullptr;
  int64_t row_stride = 0;
  int64_t dim = 0;
};

template <typename T>
struct AttentionOutputs {
  T* out;           // [num_dst, H, C]
  acc_t<T>* lse;    // [num_dst, H]
  T* alpha;         // [E', H] or null
};

// ---- GAT: s = leaky_relu(a_src[j,h] + a_dst[i,h] + edge_attr[e] . w_edge[:,h]), value x[j,h,:]
template <typename T>
struct GatInputs {
  NodeRows<T> x;          // [num_src, H, C]
  NodeRows<T> a_src;      // [num_src, H]
  NodeRows<T> a_dst;      // [num_dst, H]; data null: no destination term
  EdgeRows<T> edge_attr;  // [E', De] or absent
  const T* w_edge;        // [De, H] contiguous, with edge_attr
  double negative_slope;
};
template <typename T>
struct GatGrads {
  T* x;          // [num_src, H, C]
  T* a_src;      // [num_src, H]
  T* a_dst;      // [num_dst, H] or null
  T* edge_attr;  // [E', De] or null
  T* w_edge;     // [De, H] or null
};

// ---- GATv2: s = att[h] . leaky_relu(x_dst[i,h] + x_src[j,h] + W_e edge_attr[e]), value x_src[j,h]
template <typename T>
struct GatV2Inputs {
  NodeRows<T> x_src;      // [num_src, H, C]
  NodeRows<T> x_dst;      // [num_dst, H, C]
  const T* att;           // [H, C] contiguous
  EdgeRows<T> edge_attr;  // [E', De] or absent
  const T* w_edge;        // [H*C, De] contiguous, with edge_attr
  double negative_slope;
};
template <typename T>
struct GatV2Grads {
  T* x_src;      // [num_src, H, C]
  T* x_dst;      // [num_dst, H, C]
  T* att;        // [H, C]
  T* edge_attr;  // [E', De] or null
  T* w_edge;     // [H*C, De] or null
};

// ---- Transformer: s = scale * q[i,h] . (k[j,h] + ep), value v[j,h] + ep, ep = W_e edge_attr[e]
template <typename T>
struct TransformerInputs {
  NodeRows<T> query;      // [num_dst, H, C]
  NodeRows<T> key;        // [num_src, H, C]
  NodeRows<T> value;      // [num_src, H, C]
  EdgeRows<T> edge_attr;  // [E', De] or absent
  const T* w_edge;        // [H*C, De] contiguous, with edge_attr
  double scale;
};
template <typename T>
struct TransformerGrads {
  T* query;      // [num_dst, H, C]
  T* key;        // [num_src, H, C]
  T* value;      // [num_src, H, C]
  T* edge_attr;  // [E', De] or null
  T* w_edge;     // [H*C, De] or null
};

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

// Attention family (GAT, GATv2, Graph Transformer): the plain views both kernel families take -
// host (kernels/cpu/{gat,gatv2,transformer}.h) and device (kernels/cuda/attention.h) - so one
// binding fills them for either. Pointers are host or device pointers as the family requires.
// Formulas and conventions: kernels/cpu/attention_common.h.
//
// The family's places (per variant V in gat, gatv2, transformer):
//   contract (this file)           kernels/attention_types.h, kernels/cpu/attention_common.h
//   host kernels                   kernels/cpu/V.{h,cpp}, on the skeleton and VariantBase of
//                                  kernels/cpu/attention_common.h
//   device kernels                 kernels/cuda/attention.h (API); attention_forward.cuh and
//                                  attention_backward.cuh (the passes), attention_variants.cuh
//                                  (what each variant adds: its scores and their gradients),
//                                  attention_launch.cuh (workspaces and launches)
//   binding                        binding/attention_ops.h (op bodies, every backend),
//                                  binding/attention.cpp (schemas, host backend),
//                                  binding/cuda/attention.cpp (device backend),
//                                  binding/meta.cpp (Meta kernels: the outputs' shapes),
//                                  binding/autograd/attention.cpp (autograd formulas)
//   Python and tests               python/iognn/ops/attention.py (wrappers);
//                                  python/iognn/nn/conv/V_conv.py (layers; shared parts in
//                                  nn/conv/_attention.py);
//                                  tests/python/test_attention{,_cuda,_layers_cuda}.py,
//                                  tests/cpp/test_attention_cpu.cpp
#pragma once

#include <cstdint>

#include "core/numeric.h"

namespace iognn {

// The two CSR layouts of a graph (core/graph.h), as the attention kernels read them.
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
  // Upper bounds on the longest in-row (rowptr) and out-row (colptr), -1 when unknown: the
  // Graph's max_degree_hints. The CUDA kernels skip the heavy-row chunk plan of a direction whose
  // rows are all light (attention_common.cuh, chunked); results do not depend on them.
  int64_t max_in_degree = -1;
  int64_t max_out_degree = -1;
};

struct AttentionConfig {
  int64_t heads;     // H >= 1
  int64_t channels;  // C >= 1
  float dropout;     // attention dropout probability in [0, 1); 0 disables it
  uint64_t seed;     // dropout stream, see core/dropout_rng.h
};

// Forward outputs, contiguous: out [num_dst, H, C], lse [num_dst, H], alpha [E', H] (augmented
// edge order) or null when not requested.
template <typename T>
struct AttentionOutputs {
  T* out;
  acc_t<T>* lse;
  T* alpha;
};

// Node tensor [N, H, C] (or [N, H] with C = 1): element (n, h, c) at n * row_stride + h * C + c.
template <typename T>
struct NodeRows {
  const T* data = nullptr;
  int64_t row_stride = 0;
  IOGNN_HD const T* at(int64_t n, int64_t h, int64_t C) const {
    return data + n * row_stride + h * C;
  }
};

// Edge features [E', De] in augmented edge order: given when dim > 0 (data may then be null only
// when E' = 0), absent when dim = 0.
template <typename T>
struct EdgeRows {
  const T* data = nullptr;
  int64_t row_stride = 0;
  int64_t dim = 0;
  IOGNN_HD bool present() const { return dim > 0; }
  IOGNN_HD const T* at(int64_t e) const { return data + e * row_stride; }
};

// Inputs of each variant (naming its Grads), and its gradient outputs (contiguous; the pointers of
// absent inputs - a_dst, edge_attr, w_edge - are null).
template <typename T>
struct GatGrads;
template <typename T>
struct GatV2Grads;
template <typename T>
struct TransformerGrads;

// GAT: s = leaky_relu(a_src[j,h] + a_dst[i,h] + edge_attr[e] . w_edge[:,h]), value x[j,h,:]
template <typename T>
struct GatInputs {
  using Grads = GatGrads<T>;
  NodeRows<T> x;          // [num_src, H, C]
  NodeRows<T> a_src;      // [num_src, H]
  NodeRows<T> a_dst;      // [num_dst, H]; data null: no destination term (PyG's x_dst = None)
  EdgeRows<T> edge_attr;  // [E', De] or absent
  const T* w_edge;        // [De, H] contiguous, with edge_attr
  double negative_slope;
};
template <typename T>
struct GatGrads {
  T* x;          // [num_src, H, C]
  T* a_src;      // [num_src, H]
  T* a_dst;      // [num_dst, H]
  T* edge_attr;  // [E', De]
  T* w_edge;     // [De, H]
};

// GATv2: s = att[h] . leaky_relu(x_dst[i,h] + x_src[j,h] + W_e edge_attr[e]), value x_src[j,h]
template <typename T>
struct GatV2Inputs {
  using Grads = GatV2Grads<T>;
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
  T* edge_attr;  // [E', De]
  T* w_edge;     // [H*C, De]
};

// Transformer: s = scale * q[i,h] . (k[j,h] + ep), value v[j,h] + ep, ep = W_e edge_attr[e]
template <typename T>
struct TransformerInputs {
  using Grads = TransformerGrads<T>;
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
  T* edge_attr;  // [E', De]
  T* w_edge;     // [H*C, De]
};

}  // namespace iognn

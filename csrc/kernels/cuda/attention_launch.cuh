// Host side of the CUDA attention kernels: workspace layouts, launch sequences and the public
// entry points of attention.h. One generated unit per variant, pass and storage type
// (IOGNN_CUDA_INSTANTIATIONS in CMakeLists.txt) includes this header and instantiates its entry
// points for int32 and int64 graphs.
//
// Vector width: a call runs with vector loads (VEC = vector_width<T>()) when C is a multiple of
// VEC and every node tensor, output and gradient read or written by slots is aligned to a vector
// with a row stride that keeps it so; otherwise with VEC = 1. Both are compiled for each variant.
#pragma once

#include <algorithm>

#include "kernels/cuda/attention_backward.cuh"
#include "kernels/cuda/attention_forward.cuh"
#include "kernels/cuda/attention_kernel_launch.cuh"
#include "kernels/cuda/attention_plan.cuh"

namespace iognn::cuda::attention_detail {

// A kernel over `items` groups of `group` lanes (nothing when there are none).
template <class Kernel, class Args>
void launch(const char* name, Kernel kernel, int64_t items, int group, cudaStream_t stream,
            const Args& args) {
  const unsigned blocks = blocks_for(items, group);
  if (blocks > 0) launch_kernel(name, kernel, dim3(blocks), kThreads, stream, args);
}

// W_t[d, k] = W[k, d] for W [K, De]: the edge projection then reads W_t rows with vector loads.
template <typename T>
__global__ void __launch_bounds__(kThreads) transpose_kernel(const T* w, T* w_t, int64_t K,
                                                             int64_t De) {
  for (int64_t idx = int64_t(blockIdx.x) * kThreads + threadIdx.x; idx < K * De;
       idx += int64_t(gridDim.x) * kThreads) {
    const int64_t k = idx / De, d = idx % De;
    w_t[d * K + k] = w[idx];
  }
}

template <typename T>
void transpose_edge_weight(const T* w, T* w_t, int64_t K, int64_t De, cudaStream_t stream) {
  const int64_t n = K * De;
  if (n == 0) return;
  const unsigned blocks = unsigned(std::min<int64_t>((n + kThreads - 1) / kThreads, 4096));
  launch_kernel("attention transpose_kernel", transpose_kernel<T>, dim3(blocks), kThreads, stream,
                w, w_t, K, De);
}

// ---- per-variant host facts --------------------------------------------------------------------
// Edge features per edge: dim whenever edge_attr is given (its data may be null when E' = 0).
template <class Inputs>
int64_t edge_dim_of(const Inputs& in) {
  return in.edge_attr.dim;
}

// Elements of the transposed edge weight (GATv2 and the Transformer project edge features per
// channel; GAT's w_edge is read as is).
template <template <typename, int> class Policy, typename T>
int64_t w_t_elems(const AttentionConfig& cfg, int64_t edge_dim) {
  return Policy<T, 1>::kChannelScore ? cfg.heads * cfg.channels * edge_dim : 0;
}

// Slot-accessed pointers of each variant (inputs, then gradients).
template <typename T>
bool vector_ok(const GatInputs<T>& in) {
  return vector_aligned(in.x.data, in.x.row_stride);
}
template <typename T>
bool vector_ok(const GatV2Inputs<T>& in) {
  return vector_aligned(in.x_src.data, in.x_src.row_stride) &&
         vector_aligned(in.x_dst.data, in.x_dst.row_stride) && vector_aligned(in.att);
}
template <typename T>
bool vector_ok(const TransformerInputs<T>& in) {
  return vector_aligned(in.query.data, in.query.row_stride) &&
         vector_aligned(in.key.data, in.key.row_stride) &&
         vector_aligned(in.value.data, in.value.row_stride);
}
template <typename T>
bool vector_ok(const GatGrads<T>& g) {
  return vector_aligned(g.x);
}
template <typename T>
bool vector_ok(const GatV2Grads<T>& g) {
  return vector_aligned(g.x_src) && vector_aligned(g.x_dst);
}
template <typename T>
bool vector_ok(const TransformerGrads<T>& g) {
  return vector_aligned(g.query) && vector_aligned(g.key) && vector_aligned(g.value);
}

template <typename T>
GatGrads<T> no_grads(const GatInputs<T>&) {
  return {};
}
template <typename T>
GatV2Grads<T> no_grads(const GatV2Inputs<T>&) {
  return {};
}
template <typename T>
TransformerGrads<T> no_grads(const TransformerInputs<T>&) {
  return {};
}

template <int VEC, typename T>
GatPolicy<T, VEC> make_policy(const GatInputs<T>& in, const GatGrads<T>& grads, const T*,
                              const AttentionConfig& cfg) {
  return {in, grads, cfg.heads, cfg.channels, acc_t<T>(in.negative_slope)};
}
template <int VEC, typename T>
GatV2Policy<T, VEC> make_policy(const GatV2Inputs<T>& in, const GatV2Grads<T>& grads,
                                const T* w_t, const AttentionConfig& cfg) {
  return {in, grads, w_t, cfg.heads, cfg.channels, acc_t<T>(in.negative_slope)};
}
template <int VEC, typename T>
TransformerPolicy<T, VEC> make_policy(const TransformerInputs<T>& in,
                                      const TransformerGrads<T>& grads, const T* w_t,
                                      const AttentionConfig& cfg) {
  return {in, grads, w_t, cfg.heads, cfg.channels, acc_t<T>(in.scale)};
}

// ---- forward -----------------------------------------------------------------------------------
template <typename T>
struct ForwardLayout {
  T* w_t = nullptr;
  int64_t* chunk_ptr = nullptr;
  void* scan_temp = nullptr;
  size_t scan_bytes = 0;
  acc_t<T>* partial = nullptr;
  size_t bytes = 0;
};

template <template <typename, int> class Policy, typename T, typename index_t>
ForwardLayout<T> forward_layout(void* base, const AttentionGraph<index_t>& graph,
                                const AttentionConfig& cfg, int64_t edge_dim) {
  WorkspaceSlicer s(base);
  ForwardLayout<T> l;
  l.w_t = s.take<T>(w_t_elems<Policy, T>(cfg, edge_dim));
  const int64_t E = graph.num_edges, chunk = chunk_edges_for(E);
  if (chunked(E, chunk, graph.max_in_degree)) {
    l.chunk_ptr = s.take<int64_t>(graph.num_dst + 1);
    l.scan_bytes = chunk_plan_temp_bytes<index_t>(graph.num_dst);
    l.scan_temp = s.take<char>(int64_t(l.scan_bytes));
    l.partial = s.take<acc_t<T>>(max_chunks_for(E, chunk) * cfg.heads * (2 + cfg.channels));
  }
  l.bytes = s.used();
  return l;
}

template <class V, typename index_t>
void run_forward(const V& v, const AttentionGraph<index_t>& graph, const AttentionConfig& cfg,
                 const AttentionOutputs<typename V::value_type>& out,
                 const ForwardLayout<typename V::value_type>& ws, cudaStream_t stream) {
  const Geometry geo = make_geometry(cfg.channels, V::kVec, V::S::kN);
  const int64_t E = graph.num_edges, H = cfg.heads, chunk = chunk_edges_for(E);
  ChunkPlan plan{nullptr, chunk, max_chunks_for(E, chunk)};
  if (ws.chunk_ptr) {
    build_chunk_plan(graph.rowptr, graph.num_dst, chunk, ws.chunk_ptr, ws.scan_temp,
                     ws.scan_bytes, stream);
    plan.chunk_ptr = ws.chunk_ptr;
  }
  const ForwardArgs<V, index_t> a{v, graph, cfg, geo, plan, out, ws.partial};
  if (plan.chunk_ptr)
    launch("attention forward_chunks_kernel", forward_chunks_kernel<V, index_t>,
           plan.max_chunks * H * geo.tiles, geo.group, stream, a);
  launch("attention forward_rows_kernel", forward_rows_kernel<V, index_t>,
         graph.num_dst * H * geo.tiles, geo.group, stream, a);
  if (plan.chunk_ptr && out.alpha)
    launch("attention forward_alpha_kernel", forward_alpha_kernel<V, index_t>,
           plan.max_chunks * H, geo.group, stream, a);
}

template <template <typename, int> class Policy, typename T, typename index_t, class Inputs>
void forward(const char* name, const AttentionGraph<index_t>& graph, const AttentionConfig& cfg,
             const Inputs& in, const AttentionOutputs<T>& out, void* workspace,
             size_t workspace_bytes, cudaStream_t stream) {
  const int64_t edge_dim = edge_dim_of(in);
  const ForwardLayout<T> ws = forward_layout<Policy, T>(workspace, graph, cfg, edge_dim);
  check_workspace(name, workspace, workspace_bytes, ws.bytes);
  if (ws.w_t) transpose_edge_weight(in.w_edge, ws.w_t, cfg.heads * cfg.channels, edge_dim, stream);
  constexpr int kVec = vector_width<T>();
  const bool vec = cfg.channels % kVec == 0 && vector_ok(in) && vector_aligned(out.out);
  if (vec)
    run_forward(make_policy<kVec>(in, no_grads(in), ws.w_t, cfg), graph, cfg, out, ws, stream);
  else
    run_forward(make_policy<1>(in, no_grads(in), ws.w_t, cfg), graph, cfg, out, ws, stream);
}

// ---- backward ----------------------------------------------------------------------------------
template <typename T>
struct BackwardLayout {
  using acc = acc_t<T>;
  T* w_t = nullptr;
  acc* alpha = nullptr;
  acc* dalpha = nullptr;
  acc* dsum = nullptr;
  int64_t* dst_chunk_ptr = nullptr;
  int64_t* src_chunk_ptr = nullptr;
  void* scan_temp = nullptr;
  size_t scan_bytes = 0;
  acc* partial = nullptr;
  acc* params = nullptr;
  acc* att_partial = nullptr;  // GATv2: pass 2's per-block att partials (att_blocks_for)
  acc* att_ranges = nullptr;   // and their sums over block ranges
  size_t bytes = 0;
};

template <template <typename, int> class Policy, typename T, typename index_t>
BackwardLayout<T> backward_layout(void* base, const AttentionGraph<index_t>& graph,
                                  const AttentionConfig& cfg, int64_t edge_dim) {
  using V = Policy<T, 1>;
  using acc = acc_t<T>;
  WorkspaceSlicer s(base);
  BackwardLayout<T> l;
  const int64_t E = graph.num_edges, H = cfg.heads, C = cfg.channels;
  l.w_t = s.take<T>(w_t_elems<Policy, T>(cfg, edge_dim));
  l.alpha = s.take<acc>(E * H);
  l.dalpha = s.take<acc>(E * H);
  l.dsum = s.take<acc>(graph.num_dst * H);
  const int64_t chunk = chunk_edges_for(E);
  const bool dst_chunked = chunked(E, chunk, graph.max_in_degree),
             src_chunked = chunked(E, chunk, graph.max_out_degree);
  if (dst_chunked) l.dst_chunk_ptr = s.take<int64_t>(graph.num_dst + 1);
  if (src_chunked) l.src_chunk_ptr = s.take<int64_t>(graph.num_src + 1);
  if (dst_chunked || src_chunked) {
    l.scan_bytes =
        std::max(dst_chunked ? chunk_plan_temp_bytes<index_t>(graph.num_dst) : size_t(0),
                 src_chunked ? chunk_plan_temp_bytes<index_t>(graph.num_src) : size_t(0));
    l.scan_temp = s.take<char>(int64_t(l.scan_bytes));
    const int64_t width = std::max(dst_chunked ? dst_width<V>(C) : int64_t(0),
                                   src_chunked ? src_width<V>(C) : int64_t(0));
    l.partial = s.take<acc>(max_chunks_for(E, chunk) * H * width);
  }
  const int64_t P = param_count<V>(H, C, edge_dim);
  if (P > 0) l.params = s.take<acc>(param_chunks_for(E) * P);
  if (V::kAttGrad) {  // room for either geometry (the vector width is chosen at launch)
    const int64_t blocks = std::max(
        att_blocks_for(make_geometry(C, 1, slots_for<1>()), graph.num_src, H),
        att_blocks_for(make_geometry(C, vector_width<T>(), slots_for<vector_width<T>()>()),
                       graph.num_src, H));
    if (blocks > 0) {
      l.att_partial = s.take<acc>(blocks * H * C);
      l.att_ranges = s.take<acc>(att_ranges_for(blocks) * H * C);
    }
  }
  l.bytes = s.used();
  return l;
}

// Threads along the projection rows in a parameter block: a power of two covering K, <= kThreads.
inline int param_lanes(int64_t K) {
  int lanes = 1;
  while (lanes < kThreads && lanes < K) lanes *= 2;
  return lanes;
}

template <class V, typename index_t>
void run_backward(const V& v, const AttentionGraph<index_t>& graph, const AttentionConfig& cfg,
                  const typename V::acc* lse, const typename V::value_type* grad_out,
                  const typename V::value_type* grad_alpha,
                  const BackwardLayout<typename V::value_type>& ws, int64_t edge_dim,
                  typename V::value_type* grad_edge_attr, cudaStream_t stream) {
  const Geometry geo = make_geometry(cfg.channels, V::kVec, V::S::kN);
  const int64_t E = graph.num_edges, H = cfg.heads, C = cfg.channels;
  const int64_t chunk = chunk_edges_for(E), max_chunks = max_chunks_for(E, chunk);
  ChunkPlan dst_plan{nullptr, chunk, max_chunks}, src_plan{nullptr, chunk, max_chunks};
  if (ws.dst_chunk_ptr) {
    build_chunk_plan(graph.rowptr, graph.num_dst, chunk, ws.dst_chunk_ptr, ws.scan_temp,
                     ws.scan_bytes, stream);
    dst_plan.chunk_ptr = ws.dst_chunk_ptr;
  }
  if (ws.src_chunk_ptr) {
    build_chunk_plan(graph.colptr, graph.num_src, chunk, ws.src_chunk_ptr, ws.scan_temp,
                     ws.scan_bytes, stream);
    src_plan.chunk_ptr = ws.src_chunk_ptr;
  }
  using acc = typename V::acc;
  const int64_t att_blocks = V::kAttGrad ? att_blocks_for(geo, graph.num_src, H) : 0;
  acc* att_partial = att_blocks > 0 ? ws.att_partial : nullptr;
  const BackwardArgs<V, index_t> a{v,         graph,     cfg,         geo,   dst_plan,
                                   src_plan,  lse,       grad_out,    grad_alpha,
                                   ws.alpha,  ws.dalpha, ws.dsum,     ws.partial,
                                   ws.params, param_chunks_for(E), att_partial};
  const int64_t dst_items = graph.num_dst * H * geo.tiles;
  if (dst_plan.chunk_ptr) {
    launch("attention dst_chunks_kernel", dst_chunks_kernel<V, index_t>, max_chunks * H * geo.tiles,
           geo.group, stream, a);
    launch("attention dst_merge_kernel", dst_merge_kernel<V, index_t>, dst_items, geo.group,
           stream, a);
  }
  launch("attention dst_rows_kernel", dst_rows_kernel<V, index_t>, dst_items, geo.group, stream,
         a);
  if (src_plan.chunk_ptr)
    launch("attention src_chunks_kernel", src_chunks_kernel<V, index_t>, max_chunks * H * geo.tiles,
           geo.group, stream, a);
  launch("attention src_rows_kernel", src_rows_kernel<V, index_t>, graph.num_src * H * geo.tiles,
         geo.group, stream, a);
  const int64_t K = V::proj_rows(H, C), weights = K * edge_dim;
  if (att_partial) {  // GATv2's att: block partials -> range sums -> total, in fixed order
    const int64_t HC = H * C, ranges = att_ranges_for(att_blocks);
    launch_kernel("attention att_column_kernel", att_column_kernel<acc>,
                  dim3(unsigned(ranges), unsigned((HC + kThreads - 1) / kThreads)), kThreads,
                  stream, static_cast<const acc*>(att_partial), att_blocks, HC, ranges,
                  ws.att_ranges);
    const unsigned blocks = unsigned(std::min<int64_t>((HC + kThreads - 1) / kThreads, 4096));
    launch_kernel("attention param_reduce_kernel", param_reduce_kernel<V>, dim3(blocks), kThreads,
                  stream, v, static_cast<const acc*>(ws.att_ranges), ranges, HC, weights, HC);
  }

  if (edge_dim > 0 && E > 0) {
    const int64_t warps = (E + kEdgesPerWarp - 1) / kEdgesPerWarp;
    const int64_t blocks = (warps + kThreads / 32 - 1) / (kThreads / 32);
    launch_kernel("attention edge_attr_grad_kernel", edge_attr_grad_kernel<V, index_t>,
                  dim3(unsigned(blocks)), kThreads, stream, a, grad_edge_attr, edge_dim);
  }
  const int64_t P = param_count<V>(H, C, edge_dim);
  const int64_t reduced = att_partial ? weights : P;  // entries pass 3 sums
  if (reduced > 0) {
    const int lanes = param_lanes(K);
    const dim3 grid(unsigned(a.param_chunks), unsigned((K + lanes - 1) / lanes),
                    unsigned(std::max<int64_t>(1, (edge_dim + kParamD - 1) / kParamD)));
    launch_kernel("attention param_partials_kernel", param_partials_kernel<V, index_t>, grid,
                  kThreads, stream, a, lanes, edge_dim);
    const unsigned blocks =
        unsigned(std::min<int64_t>((reduced + kThreads - 1) / kThreads, 4096));
    launch_kernel("attention param_reduce_kernel", param_reduce_kernel<V>, dim3(blocks), kThreads,
                  stream, v, static_cast<const acc*>(ws.params), a.param_chunks, P, int64_t(0),
                  reduced);
  }
}

template <template <typename, int> class Policy, typename T, typename index_t, class Inputs,
          class Grads>
void backward(const char* name, const AttentionGraph<index_t>& graph, const AttentionConfig& cfg,
              const Inputs& in, const acc_t<T>* lse, const T* grad_out, const T* grad_alpha,
              const Grads& grads, void* workspace, size_t workspace_bytes, cudaStream_t stream) {
  const int64_t edge_dim = edge_dim_of(in);
  const BackwardLayout<T> ws = backward_layout<Policy, T>(workspace, graph, cfg, edge_dim);
  check_workspace(name, workspace, workspace_bytes, ws.bytes);
  if (ws.w_t) transpose_edge_weight(in.w_edge, ws.w_t, cfg.heads * cfg.channels, edge_dim, stream);
  constexpr int kVec = vector_width<T>();
  const bool vec = cfg.channels % kVec == 0 && vector_ok(in) && vector_ok(grads) &&
                   vector_aligned(grad_out);
  if (vec)
    run_backward(make_policy<kVec>(in, grads, ws.w_t, cfg), graph, cfg, lse, grad_out, grad_alpha,
                 ws, edge_dim, grads.edge_attr, stream);
  else
    run_backward(make_policy<1>(in, grads, ws.w_t, cfg), graph, cfg, lse, grad_out, grad_alpha,
                 ws, edge_dim, grads.edge_attr, stream);
}

}  // namespace iognn::cuda::attention_detail

// ---- public entry points (attention.h) ---------------------------------------------------------
namespace iognn::cuda {

// <name>_<pass>_workspace_bytes: the size of the pass's workspace layout.
#define IOGNN_ATTENTION_WORKSPACE_BYTES(name, pass, Policy)                                       \
  template <typename T, typename index_t>                                                       \
  size_t name##_##pass##_workspace_bytes(const AttentionGraph<index_t>& graph,                  \
                                         const AttentionConfig& cfg, int64_t edge_dim) {        \
    using attention_detail::Policy;                                                             \
    return attention_detail::pass##_layout<Policy, T>(nullptr, graph, cfg, edge_dim).bytes;     \
  }

#define IOGNN_ATTENTION_ENTRY_POINTS(name, Policy, Inputs, Grads)                                 \
  IOGNN_ATTENTION_WORKSPACE_BYTES(name, forward, Policy)                                        \
  template <typename T, typename index_t>                                                       \
  void name##_forward(const AttentionGraph<index_t>& graph, const AttentionConfig& cfg,         \
                      const Inputs<T>& in, const AttentionOutputs<T>& out, void* workspace,     \
                      size_t workspace_bytes, cudaStream_t stream) {                            \
    attention_detail::forward<attention_detail::Policy, T>("iognn::cuda::" #name "_forward",    \
                                                           graph, cfg, in, out, workspace,      \
                                                           workspace_bytes, stream);            \
  }                                                                                             \
  IOGNN_ATTENTION_WORKSPACE_BYTES(name, backward, Policy)                                       \
  template <typename T, typename index_t>                                                       \
  void name##_backward(const AttentionGraph<index_t>& graph, const AttentionConfig& cfg,        \
                       const Inputs<T>& in, const acc_t<T>* lse, const T* grad_out,             \
                       const T* grad_alpha, const Grads<T>& grads, void* workspace,             \
                       size_t workspace_bytes, cudaStream_t stream) {                           \
    attention_detail::backward<attention_detail::Policy, T>(                                    \
        "iognn::cuda::" #name "_backward", graph, cfg, in, lse, grad_out, grad_alpha, grads,    \
        workspace, workspace_bytes, stream);                                                    \
  }

IOGNN_ATTENTION_ENTRY_POINTS(gat, GatPolicy, GatInputs, GatGrads)
IOGNN_ATTENTION_ENTRY_POINTS(gatv2, GatV2Policy, GatV2Inputs, GatV2Grads)
IOGNN_ATTENTION_ENTRY_POINTS(transformer, TransformerPolicy, TransformerInputs, TransformerGrads)
#undef IOGNN_ATTENTION_ENTRY_POINTS
#undef IOGNN_ATTENTION_WORKSPACE_BYTES

// Instantiation of one variant's forward or backward for storage type T and both index types
// (IOGNN_INSTANTIATE_ATTENTION_FORWARD / _BACKWARD: the IOGNN_CUDA_INSTANTIATIONS rows).
#define IOGNN_INSTANTIATE_ATTENTION_WORKSPACE_BYTES(name, pass, T, index_t)                       \
  template size_t name##_##pass##_workspace_bytes<T, index_t>(const AttentionGraph<index_t>&,   \
                                                              const AttentionConfig&, int64_t);

#define IOGNN_INSTANTIATE_ATTENTION_FORWARD_FOR(name, Inputs, T, index_t)                         \
  IOGNN_INSTANTIATE_ATTENTION_WORKSPACE_BYTES(name, forward, T, index_t)                        \
  template void name##_forward<T, index_t>(const AttentionGraph<index_t>&,                      \
                                           const AttentionConfig&, const Inputs<T>&,            \
                                           const AttentionOutputs<T>&, void*, size_t,           \
                                           cudaStream_t);

#define IOGNN_INSTANTIATE_ATTENTION_BACKWARD_FOR(name, Inputs, Grads, T, index_t)                 \
  IOGNN_INSTANTIATE_ATTENTION_WORKSPACE_BYTES(name, backward, T, index_t)                       \
  template void name##_backward<T, index_t>(const AttentionGraph<index_t>&,                     \
                                            const AttentionConfig&, const Inputs<T>&,           \
                                            const acc_t<T>*, const T*, const T*,                \
                                            const Grads<T>&, void*, size_t, cudaStream_t);

#define IOGNN_INSTANTIATE_ATTENTION_FORWARD(name, Inputs, T)                                      \
  IOGNN_INSTANTIATE_ATTENTION_FORWARD_FOR(name, Inputs, T, int32_t)                             \
  IOGNN_INSTANTIATE_ATTENTION_FORWARD_FOR(name, Inputs, T, int64_t)

#define IOGNN_INSTANTIATE_ATTENTION_BACKWARD(name, Inputs, Grads, T)                              \
  IOGNN_INSTANTIATE_ATTENTION_BACKWARD_FOR(name, Inputs, Grads, T, int32_t)                     \
  IOGNN_INSTANTIATE_ATTENTION_BACKWARD_FOR(name, Inputs, Grads, T, int64_t)

}  // namespace iognn::cuda

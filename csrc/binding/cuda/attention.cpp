// The attention ops (schemas in binding/attention.cpp) on CUDA tensors: the same checks
// (attention_checks.h) and outputs as the host implementations, computed by the device kernels
// of kernels/cuda/attention.h on the current stream of the inputs' device. Outputs and scratch
// come from PyTorch's caching allocator; nothing synchronises, so the ops can be captured in a
// CUDA graph.
#include <ATen/ATen.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/library.h>

#include "binding/attention_checks.h"
#include "binding/utils.h"
#include "kernels/cuda/attention.h"

namespace iognn::torch_ext {
namespace {

using namespace attention;

// The guard and stream of one call on `ref`'s device.
struct DeviceScope {
  explicit DeviceScope(const Tensor& ref)
      : guard(ref.device()), stream(c10::cuda::getCurrentCUDAStream(ref.device().index())) {}
  c10::cuda::CUDAGuard guard;
  c10::cuda::CUDAStream stream;
};

// Device scratch of `bytes` bytes on ref's device (stream-ordered, returned to the cache).
Tensor workspace(size_t bytes, const Tensor& ref) {
  return at::empty({int64_t(bytes)}, ref.options().dtype(at::kByte));
}

int64_t edge_dim(const OptTensor& edge_attr) { return edge_attr ? edge_attr->size(1) : 0; }

// Calls run(graph, workspace, workspace_bytes, stream) with a workspace of bytes(graph) bytes.
template <typename I, typename Bytes, typename Run>
void run_with_workspace(const GraphArgs& g, const Tensor& ref, cudaStream_t stream, Bytes&& bytes,
                        Run&& run) {
  const auto graph = graph_view<I>(g);
  translate_errors([&] {
    const Tensor ws = workspace(bytes(graph), ref);
    run(graph, ws.data_ptr(), size_t(ws.numel()), stream);
  });
}

// ---- GAT -----------------------------------------------------------------------------------
Forward gat_attention_cuda(const Tensor& rowptr, const Tensor& col, const Tensor& eid,
                           const Tensor& colptr, const Tensor& row, const Tensor& csc2csr,
                           const Tensor& x, const Tensor& a_src, const OptTensor& a_dst,
                           const OptTensor& edge_attr, const OptTensor& w_edge,
                           double negative_slope, double dropout, int64_t seed,
                           bool return_alpha) {
  constexpr const char* op = "iognn::gat_attention";
  const GraphArgs g{rowptr, col, eid, colptr, row, csc2csr};
  const GatArgs a = check_gat(op, g, x, a_src, a_dst, edge_attr, w_edge);
  const auto cfg = make_config(op, a.H, a.C, dropout, seed);
  const DeviceScope scope(a.x);
  Forward out = make_outputs(g, a.x, a.H, a.C, return_alpha);
  dispatch(op, a.x, g, [&](auto ft, auto it) {
    using T = typename decltype(ft)::type;
    using I = typename decltype(it)::type;
    const auto in = gat_inputs<T>(a, negative_slope);
    run_with_workspace<I>(
        g, a.x, scope.stream,
        [&](const auto& graph) {
          return cuda::gat_forward_workspace_bytes<T, I>(graph, cfg, edge_dim(a.edge_attr));
        },
        [&](const auto& graph, void* ws, size_t bytes, cudaStream_t s) {
          cuda::gat_forward<T, I>(graph, cfg, in, output_view<T>(out), ws, bytes, s);
        });
  });
  return out;
}

Backward gat_attention_backward_cuda(const Tensor& rowptr, const Tensor& col, const Tensor& eid,
                                     const Tensor& colptr, const Tensor& row,
                                     const Tensor& csc2csr, const Tensor& x, const Tensor& a_src,
                                     const OptTensor& a_dst, const OptTensor& edge_attr,
                                     const OptTensor& w_edge, const Tensor& lse,
                                     const Tensor& grad_out, const OptTensor& grad_alpha,
                                     double negative_slope, double dropout, int64_t seed) {
  constexpr const char* op = "iognn::gat_attention_backward";
  const GraphArgs g{rowptr, col, eid, colptr, row, csc2csr};
  const GatArgs a = check_gat(op, g, x, a_src, a_dst, edge_attr, w_edge);
  const auto cfg = make_config(op, a.H, a.C, dropout, seed);
  const BackwardInputs b =
      check_backward_inputs(op, g, a.x, "x", a.H, a.C, lse, grad_out, grad_alpha);
  const DeviceScope scope(a.x);
  Backward grads = gat_grads(a);
  dispatch(op, a.x, g, [&](auto ft, auto it) {
    using T = typename decltype(ft)::type;
    using I = typename decltype(it)::type;
    const auto in = gat_inputs<T>(a, negative_slope);
    run_with_workspace<I>(
        g, a.x, scope.stream,
        [&](const auto& graph) {
          return cuda::gat_backward_workspace_bytes<T, I>(graph, cfg, edge_dim(a.edge_attr));
        },
        [&](const auto& graph, void* ws, size_t bytes, cudaStream_t s) {
          cuda::gat_backward<T, I>(graph, cfg, in, lse_ptr<T>(b), cptr<T>(b.grad_out),
                                   grad_alpha_ptr<T>(b), grads_view<GatGrads<T>, T>(grads),
                                   ws, bytes, s);
        });
  });
  return grads;
}

// ---- GATv2 ---------------------------------------------------------------------------------
Forward gatv2_attention_cuda(const Tensor& rowptr, const Tensor& col, const Tensor& eid,
                             const Tensor& colptr, const Tensor& row, const Tensor& csc2csr,
                             const Tensor& x_src, const Tensor& x_dst, const Tensor& att,
                             const OptTensor& edge_attr, const OptTensor& w_edge,
                             double negative_slope, double dropout, int64_t seed,
                             bool return_alpha) {
  constexpr const char* op = "iognn::gatv2_attention";
  const GraphArgs g{rowptr, col, eid, colptr, row, csc2csr};
  const GatV2Args a = check_gatv2(op, g, x_src, x_dst, att, edge_attr, w_edge);
  const auto cfg = make_config(op, a.H, a.C, dropout, seed);
  const DeviceScope scope(a.x_src);
  Forward out = make_outputs(g, a.x_src, a.H, a.C, return_alpha);
  dispatch(op, a.x_src, g, [&](auto ft, auto it) {
    using T = typename decltype(ft)::type;
    using I = typename decltype(it)::type;
    const auto in = gatv2_inputs<T>(a, negative_slope);
    run_with_workspace<I>(
        g, a.x_src, scope.stream,
        [&](const auto& graph) {
          return cuda::gatv2_forward_workspace_bytes<T, I>(graph, cfg, edge_dim(a.edge_attr));
        },
        [&](const auto& graph, void* ws, size_t bytes, cudaStream_t s) {
          cuda::gatv2_forward<T, I>(graph, cfg, in, output_view<T>(out), ws, bytes,
                                    s);
        });
  });
  return out;
}

Backward gatv2_attention_backward_cuda(const Tensor& rowptr, const Tensor& col,
                                       const Tensor& eid, const Tensor& colptr, const Tensor& row,
                                       const Tensor& csc2csr, const Tensor& x_src,
                                       const Tensor& x_dst, const Tensor& att,
                                       const OptTensor& edge_attr, const OptTensor& w_edge,
                                       const Tensor& lse, const Tensor& grad_out,
                                       const OptTensor& grad_alpha, double negative_slope,
                                       double dropout, int64_t seed) {
  constexpr const char* op = "iognn::gatv2_attention_backward";
  const GraphArgs g{rowptr, col, eid, colptr, row, csc2csr};
  const GatV2Args a = check_gatv2(op, g, x_src, x_dst, att, edge_attr, w_edge);
  const auto cfg = make_config(op, a.H, a.C, dropout, seed);
  const BackwardInputs b =
      check_backward_inputs(op, g, a.x_src, "x_src", a.H, a.C, lse, grad_out, grad_alpha);
  const DeviceScope scope(a.x_src);
  Backward grads = gatv2_grads(a);
  dispatch(op, a.x_src, g, [&](auto ft, auto it) {
    using T = typename decltype(ft)::type;
    using I = typename decltype(it)::type;
    const auto in = gatv2_inputs<T>(a, negative_slope);
    run_with_workspace<I>(
        g, a.x_src, scope.stream,
        [&](const auto& graph) {
          return cuda::gatv2_backward_workspace_bytes<T, I>(graph, cfg, edge_dim(a.edge_attr));
        },
        [&](const auto& graph, void* ws, size_t bytes, cudaStream_t s) {
          cuda::gatv2_backward<T, I>(graph, cfg, in, lse_ptr<T>(b), cptr<T>(b.grad_out),
                                     grad_alpha_ptr<T>(b),
                                     grads_view<GatV2Grads<T>, T>(grads), ws, bytes, s);
        });
  });
  return grads;
}

// ---- Graph Transformer ---------------------------------------------------------------------
Forward transformer_attention_cuda(const Tensor& rowptr, const Tensor& col, const Tensor& eid,
                                   const Tensor& colptr, const Tensor& row,
                                   const Tensor& csc2csr, const Tensor& query, const Tensor& key,
                                   const Tensor& value, const OptTensor& edge_attr,
                                   const OptTensor& w_edge, double scale, double dropout,
                                   int64_t seed, bool return_alpha) {
  constexpr const char* op = "iognn::transformer_attention";
  const GraphArgs g{rowptr, col, eid, colptr, row, csc2csr};
  const TransformerArgs a = check_transformer(op, g, query, key, value, edge_attr, w_edge);
  const auto cfg = make_config(op, a.H, a.C, dropout, seed);
  const DeviceScope scope(a.query);
  Forward out = make_outputs(g, a.query, a.H, a.C, return_alpha);
  dispatch(op, a.query, g, [&](auto ft, auto it) {
    using T = typename decltype(ft)::type;
    using I = typename decltype(it)::type;
    const auto in = transformer_inputs<T>(a, scale);
    run_with_workspace<I>(
        g, a.query, scope.stream,
        [&](const auto& graph) {
          return cuda::transformer_forward_workspace_bytes<T, I>(graph, cfg,
                                                                 edge_dim(a.edge_attr));
        },
        [&](const auto& graph, void* ws, size_t bytes, cudaStream_t s) {
          cuda::transformer_forward<T, I>(graph, cfg, in, output_view<T>(out), ws,
                                          bytes, s);
        });
  });
  return out;
}

Backward transformer_attention_backward_cuda(
    const Tensor& rowptr, const Tensor& col, const Tensor& eid, const Tensor& colptr,
    const Tensor& row, const Tensor& csc2csr, const Tensor& query, const Tensor& key,
    const Tensor& value, const OptTensor& edge_attr, const OptTensor& w_edge, const Tensor& lse,
    const Tensor& grad_out, const OptTensor& grad_alpha, double scale, double dropout,
    int64_t seed) {
  constexpr const char* op = "iognn::transformer_attention_backward";
  const GraphArgs g{rowptr, col, eid, colptr, row, csc2csr};
  const TransformerArgs a = check_transformer(op, g, query, key, value, edge_attr, w_edge);
  const auto cfg = make_config(op, a.H, a.C, dropout, seed);
  const BackwardInputs b =
      check_backward_inputs(op, g, a.query, "query", a.H, a.C, lse, grad_out, grad_alpha);
  const DeviceScope scope(a.query);
  Backward grads = transformer_grads(a);
  dispatch(op, a.query, g, [&](auto ft, auto it) {
    using T = typename decltype(ft)::type;
    using I = typename decltype(it)::type;
    const auto in = transformer_inputs<T>(a, scale);
    run_with_workspace<I>(
        g, a.query, scope.stream,
        [&](const auto& graph) {
          return cuda::transformer_backward_workspace_bytes<T, I>(graph, cfg,
                                                                  edge_dim(a.edge_attr));
        },
        [&](const auto& graph, void* ws, size_t bytes, cudaStream_t s) {
          cuda::transformer_backward<T, I>(graph, cfg, in, lse_ptr<T>(b), cptr<T>(b.grad_out),
                                           grad_alpha_ptr<T>(b),
                                           grads_view<TransformerGrads<T>, T>(grads), ws,
                                           bytes, s);
        });
  });
  return grads;
}

}  // namespace

TORCH_LIBRARY_IMPL(iognn, CUDA, m) {
  m.impl("gat_attention", &gat_attention_cuda);
  m.impl("gat_attention_backward", &gat_attention_backward_cuda);
  m.impl("gatv2_attention", &gatv2_attention_cuda);
  m.impl("gatv2_attention_backward", &gatv2_attention_backward_cuda);
  m.impl("transformer_attention", &transformer_attention_cuda);
  m.impl("transformer_attention_backward", &transformer_attention_backward_cuda);
}

}  // namespace iognn::torch_ext

// iognn::build_graph on CUDA tensors: the device build of core/graph_cuda.h, queued on the current
// stream of edge_index's device, with outputs and scratch from PyTorch's caching allocator. The
// outputs are allocated for the capacity (E' as if the input had no self-loops) before the build
// and narrowed to the true E' after its single synchronisation, so a build is one kernel launch
// and one sync. The longest rows come back with the sizes (the ops' schedule hints).
// iognn::build_graph_deferred: the same launch without the sync (core/graph_cuda.h).
// graph_stats stays CPU-only: Graph.stats passes it host copies of the offset vectors.
#include <ATen/ATen.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/library.h>

#include "binding/graph_build.h"
#include "binding/utils.h"
#include "core/graph_cuda.h"

namespace iognn::torch_ext {
namespace {

// Device scratch of `bytes` bytes on edge_index's device (freed back to the cache, stream-ordered).
at::Tensor device_workspace(size_t bytes, const at::Tensor& edge_index) {
  return at::empty({int64_t(bytes)}, edge_index.options().dtype(at::kByte));
}

// deferred_error: null, or a deferred build's error word (binding/graph.cpp's build_graph_deferred).
BuildGraphOutputs build_graph_on_device(const at::Tensor& edge_index, int64_t num_src,
                                        int64_t num_dst, int64_t self_loops, bool force_int64,
                                        const at::Tensor* deferred_error) {
  const SelfLoops mode = check_build_graph_args(edge_index, self_loops);
  const c10::cuda::CUDAGuard device_guard(edge_index.device());
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream(edge_index.device().index()).stream();
  const EdgeIndexView view = edge_index_view(edge_index);

  const GraphSizes cap = translate_errors([&] {
    return iognn::cuda::graph_capacity(num_src, num_dst, edge_index.size(1), mode);
  });
  const at::ScalarType index_dtype = graph_index_dtype(cap, force_int64);
  GraphTensors out = empty_graph_tensors(cap, edge_index.options().dtype(index_dtype));
  GraphSizes sz;
  iognn::cuda::GraphDegrees degrees;
  dispatch_index(index_dtype, kBuildGraph, [&](auto tag) {
    using I = typename decltype(tag)::type;
    sz = translate_errors([&] {
      const at::Tensor ws =
          device_workspace(iognn::cuda::build_graph_workspace_bytes<I>(cap), edge_index);
      return iognn::cuda::build_graph_cuda<I>(
          view, cap, mode, graph_arrays<I>(out), ws.data_ptr(), size_t(ws.numel()), stream,
          &degrees,
          deferred_error
              ? reinterpret_cast<unsigned long long*>(deferred_error->data_ptr<int64_t>())
              : nullptr);
    });
  });
  auto& [rowptr, col, eid, colptr, row, csc2csr, edge_map] = out;
  for (at::Tensor* t : {&col, &eid, &row, &csc2csr, &edge_map}) *t = t->narrow(0, 0, sz.num_edges);
  // The capacity may need int64 where the true sizes fit int32 (only within L edges of 2^31).
  if (graph_index_dtype(sz, force_int64) != index_dtype)
    for (at::Tensor* t : {&rowptr, &col, &eid, &colptr, &row, &csc2csr, &edge_map})
      *t = t->to(at::kInt);
  return with_max_degrees(std::move(out), degrees.max_in, degrees.max_out);
}

BuildGraphOutputs build_graph_cuda(const at::Tensor& edge_index, int64_t num_src, int64_t num_dst,
                                   int64_t self_loops, bool force_int64) {
  return build_graph_on_device(edge_index, num_src, num_dst, self_loops, force_int64, nullptr);
}

BuildGraphOutputs build_graph_deferred_cuda(const at::Tensor& edge_index, int64_t num_src,
                                            int64_t num_dst, const at::Tensor& error,
                                            bool force_int64) {
  check_deferred_error_word(error, edge_index);
  return build_graph_on_device(edge_index, num_src, num_dst, 0, force_int64, &error);
}

}  // namespace

TORCH_LIBRARY_IMPL(iognn, CUDA, m) {
  m.impl("build_graph", &build_graph_cuda);
  m.impl("build_graph_deferred", &build_graph_deferred_cuda);
}

}  // namespace iognn::torch_ext

// iognn::build_graph on CUDA tensors: the device build of core/graph_cuda.h, queued on the current
// stream of edge_index's device, with outputs and scratch from PyTorch's caching allocator. The
// validation pass synchronises that stream once (to size the outputs); the build itself does not.
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

GraphTensors build_graph_cuda(const at::Tensor& edge_index, int64_t num_src, int64_t num_dst,
                              int64_t self_loops, bool force_int64) {
  const SelfLoops mode = check_build_graph_args(edge_index, self_loops);
  const c10::cuda::CUDAGuard device_guard(edge_index.device());
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream(edge_index.device().index()).stream();
  const EdgeIndexView view = edge_index_view(edge_index);

  const at::Tensor plan_ws = device_workspace(iognn::cuda::plan_graph_workspace_bytes(), edge_index);
  const GraphSizes sz = translate_errors([&] {
    return iognn::cuda::plan_graph_cuda(view, num_src, num_dst, mode, plan_ws.data_ptr(),
                                        size_t(plan_ws.numel()), stream);
  });
  const at::ScalarType index_dtype = graph_index_dtype(sz, force_int64);
  GraphTensors out = empty_graph_tensors(sz, edge_index.options().dtype(index_dtype));
  dispatch_index(index_dtype, kBuildGraph, [&](auto tag) {
    using I = typename decltype(tag)::type;
    translate_errors([&] {
      const at::Tensor ws =
          device_workspace(iognn::cuda::build_graph_workspace_bytes<I>(sz, mode), edge_index);
      iognn::cuda::build_graph_cuda<I>(view, sz, mode, graph_arrays<I>(out), ws.data_ptr(),
                                       size_t(ws.numel()), stream);
    });
  });
  return out;
}

}  // namespace

TORCH_LIBRARY_IMPL(iognn, CUDA, m) { m.impl("build_graph", &build_graph_cuda); }

}  // namespace iognn::torch_ext

// Pieces of iognn::build_graph shared by its CPU (binding/graph.cpp) and CUDA
// (binding/cuda/graph.cpp) implementations: argument checks, the core's view of edge_index, the
// index dtype rule and the output tensors.
#pragma once

#include <ATen/ATen.h>

#include <tuple>

#include "binding/utils.h"
#include "core/graph.h"

namespace iognn::torch_ext {

constexpr const char* kBuildGraph = "iognn::build_graph";

// (rowptr, col, eid, colptr, row, csc2csr, edge_map), as in the schema.
using GraphTensors = std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor,
                                at::Tensor, at::Tensor>;
// The op's outputs: the graph, then max_degrees, a host int64 [2] = (longest row of rowptr, of
// colptr), which the Graph hands to the ops as their schedule hints.
using BuildGraphOutputs = std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor,
                                     at::Tensor, at::Tensor, at::Tensor>;

BuildGraphOutputs with_max_degrees(GraphTensors graph, int64_t max_in, int64_t max_out);

// Checks edge_index ([2, E], int32/int64, any strides) and self_loops (0, 1 or 2).
SelfLoops check_build_graph_args(const at::Tensor& edge_index, int64_t self_loops);
// build_graph_deferred's error word: int64, one entry, on edge_index's device.
void check_deferred_error_word(const at::Tensor& error, const at::Tensor& edge_index);

// The core's view of edge_index's storage (host or device pointer, element strides).
EdgeIndexView edge_index_view(const at::Tensor& edge_index);

// int32 when every count of the planned graph fits and int64 is not forced, else int64.
at::ScalarType graph_index_dtype(const GraphSizes& sizes, bool force_int64);

// Uninitialised outputs of a planned graph, with `options`' device and index dtype.
GraphTensors empty_graph_tensors(const GraphSizes& sizes, const at::TensorOptions& options);

// The core's pointers into the outputs (index_t must be their dtype).
template <typename index_t>
GraphArrays<index_t> graph_arrays(const GraphTensors& t) {
  return {ptr<index_t>(std::get<0>(t)), ptr<index_t>(std::get<1>(t)), ptr<index_t>(std::get<2>(t)),
          ptr<index_t>(std::get<3>(t)), ptr<index_t>(std::get<4>(t)), ptr<index_t>(std::get<5>(t)),
          ptr<index_t>(std::get<6>(t))};
}

}  // namespace iognn::torch_ext

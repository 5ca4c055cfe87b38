// iognn::propagate (SpMM family): schemas and the host backend (op bodies: propagate_ops.h,
// shared with the CUDA backend in binding/cuda/propagate.cpp; checks: propagate_checks.h).
//
// Forward:  propagate(rowptr, col, colptr, row, csc2csr, weight?, x, reduce, bias?,
//                     max_in_degree, max_out_degree) -> out [num_dst, F] (the layer's bias fused)
// Backward: propagate_backward_x -> grad_x [num_src, F]   (transposed CSR gather)
//           propagate_backward_weight -> grad_weight [E]   (sampled dense-dense product)
// Tile path: propagate_tile_values, propagate_tiles (propagate_tiles_ops.h; the autograd and the
//           choice of path are python/iognn/ops/propagate_tiles.py).
// The transposed-CSR arguments of the forward are unused by it; they are part of the schema so the
// autograd formula (binding/autograd/propagate.cpp) can hand them to the backward ops.
// max_in_degree / max_out_degree: the longest row of rowptr / colptr when the caller knows it (a
// Graph does), else -1. Only the CUDA schedule reads them (no heavy row: one launch); a value
// below the true maximum still gives the right result (heavy rows then take the light path).
#include <ATen/ATen.h>
#include <torch/library.h>

#include "binding/propagate_ops.h"
#include "binding/propagate_tiles_ops.h"
#include "kernels/cpu/propagate.h"
#include "kernels/cpu/propagate_tiles.h"

namespace iognn::torch_ext {
namespace {

using namespace propagate;

// The host kernels (kernels/cpu/propagate.h); the degree hints are the device schedule's only.
struct CpuPropagate {
  using Scope = HostScope;
  template <typename T, typename I>
  static void forward(const Scope&, const ForwardArgs<T, I>& a) {
    cpu::propagate_forward<T, I>(a.rowptr, a.col, a.weight, a.x, a.x_stride, a.num_dst, a.F,
                                 a.reduce, a.bias, a.out);
  }
  template <typename T, typename I>
  static void backward_x(const Scope&, const BackwardXArgs<T, I>& a) {
    cpu::propagate_backward_x<T, I>(a.colptr, a.row, a.csc2csr, a.rowptr, a.weight, a.grad_out,
                                    a.num_src, a.F, a.reduce, a.grad_x);
  }
  template <typename T, typename I>
  static void backward_weight(const Scope&, const BackwardWeightArgs<T, I>& a) {
    cpu::propagate_backward_weight<T, I>(a.rowptr, a.col, a.grad_out, a.x, a.x_stride, a.num_dst,
                                         a.F, a.reduce, a.grad_w);
  }
  template <typename acc, typename I>
  static void tile_values(const Scope&, const TileValuesArgs<acc, I>& a) {
    cpu::tile_values<acc, I>(a.ptr, a.edge_slot, a.weight, a.perm, a.target, a.deg_ptr,
                             a.num_rows, a.vals);
  }
  template <typename T, typename I>
  static void tile_spmm(const Scope&, const TileSpmmArgs<T, I>& a) {
    cpu::tile_spmm<T, I>(a.window_ptr, a.tile_cols, a.row_order, a.vals, a.x, a.x_stride,
                         a.num_rows, a.F, a.bias, a.out);
  }
};

}  // namespace

TORCH_LIBRARY_FRAGMENT(iognn, m) {
  m.def(
      "propagate(Tensor rowptr, Tensor col, Tensor colptr, Tensor row, Tensor csc2csr, "
      "Tensor? weight, Tensor x, str reduce, Tensor? bias=None, SymInt max_in_degree=-1, "
      "SymInt max_out_degree=-1) -> Tensor");
  m.def(
      "propagate_backward_x(Tensor colptr, Tensor row, Tensor csc2csr, Tensor rowptr, "
      "Tensor? weight, Tensor grad_out, str reduce, SymInt max_out_degree=-1) -> Tensor");
  m.def(
      "propagate_backward_weight(Tensor rowptr, Tensor col, Tensor grad_out, Tensor x, "
      "str reduce, SymInt max_in_degree=-1) -> Tensor");
  m.def(
      "propagate_tile_values(Tensor ptr, Tensor edge_slot, int num_tiles, Tensor? weight, "
      "Tensor? perm, Tensor? target, Tensor? deg_ptr, ScalarType dtype) -> Tensor");
  m.def(
      "propagate_tiles(Tensor window_ptr, Tensor tile_cols, Tensor? row_order, Tensor vals, "
      "Tensor x, Tensor? bias, int num_rows) -> Tensor");
}

TORCH_LIBRARY_IMPL(iognn, CPU, m) {
  propagate::register_propagate<CpuPropagate>(m);
  propagate::register_propagate_tiles<CpuPropagate>(m);
}

}  // namespace iognn::torch_ext

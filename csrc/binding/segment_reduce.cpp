// iognn::segment_reduce (fused sum/mean/min/max/var/std aggregation): schemas and the host
// backend (op bodies: segment_reduce_ops.h, shared with the CUDA backend in
// binding/cuda/segment_reduce.cpp; checks and outputs: segment_reduce_checks.h).
//
// Forward:  segment_reduce(rowptr, col, colptr, row, csc2csr, x, reduces, scale=None)
//             -> (out [num_dst, K*F], ties, wide, mean, plain)
//           ties [2, num_dst, n, F] uint8 and wide [n, num_edges // 0x7FFF, F] int64 when min or
//           max is requested (n of them, min first): who holds each result, as tie codes in two
//           byte planes (kernels/segment_extremum.h; wide entries are written only where a
//           count saturates); mean: [num_dst, F] in the accumulation dtype (fp32; fp64 for fp64)
//           when var or std is requested, unless the mean is requested too and x is fp32 / fp64
//           (the backward then reads out's mean); each is an empty [0] tensor otherwise. They
//           exist for the backward only.
//           scale [num_dst, S] (x's dtype): PNA's degree scalers applied in the epilogue; out is
//           then [num_dst, S*K*F] (block s = scale[:, s] * results) and plain [num_dst, K*F]
//           holds the unscaled results (else an empty [0] tensor). kernels/segment_reduce_types.h.
// Backward: segment_reduce_backward(..., grad_out, reduces, scale=None) -> grad_x [num_src, F]
//           (transposed CSR gather; min / max split each gradient evenly among tied in-edges as
//           torch's scatter_reduce does: kernels/segment_extremum.h). With scale, `out` is
//           the forward's plain results and grad_out [num_dst, S*K*F] is folded over the scalers
//           first. The gradient of scale itself is left to the autograd formula.
// The transposed-CSR arguments of the forward are unused by it; they are part of the schema so the
// autograd formula (binding/autograd/segment_reduce.cpp) can hand them to the backward op. The
// host backward does not read csc2csr (it compares values); the CUDA backward finds a sole
// holder by its CSR position through it.
#include <ATen/ATen.h>
#include <torch/library.h>

#include "binding/segment_reduce_ops.h"
#include "kernels/cpu/segment_reduce.h"

namespace iognn::torch_ext {
namespace {

using namespace segment_reduce;

// The host kernels (kernels/cpu/segment_reduce.h); the degree hints are the device schedule's only.
struct CpuSegmentReduce {
  using Scope = HostScope;
  template <typename T, typename I>
  static void forward(const Scope&, const ForwardArgs<T, I>& a) {
    cpu::segment_reduce_forward<T, I>(a.rowptr, a.col, a.x, a.x_stride, a.num_dst, a.F, a.reduces,
                                      a.out, a.ties, a.mean, a.scales);
  }
  template <typename T>
  static void fold_scales(const Scope&, const T* grad_out, const T* scale, int64_t num_dst,
                          int64_t S, int64_t KF, T* folded) {
    cpu::segment_reduce_fold_scales<T>(grad_out, scale, num_dst, S, KF, folded);
  }
  template <typename T, typename I>
  static void backward(const Scope&, const BackwardArgs<T, I>& a) {
    cpu::segment_reduce_backward<T, I>(a.colptr, a.row, a.rowptr, a.x, a.x_stride, a.out, a.ties,
                                       a.mean, a.mean_stride, a.grad_out, a.num_src, a.F,
                                       a.reduces, a.grad_x);
  }
};

}  // namespace

TORCH_LIBRARY_FRAGMENT(iognn, m) {
  m.def(
      "segment_reduce(Tensor rowptr, Tensor col, Tensor colptr, Tensor row, Tensor csc2csr, "
      "Tensor x, str[] reduces, Tensor? scale=None, SymInt max_in_degree=-1, "
      "SymInt max_out_degree=-1) -> (Tensor out, Tensor ties, Tensor wide, Tensor mean, "
      "Tensor plain)");
  m.def(
      "segment_reduce_backward(Tensor colptr, Tensor row, Tensor csc2csr, Tensor rowptr, "
      "Tensor x, Tensor out, Tensor ties, Tensor wide, Tensor mean, Tensor grad_out, "
      "str[] reduces, Tensor? scale=None, SymInt max_out_degree=-1) -> Tensor");
}

TORCH_LIBRARY_IMPL(iognn, CPU, m) { segment_reduce::register_segment_reduce<CpuSegmentReduce>(m); }

}  // namespace iognn::torch_ext

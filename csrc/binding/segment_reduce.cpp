// iognn::segment_reduce (fused sum/mean/min/max/var/std aggregation): schemas and host
// implementations (argument checks: segment_reduce_checks.h; CUDA: cuda/segment_reduce.cpp).
//
// Forward:  segment_reduce(rowptr, col, colptr, row, csc2csr, x, reduces, scale=None)
//             -> (out [num_dst, K*F], ties, wide, mean, plain)
//           ties [2, num_dst, n, F] uint8 and wide [n, num_edges // 0x7FFF, F] int64 when min or
//           max is requested (n of them, min first): who holds each result, as tie codes in two
//           byte planes (kernels/cpu/segment_extremum.h; wide entries are written only where a
//           count saturates); mean: [num_dst, F] in the accumulation dtype (fp32; fp64 for fp64)
//           when var or std is requested, unless the mean is requested too and x is fp32 / fp64
//           (the backward then reads out's mean); each is an empty [0] tensor otherwise. They
//           exist for the backward only.
//           scale [num_dst, S] (x's dtype): PNA's degree scalers applied in the epilogue; out is
//           then [num_dst, S*K*F] (block s = scale[:, s] * results) and plain [num_dst, K*F]
//           holds the unscaled results (else an empty [0] tensor). kernels/cpu/segment_reduce.h.
// Backward: segment_reduce_backward(..., grad_out, reduces, scale=None) -> grad_x [num_src, F]
//           (transposed CSR gather; min / max split each gradient evenly among tied in-edges as
//           torch's scatter_reduce does: kernels/cpu/segment_extremum.h). With scale, `out` is
//           the forward's plain results and grad_out [num_dst, S*K*F] is folded over the scalers
//           first. The gradient of scale itself is left to the autograd formula.
// The transposed-CSR arguments of the forward are unused by it; they are part of the schema so the
// autograd formula (binding/autograd/segment_reduce.cpp) can hand them to the backward op. The
// host backward does not read csc2csr (it compares values); the CUDA backward finds a sole
// holder by its CSR position through it.
#include <ATen/ATen.h>
#include <torch/library.h>

#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "binding/segment_reduce_checks.h"
#include "binding/utils.h"
#include "kernels/cpu/segment_reduce.h"

namespace iognn::torch_ext {
namespace {

SegmentReduceOutputs segment_reduce_cpu(const at::Tensor& rowptr, const at::Tensor& col,
                                        const at::Tensor& colptr, const at::Tensor& row,
                                        const at::Tensor& csc2csr, const at::Tensor& x_in,
                                        std::vector<std::string> reduce_names,
                                        const std::optional<at::Tensor>& scale_in, int64_t,
                                        int64_t) {
  constexpr const char* op = "iognn::segment_reduce";
  const SegmentReduceCall call =
      check_segment_reduce(op, rowptr, col, colptr, row, csc2csr, x_in, reduce_names, scale_in);
  const at::Tensor x = last_dim_contiguous(x_in);
  const at::Tensor scale = contiguous_scale(call, scale_in);
  auto [out, ties, wide, mean, plain] = empty_segment_reduce_outputs(call, x);
  if (out.numel() == 0) return {out, ties, wide, mean, plain};
  dispatch_float(x.scalar_type(), op, [&](auto ft) {
    using T = typename decltype(ft)::type;
    dispatch_index(rowptr.scalar_type(), op, [&](auto it) {
      using I = typename decltype(it)::type;
      cpu::segment_reduce_forward<T, I>(
          cptr<I>(rowptr), cptr<I>(col), cptr<T>(x), x.stride(0), call.num_dst, call.F,
          call.reduces, ptr<T>(out), tie_arrays(call, ties, wide),
          call.want_mean ? ptr<acc_t<T>>(mean) : nullptr, degree_scales<T>(scale, plain));
    });
  });
  return {out, ties, wide, mean, plain};
}

at::Tensor segment_reduce_backward_cpu(const at::Tensor& colptr, const at::Tensor& row,
                                       const at::Tensor& csc2csr, const at::Tensor& rowptr,
                                       const at::Tensor& x_in, const at::Tensor& out_in,
                                       const at::Tensor& ties_in, const at::Tensor& wide_in,
                                       const at::Tensor& mean_in, const at::Tensor& grad_out_in,
                                       std::vector<std::string> reduce_names,
                                       const std::optional<at::Tensor>& scale, int64_t) {
  constexpr const char* op = "iognn::segment_reduce_backward";
  const SegmentReduceCall call =
      check_segment_reduce_backward(op, colptr, row, csc2csr, rowptr, x_in, out_in, ties_in,
                                    wide_in, mean_in, grad_out_in, reduce_names, scale);
  SegmentReduceBackwardOperands t = segment_reduce_backward_operands(
      call, x_in, out_in, ties_in, wide_in, mean_in, grad_out_in, scale);
  if (t.grad_x.numel() == 0) return t.grad_x;
  dispatch_float(t.x.scalar_type(), op, [&](auto ft) {
    using T = typename decltype(ft)::type;
    if (t.scale.defined()) {  // the gradient of the plain results
      at::Tensor folded = at::empty({call.num_dst, call.K * call.F}, t.x.options());
      cpu::segment_reduce_fold_scales<T>(cptr<T>(t.grad_out), cptr<T>(t.scale), call.num_dst,
                                         call.S, call.K * call.F, ptr<T>(folded));
      t.grad_out = folded;
    }
    dispatch_index(rowptr.scalar_type(), op, [&](auto it) {
      using I = typename decltype(it)::type;
      const auto [mean, mean_stride] = t.mean_rows<T>(call);
      cpu::segment_reduce_backward<T, I>(cptr<I>(colptr), cptr<I>(row), cptr<I>(rowptr),
                                         cptr<T>(t.x), t.x.stride(0), cptr<T>(t.out),
                                         tie_view(call, t.ties, t.wide), mean, mean_stride,
                                         cptr<T>(t.grad_out), call.num_src, call.F, call.reduces,
                                         ptr<T>(t.grad_x));
    });
  });
  return t.grad_x;
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(iognn, m) {
  m.def(
      "segment_reduce(Tensor rowptr, Tensor col, Tensor colptr, Tensor row, Tensor csc2csr, "
      "Tensor x, str[] reduces, Tensor? scale=None, int max_in_degree=-1, "
      "int max_out_degree=-1) -> (Tensor out, Tensor ties, Tensor wide, Tensor mean, "
      "Tensor plain)");
  m.def(
      "segment_reduce_backward(Tensor colptr, Tensor row, Tensor csc2csr, Tensor rowptr, "
      "Tensor x, Tensor out, Tensor ties, Tensor wide, Tensor mean, Tensor grad_out, "
      "str[] reduces, Tensor? scale=None, int max_out_degree=-1) -> Tensor");
}

TORCH_LIBRARY_IMPL(iognn, CPU, m) {
  m.impl("segment_reduce", &segment_reduce_cpu);
  m.impl("segment_reduce_backward", &segment_reduce_backward_cpu);
}

}  // namespace iognn::torch_ext

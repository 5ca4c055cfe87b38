// The segment-reduce ops, written once for every backend: argument checks and outputs
// (segment_reduce_checks.h), the dtype / index dispatch, the fold of PNA's scalers and the call of
// the backend's kernels. binding/segment_reduce.cpp defines the schemas and registers these
// bodies with the host kernels; binding/cuda/segment_reduce.cpp with the device kernels;
// binding/meta.cpp as the Meta kernels (MetaBackend: the outputs only). A Backend other than
// MetaBackend provides
//
//   using Scope = HostScope or DeviceScope (binding/utils.h, binding/cuda/device_scope.h)
//   template <typename T, typename I> static void forward(const Scope&, const ForwardArgs<T, I>&);
//   template <typename T>
//   static void fold_scales(const Scope&, const T* grad_out, const T* scale, int64_t num_dst,
//                           int64_t S, int64_t KF, T* folded);
//   template <typename T, typename I>
//   static void backward(const Scope&, const BackwardArgs<T, I>&);
#pragma once

#include <ATen/ATen.h>
#include <torch/library.h>

#include <optional>
#include <string>
#include <vector>

#include "binding/segment_reduce_checks.h"
#include "binding/utils.h"

namespace iognn::torch_ext::segment_reduce {

// The K requested reductions of x's rows over rowptr's rows (longest: max_degree, or -1).
template <typename T, typename I>
struct ForwardArgs {
  const I *rowptr, *col;
  const T* x;
  int64_t x_stride, num_dst, num_edges, max_degree, F;
  const std::vector<SegmentReduce>& reduces;
  T* out;
  Ties ties;
  acc_t<T>* mean;  // nullable
  DegreeScales<T> scales;
};

// grad_x over the transposed CSR (colptr's longest row: max_degree).
template <typename T, typename I>
struct BackwardArgs {
  const I *colptr, *row, *csc2csr, *rowptr;
  const T* x;
  int64_t x_stride;
  const T* out;
  TiesView ties;
  const acc_t<T>* mean;
  int64_t mean_stride;
  const T* grad_out;
  int64_t num_src, num_dst, num_edges, max_degree, F;
  const std::vector<SegmentReduce>& reduces;
  T* grad_x;
};

template <class Backend>
struct SegmentReduceOps {
  static SegmentReduceOutputs forward(const at::Tensor& rowptr, const at::Tensor& col,
                                      const at::Tensor& colptr, const at::Tensor& row,
                                      const at::Tensor& csc2csr, const at::Tensor& x_in,
                                      std::vector<std::string> reduce_names,
                                      const std::optional<at::Tensor>& scale_in,
                                      c10::SymInt max_in_degree, c10::SymInt) {
    constexpr const char* op = "iognn::segment_reduce";
    if constexpr (is_meta_v<Backend>) {
      return empty_segment_reduce_outputs(plan_segment_reduce(reduce_names, x_in.scalar_type(), op),
                                          rowptr, col, x_in, scale_in);
    } else {
      const SegmentReduceCall call = check_segment_reduce(op, rowptr, col, colptr, row, csc2csr,
                                                          x_in, reduce_names, scale_in);
      const typename Backend::Scope scope(x_in);
      const at::Tensor x = last_dim_contiguous(x_in);
      const at::Tensor scale = contiguous_scale(call, scale_in);
      auto [out, ties, wide, mean, plain] =
          empty_segment_reduce_outputs(call, rowptr, col, x, scale_in);
      if (out.numel() == 0) return {out, ties, wide, mean, plain};
      dispatch_float_index(x.scalar_type(), rowptr.scalar_type(), op, [&](auto ft, auto it) {
        using T = typename decltype(ft)::type;
        using I = typename decltype(it)::type;
        Backend::forward(scope, ForwardArgs<T, I>{
                                    cptr<I>(rowptr), cptr<I>(col), cptr<T>(x), x.stride(0),
                                    call.num_dst, col.numel(), max_in_degree.expect_int(), call.F,
                                    call.reduces, ptr<T>(out), tie_arrays(call, ties, wide),
                                    call.want_mean ? ptr<acc_t<T>>(mean) : nullptr,
                                    degree_scales<T>(scale, plain)});
      });
      return {out, ties, wide, mean, plain};
    }
  }

  static at::Tensor backward(const at::Tensor& colptr, const at::Tensor& row,
                             const at::Tensor& csc2csr, const at::Tensor& rowptr,
                             const at::Tensor& x_in, const at::Tensor& out_in,
                             const at::Tensor& ties_in, const at::Tensor& wide_in,
                             const at::Tensor& mean_in, const at::Tensor& grad_out_in,
                             std::vector<std::string> reduce_names,
                             const std::optional<at::Tensor>& scale,
                             c10::SymInt max_out_degree) {
    constexpr const char* op = "iognn::segment_reduce_backward";
    if constexpr (is_meta_v<Backend>) {
      return empty_csr_rows(colptr, x_in);
    } else {
      const SegmentReduceCall call =
          check_segment_reduce_backward(op, colptr, row, csc2csr, rowptr, x_in, out_in, ties_in,
                                        wide_in, mean_in, grad_out_in, reduce_names, scale);
      const typename Backend::Scope scope(x_in);
      SegmentReduceBackwardOperands t = segment_reduce_backward_operands(
          call, colptr, x_in, out_in, ties_in, wide_in, mean_in, grad_out_in, scale);
      if (t.grad_x.numel() == 0) return t.grad_x;
      dispatch_float(t.x.scalar_type(), op, [&](auto ft) {
        using T = typename decltype(ft)::type;
        if (t.scale.defined()) {  // the gradient of the plain results
          at::Tensor folded = at::empty({call.num_dst, call.K * call.F}, t.x.options());
          Backend::fold_scales(scope, cptr<T>(t.grad_out), cptr<T>(t.scale), call.num_dst,
                               call.S, call.K * call.F, ptr<T>(folded));
          t.grad_out = folded;
        }
        const auto [mean, mean_stride] = t.mean_rows<T>(call);
        dispatch_index(rowptr.scalar_type(), op, [&](auto it) {
          using I = typename decltype(it)::type;
          Backend::backward(scope, BackwardArgs<T, I>{
                                       cptr<I>(colptr), cptr<I>(row), cptr<I>(csc2csr),
                                       cptr<I>(rowptr), cptr<T>(t.x), t.x.stride(0),
                                       cptr<T>(t.out), tie_view(call, t.ties, t.wide), mean,
                                       mean_stride, cptr<T>(t.grad_out), call.num_src,
                                       call.num_dst, row.numel(), max_out_degree.expect_int(),
                                       call.F, call.reduces, ptr<T>(t.grad_x)});
        });
      });
      return t.grad_x;
    }
  }
};

// Registers the two ops of `Backend` for one dispatch key.
template <class Backend>
void register_segment_reduce(torch::Library& m) {
  m.impl("segment_reduce", &SegmentReduceOps<Backend>::forward);
  m.impl("segment_reduce_backward", &SegmentReduceOps<Backend>::backward);
}

}  // namespace iognn::torch_ext::segment_reduce

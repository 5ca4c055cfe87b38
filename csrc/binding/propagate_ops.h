// The propagate ops, written once for every backend: argument checks (propagate_checks.h), the
// dense operands, outputs, the dtype / index dispatch and the call of the backend's kernels.
// binding/propagate.cpp defines the schemas and registers these bodies with the host kernels;
// binding/cuda/propagate.cpp with the device kernels; binding/meta.cpp as the Meta kernels
// (MetaBackend: the outputs only). A Backend other than MetaBackend provides
//
//   using Scope = HostScope or DeviceScope (binding/utils.h, binding/cuda/device_scope.h)
//   template <typename T, typename I> static void forward(const Scope&, const ForwardArgs<T, I>&);
//   template <typename T, typename I>
//   static void backward_x(const Scope&, const BackwardXArgs<T, I>&);
//   template <typename T, typename I>
//   static void backward_weight(const Scope&, const BackwardWeightArgs<T, I>&);
#pragma once

#include <ATen/ATen.h>
#include <torch/library.h>

#include <optional>

#include "binding/propagate_checks.h"
#include "binding/utils.h"

namespace iognn::torch_ext::propagate {

using OptTensor = std::optional<at::Tensor>;

// out = scale_i * sum_p w_p * x[col_p] (+ bias), rows of rowptr (longest: max_degree or -1).
template <typename T, typename I>
struct ForwardArgs {
  const I *rowptr, *col;
  const acc_t<T>* weight;  // nullable
  const T* x;
  int64_t x_stride, num_dst, num_edges, max_degree, F;
  PropagateReduce reduce;
  const T* bias;  // nullable
  T* out;
};

// grad_x over the transposed CSR (colptr's longest row: max_degree).
template <typename T, typename I>
struct BackwardXArgs {
  const I *colptr, *row, *csc2csr, *rowptr;
  const acc_t<T>* weight;  // nullable
  const T* grad_out;
  int64_t num_src, num_edges, max_degree, F;
  PropagateReduce reduce;
  T* grad_x;
};

// grad_w[p] = scale_i * <grad_out[i], x[col_p]> (rowptr's longest row: max_degree).
template <typename T, typename I>
struct BackwardWeightArgs {
  const I *rowptr, *col;
  const T *grad_out, *x;
  int64_t x_stride, num_dst, num_edges, max_degree, F;
  PropagateReduce reduce;
  acc_t<T>* grad_w;
};

inline OptTensor contiguous(const OptTensor& t) {
  return t ? OptTensor(t->contiguous()) : std::nullopt;
}

template <class Backend>
struct PropagateOps {
  static at::Tensor forward(const at::Tensor& rowptr, const at::Tensor& col,
                            const at::Tensor& colptr, const at::Tensor& row,
                            const at::Tensor& csc2csr, const OptTensor& weight_in,
                            const at::Tensor& x_in, c10::string_view reduce,
                            const OptTensor& bias_in, c10::SymInt max_in_degree, c10::SymInt) {
    constexpr const char* op = "iognn::propagate";
    const auto red = parse_reduce(reduce, op);
    if constexpr (is_meta_v<Backend>) {
      return empty_csr_rows(rowptr, x_in);
    } else {
      check_propagate_args(op, rowptr, col, colptr, weight_in, x_in, bias_in);
      const typename Backend::Scope scope(x_in);
      const at::Tensor x = last_dim_contiguous(x_in);
      const OptTensor weight = contiguous(weight_in), bias = contiguous(bias_in);
      at::Tensor out = empty_csr_rows(rowptr, x);
      if (out.numel() == 0) return out;
      const int64_t num_dst = out.size(0), F = out.size(1);
      dispatch_float_index(x.scalar_type(), rowptr.scalar_type(), op, [&](auto ft, auto it) {
        using T = typename decltype(ft)::type;
        using I = typename decltype(it)::type;
        Backend::forward(scope, ForwardArgs<T, I>{
                                    cptr<I>(rowptr), cptr<I>(col),
                                    optional_cptr<acc_t<T>>(weight), cptr<T>(x), x.stride(0),
                                    num_dst, col.numel(), max_in_degree.expect_int(), F, red,
                                    optional_cptr<T>(bias), ptr<T>(out)});
      });
      return out;
    }
  }

  static at::Tensor backward_x(const at::Tensor& colptr, const at::Tensor& row,
                               const at::Tensor& csc2csr, const at::Tensor& rowptr,
                               const OptTensor& weight_in, const at::Tensor& grad_out_in,
                               c10::string_view reduce, c10::SymInt max_out_degree) {
    constexpr const char* op = "iognn::propagate_backward_x";
    const auto red = parse_reduce(reduce, op);
    if constexpr (is_meta_v<Backend>) {
      return empty_csr_rows(colptr, grad_out_in);
    } else {
      check_backward_x_args(op, colptr, row, csc2csr, rowptr, weight_in, grad_out_in);
      const typename Backend::Scope scope(grad_out_in);
      const at::Tensor grad_out = grad_out_in.contiguous();
      const OptTensor weight = contiguous(weight_in);
      at::Tensor grad_x = empty_csr_rows(colptr, grad_out);
      if (grad_x.numel() == 0) return grad_x;
      const int64_t num_src = grad_x.size(0), F = grad_x.size(1);
      dispatch_float_index(grad_out.scalar_type(), colptr.scalar_type(), op, [&](auto ft, auto it) {
        using T = typename decltype(ft)::type;
        using I = typename decltype(it)::type;
        Backend::backward_x(scope, BackwardXArgs<T, I>{
                                       cptr<I>(colptr), cptr<I>(row), cptr<I>(csc2csr),
                                       cptr<I>(rowptr), optional_cptr<acc_t<T>>(weight),
                                       cptr<T>(grad_out), num_src, row.numel(),
                                       max_out_degree.expect_int(), F, red, ptr<T>(grad_x)});
      });
      return grad_x;
    }
  }

  static at::Tensor backward_weight(const at::Tensor& rowptr, const at::Tensor& col,
                                    const at::Tensor& grad_out_in, const at::Tensor& x_in,
                                    c10::string_view reduce, c10::SymInt max_in_degree) {
    constexpr const char* op = "iognn::propagate_backward_weight";
    const auto red = parse_reduce(reduce, op);
    if constexpr (is_meta_v<Backend>) {
      return empty_edge_grad(col, x_in);
    } else {
      check_backward_weight_args(op, rowptr, col, grad_out_in, x_in);
      const typename Backend::Scope scope(x_in);
      const at::Tensor grad_out = grad_out_in.contiguous();
      const at::Tensor x = last_dim_contiguous(x_in);
      at::Tensor grad_w = empty_edge_grad(col, x);
      if (grad_w.numel() == 0) return grad_w;
      const int64_t num_dst = rowptr.numel() - 1, F = x.size(1);
      if (F == 0) return grad_w.zero_();  // every product is empty
      dispatch_float_index(x.scalar_type(), rowptr.scalar_type(), op, [&](auto ft, auto it) {
        using T = typename decltype(ft)::type;
        using I = typename decltype(it)::type;
        Backend::backward_weight(scope, BackwardWeightArgs<T, I>{
                                            cptr<I>(rowptr), cptr<I>(col), cptr<T>(grad_out),
                                            cptr<T>(x), x.stride(0), num_dst, col.numel(),
                                            max_in_degree.expect_int(), F, red,
                                            ptr<acc_t<T>>(grad_w)});
      });
      return grad_w;
    }
  }
};

// Registers the three ops of `Backend` for one dispatch key.
template <class Backend>
void register_propagate(torch::Library& m) {
  m.impl("propagate", &PropagateOps<Backend>::forward);
  m.impl("propagate_backward_x", &PropagateOps<Backend>::backward_x);
  m.impl("propagate_backward_weight", &PropagateOps<Backend>::backward_weight);
}

}  // namespace iognn::torch_ext::propagate

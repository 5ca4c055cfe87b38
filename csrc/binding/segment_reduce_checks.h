// Argument checks and output allocation of iognn::segment_reduce / segment_reduce_backward, shared
// by the CPU (binding/segment_reduce.cpp) and CUDA (binding/cuda/segment_reduce.cpp)
// implementations so that both raise the same errors for the same bad input.
#pragma once

#include <ATen/ATen.h>

#include <initializer_list>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "binding/utils.h"
#include "kernels/cpu/segment_reduce.h"

namespace iognn::torch_ext {

// What a checked call computes.
struct SegmentReduceCall {
  std::vector<cpu::SegmentReduce> reduces;
  int64_t num_src, num_dst, F, K;
  bool want_min, want_max, want_mean;  // which auxiliary outputs exist (count_min, count_max, mean)
};

namespace segment_reduce_detail {

inline std::vector<cpu::SegmentReduce> parse_reduces(const std::vector<std::string>& names,
                                                     const char* op) {
  try {
    return cpu::parse_segment_reduces(names);
  } catch (const iognn::ValueError& e) {
    TORCH_CHECK_VALUE(false, op, ": ", e.what());
  }
}

// A graph's index vectors (all of one dtype, on x's device) and x [num_src, F] of a float dtype.
inline void check_graph(const char* op,
                        std::initializer_list<std::pair<const at::Tensor*, const char*>> index,
                        const at::Tensor& x, int64_t num_src) {
  const at::Tensor& first = *index.begin()->first;
  for (const auto& [t, name] : index) {
    check_index_vector(*t, op, name);
    check_same_index_dtype(first, *t, op, name);
    check_device(*t, x, op, name, "x");
  }
  const auto dtype = x.scalar_type();
  TORCH_CHECK_TYPE(dtype == at::kFloat || dtype == at::kDouble || dtype == at::kHalf ||
                       dtype == at::kBFloat16,
                   op, ": x must be float32, float64, float16 or bfloat16, got ", dtype);
  check_dim(x, 2, op, "x");
  check_size(x, 0, num_src, op, "x", "rows (source nodes)");
}

// An auxiliary tensor of the forward: [rows, cols] of `dtype` when `present`, else anything empty.
inline void check_aux(const at::Tensor& t, bool present, int64_t rows, int64_t cols,
                      at::ScalarType dtype, const at::Tensor& x, const char* op, const char* name) {
  check_device(t, x, op, name, "x");
  if (!present) return;
  check_dtype(t, dtype, op, name);
  check_dim(t, 2, op, name);
  check_size(t, 0, rows, op, name, "rows (destination nodes)");
  check_size(t, 1, cols, op, name, "features");
}

inline SegmentReduceCall describe(std::vector<cpu::SegmentReduce> reduces, int64_t num_src,
                                  int64_t num_dst, int64_t F) {
  const bool want_min = cpu::segment_reduce_has(reduces, cpu::SegmentReduce::kMin);
  const bool want_max = cpu::segment_reduce_has(reduces, cpu::SegmentReduce::kMax);
  const bool want_mean = cpu::segment_reduce_needs_mean(reduces);
  const int64_t K = int64_t(reduces.size());
  return {std::move(reduces), num_src, num_dst, F, K, want_min, want_max, want_mean};
}

}  // namespace segment_reduce_detail

// Checks the forward's arguments (the transposed CSR only for its dtype and device).
inline SegmentReduceCall check_segment_reduce(const char* op, const at::Tensor& rowptr,
                                              const at::Tensor& col, const at::Tensor& colptr,
                                              const at::Tensor& row, const at::Tensor& x,
                                              const std::vector<std::string>& names) {
  namespace d = segment_reduce_detail;
  auto reduces = d::parse_reduces(names, op);
  d::check_graph(op, {{&rowptr, "rowptr"}, {&col, "col"}, {&colptr, "colptr"}, {&row, "row"}}, x,
                 colptr.numel() - 1);
  TORCH_CHECK_VALUE(rowptr.numel() >= 1, op, ": rowptr must have num_dst + 1 >= 1 entries");
  return d::describe(std::move(reduces), colptr.numel() - 1, rowptr.numel() - 1, x.size(1));
}

// Checks the backward's arguments, including the forward outputs it is handed back.
inline SegmentReduceCall check_segment_reduce_backward(
    const char* op, const at::Tensor& colptr, const at::Tensor& row, const at::Tensor& rowptr,
    const at::Tensor& x, const at::Tensor& out, const at::Tensor& count_min,
    const at::Tensor& count_max, const at::Tensor& mean, const at::Tensor& grad_out,
    const std::vector<std::string>& names) {
  namespace d = segment_reduce_detail;
  auto reduces = d::parse_reduces(names, op);
  d::check_graph(op, {{&colptr, "colptr"}, {&row, "row"}, {&rowptr, "rowptr"}}, x,
                 colptr.numel() - 1);
  TORCH_CHECK_VALUE(rowptr.numel() >= 1, op, ": rowptr must have num_dst + 1 >= 1 entries");
  const SegmentReduceCall call =
      d::describe(std::move(reduces), colptr.numel() - 1, rowptr.numel() - 1, x.size(1));
  const auto index_dtype = rowptr.scalar_type();
  const auto n = call.num_dst, KF = call.K * call.F;
  d::check_aux(out, true, n, KF, x.scalar_type(), x, op, "out");
  d::check_aux(grad_out, true, n, KF, x.scalar_type(), x, op, "grad_out");
  d::check_aux(count_min, call.want_min, n, call.F, index_dtype, x, op, "count_min");
  d::check_aux(count_max, call.want_max, n, call.F, index_dtype, x, op, "count_max");
  d::check_aux(mean, call.want_mean, n, call.F, acc_dtype(x.scalar_type()), x, op, "mean");
  return call;
}

// Uninitialised forward outputs (out, count_min, count_max, mean): out [num_dst, K*F] like x;
// count_min / count_max [num_dst, F] in the index dtype (a count is at most a row's degree) and
// mean [num_dst, F] in the accumulation dtype when requested, else empty [0] tensors.
inline std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> empty_segment_reduce_outputs(
    const SegmentReduceCall& call, const at::Tensor& x, const at::Tensor& rowptr) {
  const auto aux_shape = [&](bool present) {
    return present ? std::vector<int64_t>{call.num_dst, call.F} : std::vector<int64_t>{0};
  };
  return {at::empty({call.num_dst, call.K * call.F}, x.options()),
          at::empty(aux_shape(call.want_min), rowptr.options()),
          at::empty(aux_shape(call.want_max), rowptr.options()),
          at::empty(aux_shape(call.want_mean), x.options().dtype(acc_dtype(x.scalar_type())))};
}

// The backward's operands as the kernels read them - x with a dense last dimension, the others
// contiguous - and its uninitialised result grad_x [num_src, F] like x.
struct SegmentReduceBackwardOperands {
  at::Tensor x, out, count_min, count_max, mean, grad_out, grad_x;
};
inline SegmentReduceBackwardOperands segment_reduce_backward_operands(
    const SegmentReduceCall& call, const at::Tensor& x, const at::Tensor& out,
    const at::Tensor& count_min, const at::Tensor& count_max, const at::Tensor& mean,
    const at::Tensor& grad_out) {
  const at::Tensor x_dense = last_dim_contiguous(x);
  const at::Tensor grad_x = at::empty({call.num_src, call.F}, x_dense.options());
  return {x_dense,           out.contiguous(),      count_min.contiguous(), count_max.contiguous(),
          mean.contiguous(), grad_out.contiguous(), grad_x};
}

}  // namespace iognn::torch_ext

// Argument checks and output allocation of iognn::segment_reduce / segment_reduce_backward, shared
// by the CPU (binding/segment_reduce.cpp) and CUDA (binding/cuda/segment_reduce.cpp)
// implementations so that both raise the same errors for the same bad input.
#pragma once

#include <ATen/ATen.h>

#include <algorithm>
#include <initializer_list>
#include <optional>
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
  int64_t S = 0;                       // degree scalers (scale's columns), 0 without
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

// The degree scalers: scale [num_dst, S >= 1] in x's dtype, on x's device; S (0 without).
inline int64_t check_scale(const std::optional<at::Tensor>& scale, int64_t num_dst,
                           const at::Tensor& x, const char* op) {
  if (!scale) return 0;
  check_device(*scale, x, op, "scale", "x");
  check_dtype(*scale, x.scalar_type(), op, "scale");
  check_dim(*scale, 2, op, "scale");
  check_size(*scale, 0, num_dst, op, "scale", "rows (destination nodes)");
  TORCH_CHECK_VALUE(scale->size(1) >= 1, op, ": scale must have at least one column (scaler)");
  return scale->size(1);
}

inline SegmentReduceCall describe(std::vector<cpu::SegmentReduce> reduces, int64_t num_src,
                                  int64_t num_dst, int64_t F, int64_t S) {
  const bool want_min = cpu::segment_reduce_has(reduces, cpu::SegmentReduce::kMin);
  const bool want_max = cpu::segment_reduce_has(reduces, cpu::SegmentReduce::kMax);
  const bool want_mean = cpu::segment_reduce_needs_mean(reduces);
  const int64_t K = int64_t(reduces.size());
  return {std::move(reduces), num_src, num_dst, F, K, want_min, want_max, want_mean, S};
}

}  // namespace segment_reduce_detail

// Checks the forward's arguments (the transposed CSR only for its dtype and device).
inline SegmentReduceCall check_segment_reduce(const char* op, const at::Tensor& rowptr,
                                              const at::Tensor& col, const at::Tensor& colptr,
                                              const at::Tensor& row, const at::Tensor& x,
                                              const std::vector<std::string>& names,
                                              const std::optional<at::Tensor>& scale) {
  namespace d = segment_reduce_detail;
  auto reduces = d::parse_reduces(names, op);
  d::check_graph(op, {{&rowptr, "rowptr"}, {&col, "col"}, {&colptr, "colptr"}, {&row, "row"}}, x,
                 colptr.numel() - 1);
  TORCH_CHECK_VALUE(rowptr.numel() >= 1, op, ": rowptr must have num_dst + 1 >= 1 entries");
  const int64_t S = d::check_scale(scale, rowptr.numel() - 1, x, op);
  return d::describe(std::move(reduces), colptr.numel() - 1, rowptr.numel() - 1, x.size(1), S);
}

// Checks the backward's arguments, including the forward outputs it is handed back.
inline SegmentReduceCall check_segment_reduce_backward(
    const char* op, const at::Tensor& colptr, const at::Tensor& row, const at::Tensor& rowptr,
    const at::Tensor& x, const at::Tensor& out, const at::Tensor& count_min,
    const at::Tensor& count_max, const at::Tensor& mean, const at::Tensor& grad_out,
    const std::vector<std::string>& names, const std::optional<at::Tensor>& scale) {
  namespace d = segment_reduce_detail;
  auto reduces = d::parse_reduces(names, op);
  d::check_graph(op, {{&colptr, "colptr"}, {&row, "row"}, {&rowptr, "rowptr"}}, x,
                 colptr.numel() - 1);
  TORCH_CHECK_VALUE(rowptr.numel() >= 1, op, ": rowptr must have num_dst + 1 >= 1 entries");
  const int64_t S = d::check_scale(scale, rowptr.numel() - 1, x, op);
  const SegmentReduceCall call =
      d::describe(std::move(reduces), colptr.numel() - 1, rowptr.numel() - 1, x.size(1), S);
  const auto index_dtype = rowptr.scalar_type();
  const auto n = call.num_dst, KF = call.K * call.F;
  d::check_aux(out, true, n, KF, x.scalar_type(), x, op, "out");  // the plain results if scaled
  d::check_aux(grad_out, true, n, std::max<int64_t>(S, 1) * KF, x.scalar_type(), x, op,
               "grad_out");
  d::check_aux(count_min, call.want_min, n, call.F, index_dtype, x, op, "count_min");
  d::check_aux(count_max, call.want_max, n, call.F, index_dtype, x, op, "count_max");
  d::check_aux(mean, call.want_mean, n, call.F, acc_dtype(x.scalar_type()), x, op, "mean");
  return call;
}

// (out, count_min, count_max, mean, plain)
using SegmentReduceOutputs =
    std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor>;

// Uninitialised forward outputs (out, count_min, count_max, mean, plain): out [num_dst, K*F] like
// x ([num_dst, S*K*F] with S degree scalers); count_min / count_max [num_dst, F] in the index
// dtype (a count is at most a row's degree) and mean [num_dst, F] in the accumulation dtype when
// requested; plain [num_dst, K*F] like x with degree scalers; empty [0] tensors otherwise.
inline SegmentReduceOutputs empty_segment_reduce_outputs(const SegmentReduceCall& call,
                                                         const at::Tensor& x,
                                                         const at::Tensor& rowptr) {
  const auto shape = [&](bool present, int64_t cols) {
    return present ? std::vector<int64_t>{call.num_dst, cols} : std::vector<int64_t>{0};
  };
  const int64_t KF = call.K * call.F;
  return {at::empty({call.num_dst, std::max<int64_t>(call.S, 1) * KF}, x.options()),
          at::empty(shape(call.want_min, call.F), rowptr.options()),
          at::empty(shape(call.want_max, call.F), rowptr.options()),
          at::empty(shape(call.want_mean, call.F), x.options().dtype(acc_dtype(x.scalar_type()))),
          at::empty(shape(call.S > 0, KF), x.options())};
}

// The contiguous degree scalers of a checked call (undefined without), and the kernels' view of
// them with the plain-results output.
inline at::Tensor contiguous_scale(const SegmentReduceCall& call,
                                   const std::optional<at::Tensor>& scale) {
  return call.S > 0 ? scale->contiguous() : at::Tensor();
}
template <typename T>
cpu::DegreeScales<T> degree_scales(const at::Tensor& scale, at::Tensor& plain) {
  if (!scale.defined()) return {};
  return {cptr<T>(scale), scale.size(1), ptr<T>(plain)};
}

// The backward's operands as the kernels read them - x with a dense last dimension, the others
// contiguous - and its uninitialised result grad_x [num_src, F] like x.
// With degree scalers, grad_out is the caller's [num_dst, S*K*F] gradient and scale the
// contiguous factors; the implementation folds them into the [num_dst, K*F] gradient of the plain
// results (segment_reduce_fold_scales) before the backward proper.
struct SegmentReduceBackwardOperands {
  at::Tensor x, out, count_min, count_max, mean, grad_out, grad_x, scale;
};
inline SegmentReduceBackwardOperands segment_reduce_backward_operands(
    const SegmentReduceCall& call, const at::Tensor& x, const at::Tensor& out,
    const at::Tensor& count_min, const at::Tensor& count_max, const at::Tensor& mean,
    const at::Tensor& grad_out, const std::optional<at::Tensor>& scale) {
  const at::Tensor x_dense = last_dim_contiguous(x);
  const at::Tensor grad_x = at::empty({call.num_src, call.F}, x_dense.options());
  return {x_dense,           out.contiguous(),      count_min.contiguous(), count_max.contiguous(),
          mean.contiguous(), grad_out.contiguous(), grad_x, contiguous_scale(call, scale)};
}

}  // namespace iognn::torch_ext

// Argument checks and output shapes of iognn::segment_reduce / segment_reduce_backward, shared by
// the CPU (binding/segment_reduce.cpp), CUDA (binding/cuda/segment_reduce.cpp) and Meta
// (binding/meta.cpp) implementations: the first two raise the same errors for the same bad input,
// and all three size the outputs with the same code.
#pragma once

#include <ATen/ATen.h>

#include <algorithm>
#include <initializer_list>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "binding/utils.h"
#include "kernels/segment_extremum.h"
#include "kernels/segment_reduce_types.h"

namespace iognn::torch_ext {

// What a call computes, from the reduce names and x's dtype alone (no size): what the Meta kernel
// needs besides the inputs' sizes.
struct SegmentReducePlan {
  std::vector<SegmentReduce> reduces;
  int64_t K;
  TieSlots ties;   // the extrema with tie codes (ties / wide exist when ties.count > 0)
  bool want_mean;  // whether the mean output exists
  // var / std with the mean among the results and x of its own accumulation dtype (fp32, fp64):
  // the backward reads the mean from that slot of the (plain) results, and the mean output is
  // empty. -1 otherwise.
  int64_t mean_slot = -1;
};

// What a checked call computes, with its sizes.
struct SegmentReduceCall : SegmentReducePlan {
  int64_t num_src, num_dst, num_edges, F;
  int64_t S = 0;  // degree scalers (scale's columns), 0 without

  int64_t wide_rows() const { return tie_wide_rows(num_edges); }
};

// The plan of `names` (a ValueError naming `op` for a bad list) for x of `dtype`.
inline SegmentReducePlan plan_segment_reduce(const std::vector<std::string>& names,
                                             at::ScalarType dtype, const char* op) {
  std::vector<SegmentReduce> reduces;
  try {
    reduces = parse_segment_reduces(names);
  } catch (const iognn::ValueError& e) {
    TORCH_CHECK_VALUE(false, op, ": ", e.what());
  }
  const TieSlots ties = segment_reduce_tie_slots(reduces);
  const bool needs_mean = segment_reduce_needs_mean(reduces);
  int64_t mean_slot = -1;
  if (needs_mean && acc_dtype(dtype) == dtype) {
    const auto at = std::find(reduces.begin(), reduces.end(), SegmentReduce::kMean);
    if (at != reduces.end()) mean_slot = at - reduces.begin();
  }
  const int64_t K = int64_t(reduces.size());
  return {std::move(reduces), K, ties, needs_mean && mean_slot < 0, mean_slot};
}

namespace segment_reduce_detail {

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

// A tensor the forward returned: `shape` of `dtype` when `present`, else anything empty; `what`
// names each dimension in the error.
inline void check_aux(const at::Tensor& t, bool present, const std::vector<int64_t>& shape,
                      std::initializer_list<const char*> what, at::ScalarType dtype,
                      const at::Tensor& x, const char* op, const char* name) {
  check_device(t, x, op, name, "x");
  if (!present) return;
  check_dtype(t, dtype, op, name);
  check_dim(t, int64_t(shape.size()), op, name);
  int64_t d = 0;
  for (const int64_t size : shape) {
    check_size(t, d, size, op, name, what.begin()[d]);
    ++d;
  }
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

}  // namespace segment_reduce_detail

// The forward's output shapes (out, ties, wide, mean, plain) for num_dst destinations, num_edges
// edges, F features and S degree scalers (none: nullopt), of size type Int (int64_t, or
// c10::SymInt for symbolic sizes): out [num_dst, K*F] like x ([num_dst, S*K*F] with degree
// scalers); with min / max, the tie codes ties [2, num_dst, n, F] (uint8: the lead and rest byte
// planes) and their wide table [n, wide_rows, F] (int64), n = the extrema
// (kernels/segment_extremum.h); mean [num_dst, F] in the accumulation dtype with var / std, unless
// the results hold it (plan.mean_slot); plain [num_dst, K*F] like x with degree scalers; [0] for
// an output the call does not have.
template <typename Int>
struct SegmentReduceShapes {
  std::vector<Int> out, ties, wide, mean, plain;
};
template <typename Int>
SegmentReduceShapes<Int> segment_reduce_shapes(const SegmentReducePlan& plan, const Int& num_dst,
                                               const Int& num_edges, const Int& F,
                                               const std::optional<Int>& S) {
  const auto shape = [](bool present, std::vector<Int> sizes) {
    return present ? std::move(sizes) : std::vector<Int>{0};
  };
  const Int KF = F * plan.K;
  const int64_t n = plan.ties.count;
  return {{num_dst, S ? *S * KF : KF},
          shape(n > 0, {2, num_dst, n, F}),
          shape(n > 0, {n, tie_wide_rows(num_edges), F}),
          shape(plan.want_mean, {num_dst, F}),
          shape(S.has_value(), {num_dst, KF})};
}

// Checks the forward's arguments (the transposed CSR only for its dtype and device).
inline SegmentReduceCall check_segment_reduce(const char* op, const at::Tensor& rowptr,
                                              const at::Tensor& col, const at::Tensor& colptr,
                                              const at::Tensor& row, const at::Tensor& csc2csr,
                                              const at::Tensor& x,
                                              const std::vector<std::string>& names,
                                              const std::optional<at::Tensor>& scale) {
  namespace d = segment_reduce_detail;
  SegmentReducePlan plan = plan_segment_reduce(names, x.scalar_type(), op);
  d::check_graph(op,
                 {{&rowptr, "rowptr"}, {&col, "col"}, {&colptr, "colptr"}, {&row, "row"},
                  {&csc2csr, "csc2csr"}},
                 x, colptr.numel() - 1);
  TORCH_CHECK_VALUE(rowptr.numel() >= 1, op, ": rowptr must have num_dst + 1 >= 1 entries");
  const int64_t S = d::check_scale(scale, rowptr.numel() - 1, x, op);
  return {std::move(plan), colptr.numel() - 1, rowptr.numel() - 1, col.numel(), x.size(1), S};
}

// Checks the backward's arguments, including the forward outputs it is handed back.
inline SegmentReduceCall check_segment_reduce_backward(
    const char* op, const at::Tensor& colptr, const at::Tensor& row, const at::Tensor& csc2csr,
    const at::Tensor& rowptr, const at::Tensor& x, const at::Tensor& out, const at::Tensor& ties,
    const at::Tensor& wide, const at::Tensor& mean, const at::Tensor& grad_out,
    const std::vector<std::string>& names, const std::optional<at::Tensor>& scale) {
  namespace d = segment_reduce_detail;
  SegmentReducePlan plan = plan_segment_reduce(names, x.scalar_type(), op);
  d::check_graph(op,
                 {{&colptr, "colptr"}, {&row, "row"}, {&csc2csr, "csc2csr"}, {&rowptr, "rowptr"}},
                 x, colptr.numel() - 1);
  TORCH_CHECK_VALUE(rowptr.numel() >= 1, op, ": rowptr must have num_dst + 1 >= 1 entries");
  TORCH_CHECK_VALUE(csc2csr.numel() == row.numel(), op, ": csc2csr must have one entry per edge (",
                    row.numel(), "), got ", csc2csr.numel());
  const int64_t S = d::check_scale(scale, rowptr.numel() - 1, x, op);
  const SegmentReduceCall call{std::move(plan), colptr.numel() - 1, rowptr.numel() - 1,
                               row.numel(), x.size(1), S};
  // The forward's outputs as it shaped them; out is the unscaled results (plain when scaled).
  const auto forward = segment_reduce_shapes<int64_t>(
      call, call.num_dst, call.num_edges, call.F, S > 0 ? std::optional(S) : std::nullopt);
  const int64_t N = call.ties.count;
  const char* const kRows = "rows (destination nodes)";
  const auto dtype = x.scalar_type();
  d::check_aux(out, true, S > 0 ? forward.plain : forward.out, {kRows, "features"}, dtype, x, op,
               "out");
  d::check_aux(grad_out, true, forward.out, {kRows, "features"}, dtype, x, op, "grad_out");
  d::check_aux(ties, N > 0, forward.ties, {"byte planes", kRows, "extrema", "features"},
               at::kByte, x, op, "ties");
  d::check_aux(wide, N > 0, forward.wide, {"extrema", "rows", "features"}, at::kLong, x, op,
               "wide");
  d::check_aux(mean, call.want_mean, forward.mean, {kRows, "features"}, acc_dtype(dtype), x, op,
               "mean");
  return call;
}

// (out, ties, wide, mean, plain)
using SegmentReduceOutputs =
    std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor>;

// Uninitialised forward outputs (segment_reduce_shapes), sized from the inputs' sizes (symbolic
// ones too: the Meta kernel allocates with this function). The wide table is zero-filled (the
// kernels write only its saturated entries), so that every output is a function of the inputs.
inline SegmentReduceOutputs empty_segment_reduce_outputs(const SegmentReducePlan& plan,
                                                         const at::Tensor& rowptr,
                                                         const at::Tensor& col,
                                                         const at::Tensor& x,
                                                         const std::optional<at::Tensor>& scale) {
  const auto s = segment_reduce_shapes<c10::SymInt>(
      plan, rowptr.sym_numel() - 1, col.sym_numel(), x.sym_size(1),
      scale ? std::optional(scale->sym_size(1)) : std::nullopt);
  const auto opts = x.options();
  return {at::empty_symint(s.out, opts), at::empty_symint(s.ties, opts.dtype(at::kByte)),
          at::zeros_symint(s.wide, opts.dtype(at::kLong)),
          at::empty_symint(s.mean, opts.dtype(acc_dtype(x.scalar_type()))),
          at::empty_symint(s.plain, opts)};
}

// The kernels' view of the tie arrays (null when the call has no min / max).
inline Ties tie_arrays(const SegmentReduceCall& call, at::Tensor& ties, at::Tensor& wide) {
  if (call.ties.count == 0) return {};
  uint8_t* lead = ties.data_ptr<uint8_t>();
  return {lead, lead + ties[0].numel(), wide.data_ptr<int64_t>(), call.wide_rows()};
}
inline TiesView tie_view(const SegmentReduceCall& call, const at::Tensor& ties,
                              const at::Tensor& wide) {
  if (call.ties.count == 0) return {};
  const uint8_t* lead = ties.const_data_ptr<uint8_t>();
  return {lead, lead + ties[0].numel(), wide.const_data_ptr<int64_t>(), call.wide_rows()};
}

// The contiguous degree scalers of a checked call (undefined without), and the kernels' view of
// them with the plain-results output.
inline at::Tensor contiguous_scale(const SegmentReduceCall& call,
                                   const std::optional<at::Tensor>& scale) {
  return call.S > 0 ? scale->contiguous() : at::Tensor();
}
template <typename T>
DegreeScales<T> degree_scales(const at::Tensor& scale, at::Tensor& plain) {
  if (!scale.defined()) return {};
  return {cptr<T>(scale), scale.size(1), ptr<T>(plain)};
}

// The backward's operands as the kernels read them - x with a dense last dimension, the others
// contiguous - and its uninitialised result grad_x [num_src, F] like x (empty_csr_rows of colptr).
// With degree scalers, grad_out is the caller's [num_dst, S*K*F] gradient and scale the
// contiguous factors; the implementation folds them into the [num_dst, K*F] gradient of the plain
// results (segment_reduce_fold_scales) before the backward proper.
struct SegmentReduceBackwardOperands {
  at::Tensor x, out, ties, wide, mean, grad_out, grad_x, scale;

  // The forward's per-row mean as the kernels read it (var / std; else null): the mean output,
  // rows of F, or the mean slot of the results, rows of K*F (T is then its accumulation type).
  template <typename T>
  std::pair<const acc_t<T>*, int64_t> mean_rows(const SegmentReduceCall& call) const {
    if (call.want_mean) return {cptr<acc_t<T>>(mean), call.F};
    if constexpr (std::is_same_v<T, acc_t<T>>) {  // describe() sets mean_slot only then
      if (call.mean_slot >= 0) return {cptr<T>(out) + call.mean_slot * call.F, call.K * call.F};
    }
    return {nullptr, 0};
  }
};
inline SegmentReduceBackwardOperands segment_reduce_backward_operands(
    const SegmentReduceCall& call, const at::Tensor& colptr, const at::Tensor& x,
    const at::Tensor& out, const at::Tensor& ties, const at::Tensor& wide, const at::Tensor& mean,
    const at::Tensor& grad_out, const std::optional<at::Tensor>& scale) {
  const at::Tensor x_dense = last_dim_contiguous(x);
  const at::Tensor grad_x = empty_csr_rows(colptr, x_dense);
  return {x_dense,           out.contiguous(),      ties.contiguous(), wide.contiguous(),
          mean.contiguous(), grad_out.contiguous(), grad_x,
          contiguous_scale(call, scale)};
}

}  // namespace iognn::torch_ext

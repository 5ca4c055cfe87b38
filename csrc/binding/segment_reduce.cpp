// iognn::segment_reduce (fused sum/mean/min/max/var/std aggregation): schemas, argument checks and
// host implementations.
//
// Forward:  segment_reduce(rowptr, col, colptr, row, csc2csr, x, reduces)
//             -> (out [num_dst, K*F], arg_min, arg_max, mean)
//           arg_min / arg_max: [num_dst, F] in the graph's index dtype when min / max is requested,
//           mean: [num_dst, F] in the accumulation dtype (fp32; fp64 for fp64) when var or std is
//           requested; each is an empty [0] tensor otherwise. They exist for the backward only.
// Backward: segment_reduce_backward -> grad_x [num_src, F]   (transposed CSR gather)
// The transposed-CSR arguments of the forward are unused by it; they are part of the schema so the
// autograd formula (registered from Python) can hand them to the backward op.
#include <ATen/ATen.h>
#include <torch/library.h>

#include <string>
#include <initializer_list>
#include <tuple>
#include <utility>
#include <vector>

#include "binding/utils.h"
#include "kernels/cpu/segment_reduce.h"

namespace iognn::torch_ext {
namespace {

using cpu::SegmentReduce;

std::vector<SegmentReduce> parse_reduces(const std::vector<std::string>& names, const char* op) {
  try {
    return cpu::parse_segment_reduces(names);
  } catch (const iognn::ValueError& e) {
    TORCH_CHECK_VALUE(false, op, ": ", e.what());
  }
}

// Checks a graph's index vectors (all of one dtype, on x's device) and x [num_src, F].
void check_graph(const char* op,
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

// An auxiliary tensor of the forward: [rows, cols] of `dtype` when `present`, else empty.
void check_aux(const at::Tensor& t, bool present, int64_t rows, int64_t cols,
               at::ScalarType dtype, const at::Tensor& x, const char* op, const char* name) {
  check_device(t, x, op, name, "x");
  if (!present) return;
  check_dtype(t, dtype, op, name);
  check_dim(t, 2, op, name);
  check_size(t, 0, rows, op, name, "rows (destination nodes)");
  check_size(t, 1, cols, op, name, "features");
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> segment_reduce_cpu(
    const at::Tensor& rowptr, const at::Tensor& col, const at::Tensor& colptr,
    const at::Tensor& row, const at::Tensor& csc2csr, const at::Tensor& x_in,
    std::vector<std::string> reduce_names) {
  constexpr const char* op = "iognn::segment_reduce";
  const auto reduces = parse_reduces(reduce_names, op);
  check_graph(op, {{&rowptr, "rowptr"}, {&col, "col"}, {&colptr, "colptr"}}, x_in,
              colptr.numel() - 1);
  TORCH_CHECK_VALUE(rowptr.numel() >= 1, op, ": rowptr must have num_dst + 1 >= 1 entries");
  const at::Tensor x = last_dim_contiguous(x_in);
  const int64_t num_dst = rowptr.numel() - 1, F = x.size(1), K = int64_t(reduces.size());
  const bool want_min = cpu::segment_reduce_has(reduces, SegmentReduce::kMin);
  const bool want_max = cpu::segment_reduce_has(reduces, SegmentReduce::kMax);
  const bool want_mean = cpu::segment_reduce_needs_mean(reduces);
  const auto aux_shape = [&](bool present) {
    return present ? std::vector<int64_t>{num_dst, F} : std::vector<int64_t>{0};
  };
  at::Tensor out = at::empty({num_dst, K * F}, x.options());
  at::Tensor arg_min = at::empty(aux_shape(want_min), rowptr.options());
  at::Tensor arg_max = at::empty(aux_shape(want_max), rowptr.options());
  at::Tensor mean = at::empty(aux_shape(want_mean), x.options().dtype(acc_dtype(x.scalar_type())));
  if (out.numel() == 0) return {out, arg_min, arg_max, mean};
  dispatch_float(x.scalar_type(), op, [&](auto ft) {
    using T = typename decltype(ft)::type;
    dispatch_index(rowptr.scalar_type(), op, [&](auto it) {
      using I = typename decltype(it)::type;
      cpu::segment_reduce_forward<T, I>(
          cptr<I>(rowptr), cptr<I>(col), cptr<T>(x), x.stride(0), num_dst, F, reduces, ptr<T>(out),
          want_min ? ptr<I>(arg_min) : nullptr, want_max ? ptr<I>(arg_max) : nullptr,
          want_mean ? ptr<acc_t<T>>(mean) : nullptr);
    });
  });
  return {out, arg_min, arg_max, mean};
}

at::Tensor segment_reduce_backward_cpu(const at::Tensor& colptr, const at::Tensor& row,
                                       const at::Tensor& csc2csr, const at::Tensor& rowptr,
                                       const at::Tensor& x_in, const at::Tensor& out_in,
                                       const at::Tensor& arg_min, const at::Tensor& arg_max,
                                       const at::Tensor& mean_in, const at::Tensor& grad_out_in,
                                       std::vector<std::string> reduce_names) {
  constexpr const char* op = "iognn::segment_reduce_backward";
  const auto reduces = parse_reduces(reduce_names, op);
  check_graph(op, {{&colptr, "colptr"}, {&row, "row"}, {&csc2csr, "csc2csr"}, {&rowptr, "rowptr"}},
              x_in, colptr.numel() - 1);
  TORCH_CHECK_VALUE(rowptr.numel() >= 1, op, ": rowptr must have num_dst + 1 >= 1 entries");
  check_size(csc2csr, 0, row.numel(), op, "csc2csr", "entries");
  const int64_t num_src = colptr.numel() - 1, num_dst = rowptr.numel() - 1, F = x_in.size(1);
  const int64_t K = int64_t(reduces.size());
  const bool want_min = cpu::segment_reduce_has(reduces, SegmentReduce::kMin);
  const bool want_max = cpu::segment_reduce_has(reduces, SegmentReduce::kMax);
  const bool want_mean = cpu::segment_reduce_needs_mean(reduces);
  const auto index_dtype = rowptr.scalar_type();
  check_aux(out_in, true, num_dst, K * F, x_in.scalar_type(), x_in, op, "out");
  check_aux(grad_out_in, true, num_dst, K * F, x_in.scalar_type(), x_in, op, "grad_out");
  check_aux(arg_min, want_min, num_dst, F, index_dtype, x_in, op, "arg_min");
  check_aux(arg_max, want_max, num_dst, F, index_dtype, x_in, op, "arg_max");
  check_aux(mean_in, want_mean, num_dst, F, acc_dtype(x_in.scalar_type()), x_in, op, "mean");
  const at::Tensor x = last_dim_contiguous(x_in);
  const at::Tensor out = out_in.contiguous(), grad_out = grad_out_in.contiguous();
  const at::Tensor arg_min_c = arg_min.contiguous(), arg_max_c = arg_max.contiguous();
  const at::Tensor mean = mean_in.contiguous();
  at::Tensor grad_x = at::empty({num_src, F}, x.options());
  if (grad_x.numel() == 0) return grad_x;
  dispatch_float(x.scalar_type(), op, [&](auto ft) {
    using T = typename decltype(ft)::type;
    dispatch_index(index_dtype, op, [&](auto it) {
      using I = typename decltype(it)::type;
      cpu::segment_reduce_backward<T, I>(
          cptr<I>(colptr), cptr<I>(row), cptr<I>(csc2csr), cptr<I>(rowptr), cptr<T>(x), x.stride(0),
          cptr<T>(out), want_min ? cptr<I>(arg_min_c) : nullptr,
          want_max ? cptr<I>(arg_max_c) : nullptr, want_mean ? cptr<acc_t<T>>(mean) : nullptr,
          cptr<T>(grad_out), num_src, F, reduces, ptr<T>(grad_x));
    });
  });
  return grad_x;
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(iognn, m) {
  m.def(
      "segment_reduce(Tensor rowptr, Tensor col, Tensor colptr, Tensor row, Tensor csc2csr, "
      "Tensor x, str[] reduces) -> (Tensor out, Tensor arg_min, Tensor arg_max, Tensor mean)");
  m.def(
      "segment_reduce_backward(Tensor colptr, Tensor row, Tensor csc2csr, Tensor rowptr, "
      "Tensor x, Tensor out, Tensor arg_min, Tensor arg_max, Tensor mean, Tensor grad_out, "
      "str[] reduces) -> Tensor");
}

TORCH_LIBRARY_IMPL(iognn, CPU, m) {
  m.impl("segment_reduce", &segment_reduce_cpu);
  m.impl("segment_reduce_backward", &segment_reduce_backward_cpu);
}

}  // namespace iognn::torch_ext

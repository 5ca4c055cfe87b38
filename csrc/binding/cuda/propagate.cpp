// iognn::propagate family, CUDA implementations (schemas and host twins: binding/propagate.cpp).
//
// The two gathers (forward over the CSR, backward_x over the transposed CSR) run on the own kernels
// (kernels/cuda/propagate.h) or on cuSPARSE's CSR SpMM (propagate_cusparse_path.cpp), as
// IOGNN_PROPAGATE_BACKEND and the per-graph plan say (propagate_plan.h):
//   own (default)  the own kernels;
//   cusparse       cuSPARSE for every call it can serve exactly (cusparse_capable), else own;
//   auto           per (graph, direction, dtype, stream, F) the backend of the width plan's
//                  decision: made on the first call by timing both backends (CUDA events, a few
//                  runs; own without timing below kMinTimedWork), or set by propagate_plan_set
//                  (explicitly, or from the on-disk plan cache: python/iognn/ops/propagate_plan.py).
//                  Nothing is timed while the stream captures a CUDA graph: undecided widths run
//                  the own kernels.
// A cuSPARSE failure (a status error) is recorded in the width plan, which uses the own kernels from
// then on. backward_weight always runs the own sampled dense-dense product. Calls run on the current
// stream under a guard of the inputs' device; once a graph's schedule and plan are cached they
// neither synchronise nor call cudaMalloc (scratch comes from PyTorch's caching allocator).
#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>

#include "binding/cuda/propagate_gather.h"
#include "binding/cuda/propagate_plan.h"
#include "binding/propagate_checks.h"
#include "binding/utils.h"
#include "kernels/cuda/propagate.h"

namespace iognn::torch_ext {
namespace cuda_gather {

namespace {
at::Tensor empty_partials(const iognn::cuda::RowSchedule& s, const at::Tensor& like, int64_t F) {
  const int64_t n = iognn::cuda::propagate_partials_size(s, F);
  return n > 0 ? at::empty({n}, like.options().dtype(acc_dtype(like.scalar_type()))) : at::Tensor();
}

template <typename T>
acc_t<T>* ptr_or_null(const at::Tensor& t) {
  return t.defined() ? ptr<acc_t<T>>(t) : nullptr;
}
}  // namespace

void run_own(const Gather& g, const iognn::cuda::RowSchedule& schedule) {
  constexpr const char* op = "iognn::propagate (CUDA)";
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream().stream();
  const at::Tensor partials = empty_partials(schedule, g.dense, g.F());
  dispatch_float(g.dense.scalar_type(), op, [&](auto ft) {
    using T = typename decltype(ft)::type;
    dispatch_index(g.offsets.scalar_type(), op, [&](auto it) {
      using I = typename decltype(it)::type;
      translate_errors([&] {
        if (g.forward())
          iognn::cuda::propagate_forward<T, I>(
              cptr<I>(g.offsets), cptr<I>(g.indices), optional_cptr<acc_t<T>>(g.weight),
              cptr<T>(g.dense), g.dense.stride(0), g.rows(), g.F(), g.reduce, schedule,
              ptr_or_null<T>(partials), optional_cptr<T>(g.bias), ptr<T>(g.out), stream);
        else
          iognn::cuda::propagate_backward_x<T, I>(
              cptr<I>(g.offsets), cptr<I>(g.indices), cptr<I>(g.csc2csr), cptr<I>(g.rowptr),
              optional_cptr<acc_t<T>>(g.weight), cptr<T>(g.dense), g.rows(), g.F(), g.reduce,
              schedule, ptr_or_null<T>(partials), ptr<T>(g.out), stream);
      });
    });
  });
}

}  // namespace cuda_gather

namespace {

using cuda_gather::Gather;
using cuda_plan::Backend;
using cuda_plan::BackendRequest;
using cuda_plan::Direction;
using cuda_plan::Plan;
using cuda_plan::PlanKey;
using cuda_plan::WidthPlan;
using cuda_plan::RowScheduleTensors;

// The auto planner times the backends only when there is enough work for the timing to mean
// something (nnz * F); smaller problems take the own kernels.
constexpr int64_t kMinTimedWork = int64_t(1) << 20;
// Each backend is timed in kTimedRounds rounds (interleaved) of kTimedRuns runs after a warm-up
// run; the faster round counts.
constexpr int kTimedRounds = 2;
constexpr int kTimedRuns = 5;

// ---- planner ----------------------------------------------------------------------------------
// The auto decision for a width, on this call's inputs (the timed runs write g.out, which the
// chosen backend then overwrites). Never called while capturing.
void decide(Plan& plan, WidthPlan& w, const Gather& g, const RowScheduleTensors& schedule) {
  auto& d = w.decision;
  d = {true, Backend::kOwn, ""};
  if (g.nnz() * g.F() < kMinTimedWork) {
    d.why = "not timed: nnz * F below " + std::to_string(kMinTimedWork);
    return;
  }
  if (!cuda_gather::run_cusparse(g, plan, w, schedule.longest_row, /*capturing=*/false)) {
    // (the call sets cuSPARSE up and warms it up)
    d.why = "cuSPARSE unavailable: " + w.cusparse_error;
    return;
  }
  double own_ms = 0, cusparse_ms = 0;
  for (int round = 0; round < kTimedRounds; ++round) {
    const double o =
        cuda_plan::time_ms([&] { cuda_gather::run_own(g, schedule.view); }, kTimedRuns);
    const double c = cuda_plan::time_ms(
        [&] { cuda_gather::run_cusparse(g, plan, w, schedule.longest_row, false); }, kTimedRuns);
    own_ms = round == 0 ? o : std::min(own_ms, o);
    cusparse_ms = round == 0 ? c : std::min(cusparse_ms, c);
  }
  if (!w.cusparse_error.empty()) {  // failed while being timed
    d.why = "cuSPARSE unavailable: " + w.cusparse_error;
    return;
  }
  if (cusparse_ms < own_ms) d.choice = Backend::kCusparse;
  char buf[96];
  std::snprintf(buf, sizeof buf, "timed: own %.4f ms, cusparse %.4f ms", own_ms, cusparse_ms);
  d.why = buf;
}

void run_gather(const Gather& g) {
  const auto schedule = cuda_plan::row_schedule(g.offsets, g.nnz());
  const BackendRequest request = cuda_plan::requested_backend();
  if (request == BackendRequest::kOwn || !cuda_gather::cusparse_capable(g))
    return cuda_gather::run_own(g, schedule->view);
  // While capturing nothing is created or timed: an existing plan is followed as it is.
  const bool capturing = cuda_plan::stream_is_capturing();
  const auto plan = capturing ? cuda_plan::find_plan(g.key(), g.graph())
                              : cuda_plan::find_or_create_plan(g.key(), g.graph());
  if (!plan) return cuda_gather::run_own(g, schedule->view);
  std::lock_guard<std::mutex> lock(plan->mutex);
  auto found = plan->widths.find(g.F());
  if (found == plan->widths.end()) {
    if (capturing) return cuda_gather::run_own(g, schedule->view);
    found = plan->widths.emplace(g.F(), WidthPlan()).first;
  }
  WidthPlan& w = found->second;
  if (request == BackendRequest::kAuto && !w.decision.made) {
    if (capturing) return cuda_gather::run_own(g, schedule->view);
    decide(*plan, w, g, *schedule);
  }
  const bool wants_cusparse =
      request == BackendRequest::kCusparse || w.decision.choice == Backend::kCusparse;
  if (!wants_cusparse ||
      !cuda_gather::run_cusparse(g, *plan, w, schedule->longest_row, capturing))
    cuda_gather::run_own(g, schedule->view);
}

// ---- ops ------------------------------------------------------------------------------------
at::Tensor propagate_cuda(const at::Tensor& rowptr, const at::Tensor& col, const at::Tensor& colptr,
                          const at::Tensor& row, const at::Tensor& csc2csr,
                          const std::optional<at::Tensor>& weight, const at::Tensor& x,
                          c10::string_view reduce, const std::optional<at::Tensor>& bias) {
  constexpr const char* op = "iognn::propagate";
  const auto red = parse_reduce(reduce, op);
  check_propagate_args(op, rowptr, col, colptr, weight, x, bias);
  dispatch_float(x.scalar_type(), op, [](auto) {});  // the dtype error before any work
  const c10::cuda::CUDAGuard guard(x.device());
  Gather g{Direction::kForward, rowptr, col,         {}, {}, std::nullopt, std::nullopt,
           last_dim_contiguous(x), red, {}};
  if (weight) g.weight = weight->contiguous();
  if (bias) g.bias = bias->contiguous();
  g.out = at::empty({g.rows(), g.F()}, x.options());
  if (g.out.numel() > 0) run_gather(g);
  return g.out;
}

at::Tensor propagate_backward_x_cuda(const at::Tensor& colptr, const at::Tensor& row,
                                     const at::Tensor& csc2csr, const at::Tensor& rowptr,
                                     const std::optional<at::Tensor>& weight,
                                     const at::Tensor& grad_out, c10::string_view reduce) {
  constexpr const char* op = "iognn::propagate_backward_x";
  const auto red = parse_reduce(reduce, op);
  check_backward_x_args(op, colptr, row, csc2csr, rowptr, weight, grad_out);
  dispatch_float(grad_out.scalar_type(), op, [](auto) {});
  const c10::cuda::CUDAGuard guard(grad_out.device());
  Gather g{Direction::kBackwardX, colptr, row, csc2csr, rowptr, std::nullopt, std::nullopt,
           grad_out.contiguous(), red, {}};
  if (weight) g.weight = weight->contiguous();
  g.out = at::empty({g.rows(), g.F()}, grad_out.options());
  if (g.out.numel() > 0) run_gather(g);
  return g.out;
}

at::Tensor propagate_backward_weight_cuda(const at::Tensor& rowptr, const at::Tensor& col,
                                          const at::Tensor& grad_out_in, const at::Tensor& x_in,
                                          c10::string_view reduce) {
  constexpr const char* op = "iognn::propagate_backward_weight";
  const auto red = parse_reduce(reduce, op);
  check_backward_weight_args(op, rowptr, col, grad_out_in, x_in);
  const c10::cuda::CUDAGuard guard(x_in.device());
  const at::Tensor grad_out = grad_out_in.contiguous();
  const at::Tensor x = last_dim_contiguous(x_in);
  const int64_t num_dst = rowptr.numel() - 1, F = x.size(1);
  at::Tensor grad_w = at::empty({col.numel()}, x.options().dtype(acc_dtype(x.scalar_type())));
  dispatch_float(x.scalar_type(), op, [&](auto ft) {
    using T = typename decltype(ft)::type;
    if (grad_w.numel() == 0) return;
    const auto schedule = cuda_plan::row_schedule(rowptr, col.numel());
    const cudaStream_t stream = at::cuda::getCurrentCUDAStream().stream();
    dispatch_index(rowptr.scalar_type(), op, [&](auto it) {
      using I = typename decltype(it)::type;
      translate_errors([&] {
        iognn::cuda::propagate_backward_weight<T, I>(
            cptr<I>(rowptr), cptr<I>(col), cptr<T>(grad_out), cptr<T>(x), x.stride(0), num_dst,
            F, red, schedule->view, ptr<acc_t<T>>(grad_w), stream);
      });
    });
  });
  return grad_w;
}

// ---- plan ops (schemas in binding/propagate.cpp) -----------------------------------------------
// The plan of a graph direction for F features of `dtype` on the current stream: its key and the
// graph tensors that identify it (the same as a gather of that direction uses).
struct PlanTarget {
  PlanKey key;
  std::vector<at::Tensor> graph;
  bool empty;  // no rows, columns or edges: no plan is ever made
};

PlanTarget plan_target(const char* op, const at::Tensor& rowptr, const at::Tensor& col,
                       const at::Tensor& colptr, const at::Tensor& row, int64_t F,
                       at::ScalarType dtype, c10::string_view direction) {
  const Direction dir = cuda_plan::parse_direction(direction, op);
  TORCH_CHECK_VALUE(F > 0, op, ": F must be positive, got ", F);
  dispatch_float(dtype, op, [](auto) {});
  check_index_vector(rowptr, op, "rowptr");
  check_index_vector(col, op, "col");
  check_index_vector(colptr, op, "colptr");
  check_index_vector(row, op, "row");
  for (const auto& [t, name] : {std::pair<const at::Tensor&, const char*>{col, "col"},
                                {colptr, "colptr"},
                                {row, "row"}})
    check_device(t, rowptr, op, name, "rowptr");
  const bool forward = dir == Direction::kForward;
  const at::Tensor& offsets = forward ? rowptr : colptr;
  const at::Tensor& indices = forward ? col : row;
  const int64_t rows = offsets.numel() - 1, cols = (forward ? colptr : rowptr).numel() - 1;
  PlanTarget t{{offsets.get_device(), at::cuda::getCurrentCUDAStream(offsets.get_device()).stream(),
                dir, dtype, offsets.const_data_ptr(), rows, cols, indices.numel()},
               forward ? std::vector<at::Tensor>{rowptr, col}
                       : std::vector<at::Tensor>{colptr, row, rowptr},
               rows <= 0 || cols <= 0 || indices.numel() == 0};
  return t;
}

cuda_plan::Decision parse_plan_decision(const char* op, c10::string_view backend,
                                        c10::string_view source) {
  const std::string why = "set: " + std::string(source);
  switch (parse_plan_choice(backend, op)) {
    case PlanChoice::kOwn: return {true, Backend::kOwn, why};
    case PlanChoice::kCusparse: return {true, Backend::kCusparse, why};
    case PlanChoice::kAuto: break;
  }
  return {};
}

// 16-bit features go to cuSPARSE only when its 16-bit edge values are exact (see
// propagate_cusparse_path.cpp); the other calls of such a width run the own kernels.
std::string sixteen_bit_note(at::ScalarType dtype, Direction dir) {
  if (dtype != at::kHalf && dtype != at::kBFloat16) return "";
  return dir == Direction::kForward
             ? "; 16-bit calls with edge weights run the own kernels"
             : "; 16-bit calls with edge weights or mean run the own kernels";
}

// Reads the plan cache only (never creates a plan).
std::string propagate_plan_info_cuda(const at::Tensor& rowptr, const at::Tensor& col,
                                     const at::Tensor& colptr, const at::Tensor& row, int64_t F,
                                     at::ScalarType dtype, c10::string_view direction) {
  constexpr const char* op = "iognn::propagate_plan_info";
  const PlanTarget t = plan_target(op, rowptr, col, colptr, row, F, dtype, direction);
  const BackendRequest request = cuda_plan::requested_backend();
  if (request == BackendRequest::kOwn) return "own (forced by IOGNN_PROPAGATE_BACKEND=own)";
  if (t.empty) return "own (empty graph: nothing for cuSPARSE to do)";
  const auto plan = cuda_plan::find_plan(t.key, t.graph);
  if (!plan) return "none (no call on this graph, dtype and stream yet)";
  std::lock_guard<std::mutex> lock(plan->mutex);
  const auto found = plan->widths.find(F);
  if (found == plan->widths.end()) return "none (no call with this F yet)";
  const WidthPlan& w = found->second;
  const std::string note = sixteen_bit_note(dtype, t.key.direction);
  const bool wants_cusparse = request == BackendRequest::kCusparse ||
                              (w.decision.made && w.decision.choice == Backend::kCusparse);
  if (wants_cusparse && !w.cusparse_error.empty())
    return "own (cuSPARSE unavailable: " + w.cusparse_error + ")";
  if (request == BackendRequest::kCusparse)
    return "cusparse (forced by IOGNN_PROPAGATE_BACKEND=cusparse" + note + ")";
  if (!w.decision.made) return "none (not decided yet)";
  return std::string(w.decision.choice == Backend::kCusparse ? "cusparse" : "own") + " (" +
         w.decision.why + note + ")";
}

// Records the auto decision of a width (creating its plan when missing): backend 'own' or
// 'cusparse' with `source` saying where the choice comes from, or 'auto' to forget it (the next
// auto call times again).
void propagate_plan_set_cuda(const at::Tensor& rowptr, const at::Tensor& col,
                             const at::Tensor& colptr, const at::Tensor& row, int64_t F,
                             at::ScalarType dtype, c10::string_view direction,
                             c10::string_view backend, c10::string_view source) {
  constexpr const char* op = "iognn::propagate_plan_set";
  const PlanTarget t = plan_target(op, rowptr, col, colptr, row, F, dtype, direction);
  const cuda_plan::Decision d = parse_plan_decision(op, backend, source);
  if (t.empty) return;
  const auto plan = cuda_plan::find_or_create_plan(t.key, t.graph);
  std::lock_guard<std::mutex> lock(plan->mutex);
  plan->widths[F].decision = d;
}

}  // namespace

TORCH_LIBRARY_IMPL(iognn, CUDA, m) {
  m.impl("propagate", &propagate_cuda);
  m.impl("propagate_backward_x", &propagate_backward_x_cuda);
  m.impl("propagate_backward_weight", &propagate_backward_weight_cuda);
  m.impl("propagate_plan_info", &propagate_plan_info_cuda);
  m.impl("propagate_plan_set", &propagate_plan_set_cuda);
}

}  // namespace iognn::torch_ext

// iognn::propagate family, CUDA implementations (schemas and host twins: binding/propagate.cpp).
//
// The two gathers (forward over the CSR, backward_x over the transposed CSR) run on the own kernels
// (kernels/cuda/propagate.h) or on cuSPARSE's CSR SpMM (kernels/cuda/propagate_cusparse.h), as the
// per-graph plan says (propagate_plan.h): IOGNN_PROPAGATE_BACKEND = own | cusparse forces one, auto
// (default) times both on the first call and keeps the faster. backward_weight always runs the own
// sampled dense-dense product. Calls run on the current stream under a guard of the inputs' device;
// once a graph's schedule and plan are cached they neither synchronise nor call cudaMalloc
// (scratch comes from PyTorch's caching allocator).
#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>

#include "binding/cuda/propagate_plan.h"
#include "binding/propagate_checks.h"
#include "binding/utils.h"
#include "kernels/cuda/propagate.h"
#include "kernels/cuda/propagate_cusparse.h"

namespace iognn::torch_ext {
namespace {

using cuda_plan::Backend;
using cuda_plan::BackendRequest;
using cuda_plan::Direction;
using cuda_plan::Plan;
using cuda_plan::PlanKey;
using cuda_plan::WidthPlan;
using iognn::cuda::RowSchedule;

// The auto planner times the backends only when there is enough work for the timing to mean
// something (nnz * F); smaller problems take the own kernels.
constexpr int64_t kMinTimedWork = int64_t(1) << 20;
constexpr int kTimedRuns = 3;

// One gather, described once for both backends: out[rows, F] = A dense, A the CSR walked.
struct Gather {
  Direction direction;
  at::Tensor offsets, indices;       // (rowptr, col) forward, (colptr, row) backward_x
  at::Tensor csc2csr, rowptr;        // backward_x only: weight permutation, destination degrees
  std::optional<at::Tensor> weight;  // contiguous, forward CSR order
  at::Tensor dense;                  // x [cols, F] (feature stride 1) or grad_out (contiguous)
  cpu::PropagateReduce reduce;
  at::Tensor out;                    // [rows, F], contiguous

  int64_t rows() const { return offsets.numel() - 1; }
  int64_t cols() const { return dense.size(0); }
  int64_t nnz() const { return indices.numel(); }
  int64_t F() const { return dense.size(1); }
  bool mean() const { return reduce == cpu::PropagateReduce::kMean; }
  // The graph tensors a plan's cached state depends on (checked by identity on every lookup).
  std::vector<at::Tensor> graph() const {
    if (direction == Direction::kForward) return {offsets, indices};
    return {offsets, indices, rowptr};
  }
  PlanKey key() const {
    return {dense.get_device(), at::cuda::getCurrentCUDAStream().stream(), direction,
            dense.scalar_type(), offsets.const_data_ptr(), rows(), cols(), nnz()};
  }
};

at::Tensor empty_partials(const RowSchedule& s, const at::Tensor& like, int64_t F) {
  const int64_t n = iognn::cuda::propagate_partials_size(s, F);
  return n > 0 ? at::empty({n}, like.options().dtype(acc_dtype(like.scalar_type()))) : at::Tensor();
}

template <typename T>
acc_t<T>* ptr_or_null(const at::Tensor& t) {
  return t.defined() ? ptr<acc_t<T>>(t) : nullptr;
}

void run_own(const Gather& g, const RowSchedule& schedule) {
  constexpr const char* op = "iognn::propagate (CUDA)";
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream().stream();
  const at::Tensor partials = empty_partials(schedule, g.dense, g.F());
  dispatch_float(g.dense.scalar_type(), op, [&](auto ft) {
    using T = typename decltype(ft)::type;
    dispatch_index(g.offsets.scalar_type(), op, [&](auto it) {
      using I = typename decltype(it)::type;
      translate_errors([&] {
        if (g.direction == Direction::kForward)
          iognn::cuda::propagate_forward<T, I>(
              cptr<I>(g.offsets), cptr<I>(g.indices), optional_cptr<acc_t<T>>(g.weight),
              cptr<T>(g.dense), g.dense.stride(0), g.rows(), g.F(), g.reduce, schedule,
              ptr_or_null<T>(partials), ptr<T>(g.out), stream);
        else
          iognn::cuda::propagate_backward_x<T, I>(
              cptr<I>(g.offsets), cptr<I>(g.indices), cptr<I>(g.csc2csr), cptr<I>(g.rowptr),
              optional_cptr<acc_t<T>>(g.weight), cptr<T>(g.dense), g.rows(), g.F(), g.reduce,
              schedule, ptr_or_null<T>(partials), ptr<T>(g.out), stream);
      });
    });
  });
}

// ---- cuSPARSE path ------------------------------------------------------------------------
bool cusparse_capable(const Gather& g) {
  const auto t = g.dense.scalar_type();
  return (t == at::kFloat || t == at::kDouble) && g.rows() > 0 && g.cols() > 0 && g.nnz() > 0 &&
         g.F() > 0;
}

// t itself when contiguous with a 16-byte aligned start, else an aligned contiguous copy
// (cuSPARSE's dense and value arrays are not promised to work from any element offset).
at::Tensor aligned(const at::Tensor& t) {
  if (t.is_contiguous() && reinterpret_cast<uintptr_t>(t.const_data_ptr()) % 16 == 0) return t;
  return t.clone(at::MemoryFormat::Contiguous);
}

// 1/deg of the destination row each edge of g's CSR is summed into (mean), in g's edge order.
at::Tensor edge_scale(const Gather& g) {
  const auto acc = g.dense.scalar_type();
  if (g.direction == Direction::kForward) {
    const at::Tensor deg = g.offsets.diff().to(at::kLong);
    const at::Tensor inv = deg.to(acc).clamp_min(1).reciprocal();
    return at::repeat_interleave(inv, deg, 0, g.nnz());
  }
  const at::Tensor inv = g.rowptr.diff().to(acc).clamp_min(1).reciprocal();
  return inv.index_select(0, g.indices);
}

// Creates the descriptors, the persistent workspace and cuSPARSE's analysis of the CSR for one
// width. A failure (an unsupported configuration, say) leaves w.spmm null and says why in w.error.
void setup_cusparse(Plan& plan, WidthPlan& w, const Gather& g) {
  w.tried = true;
  try {
    if (!plan.ones.defined()) plan.ones = at::ones({g.nnz()}, g.dense.options());
    const at::Tensor B = aligned(g.dense);
    const iognn::cuda::CsrShape shape{g.rows(), g.cols(), g.nnz(),
                                      g.offsets.scalar_type() == at::kLong};
    w.spmm = std::make_unique<iognn::cuda::CsrSpmm>(
        shape, g.dense.scalar_type() == at::kDouble ? CUDA_R_64F : CUDA_R_32F, g.F(),
        g.offsets.const_data_ptr(), g.indices.const_data_ptr(), plan.ones.const_data_ptr(),
        B.const_data_ptr(), g.out.data_ptr());
    const cusparseHandle_t handle = at::cuda::getCurrentCUDASparseHandle();
    const size_t bytes = w.spmm->workspace_size(handle);
    w.workspace = at::empty({int64_t(std::max<size_t>(bytes, 1))}, g.dense.options().dtype(at::kByte));
    w.spmm->preprocess(handle, w.workspace.data_ptr());
  } catch (const iognn::DeviceError& e) {
    w.spmm.reset();
    w.error = e.what();
  } catch (const iognn::ValueError& e) {
    w.spmm.reset();
    w.error = e.what();
  }
}

void run_cusparse(const Gather& g, Plan& plan, WidthPlan& w) {
  constexpr const char* op = "iognn::propagate (cuSPARSE)";
  if (g.mean() && !plan.edge_scale.defined()) plan.edge_scale = edge_scale(g);
  const at::Tensor& base = g.mean() ? plan.edge_scale : plan.ones;
  at::Tensor values = base;
  if (g.weight) {
    if (g.direction == Direction::kForward && !g.mean()) {
      values = aligned(*g.weight);
    } else {
      values = at::empty_like(base);
      const cudaStream_t stream = at::cuda::getCurrentCUDAStream().stream();
      dispatch_float(g.dense.scalar_type(), op, [&](auto ft) {
        using A = acc_t<typename decltype(ft)::type>;
        dispatch_index(g.offsets.scalar_type(), op, [&](auto it) {
          using I = typename decltype(it)::type;
          translate_errors([&] {
            iognn::cuda::edge_values<A, I>(
                g.nnz(), cptr<A>(*g.weight),
                g.direction == Direction::kForward ? nullptr : cptr<I>(g.csc2csr),
                g.mean() ? cptr<A>(plan.edge_scale) : nullptr, ptr<A>(values), stream);
          });
        });
      });
    }
  }
  const at::Tensor B = aligned(g.dense);
  translate_errors([&] {
    w.spmm->run(at::cuda::getCurrentCUDASparseHandle(), g.offsets.const_data_ptr(),
                g.indices.const_data_ptr(), values.const_data_ptr(), B.const_data_ptr(),
                g.out.data_ptr(), w.workspace.data_ptr());
  });
}

// ---- planner ----------------------------------------------------------------------------------
// The auto choice for a width whose cuSPARSE setup was tried: time both backends on this call's
// inputs (the runs write g.out, which the chosen backend then overwrites).
void decide(Plan& plan, WidthPlan& w, const Gather& g, const RowSchedule& schedule) {
  w.decided = true;
  w.choice = Backend::kOwn;
  if (!w.spmm) {
    w.why = "cuSPARSE unavailable: " + w.error;
    return;
  }
  if (g.nnz() * g.F() < kMinTimedWork) {
    w.why = "not timed: nnz * F below " + std::to_string(kMinTimedWork);
    return;
  }
  const double own_ms = cuda_plan::time_ms([&] { run_own(g, schedule); }, kTimedRuns);
  const double cusparse_ms = cuda_plan::time_ms([&] { run_cusparse(g, plan, w); }, kTimedRuns);
  if (cusparse_ms < own_ms) w.choice = Backend::kCusparse;
  char buf[96];
  std::snprintf(buf, sizeof buf, "timed: own %.4f ms, cusparse %.4f ms", own_ms, cusparse_ms);
  w.why = buf;
}

// The backend a width's plan gives for a request (auto before the decision: own).
Backend backend_of(const WidthPlan& w, BackendRequest request) {
  if (request == BackendRequest::kCusparse) return w.spmm ? Backend::kCusparse : Backend::kOwn;
  return w.decided ? w.choice : Backend::kOwn;
}

void run_gather(const Gather& g) {
  const auto schedule = cuda_plan::row_schedule(g.offsets, g.nnz());
  const BackendRequest request = cuda_plan::requested_backend();
  if (request == BackendRequest::kOwn || !cusparse_capable(g)) return run_own(g, schedule->view);
  // Nothing is set up or timed while capturing a CUDA graph: an existing plan is followed as is.
  const bool capturing = cuda_plan::stream_is_capturing();
  const auto plan = capturing ? cuda_plan::find_plan(g.key(), g.graph())
                              : cuda_plan::find_or_create_plan(g.key(), g.graph());
  if (!plan) return run_own(g, schedule->view);
  std::lock_guard<std::mutex> lock(plan->mutex);
  auto found = plan->widths.find(g.F());
  if (found == plan->widths.end()) {
    if (capturing) return run_own(g, schedule->view);
    found = plan->widths.emplace(g.F(), WidthPlan()).first;
  }
  WidthPlan& w = found->second;
  if (!capturing) {
    if (!w.tried) setup_cusparse(*plan, w, g);
    if (request == BackendRequest::kAuto && !w.decided) decide(*plan, w, g, schedule->view);
  }
  if (backend_of(w, request) == Backend::kCusparse)
    run_cusparse(g, *plan, w);
  else
    run_own(g, schedule->view);
}

// ---- ops ------------------------------------------------------------------------------------
at::Tensor propagate_cuda(const at::Tensor& rowptr, const at::Tensor& col, const at::Tensor& colptr,
                          const at::Tensor& row, const at::Tensor& csc2csr,
                          const std::optional<at::Tensor>& weight, const at::Tensor& x,
                          c10::string_view reduce) {
  constexpr const char* op = "iognn::propagate";
  const auto red = parse_reduce(reduce, op);
  check_propagate_args(op, rowptr, col, colptr, weight, x);
  dispatch_float(x.scalar_type(), op, [](auto) {});  // the dtype error before any work
  const c10::cuda::CUDAGuard guard(x.device());
  Gather g{Direction::kForward, rowptr, col, {}, {}, std::nullopt, last_dim_contiguous(x), red, {}};
  if (weight) g.weight = weight->contiguous();
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
  Gather g{Direction::kBackwardX, colptr, row, csc2csr, rowptr, std::nullopt,
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

// See the schema in binding/propagate.cpp. Reads the plan cache only (never creates a plan).
std::string propagate_plan_info_cuda(const at::Tensor& rowptr, const at::Tensor& col,
                                     const at::Tensor& colptr, const at::Tensor& row, int64_t F,
                                     at::ScalarType dtype, c10::string_view direction) {
  constexpr const char* op = "iognn::propagate_plan_info";
  const Direction dir = cuda_plan::parse_direction(direction, op);
  const bool forward = dir == Direction::kForward;
  const at::Tensor& offsets = forward ? rowptr : colptr;
  const at::Tensor& indices = forward ? col : row;
  const int64_t rows = offsets.numel() - 1, cols = (forward ? colptr : rowptr).numel() - 1;
  const BackendRequest request = cuda_plan::requested_backend();
  if (request == BackendRequest::kOwn) return "own (forced by IOGNN_PROPAGATE_BACKEND=own)";
  if ((dtype != at::kFloat && dtype != at::kDouble) || rows <= 0 || cols <= 0 ||
      indices.numel() == 0 || F <= 0)
    return "own (the cuSPARSE path takes float32/float64 features and a non-empty graph)";
  const c10::cuda::CUDAGuard guard(offsets.device());
  const PlanKey key{offsets.get_device(), at::cuda::getCurrentCUDAStream().stream(), dir, dtype,
                    offsets.const_data_ptr(), rows, cols, indices.numel()};
  const auto plan = cuda_plan::find_plan(key, forward ? std::vector<at::Tensor>{rowptr, col}
                                                      : std::vector<at::Tensor>{colptr, row, rowptr});
  if (!plan) return "none (no call on this graph, dtype and stream yet)";
  std::lock_guard<std::mutex> lock(plan->mutex);
  const auto found = plan->widths.find(F);
  if (found == plan->widths.end()) return "none (no call with this F yet)";
  const WidthPlan& w = found->second;
  if (request == BackendRequest::kCusparse)
    return w.spmm ? "cusparse (forced by IOGNN_PROPAGATE_BACKEND=cusparse)"
                  : "own (cuSPARSE unavailable: " + w.error + ")";
  if (!w.decided) return "none (not decided yet)";
  return std::string(w.choice == Backend::kCusparse ? "cusparse" : "own") + " (" + w.why + ")";
}

}  // namespace

TORCH_LIBRARY_IMPL(iognn, CUDA, m) {
  m.impl("propagate", &propagate_cuda);
  m.impl("propagate_backward_x", &propagate_backward_x_cuda);
  m.impl("propagate_backward_weight", &propagate_backward_weight_cuda);
  m.impl("propagate_plan_info", &propagate_plan_info_cuda);
}

}  // namespace iognn::torch_ext

// The cuSPARSE backend of the CUDA propagate gathers (kernels/cuda/propagate_cusparse.h).
//
// Which calls it serves (cusparse_capable): non-empty graphs; float32/float64 features with any
// reduce and weights; float16/bfloat16 features only when A's values are exact in 16 bits -
// unweighted calls, forward or sum - because mixed precision takes A's values in the features'
// type while the op contract keeps weights and 1/deg in float32. A 16-bit forward mean multiplies
// by ones and applies 1/deg in float32 to the float32 product (finish_rows); backward_x of a mean
// would need 1/deg per edge inside A and stays on the own kernels.
//
// Two tiers:
//  - Unweighted calls use the width plan's PreparedSpmm: a descriptor bound to the plan's ones or
//    1/deg values (written once, never modified), preprocessed once into a workspace of its own.
//  - Weighted calls compute their values (weight, permuted to the transposed CSR for backward_x,
//    times 1/deg for mean: one kernel; the weight itself for a forward sum) into a fresh buffer
//    and run an un-preprocessed product on a per-call workspace from PyTorch's allocator.
// While capturing a CUDA graph nothing persistent is built (the call falls back to the own
// kernels); the per-call tier is capture-safe, its buffers coming from the graph's pool.
#include <ATen/cuda/CUDAContext.h>

#include <algorithm>

#include "binding/cuda/propagate_gather.h"
#include "binding/utils.h"
#include "kernels/cuda/propagate_cusparse.h"

namespace iognn::torch_ext::cuda_gather {
namespace {

using cuda_plan::EdgeValues;
using cuda_plan::Plan;
using cuda_plan::PreparedSpmm;
using cuda_plan::WidthPlan;
using iognn::cuda::CsrSpmm;

bool sixteen_bit(const Gather& g) {
  const auto t = g.dense.scalar_type();
  return t == at::kHalf || t == at::kBFloat16;
}

cudaDataType feature_type(at::ScalarType t) {
  switch (t) {
    case at::kFloat: return CUDA_R_32F;
    case at::kDouble: return CUDA_R_64F;
    case at::kHalf: return CUDA_R_16F;
    case at::kBFloat16: return CUDA_R_16BF;
    default: TORCH_CHECK_TYPE(false, "iognn::propagate (cuSPARSE): unsupported dtype ", t);
  }
}

iognn::cuda::CsrShape shape_of(const Gather& g) {
  return {g.rows(), g.cols(), g.nnz(), g.offsets.scalar_type() == at::kLong};
}

std::unique_ptr<CsrSpmm> make_spmm(const Gather& g, const at::Tensor& values) {
  return std::make_unique<CsrSpmm>(shape_of(g),
                                   iognn::cuda::spmm_types(feature_type(g.dense.scalar_type())),
                                   g.F(), g.offsets.const_data_ptr(), g.indices.const_data_ptr(),
                                   values.const_data_ptr());
}

cusparseHandle_t handle() { return at::cuda::getCurrentCUDASparseHandle(); }

at::Tensor workspace(size_t bytes, const Gather& g) {
  return at::empty({int64_t(std::max<size_t>(bytes, 1))}, g.dense.options().dtype(at::kByte));
}

// t itself when contiguous with a 16-byte aligned start, else an aligned contiguous copy
// (cuSPARSE requires 16-byte aligned dense and value arrays).
at::Tensor aligned(const at::Tensor& t) {
  if (t.is_contiguous() && reinterpret_cast<uintptr_t>(t.const_data_ptr()) % 16 == 0) return t;
  return t.clone(at::MemoryFormat::Contiguous);
}

const at::Tensor& ones_of(Plan& plan, const Gather& g) {
  if (!plan.ones.defined()) plan.ones = at::ones({g.nnz()}, g.dense.options());
  return plan.ones;
}

// 1/deg of the destination row each edge of g's CSR is summed into (mean), in g's edge order, in
// the features' dtype (float32 or float64 here).
const at::Tensor& scale_of(Plan& plan, const Gather& g) {
  if (plan.edge_scale.defined()) return plan.edge_scale;
  const auto acc = g.dense.scalar_type();
  if (g.forward()) {
    const at::Tensor deg = g.offsets.diff().to(at::kLong);
    const at::Tensor inv = deg.to(acc).clamp_min(1).reciprocal();
    plan.edge_scale = at::repeat_interleave(inv, deg, 0, g.nnz());
  } else {
    const at::Tensor inv = g.rowptr.diff().to(acc).clamp_min(1).reciprocal();
    plan.edge_scale = inv.index_select(0, g.indices);
  }
  return plan.edge_scale;
}

// The prepared product of an unweighted call, built and preprocessed for handle h on first need
// (and preprocessed again for another handle); null when that would have to happen while
// capturing.
PreparedSpmm* prepared_product(Plan& plan, WidthPlan& w, const Gather& g, cusparseHandle_t h,
                               const void* B, void* C, bool capturing) {
  const EdgeValues kind = g.mean() && !sixteen_bit(g) ? EdgeValues::kMeanScale : EdgeValues::kOnes;
  PreparedSpmm& p = w.prepared[int(kind)];
  if (p.spmm && p.handle == h) return &p;
  if (capturing) return nullptr;
  if (!p.spmm) {
    auto spmm = make_spmm(g, kind == EdgeValues::kOnes ? ones_of(plan, g) : scale_of(plan, g));
    p.workspace = workspace(spmm->workspace_size(h, B, C), g);
    p.spmm = std::move(spmm);
  }
  p.handle = nullptr;  // until the preprocess below has succeeded
  p.spmm->preprocess(h, B, C, p.workspace.data_ptr());
  p.handle = h;
  return &p;
}

// The edge values of a weighted call, in g's edge order (the scale of a mean must be cached).
at::Tensor weighted_values(Plan& plan, const Gather& g) {
  if (g.forward() && !g.mean()) return aligned(*g.weight);
  at::Tensor values = at::empty({g.nnz()}, g.weight->options());
  const at::Tensor* scale = g.mean() ? &scale_of(plan, g) : nullptr;
  constexpr const char* op = "iognn::propagate (cuSPARSE)";
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream().stream();
  dispatch_float(g.dense.scalar_type(), op, [&](auto ft) {
    using A = acc_t<typename decltype(ft)::type>;
    dispatch_index(g.offsets.scalar_type(), op, [&](auto it) {
      using I = typename decltype(it)::type;
      iognn::cuda::edge_values<A, I>(g.nnz(), cptr<A>(*g.weight),
                                     g.forward() ? nullptr : cptr<I>(g.csc2csr),
                                     scale ? cptr<A>(*scale) : nullptr, ptr<A>(values), stream);
    });
  });
  return values;
}

// out = T(C), times 1/deg per row for a 16-bit forward mean (C is the float32 product).
void finish_16bit(const Gather& g, const at::Tensor& C) {
  constexpr const char* op = "iognn::propagate (cuSPARSE)";
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream().stream();
  const bool scale_rows = g.forward() && g.mean();
  dispatch_index(g.offsets.scalar_type(), op, [&](auto it) {
    using I = typename decltype(it)::type;
    const I* mean_offsets = scale_rows ? cptr<I>(g.offsets) : nullptr;
    if (g.dense.scalar_type() == at::kHalf)
      iognn::cuda::finish_rows<half_t, I>(g.rows(), g.F(), cptr<float>(C), mean_offsets,
                                          ptr<half_t>(g.out), stream);
    else
      iognn::cuda::finish_rows<bf16_t, I>(g.rows(), g.F(), cptr<float>(C), mean_offsets,
                                          ptr<bf16_t>(g.out), stream);
  });
}

}  // namespace

bool cusparse_capable(const Gather& g) {
  if (g.rows() <= 0 || g.cols() <= 0 || g.nnz() <= 0 || g.F() <= 0) return false;
  if (!sixteen_bit(g)) return true;
  return !g.weight && (g.forward() || !g.mean());
}

bool run_cusparse(const Gather& g, Plan& plan, WidthPlan& w, int64_t longest_row,
                  bool capturing) {
  if (!w.cusparse_error.empty() || longest_row < 0) return false;
  if (longest_row > kCusparseLongestRow) {
    w.cusparse_error = "a row of " + std::to_string(longest_row) +
                       " entries; CSR_ALG3 is used only on rows of at most " +
                       std::to_string(kCusparseLongestRow) +
                       " (longer ones fault or change bits run to run)";
    return false;
  }
  if (capturing && g.weight && g.mean() && !plan.edge_scale.defined()) return false;
  const at::Tensor B = aligned(g.dense);
  const at::Tensor C =
      sixteen_bit(g) ? at::empty({g.rows(), g.F()}, g.dense.options().dtype(at::kFloat)) : g.out;
  try {
    if (!g.weight) {
      const cusparseHandle_t h = handle();
      PreparedSpmm* p = prepared_product(plan, w, g, h, B.const_data_ptr(), C.data_ptr(), capturing);
      if (!p) return false;
      p->spmm->run(h, B.const_data_ptr(), C.data_ptr(), p->workspace.data_ptr());
    } else {
      // Freed on return while the product may still run: PyTorch's allocator reuses the memory
      // only for work queued later on this stream.
      const at::Tensor values = weighted_values(plan, g);
      const auto spmm = make_spmm(g, values);
      const cusparseHandle_t h = handle();
      const at::Tensor ws = workspace(spmm->workspace_size(h, B.const_data_ptr(), C.data_ptr()), g);
      spmm->run(h, B.const_data_ptr(), C.data_ptr(), ws.data_ptr());
    }
    if (g.bias) C.add_(*g.bias);  // a pass over C of its own here (the own kernels fuse it)
    if (sixteen_bit(g)) finish_16bit(g, C);
  } catch (const iognn::DeviceError& e) {
    w.cusparse_error = e.what();
    return false;
  } catch (const iognn::ValueError& e) {
    w.cusparse_error = e.what();
    return false;
  }
  return true;
}

}  // namespace iognn::torch_ext::cuda_gather

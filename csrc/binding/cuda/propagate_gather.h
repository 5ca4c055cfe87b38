// One gather of the CUDA propagate ops - out[rows, F] = A dense over the forward CSR (rowptr, col)
// or the transposed CSR (colptr, row) - described once for both backends, and the two backends:
// the own kernels (propagate.cpp) and cuSPARSE (propagate_cusparse_path.cpp).
#pragma once

#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>

#include <optional>
#include <vector>

#include "binding/cuda/propagate_plan.h"
#include "kernels/cpu/propagate.h"
#include "kernels/cuda/propagate.h"

namespace iognn::torch_ext::cuda_gather {

struct Gather {
  cuda_plan::Direction direction;
  at::Tensor offsets, indices;       // (rowptr, col) forward, (colptr, row) backward_x
  at::Tensor csc2csr, rowptr;        // backward_x only: weight permutation, destination degrees
  std::optional<at::Tensor> weight;  // contiguous, forward CSR order, float32 (float64 features)
  std::optional<at::Tensor> bias;    // forward only: [F], contiguous, the dtype of dense
  at::Tensor dense;                  // x [cols, F] (feature stride 1) or grad_out (contiguous)
  cpu::PropagateReduce reduce;
  at::Tensor out;                    // [rows, F], contiguous

  int64_t rows() const { return offsets.numel() - 1; }
  int64_t cols() const { return dense.size(0); }
  int64_t nnz() const { return indices.numel(); }
  int64_t F() const { return dense.size(1); }
  bool mean() const { return reduce == cpu::PropagateReduce::kMean; }
  bool forward() const { return direction == cuda_plan::Direction::kForward; }
  // The graph tensors a plan's cached state depends on (checked by identity on every lookup).
  std::vector<at::Tensor> graph() const {
    if (forward()) return {offsets, indices};
    return {offsets, indices, rowptr};
  }
  cuda_plan::PlanKey key() const {
    return {dense.get_device(), at::cuda::getCurrentCUDAStream().stream(), direction,
            dense.scalar_type(), offsets.const_data_ptr(), rows(), cols(), nnz()};
  }
};

// The own kernels (any gather).
void run_own(const Gather& g, const iognn::cuda::RowSchedule& schedule);

// Whether cuSPARSE can compute g with the op's exact contract: a non-empty graph, and for
// float16/bfloat16 features only unweighted calls that are forward or sum (see
// propagate_cusparse_path.cpp).
bool cusparse_capable(const Gather& g);

// The longest row cuSPARSE is given (see kernels/cuda/propagate_cusparse.h: CSR_ALG3 faults or
// changes bits run to run on longer rows).
inline constexpr int64_t kCusparseLongestRow = iognn::cuda::kSpmmLongestRow;

// Computes g with cuSPARSE under the width plan w of `plan` (whose mutex the caller holds), g's CSR
// having rows of at most `longest_row` entries (-1: unknown). Returns false, writing nothing the
// caller relies on, when it cannot now: a row is longer than kCusparseLongestRow or a cuSPARSE
// call failed (now or before: w.cusparse_error says why), or the row lengths or something it needs
// are not cached while capturing.
bool run_cusparse(const Gather& g, cuda_plan::Plan& plan, cuda_plan::WidthPlan& w,
                  int64_t longest_row, bool capturing);

}  // namespace iognn::torch_ext::cuda_gather

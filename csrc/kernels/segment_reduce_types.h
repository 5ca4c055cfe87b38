// Segment-reduction family (PyG's sum/mean/min/max/var/std aggregations of x_j over the in-edges
// of each target i): the contract both backends implement, and the types they share.
//
// Several reductions requested together are computed in ONE pass over each CSR row (the fused
// MultiAggregation / PNA path). Output out [num_dst, K*F]: reduction k occupies columns
// [k*F, (k+1)*F), in request order (PyG's MultiAggregation mode='cat').
//
//   sum  = sum_p x[col[p]]                 mean = sum / max(deg, 1)
//   min / max  feature-wise; NaN propagates (torch amax); ties: kernels/segment_extremum.h
//   var  = E[x^2] - E[x]^2                 (PyG's VarAggregation, not Welford: may be slightly < 0)
//   std  = sqrt(max(var, 1e-5)), then 0 where that is <= sqrt(1e-5) (PyG's StdAggregation)
// An empty row gives 0 for every reduction. Statistics accumulate in acc_t<T>.
//
// Degree scalers (PyG's DegreeScalerAggregation / PNA), applied by the forward's epilogue: given S
// per-destination factors scale [num_dst, S] (functions of the in-degree, computed by the caller
// in T), out becomes [num_dst, S*K*F] with block s = scale[i, s] * (the K results), rounded to T
// as torch rounds `result * scale` (both operands in T, product in acc_t<T>); the unscaled
// results, which the backward needs, go to plain [num_dst, K*F]. The backward then takes plain
// for out and the gradient folded over the scalers, sum_s scale[i, s] * grad_out[i, s] (in
// acc_t<T>, rounded once to T): segment_reduce_fold_scales.
// Every output row is produced by one thread in CSR order, every grad_x row by one thread in
// transposed-CSR order: deterministic for any thread count, no atomics.
//
// The family's places:
//   contract (this file)           kernels/segment_reduce_types.h, kernels/segment_extremum.h
//   host kernels                   kernels/cpu/segment_reduce.{h,cpp}
//   device kernels                 kernels/cuda/segment_reduce.h (API),
//                                  kernels/cuda/segment_reduce_{forward,backward}.cuh on the shared
//                                  row schedule kernels/cuda/csr_schedule.cuh
//   binding                        binding/segment_reduce_ops.h (op bodies, both backends),
//                                  binding/segment_reduce.cpp (schemas, host backend),
//                                  binding/cuda/segment_reduce.cpp (device backend),
//                                  binding/meta.cpp (Meta kernels: the outputs' shapes),
//                                  binding/autograd/segment_reduce.cpp (autograd formula)
//   Python and tests               python/iognn/ops/segment_reduce.py (wrapper);
//                                  tests/python/test_segment_reduce{,_cuda}.py,
//                                  tests/cpp/test_cpu_kernels.cpp
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "core/numeric.h"

namespace iognn {


enum class SegmentReduce : int { kSum = 0, kMean = 1, kMin = 2, kMax = 3, kVar = 4, kStd = 5 };

// PyG's StdAggregation of a variance: sqrt(max(var, 1e-5)), 0 where that is <= sqrt(1e-5); a NaN
// var stays NaN. Both constants are rounded to the accumulation type, as torch does for a Python
// scalar. One definition for the host and the device kernels.
template <typename acc>
IOGNN_HD acc masked_std(acc var) {
  const acc s = std::sqrt(var < acc(1e-5) ? acc(1e-5) : var);
  return s <= acc(0.0031622776601683794) ? acc(0) : s;
}

// Parses reduction names ("sum", "mean", "min", "max", "var", "std"); throws ValueError naming
// `reduce` for an empty list, an unknown name or a repeated one.
std::vector<SegmentReduce> parse_segment_reduces(const std::vector<std::string>& names);

// Which auxiliary outputs a list of reductions needs (tie codes, the per-row mean).
bool segment_reduce_has(const std::vector<SegmentReduce>& reduces, SegmentReduce r);
bool segment_reduce_needs_mean(const std::vector<SegmentReduce>& reduces);
// Whether only min and / or max are requested (the CUDA backward then runs its min / max pass
// alone).
bool segment_reduce_extrema_only(const std::vector<SegmentReduce>& reduces);

// Where the min / max tie codes of one call go (segment_extremum.h): their two byte planes, lead
// and rest, each [num_dst, n, F] (the binding's ties tensor [2, num_dst, n, F], lead first), and
// wide [n, wide_rows, F] (wide_rows = tie_wide_rows(num_edges)), n = the extrema requested, min
// first.
struct TieSlots {
  int count = 0;  // n
  int min = -1, max = -1;  // their index in [0, n), -1 when not requested
};
TieSlots segment_reduce_tie_slots(const std::vector<SegmentReduce>& reduces);

template <typename Byte, typename Wide>
struct TieArrays {
  Byte* lead = nullptr;  // nullptr when neither min nor max is requested
  Byte* rest = nullptr;
  Wide* wide = nullptr;
  int64_t wide_rows = 0;
};
using Ties = TieArrays<uint8_t, int64_t>;                // written by the forward
using TiesView = TieArrays<const uint8_t, const int64_t>;  // read by the backward

// Degree scalers of one call (see above); scale == nullptr: none (out is [num_dst, K*F]).
template <typename T>
struct DegreeScales {
  const T* scale = nullptr;  // [num_dst, count] contiguous
  int64_t count = 0;         // S >= 1 when scale is set
  T* plain = nullptr;        // [num_dst, K*F]: the unscaled results
};

}  // namespace iognn

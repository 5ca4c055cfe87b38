// Segment-reduction family (PyG's sum/mean/min/max/var/std aggregations of x_j over the in-edges
// of each target i), host kernels.
//
// Several reductions requested together are computed in ONE pass over each CSR row (the fused
// MultiAggregation / PNA path). Output out [num_dst, K*F]: reduction k occupies columns
// [k*F, (k+1)*F), in request order (PyG's MultiAggregation mode='cat').
//
//   sum  = sum_p x[col[p]]                 mean = sum / max(deg, 1)
//   min / max  feature-wise; NaN propagates (torch amax); ties: kernels/cpu/segment_extremum.h
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
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/numeric.h"

namespace iognn::cpu {

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

// x [num_src, F] with row stride x_stride (feature stride 1); out [num_dst, K*F] contiguous
// ([num_dst, S*K*F] with degree scalers).
// ties: the min / max tie codes, written when min or max is requested (their wide entries only
// where saturated). mean [num_dst, F] in acc_t<T>: written when var or std is requested (may be
// nullptr otherwise). Both exist for the backward.
template <typename T, typename index_t>
void segment_reduce_forward(const index_t* rowptr, const index_t* col, const T* x, int64_t x_stride,
                            int64_t num_dst, int64_t F, const std::vector<SegmentReduce>& reduces,
                            T* out, Ties ties, acc_t<T>* mean, DegreeScales<T> scales = {});

// g [num_dst, KF] = sum_s scale[i, s] * grad_out[i, s*KF : (s+1)*KF] (accumulated in acc_t<T> in
// scaler order, rounded once): the gradient of the unscaled results of a scaled forward.
template <typename T>
void segment_reduce_fold_scales(const T* grad_out, const T* scale, int64_t num_dst,
                                int64_t num_scales, int64_t KF, T* g);

// grad_x [num_src, F] (contiguous), gathered over the transposed CSR (colptr, row): for source j,
// the sum over its out-edges j -> i (in transposed-CSR order, duplicates once each) and the
// requested reductions (in request order) of
//   sum: g   mean: g / deg_i   var: 2 g (x_j - mean_i) / deg_i
//   std: g (x_j - mean_i) / (deg_i std_i) where std_i > 0 (0 where masked, as PyG's clamp/mask)
//   min / max: g / (count_i + [out_i == 0]) where x_j == out_i, NaN where out_i is NaN, else 0
//              (torch's even split among ties, the zero fill counted: segment_extremum.h)
// with g the matching slice of grad_out [num_dst, K*F]. out is the forward's output (min, max and
// std are read from it), ties / mean the forward's auxiliary outputs (null when not needed; mean's
// rows mean_stride apart: F for the mean output, K*F for the mean slot of out). The
// host reads a tie code only for its holder count and compares values; a sole holder is the one
// edge equal to the result, so no CSR position (csc2csr) is needed here.
template <typename T, typename index_t>
void segment_reduce_backward(const index_t* colptr, const index_t* row, const index_t* rowptr,
                             const T* x, int64_t x_stride, const T* out, TiesView ties,
                             const acc_t<T>* mean, int64_t mean_stride, const T* grad_out,
                             int64_t num_src, int64_t F, const std::vector<SegmentReduce>& reduces,
                             T* grad_x);

}  // namespace iognn::cpu

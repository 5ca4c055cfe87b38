// Segment-reduction family (PyG's sum/mean/min/max/var/std aggregations of x_j over the in-edges
// of each target i), host kernels.
//
// Several reductions requested together are computed in ONE pass over each CSR row (the fused
// MultiAggregation / PNA path). Output out [num_dst, K*F]: reduction k occupies columns
// [k*F, (k+1)*F), in request order (PyG's MultiAggregation mode='cat').
//
//   sum  = sum_p x[col[p]]                 mean = sum / max(deg, 1)
//   min / max  feature-wise; ties go to the first edge in CSR order; NaN propagates (torch amax)
//   var  = E[x^2] - E[x]^2                 (PyG's VarAggregation, not Welford: may be slightly < 0)
//   std  = sqrt(max(var, 1e-5)), then 0 where that is <= sqrt(1e-5) (PyG's StdAggregation)
// An empty row gives 0 for every reduction (arg index -1). Statistics accumulate in acc_t<T>.
// Every output row is produced by one thread in CSR order, every grad_x row by one thread in
// transposed-CSR order: deterministic for any thread count, no atomics.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/numeric.h"

namespace iognn::cpu {

enum class SegmentReduce : int { kSum = 0, kMean = 1, kMin = 2, kMax = 3, kVar = 4, kStd = 5 };

// Parses reduction names ("sum", "mean", "min", "max", "var", "std"); throws ValueError naming
// `reduce` for an empty list, an unknown name or a repeated one.
std::vector<SegmentReduce> parse_segment_reduces(const std::vector<std::string>& names);

// Which auxiliary outputs a list of reductions needs (arg_min, arg_max, the per-row mean).
bool segment_reduce_has(const std::vector<SegmentReduce>& reduces, SegmentReduce r);
bool segment_reduce_needs_mean(const std::vector<SegmentReduce>& reduces);

// x [num_src, F] with row stride x_stride (feature stride 1); out [num_dst, K*F] contiguous.
// arg_min / arg_max [num_dst, F]: CSR position of the winning edge (-1 for an empty row); only
// written when min / max is requested (may be nullptr otherwise). mean [num_dst, F] in acc_t<T>:
// written when var or std is requested (may be nullptr otherwise), for the backward.
template <typename T, typename index_t>
void segment_reduce_forward(const index_t* rowptr, const index_t* col, const T* x, int64_t x_stride,
                            int64_t num_dst, int64_t F, const std::vector<SegmentReduce>& reduces,
                            T* out, index_t* arg_min, index_t* arg_max, acc_t<T>* mean);

// grad_x [num_src, F] (contiguous), gathered over the transposed CSR: for source j, the sum over
// its out-edges (j -> i, CSR position p) and the requested reductions of
//   sum: g   mean: g / deg_i   var: 2 g (x_j - mean_i) / deg_i
//   std: g (x_j - mean_i) / (deg_i std_i) where std_i > 0 (0 where masked, as PyG's clamp/mask)
//   min / max: g when arg[i] == p (the tie winner takes the whole gradient)
// with g the matching slice of grad_out [num_dst, K*F]. out is the forward's output (std is read
// from it), arg_min / arg_max / mean the forward's auxiliary outputs (nullptr when not needed).
template <typename T, typename index_t>
void segment_reduce_backward(const index_t* colptr, const index_t* row, const index_t* csc2csr,
                             const index_t* rowptr, const T* x, int64_t x_stride, const T* out,
                             const index_t* arg_min, const index_t* arg_max,
                             const acc_t<T>* mean, const T* grad_out, int64_t num_src, int64_t F,
                             const std::vector<SegmentReduce>& reduces, T* grad_x);

}  // namespace iognn::cpu

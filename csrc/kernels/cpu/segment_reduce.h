// Segment-reduction family, host kernels (contract, shapes and rules:
// kernels/segment_reduce_types.h).
#pragma once

#include <cstdint>
#include <vector>

#include "core/numeric.h"
#include "kernels/segment_reduce_types.h"

namespace iognn::cpu {

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

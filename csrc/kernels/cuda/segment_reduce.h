// Segment-reduction family on CUDA (sum/mean/min/max/var/std of x_j over the in-edges of each
// target i, several fused in one pass), torch-free launch API on raw device pointers.
//
// Same contract as the host kernels (kernels/segment_reduce_types.h): shapes, PyG's empty-row zeros,
// var = E[x^2] - E[x]^2, the std clamp and mask, NaN propagation as torch.amax, the min / max tie
// codes and torch's even split of their gradient (the same code: kernels/segment_extremum.h),
// the mean aux output in acc_t<T>. Min, max and the tie codes equal the host kernels' exactly.
// Results are bit-identical run to run (no float atomics); sums may differ from the host kernels in
// the last bits for rows split over several segments (a different, but fixed, summation order).
//
// Degree-aware schedule (csr_schedule.cuh): rows of degree <= a heavy threshold are
// reduced by one group of lanes each (lanes over features); heavier rows are cut into fixed-length
// edge segments reduced in parallel into a workspace and merged in segment order by a second pass.
// The workspace is caller-provided (the binding allocates it with the caching allocator): query its
// size with the *_workspace function of the same (T, sizes), which never touches the device.
// Everything is enqueued on `stream`; no host synchronisation, no device allocation.
// Errors (a failed launch, a too-small workspace) throw iognn::DeviceError / ValueError.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/numeric.h"
#include "kernels/segment_reduce_types.h"

namespace iognn::cuda {

// Workspace bytes of segment_reduce_forward for num_dst rows, num_edges = col's length, F features.
// max_degree: the longest row when the caller knows it (a Graph does), else -1; the forward must be
// called with the same value (with no heavy row the schedule is one kernel: csr_schedule.cuh).
template <typename T>
size_t segment_reduce_forward_workspace(int64_t num_dst, int64_t num_edges, int64_t max_degree,
                                        int64_t F);

// Forward: x [num_src, F] with row stride x_stride (feature stride 1); out [num_dst, K*F]
// contiguous ([num_dst, S*K*F] with degree scalers, the unscaled results in scales.plain: the
// host kernel's contract); the tie codes written when min / max is requested (their wide entries
// only where saturated); mean [num_dst, F] written when var or std is requested (else nullptr).
template <typename T, typename index_t>
void segment_reduce_forward(const index_t* rowptr, const index_t* col, const T* x, int64_t x_stride,
                            int64_t num_dst, int64_t num_edges, int64_t max_degree, int64_t F,
                            const std::vector<SegmentReduce>& reduces, T* out, Ties ties,
                            acc_t<T>* mean, DegreeScales<T> scales, void* workspace,
                            size_t workspace_bytes, cudaStream_t stream);

// Workspace bytes of segment_reduce_backward: the per-destination gradient coefficients (when the
// reductions need them: var / std, or sum and mean together), the linear part of grad_x in acc
// precision between the two passes (min / max with other reductions, T narrower than acc:
// num_src * F * 4 bytes) and the heavy-source schedule (max_degree: colptr's longest row, or -1).
template <typename T>
size_t segment_reduce_backward_workspace(int64_t num_src, int64_t num_dst, int64_t num_edges,
                                         int64_t max_degree, int64_t F,
                                         const std::vector<SegmentReduce>& reduces);

// Backward: grad_x [num_src, F] (contiguous), gathered over the transposed CSR (colptr, row;
// csc2csr: each transposed edge's CSR position) with the host kernel's formulas; out, ties, mean
// are the forward's outputs (contiguous; null when their reduction is not requested; mean's rows
// mean_stride apart: F for the mean output, K*F for the mean slot of out), grad_out
// [num_dst, K*F] contiguous. The gradients of the reductions linear in x_j are first folded per
// destination into one or two coefficients (in the workspace), a + b * x_j; the min / max share
// goes to the sole holder named by its tie code, else to an edge whose value equals the result
// (or to every edge of a NaN result): the host's rule. Sums may differ from the host kernel's in
// the last bits (the coefficients fold the reductions in another order, var / std as
// b * x_j - b * mean_i, and min / max with other reductions run as a second pass whose sums are
// added to the first's).
template <typename T, typename index_t>
void segment_reduce_backward(const index_t* colptr, const index_t* row, const index_t* csc2csr,
                             const index_t* rowptr, const T* x, int64_t x_stride, const T* out,
                             TiesView ties, const acc_t<T>* mean, int64_t mean_stride,
                             const T* grad_out, int64_t num_src, int64_t num_dst,
                             int64_t num_edges, int64_t max_degree, int64_t F,
                             const std::vector<SegmentReduce>& reduces, T* grad_x,
                             void* workspace, size_t workspace_bytes, cudaStream_t stream);

// g [num_dst, KF] = sum_s scale[i, s] * grad_out[i, s*KF : (s+1)*KF]: the host kernel's
// segment_reduce_fold_scales (same order, same rounding), on `stream`.
template <typename T>
void segment_reduce_fold_scales(const T* grad_out, const T* scale, int64_t num_dst,
                                int64_t num_scales, int64_t KF, T* g, cudaStream_t stream);

}  // namespace iognn::cuda

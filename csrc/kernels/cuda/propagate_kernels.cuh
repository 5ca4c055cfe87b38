// Kernel templates behind kernels/cuda/propagate.h. Included once per storage type by
// propagate_<dtype>.cu, which instantiates the public entry points (IOGNN_CUDA_PROPAGATE_INSTANTIATE).
//
// Work decomposition (the same for the gather and the sampled dense-dense product):
// - Lanes over features. A row's F features are covered by a *group* of G = 2^log2_group lanes
//   (G <= 32, groups never straddle a warp), each lane owning V consecutive features: V = kVec<T>
//   (one 16-byte access) when F, the row stride and the base pointers allow it, else V = 1.
//   G is the smallest power of two with G * V >= F, capped at 32; wider rows are cut into feature
//   tiles of G * V (the gather gives each tile its own group; the SDDMM's lanes loop over tiles).
//   So F <= 32 fp32 puts 32 / G rows in one warp, and F = 128 fp32 is one warp per row.
// - Light rows (at most schedule.heavy_threshold edges): one group walks the row in CSR order,
//   kUnroll edges at a time so that kUnroll independent gathers are in flight per lane.
// - Heavy rows: each kSegmentEdges segment of the row goes to one block of kBlock threads; the
//   block's groups take fixed contiguous sub-ranges, and (gather only) their sums are merged in
//   group order through shared memory into partials[segment]; merge_segments_kernel then adds the
//   segments of each heavy row in order and applies the row scale.
// The forward's epilogue also adds the optional bias (a layer's, fused: no extra pass over out).
// No atomics anywhere: every result is produced in a fixed order, bit-identical run to run.
#pragma once

#include <algorithm>
#include <cstdint>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/propagate.h"

namespace iognn::cuda::propagate_detail {

constexpr int kBlock = 256;       // threads of every gather / SDDMM block
// Blocks per SM the register budget must allow: 4 x 256 threads leaves 64 registers a thread.
// Without it ptxas aims at 32 registers and serialises the kUnroll gathers (seen in SASS).
constexpr int kMinBlocks = 4;
constexpr int kUnroll = 4;        // edges whose feature loads are in flight together
constexpr int kMergeBlock = 128;  // threads (features) of a merge block
constexpr int64_t kMaxGridY = 65535;

template <typename I>
__device__ __forceinline__ int64_t load_index(const I* p) {
  return int64_t(__ldg(p));
}

// ---- per-edge terms of the two gathers ------------------------------------------------------
// An edge functor gives, for a CSR position p, the dense row to gather (source) and its factor.
// factor() is asked only after the gathers of a batch are issued, so that its own loads (and
// the division of mean) overlap with them.

// Forward: source col[p], factor w[p]; the 1/deg of mean is applied once to the row's sum, then
// the bias added.
template <typename T, typename I>
struct ForwardEdges {
  using acc = acc_t<T>;
  const I* col;
  const acc* weight;  // nullable
  bool mean;
  const T* bias;  // nullable, [F]
  __device__ __forceinline__ int64_t source(int64_t p) const { return load_index(col + p); }
  __device__ __forceinline__ acc factor(int64_t p, int64_t) const {
    return weight ? __ldg(weight + p) : acc(1);
  }
  __device__ __forceinline__ acc row_scale(int64_t deg) const {
    return mean && deg > 0 ? acc(1) / acc(deg) : acc(1);
  }
  __device__ __forceinline__ acc finish(acc sum, acc scale, int64_t f) const {
    return bias ? sum * scale + to_acc(bias[f]) : sum * scale;
  }
};

// Backward x over the transposed CSR: source row[q] (a destination i), factor
// scale_i * w[csc2csr[q]] (the host kernel's order of operations).
template <typename T, typename I>
struct BackwardXEdges {
  using acc = acc_t<T>;
  const I* row;
  const I* csc2csr;
  const I* rowptr;
  const acc* weight;  // nullable
  bool mean;
  __device__ __forceinline__ int64_t source(int64_t q) const { return load_index(row + q); }
  __device__ __forceinline__ acc factor(int64_t q, int64_t i) const {
    acc w = acc(1);
    if (mean) w = acc(1) / acc(load_index(rowptr + i + 1) - load_index(rowptr + i));
    if (weight) w *= __ldg(weight + load_index(csc2csr + q));
    return w;
  }
  __device__ __forceinline__ acc row_scale(int64_t) const { return acc(1); }
  __device__ __forceinline__ acc finish(acc sum, acc, int64_t) const { return sum; }
};

// ---- lanes over features ----------------------------------------------------------------------
struct Layout {
  int log2_group;     // G = 2^log2_group lanes per row
  int64_t num_tiles;  // feature tiles of G * V features
};

inline Layout choose_layout(int64_t F, int vec) {
  const int64_t lanes = (F + vec - 1) / vec;
  int log2_group = 0;
  while (log2_group < 5 && (int64_t(1) << log2_group) < lanes) ++log2_group;
  const int64_t tile = (int64_t(1) << log2_group) * vec;
  return {log2_group, (F + tile - 1) / tile};
}

// Lanes of the calling thread's group, as a shuffle mask.
__device__ __forceinline__ unsigned group_mask(int log2_group) {
  if (log2_group == 5) return 0xffffffffu;
  const unsigned lanes = (1u << (1 << log2_group)) - 1u;
  return lanes << ((threadIdx.x & 31u) & ~((1u << log2_group) - 1u));
}

// The contiguous share [begin, end) of segment [seg_begin, seg_begin + len) for group g of n.
struct Range {
  int64_t begin, end;
};
__device__ __forceinline__ Range group_share(int64_t seg_begin, int64_t len, int g, int n) {
  const int64_t per = (len + n - 1) / n;
  return {seg_begin + min(len, g * per), seg_begin + min(len, (g + 1) * per)};
}

// ---- gather ---------------------------------------------------------------------------------
// sum[k] += w_p * x[src_p, f0 + k] for p in [p, end), in CSR order. xf = x + f0.
template <typename T, int V, class Edges>
__device__ __forceinline__ void gather_range(const Edges& edges, const T* __restrict__ xf,
                                             int64_t x_stride, int64_t p, int64_t end,
                                             acc_t<T> (&sum)[V]) {
  using acc = acc_t<T>;
  for (; p + kUnroll <= end; p += kUnroll) {
    int64_t src[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) src[u] = edges.source(p + u);
    Raw<T, V> r[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) r[u] = load_raw<T, V>(xf + src[u] * x_stride);
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const acc w = edges.factor(p + u, src[u]);
#pragma unroll
      for (int k = 0; k < V; ++k) sum[k] += w * raw_at(r[u], k);
    }
  }
  for (; p < end; ++p) {
    const int64_t src = edges.source(p);
    const Raw<T, V> r = load_raw<T, V>(xf + src * x_stride);
    const acc w = edges.factor(p, src);
#pragma unroll
    for (int k = 0; k < V; ++k) sum[k] += w * raw_at(r, k);
  }
}

// One group per (light row, feature tile); heavy rows are left to the segment kernels.
template <typename T, typename I, int V, class Edges>
__global__ void __launch_bounds__(kBlock, kMinBlocks)
    gather_light_kernel(const I* __restrict__ offsets, Edges edges, const T* __restrict__ x,
                        int64_t x_stride, int64_t num_rows, int64_t F, int log2_group,
                        int64_t num_tiles, int64_t heavy_threshold, T* __restrict__ out) {
  using acc = acc_t<T>;
  const int64_t item = (int64_t(blockIdx.x) * kBlock + threadIdx.x) >> log2_group;
  const int64_t row = item / num_tiles;
  if (row >= num_rows) return;
  const int64_t tile = item - row * num_tiles;
  const int lane = int(threadIdx.x & ((1u << log2_group) - 1u));
  const int64_t f0 = ((tile << log2_group) + lane) * V;
  if (f0 >= F) return;  // an idle lane of the last tile (V == 1 only: V > 1 needs F % V == 0)
  const int64_t begin = load_index(offsets + row), end = load_index(offsets + row + 1);
  if (end - begin > heavy_threshold) return;
  acc sum[V];
#pragma unroll
  for (int k = 0; k < V; ++k) sum[k] = acc(0);
  gather_range<T, V>(edges, x + f0, x_stride, begin, end, sum);
  const acc scale = edges.row_scale(end - begin);
#pragma unroll
  for (int k = 0; k < V; ++k) sum[k] = edges.finish(sum[k], scale, f0 + k);
  store_acc<T, V>(out + row * F + f0, sum);
}

// One block per (segment of a heavy row, feature tile): partials[s, tile features] = the
// segment's unscaled sum, its groups' shares added in group order.
template <typename T, typename I, int V, class Edges>
__global__ void __launch_bounds__(kBlock, kMinBlocks)
    gather_segment_kernel(RowSchedule sched, Edges edges, const T* __restrict__ x,
                          int64_t x_stride, int64_t F, int log2_group,
                          acc_t<T>* __restrict__ partials) {
  using acc = acc_t<T>;
  __shared__ acc shares[kBlock * V];  // [group][lane][k] = [group][feature of the tile]
  const int group = int(threadIdx.x >> log2_group);
  const int lane = int(threadIdx.x & ((1u << log2_group) - 1u));
  const int num_groups = kBlock >> log2_group;
  const int64_t s = blockIdx.x, tile = blockIdx.y;
  const int64_t seg_begin = sched.segment_begin[s];
  const Range r = group_share(seg_begin, sched.segment_end[s] - seg_begin, group, num_groups);
  const int64_t f0 = ((tile << log2_group) + lane) * V;
  acc sum[V];
#pragma unroll
  for (int k = 0; k < V; ++k) sum[k] = acc(0);
  if (f0 < F) gather_range<T, V>(edges, x + f0, x_stride, r.begin, r.end, sum);
#pragma unroll
  for (int k = 0; k < V; ++k) shares[threadIdx.x * V + k] = sum[k];
  __syncthreads();
  const int width = V << log2_group;  // features of one tile, <= kBlock
  for (int j = threadIdx.x; j < width; j += kBlock) {
    acc total = acc(0);
    for (int g = 0; g < num_groups; ++g) total += shares[g * width + j];
    const int64_t f = tile * width + j;
    if (f < F) partials[s * F + f] = total;
  }
}

// One thread per (heavy row, feature): out = row_scale * (sum of the row's segments, in order)
// (+ the forward's bias).
template <typename T, typename I, class Edges>
__global__ void __launch_bounds__(kMergeBlock)
    merge_segments_kernel(RowSchedule sched, const I* __restrict__ offsets, Edges edges,
                          const acc_t<T>* __restrict__ partials, int64_t F, T* __restrict__ out) {
  using acc = acc_t<T>;
  const int64_t f = int64_t(blockIdx.y) * kMergeBlock + threadIdx.x;
  if (f >= F) return;
  const int64_t h = blockIdx.x;
  const int64_t row = sched.heavy_rows[h];
  const int64_t s_end = sched.segment_ptr[h + 1];
  acc total = acc(0);
#pragma unroll 4
  for (int64_t s = sched.segment_ptr[h]; s < s_end; ++s) total += partials[s * F + f];
  const int64_t deg = load_index(offsets + row + 1) - load_index(offsets + row);
  out[row * F + f] = from_acc<T>(edges.finish(total, edges.row_scale(deg), f));
}

template <typename T, typename I, int V, class Edges>
void launch_gather_vec(const I* offsets, const Edges& edges, const T* x, int64_t x_stride,
                       int64_t num_rows, int64_t F, const RowSchedule& sched,
                       acc_t<T>* partials, T* out, cudaStream_t stream) {
  const Layout L = choose_layout(F, V);
  const int64_t threads = (num_rows * L.num_tiles) << L.log2_group;
  const int64_t blocks = (threads + kBlock - 1) / kBlock;
  IOGNN_CHECK(blocks <= INT32_MAX, ValueError, "propagate (CUDA): ", num_rows, " rows of ", F,
              " features exceed one launch");
  if (blocks > 0) {
    gather_light_kernel<T, I, V, Edges><<<unsigned(blocks), kBlock, 0, stream>>>(
        offsets, edges, x, x_stride, num_rows, F, L.log2_group, L.num_tiles,
        sched.heavy_threshold, out);
    IOGNN_CUDA_CHECK_LAUNCH("gather_light_kernel");
  }
  if (sched.num_heavy == 0) return;
  const int64_t merge_tiles = (F + kMergeBlock - 1) / kMergeBlock;
  IOGNN_CHECK(partials != nullptr, ValueError,
              "propagate (CUDA): the schedule has heavy rows but no partials buffer was given");
  IOGNN_CHECK(L.num_tiles <= kMaxGridY && merge_tiles <= kMaxGridY &&
                  sched.num_segments <= INT32_MAX,
              ValueError, "propagate (CUDA): F = ", F, " is too wide for the heavy-row kernels");
  gather_segment_kernel<T, I, V, Edges>
      <<<dim3(unsigned(sched.num_segments), unsigned(L.num_tiles)), kBlock, 0, stream>>>(
          sched, edges, x, x_stride, F, L.log2_group, partials);
  IOGNN_CUDA_CHECK_LAUNCH("gather_segment_kernel");
  merge_segments_kernel<T, I, Edges>
      <<<dim3(unsigned(sched.num_heavy), unsigned(merge_tiles)), kMergeBlock, 0, stream>>>(
          sched, offsets, edges, partials, F, out);
  IOGNN_CUDA_CHECK_LAUNCH("merge_segments_kernel");
}

// Picks the 16-byte path when every row start of x and out is 16-byte aligned.
template <typename T, typename I, class Edges>
void launch_gather(const I* offsets, const Edges& edges, const T* x, int64_t x_stride,
                   int64_t num_rows, int64_t F, const RowSchedule& sched, acc_t<T>* partials,
                   T* out, cudaStream_t stream) {
  constexpr int V = kVec<T>;
  if (F % V == 0 && x_stride % V == 0 && is_aligned16(x) && is_aligned16(out))
    launch_gather_vec<T, I, V>(offsets, edges, x, x_stride, num_rows, F, sched, partials, out,
                               stream);
  else
    launch_gather_vec<T, I, 1>(offsets, edges, x, x_stride, num_rows, F, sched, partials, out,
                               stream);
}

// ---- sampled dense-dense product ------------------------------------------------------------
// dot[u] = this lane's part of <g_row, x[src[u]]>: features f0, f0 + width, ... (< F), V at a time.
template <typename T, int V, int U>
__device__ __forceinline__ void partial_dots(const int64_t (&src)[U], const T* __restrict__ g_row,
                                             const T* __restrict__ x, int64_t x_stride, int64_t F,
                                             int64_t f0, int64_t width, acc_t<T> (&dot)[U]) {
#pragma unroll
  for (int u = 0; u < U; ++u) dot[u] = acc_t<T>(0);
  for (int64_t f = f0; f < F; f += width) {
    const Raw<T, V> g = load_raw<T, V>(g_row + f);
    Raw<T, V> xr[U];
#pragma unroll
    for (int u = 0; u < U; ++u) xr[u] = load_raw<T, V>(x + src[u] * x_stride + f);
#pragma unroll
    for (int u = 0; u < U; ++u) {
#pragma unroll
      for (int k = 0; k < V; ++k) dot[u] += raw_at(g, k) * raw_at(xr[u], k);
    }
  }
}

// grad_w[p + u] = scale * <g_row, x[col[p + u]]> for u < U. The group's lanes add their partial
// dots by an xor butterfly (a fixed order; every lane ends with the same total), then lane
// u mod G writes edge u.
template <typename T, typename I, int V, int U>
__device__ __forceinline__ void sddmm_edges(const I* __restrict__ col, const T* __restrict__ g_row,
                                            const T* __restrict__ x, int64_t x_stride, int64_t F,
                                            int log2_group, unsigned mask, int lane,
                                            acc_t<T> scale, int64_t p,
                                            acc_t<T>* __restrict__ grad_w) {
  using acc = acc_t<T>;
  int64_t src[U];
#pragma unroll
  for (int u = 0; u < U; ++u) src[u] = load_index(col + p + u);
  acc dot[U];
  partial_dots<T, V, U>(src, g_row, x, x_stride, F, int64_t(lane) * V, int64_t(V) << log2_group,
                        dot);
#pragma unroll
  for (int u = 0; u < U; ++u) {
    for (int o = (1 << log2_group) >> 1; o > 0; o >>= 1) dot[u] += __shfl_xor_sync(mask, dot[u], o);
  }
  const int lane_mask = (1 << log2_group) - 1;
#pragma unroll
  for (int u = 0; u < U; ++u)
    if ((u & lane_mask) == lane) grad_w[p + u] = dot[u] * scale;
}

template <typename T, typename I, int V>
__device__ __forceinline__ void sddmm_range(const I* __restrict__ col, const T* __restrict__ g_row,
                                            const T* __restrict__ x, int64_t x_stride, int64_t F,
                                            int log2_group, acc_t<T> scale, int64_t p, int64_t end,
                                            acc_t<T>* __restrict__ grad_w) {
  const unsigned mask = group_mask(log2_group);
  const int lane = int(threadIdx.x & ((1u << log2_group) - 1u));
  for (; p + kUnroll <= end; p += kUnroll)
    sddmm_edges<T, I, V, kUnroll>(col, g_row, x, x_stride, F, log2_group, mask, lane, scale, p,
                                  grad_w);
  for (; p < end; ++p)
    sddmm_edges<T, I, V, 1>(col, g_row, x, x_stride, F, log2_group, mask, lane, scale, p, grad_w);
}

template <typename acc>
__device__ __forceinline__ acc mean_scale(bool mean, int64_t deg) {
  return mean && deg > 0 ? acc(1) / acc(deg) : acc(1);
}

// One group per light row (every lane of a group exits together, as the shuffles need).
template <typename T, typename I, int V>
__global__ void __launch_bounds__(kBlock, kMinBlocks)
    sddmm_light_kernel(const I* __restrict__ rowptr, const I* __restrict__ col,
                       const T* __restrict__ grad_out, const T* __restrict__ x, int64_t x_stride,
                       int64_t num_rows, int64_t F, int log2_group, bool mean,
                       int64_t heavy_threshold, acc_t<T>* __restrict__ grad_w) {
  const int64_t row = (int64_t(blockIdx.x) * kBlock + threadIdx.x) >> log2_group;
  if (row >= num_rows) return;
  const int64_t begin = load_index(rowptr + row), end = load_index(rowptr + row + 1);
  if (end - begin > heavy_threshold) return;
  sddmm_range<T, I, V>(col, grad_out + row * F, x, x_stride, F, log2_group,
                       mean_scale<acc_t<T>>(mean, end - begin), begin, end, grad_w);
}

// One block per segment of a heavy row; its groups take fixed contiguous shares of the edges.
template <typename T, typename I, int V>
__global__ void __launch_bounds__(kBlock, kMinBlocks)
    sddmm_segment_kernel(RowSchedule sched, const I* __restrict__ rowptr,
                         const I* __restrict__ col, const T* __restrict__ grad_out,
                         const T* __restrict__ x, int64_t x_stride, int64_t F, int log2_group,
                         bool mean, acc_t<T>* __restrict__ grad_w) {
  const int64_t s = blockIdx.x;
  const int64_t row = sched.segment_row[s], seg_begin = sched.segment_begin[s];
  const Range r = group_share(seg_begin, sched.segment_end[s] - seg_begin,
                              int(threadIdx.x >> log2_group), kBlock >> log2_group);
  const int64_t deg = load_index(rowptr + row + 1) - load_index(rowptr + row);
  sddmm_range<T, I, V>(col, grad_out + row * F, x, x_stride, F, log2_group,
                       mean_scale<acc_t<T>>(mean, deg), r.begin, r.end, grad_w);
}

template <typename T, typename I, int V>
void launch_sddmm_vec(const I* rowptr, const I* col, const T* grad_out, const T* x,
                      int64_t x_stride, int64_t num_rows, int64_t F, bool mean,
                      const RowSchedule& sched, acc_t<T>* grad_w, cudaStream_t stream) {
  const int log2_group = choose_layout(F, V).log2_group;
  const int64_t blocks = ((num_rows << log2_group) + kBlock - 1) / kBlock;
  IOGNN_CHECK(blocks <= INT32_MAX && sched.num_segments <= INT32_MAX, ValueError,
              "propagate_backward_weight (CUDA): ", num_rows, " rows exceed one launch");
  if (blocks > 0) {
    sddmm_light_kernel<T, I, V><<<unsigned(blocks), kBlock, 0, stream>>>(
        rowptr, col, grad_out, x, x_stride, num_rows, F, log2_group, mean,
        sched.heavy_threshold, grad_w);
    IOGNN_CUDA_CHECK_LAUNCH("sddmm_light_kernel");
  }
  if (sched.num_segments == 0) return;
  sddmm_segment_kernel<T, I, V><<<unsigned(sched.num_segments), kBlock, 0, stream>>>(
      sched, rowptr, col, grad_out, x, x_stride, F, log2_group, mean, grad_w);
  IOGNN_CUDA_CHECK_LAUNCH("sddmm_segment_kernel");
}

}  // namespace iognn::cuda::propagate_detail

namespace iognn::cuda {

template <typename T, typename index_t>
void propagate_forward(const index_t* rowptr, const index_t* col, const acc_t<T>* weight,
                       const T* x, int64_t x_stride, int64_t num_dst, int64_t F,
                       PropagateReduce reduce, const RowSchedule& schedule, acc_t<T>* partials,
                       const T* bias, T* out, cudaStream_t stream) {
  using namespace propagate_detail;
  const ForwardEdges<T, index_t> edges{col, weight, reduce == PropagateReduce::kMean, bias};
  launch_gather<T, index_t>(rowptr, edges, x, x_stride, num_dst, F, schedule, partials, out,
                            stream);
}

template <typename T, typename index_t>
void propagate_backward_x(const index_t* colptr, const index_t* row, const index_t* csc2csr,
                          const index_t* rowptr, const acc_t<T>* weight, const T* grad_out,
                          int64_t num_src, int64_t F, PropagateReduce reduce,
                          const RowSchedule& schedule, acc_t<T>* partials, T* grad_x,
                          cudaStream_t stream) {
  using namespace propagate_detail;
  const BackwardXEdges<T, index_t> edges{row, csc2csr, rowptr, weight,
                                         reduce == PropagateReduce::kMean};
  launch_gather<T, index_t>(colptr, edges, grad_out, F, num_src, F, schedule, partials, grad_x,
                            stream);
}

template <typename T, typename index_t>
void propagate_backward_weight(const index_t* rowptr, const index_t* col, const T* grad_out,
                               const T* x, int64_t x_stride, int64_t num_dst, int64_t F,
                               PropagateReduce reduce, const RowSchedule& schedule,
                               acc_t<T>* grad_w, cudaStream_t stream) {
  using namespace propagate_detail;
  constexpr int V = kVec<T>;
  const bool mean = reduce == PropagateReduce::kMean;
  if (F % V == 0 && x_stride % V == 0 && is_aligned16(x) && is_aligned16(grad_out))
    launch_sddmm_vec<T, index_t, V>(rowptr, col, grad_out, x, x_stride, num_dst, F, mean,
                                    schedule, grad_w, stream);
  else
    launch_sddmm_vec<T, index_t, 1>(rowptr, col, grad_out, x, x_stride, num_dst, F, mean,
                                    schedule, grad_w, stream);
}

}  // namespace iognn::cuda

// Instantiates the three entry points for storage type T and both index types.
#define IOGNN_CUDA_PROPAGATE_INSTANTIATE_INDEX(T, I)                                               \
  template void propagate_forward<T, I>(const I*, const I*, const acc_t<T>*, const T*, int64_t,    \
                                        int64_t, int64_t, PropagateReduce, const RowSchedule&,     \
                                        acc_t<T>*, const T*, T*, cudaStream_t);                    \
  template void propagate_backward_x<T, I>(const I*, const I*, const I*, const I*,                 \
                                           const acc_t<T>*, const T*, int64_t, int64_t,            \
                                           PropagateReduce, const RowSchedule&, acc_t<T>*, T*,     \
                                           cudaStream_t);                                          \
  template void propagate_backward_weight<T, I>(const I*, const I*, const T*, const T*, int64_t,   \
                                                int64_t, int64_t, PropagateReduce,                 \
                                                const RowSchedule&, acc_t<T>*, cudaStream_t);
#define IOGNN_CUDA_PROPAGATE_INSTANTIATE(T)            \
  namespace iognn::cuda {                              \
  IOGNN_CUDA_PROPAGATE_INSTANTIATE_INDEX(T, int32_t)   \
  IOGNN_CUDA_PROPAGATE_INSTANTIATE_INDEX(T, int64_t)   \
  }

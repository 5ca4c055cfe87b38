// CUDA segment-reduction backward: grad_x gathered over the transposed CSR (one source row per
// group, its out-edges in transposed-CSR order, exactly the host kernel's arithmetic), and the entry
// points instantiated by segment_reduce_backward_*.cu. Sources of very large out-degree are split
// into segments and merged by the shared schedule like heavy forward rows.
#pragma once

#include <vector>

#include "kernels/cpu/segment_extremum.h"
#include "kernels/cuda/segment_reduce.h"
#include "kernels/cuda/segment_reduce_common.cuh"
#include "kernels/cuda/segment_reduce_schedule.cuh"

namespace iognn::cuda {
namespace sr {

template <typename T>
size_t backward_slot_bytes(int64_t F) {
  return align_up(size_t(F) * sizeof(acc_t<T>), 16);
}

template <typename T, typename index_t>
struct BackwardOp {
  using acc = acc_t<T>;
  template <int VEC>  // one lane's VEC consecutive features
  struct State {
    acc sum[VEC];
  };

  const index_t* colptr;
  const index_t* row;
  const index_t* rowptr;
  const T* x;
  int64_t x_stride;
  const T* out;
  const index_t* count_min;
  const index_t* count_max;
  const acc* mean;
  const T* grad_out;
  int64_t F;
  ReduceList reduces;
  bool need_x;       // var, std, min or max requested
  bool need_degree;  // mean, var or std requested
  T* grad_x;

  __device__ int64_t offset(int64_t j) const { return int64_t(colptr[j]); }

  template <int VEC>
  __device__ void init(State<VEC>& s) const {
#pragma unroll
    for (int e = 0; e < VEC; ++e) s.sum[e] = acc(0);
  }

  // min / max: only the edges holding the result o (or all, for a NaN result) get a share of the
  // gradient, so its gradient and count are only read when some lane-feature needs them.
  template <int VEC>
  __device__ void add_extremum(State<VEC>& s, const acc (&xj)[VEC], const Pack<T, VEC>& o,
                               const T* g, const index_t* count) const {
    bool any = false;
#pragma unroll
    for (int e = 0; e < VEC; ++e) any |= extremum_receives(xj[e], to_acc(o.v[e]));
    if (!any) return;
    const Pack<T, VEC> gp = load_pack<T, VEC>(g);
#pragma unroll
    for (int e = 0; e < VEC; ++e) {
      const acc oe = to_acc(o.v[e]);
      if (extremum_receives(xj[e], oe))
        s.sum[e] += extremum_share(oe, acc(count[e]), to_acc(gp.v[e]));
    }
  }

  // Adds the gradient that out-edge j -> i sends to x_j, all reductions in request order.
  template <int VEC>
  __device__ void add_edge(State<VEC>& s, const acc (&xj)[VEC], int64_t i, int64_t f0) const {
    const int64_t K = reduces.count;
    const acc deg =  // >= 1: the edge is in row i
        need_degree ? acc(int64_t(rowptr[i + 1]) - int64_t(rowptr[i])) : acc(1);
    const T* g_i = grad_out + i * K * F + f0;
    const T* out_i = out + i * K * F + f0;
    const int64_t aux = i * F + f0;
    // One pack per reduction, all loads issued before any is used: the gradient, except for min /
    // max, whose result is read first (add_extremum reads their gradient only where needed).
    Pack<T, VEC> v[kMaxReduces];
#pragma unroll
    for (int k = 0; k < kMaxReduces; ++k) {
      if (k >= K) continue;
      const auto code = SegmentReduce(reduces.code[k]);
      const bool extremum = code == SegmentReduce::kMin || code == SegmentReduce::kMax;
      v[k] = load_pack<T, VEC>((extremum ? out_i : g_i) + k * F);
    }
#pragma unroll
    for (int k = 0; k < kMaxReduces; ++k) {
      if (k >= K) continue;  // (not break: keeps the loop unrolled and v in registers)
      switch (SegmentReduce(reduces.code[k])) {
        case SegmentReduce::kSum:
#pragma unroll
          for (int e = 0; e < VEC; ++e) s.sum[e] += to_acc(v[k].v[e]);
          break;
        case SegmentReduce::kMean:
#pragma unroll
          for (int e = 0; e < VEC; ++e) s.sum[e] += to_acc(v[k].v[e]) / deg;
          break;
        case SegmentReduce::kMin:
          add_extremum(s, xj, v[k], g_i + k * F, count_min + aux);
          break;
        case SegmentReduce::kMax:
          add_extremum(s, xj, v[k], g_i + k * F, count_max + aux);
          break;
        case SegmentReduce::kVar:
#pragma unroll
          for (int e = 0; e < VEC; ++e)
            s.sum[e] += acc(2) * to_acc(v[k].v[e]) * (xj[e] - mean[aux + e]) / deg;
          break;
        case SegmentReduce::kStd: {
          const Pack<T, VEC> sd = load_pack<T, VEC>(out_i + k * F);
#pragma unroll
          for (int e = 0; e < VEC; ++e) {
            const acc std_i = to_acc(sd.v[e]);
            if (std_i > acc(0))  // masked or NaN std: PyG's clamp passes no gradient
              s.sum[e] += to_acc(v[k].v[e]) * (xj[e] - mean[aux + e]) / (deg * std_i);
          }
          break;
        }
      }
    }
  }

  // Folds source j's out-edges [begin, end) in transposed-CSR order.
  template <int VEC>
  __device__ void accumulate(State<VEC>& s, int64_t j, int64_t begin, int64_t end,
                             int64_t f0) const {
    acc xj[VEC];
    if (need_x) {
      const Pack<T, VEC> px = load_pack<T, VEC>(x + j * x_stride + f0);
#pragma unroll
      for (int e = 0; e < VEC; ++e) xj[e] = to_acc(px.v[e]);
    } else {
#pragma unroll
      for (int e = 0; e < VEC; ++e) xj[e] = acc(0);
    }
    int64_t q = begin;
    for (; q + kEdgeUnroll <= end; q += kEdgeUnroll) {
      int64_t i[kEdgeUnroll];
#pragma unroll
      for (int u = 0; u < kEdgeUnroll; ++u) i[u] = int64_t(row[q + u]);
#pragma unroll
      for (int u = 0; u < kEdgeUnroll; ++u) add_edge(s, xj, i[u], f0);
    }
    for (; q < end; ++q) add_edge(s, xj, int64_t(row[q]), f0);
  }

  template <int VEC>
  __device__ void merge(State<VEC>& a, const State<VEC>& b) const {
#pragma unroll
    for (int e = 0; e < VEC; ++e) a.sum[e] += b.sum[e];
  }

  // Workspace slot layout (backward_slot_bytes): acc sum[F].
  template <int VEC>
  __device__ void save(const State<VEC>& s, unsigned char* slot, int64_t f0) const {
    acc* v = reinterpret_cast<acc*>(slot) + f0;
#pragma unroll
    for (int e = 0; e < VEC; ++e) v[e] = s.sum[e];
  }

  template <int VEC>
  __device__ State<VEC> load(const unsigned char* slot, int64_t f0) const {
    const acc* v = reinterpret_cast<const acc*>(slot) + f0;
    State<VEC> s;
#pragma unroll
    for (int e = 0; e < VEC; ++e) s.sum[e] = v[e];
    return s;
  }

  template <int VEC>
  __device__ void finalize(const State<VEC>& s, int64_t j, int64_t, int64_t f0) const {
    Pack<T, VEC> o;
#pragma unroll
    for (int e = 0; e < VEC; ++e) o.v[e] = from_acc<T>(s.sum[e]);
    store_pack<T, VEC>(grad_x + j * F + f0, o);
  }
};

template <typename T>
HeavyPlan backward_plan(int64_t num_src, int64_t num_edges, int64_t F) {
  return make_heavy_plan(num_src, num_edges, backward_slot_bytes<T>(F),
                         size_t(F) * sizeof(acc_t<T>));
}

}  // namespace sr

template <typename T>
size_t segment_reduce_backward_workspace(int64_t num_src, int64_t num_edges, int64_t F) {
  return sr::backward_plan<T>(num_src, num_edges, F).bytes;
}

template <typename T, typename index_t>
void segment_reduce_backward(const index_t* colptr, const index_t* row, const index_t* rowptr,
                             const T* x, int64_t x_stride, const T* out, const index_t* count_min,
                             const index_t* count_max, const acc_t<T>* mean, const T* grad_out,
                             int64_t num_src, int64_t num_edges, int64_t F,
                             const std::vector<SegmentReduce>& reduces, T* grad_x,
                             void* workspace, size_t workspace_bytes, cudaStream_t stream) {
  const sr::ReduceList list = sr::make_reduce_list(reduces);
  const bool need_x = cpu::segment_reduce_backward_needs_x(reduces);
  const bool need_degree = cpu::segment_reduce_backward_needs_degree(reduces);
  const sr::BackwardOp<T, index_t> op{colptr,   row,       rowptr,    x,      x_stride,
                                      out,      count_min, count_max, mean,   grad_out,
                                      F,        list,      need_x,    need_degree, grad_x};
  const sr::HeavyPlan plan = sr::backward_plan<T>(num_src, num_edges, F);
  // 16-byte packs when every packed access (x, out, grad_out, grad_x) stays aligned.
  constexpr int kVec = 16 / sizeof(T);
  if (F % kVec == 0 && x_stride % kVec == 0 && sr::aligned16(x) && sr::aligned16(out) &&
      sr::aligned16(grad_out) && sr::aligned16(grad_x))
    sr::run_schedule<kVec>(op, colptr, num_src, plan, workspace, workspace_bytes, stream);
  else
    sr::run_schedule<1>(op, colptr, num_src, plan, workspace, workspace_bytes, stream);
}

}  // namespace iognn::cuda

// Instantiates the backward entry points for one storage type (both index types).
#define IOGNN_SEGMENT_REDUCE_BACKWARD_CUDA_FOR(T, I)                                         \
  template void iognn::cuda::segment_reduce_backward<T, I>(                                  \
      const I*, const I*, const I*, const T*, int64_t, const T*, const I*, const I*,           \
      const iognn::acc_t<T>*, const T*, int64_t, int64_t, int64_t,                           \
      const std::vector<iognn::cuda::SegmentReduce>&, T*, void*, size_t, cudaStream_t);
#define IOGNN_SEGMENT_REDUCE_BACKWARD_CUDA(T)                                                  \
  template size_t iognn::cuda::segment_reduce_backward_workspace<T>(int64_t, int64_t, int64_t); \
  IOGNN_SEGMENT_REDUCE_BACKWARD_CUDA_FOR(T, int32_t)                                           \
  IOGNN_SEGMENT_REDUCE_BACKWARD_CUDA_FOR(T, int64_t)

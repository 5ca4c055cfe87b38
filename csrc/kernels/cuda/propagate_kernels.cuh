// Kernel templates behind kernels/cuda/propagate.h: the propagate family's Ops on the shared CSR
// schedule (csr_schedule.cuh, which owns the lane geometry, the heavy-row segments and their
// merge). Included once per storage type by a unit CMake generates (IOGNN_CUDA_INSTANTIATIONS),
// which instantiates the public entry points (IOGNN_CUDA_PROPAGATE_INSTANTIATE).
//
// - GatherOp (forward over the CSR, backward_x over the transposed CSR): a lane folds VEC
//   features of w_p * x[src_p] over its row or segment, kUnroll gathers in flight; a segment's
//   sums go to its workspace slot, and the merge adds a row's slots in order before the epilogue
//   (row scale, then the forward's optional bias: a layer's, fused, so no extra pass over out).
// - SddmmOp (backward_weight): every edge's result is final, so there is nothing to merge. A group
//   spans all F features (kWholeRow): each lane dots its share of <grad_out_i, x_src> and the
//   group adds the shares by an xor butterfly (a fixed order).
#pragma once

#include <cstdint>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/csr_schedule.cuh"
#include "kernels/cuda/propagate.h"

namespace iognn::cuda::propagate_detail {

constexpr int kUnroll = 4;  // edges whose feature loads are in flight together
// Blocks per SM the register budget must allow: 4 x 256 threads leaves 64 registers a thread
// (ptxas otherwise aims at 32 and serialises the kUnroll gathers).
constexpr int kMinBlocks = 4;

template <typename I>
__device__ __forceinline__ int64_t load_index(const I* p) {
  return int64_t(__ldg(p));
}

template <typename acc>
__device__ __forceinline__ acc mean_scale(bool mean, int64_t deg) {
  return mean && deg > 0 ? acc(1) / acc(deg) : acc(1);
}

// ---- per-edge terms of the two gathers ------------------------------------------------------
// An edge functor gives, for a position p of the walked CSR, the dense row to gather (source)
// and its factor. factor() is asked only after the gathers of a batch are issued, so that its
// own loads (and the division of mean) overlap with them.

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
  __device__ __forceinline__ acc row_scale(int64_t deg) const { return mean_scale<acc>(mean, deg); }
  __device__ __forceinline__ acc finish(acc sum, acc scale, int64_t f) const {
    const acc scaled = mul_rn(sum, scale);
    return bias ? scaled + to_acc(bias[f]) : scaled;
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
    acc w = mean_scale<acc>(mean, load_index(rowptr + i + 1) - load_index(rowptr + i));
    if (weight) w = mul_rn(w, __ldg(weight + load_index(csc2csr + q)));
    return w;
  }
  __device__ __forceinline__ acc row_scale(int64_t) const { return acc(1); }
  __device__ __forceinline__ acc finish(acc sum, acc, int64_t) const { return sum; }
};

// ---- the gather -----------------------------------------------------------------------------
template <typename T, typename I, class Edges>
struct GatherOp : SumFold<acc_t<T>> {  // a slot holds one segment's unscaled sums
  using acc = acc_t<T>;
  static constexpr int kMinBlocks = propagate_detail::kMinBlocks;
  static constexpr bool kWholeRow = false, kMerges = true;
  template <int VEC>
  using State = typename SumFold<acc>::template State<VEC>;

  const I* offsets;
  Edges edges;
  const T* x;
  int64_t x_stride, F;
  T* out;

  __device__ int64_t offset(int64_t r) const { return load_index(offsets + r); }

  template <int VEC>
  __device__ void add(State<VEC>& s, const Pack<T, VEC>& v, acc w) const {
#pragma unroll
    for (int e = 0; e < VEC; ++e) s.sum[e] += mul_rn(w, to_acc(v.v[e]));
  }

  // sum += w_p * x[src_p, f0 .. f0 + VEC) for p in [begin, end), in CSR order.
  template <int VEC>
  __device__ void accumulate(State<VEC>& s, int64_t, int64_t begin, int64_t end, int64_t f0,
                             const GroupLanes&) const {
    const T* xf = x + f0;
    int64_t p = begin;
    for (; p + kUnroll <= end; p += kUnroll) {
      int64_t src[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) src[u] = edges.source(p + u);
      Pack<T, VEC> v[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) v[u] = load_pack<T, VEC>(xf + src[u] * x_stride);
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) add(s, v[u], edges.factor(p + u, src[u]));
    }
    for (; p < end; ++p) {
      const int64_t src = edges.source(p);
      add(s, load_pack<T, VEC>(xf + src * x_stride), edges.factor(p, src));
    }
  }

  template <int VEC>
  __device__ void finalize(const State<VEC>& s, int64_t r, int64_t deg, int64_t f0) const {
    const acc scale = edges.row_scale(deg);
    Pack<T, VEC> o;
#pragma unroll
    for (int e = 0; e < VEC; ++e) o.v[e] = from_acc<T>(edges.finish(s.sum[e], scale, f0 + e));
    store_pack<T, VEC>(out + r * F + f0, o);
  }
};

template <typename T>
size_t gather_slot_bytes(int64_t F) {
  return size_t(F) * sizeof(acc_t<T>);
}

// A propagate edge costs a lane one multiply-add: a graph whose longest row has at most 256 edges
// runs the light kernel alone (cora's has 169: one launch instead of six). Once a graph has longer
// rows the heavy passes run anyway, and cutting every row above 64 edges (segments of at least 32)
// balances the light kernel's lanes.
constexpr HeavyPolicy kPolicy{64, 32, kLightOnlyDegree};

template <typename T>
HeavyPlan gather_plan(int64_t num_rows, int64_t num_edges, int64_t max_degree, int64_t F) {
  return make_heavy_plan(num_rows, num_edges, gather_slot_bytes<T>(F), gather_slot_bytes<T>(F),
                         max_degree, kPolicy);
}

// The gather on the 16-byte path when every row start of x and out is 16-byte aligned.
template <typename T, typename I, class Edges>
void run_gather(const I* offsets, const Edges& edges, const T* x, int64_t x_stride,
                int64_t num_rows, int64_t num_edges, int64_t max_degree, int64_t F, T* out,
                void* workspace, size_t workspace_bytes, cudaStream_t stream, const char* name) {
  const GatherOp<T, I, Edges> op{{}, offsets, edges, x, x_stride, F, out};
  const HeavyPlan plan = gather_plan<T>(num_rows, num_edges, max_degree, F);
  constexpr int V = kVec<T>;
  if (F % V == 0 && x_stride % V == 0 && is_aligned16(x) && is_aligned16(out))
    run_schedule<V>(op, offsets, num_rows, plan, workspace, workspace_bytes, stream, name);
  else
    run_schedule<1>(op, offsets, num_rows, plan, workspace, workspace_bytes, stream, name);
}

// ---- the sampled dense-dense product --------------------------------------------------------
template <typename T, typename I>
struct SddmmOp {
  using acc = acc_t<T>;
  static constexpr int kMinBlocks = propagate_detail::kMinBlocks;
  static constexpr bool kWholeRow = true, kMerges = false;
  template <int VEC>
  struct State {};  // nothing carried: every edge's product is final

  const I* rowptr;
  const I* col;
  const T* grad_out;
  const T* x;
  int64_t x_stride, F;
  bool mean;
  acc* grad_w;

  __device__ int64_t offset(int64_t r) const { return load_index(rowptr + r); }
  template <int VEC>
  __device__ void init(State<VEC>&) const {}
  template <int VEC>
  __device__ void finalize(const State<VEC>&, int64_t, int64_t, int64_t) const {}

  // grad_w[p + u] = scale * <g_row, x[col[p + u]]> for u < U. Each lane dots features lane * VEC,
  // + G * VEC, ...; the group adds the lanes' dots by an xor butterfly (every lane ends with the
  // same total), then lane u mod G writes edge u.
  template <int VEC, int U>
  __device__ void edges_dot(const T* g_row, acc scale, int64_t p, const GroupLanes& lanes) const {
    int64_t src[U];
#pragma unroll
    for (int u = 0; u < U; ++u) src[u] = load_index(col + p + u);
    acc dot[U];
#pragma unroll
    for (int u = 0; u < U; ++u) dot[u] = acc(0);
    for (int64_t f = int64_t(lanes.lane) * VEC; f < F; f += int64_t(lanes.width) * VEC) {
      const Pack<T, VEC> g = load_pack<T, VEC>(g_row + f);
      Pack<T, VEC> xr[U];
#pragma unroll
      for (int u = 0; u < U; ++u) xr[u] = load_pack<T, VEC>(x + src[u] * x_stride + f);
#pragma unroll
      for (int u = 0; u < U; ++u) {
#pragma unroll
        for (int e = 0; e < VEC; ++e) dot[u] += to_acc(g.v[e]) * to_acc(xr[u].v[e]);
      }
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      for (int o = lanes.width >> 1; o > 0; o >>= 1)
        dot[u] += __shfl_xor_sync(lanes.mask, dot[u], o);
    }
#pragma unroll
    for (int u = 0; u < U; ++u)
      if (u % lanes.width == lanes.lane) grad_w[p + u] = dot[u] * scale;
  }

  template <int VEC>
  __device__ void accumulate(State<VEC>&, int64_t r, int64_t begin, int64_t end, int64_t,
                             const GroupLanes& lanes) const {
    const acc scale = mean_scale<acc>(mean, offset(r + 1) - offset(r));
    const T* g_row = grad_out + r * F;
    int64_t p = begin;
    for (; p + kUnroll <= end; p += kUnroll) edges_dot<VEC, kUnroll>(g_row, scale, p, lanes);
    for (; p < end; ++p) edges_dot<VEC, 1>(g_row, scale, p, lanes);
  }
};

inline HeavyPlan sddmm_plan(int64_t num_rows, int64_t num_edges, int64_t max_degree) {
  return make_heavy_plan(num_rows, num_edges, 0, 0, max_degree, kPolicy);
}

}  // namespace iognn::cuda::propagate_detail

namespace iognn::cuda {

template <typename T>
size_t propagate_gather_workspace(int64_t num_rows, int64_t num_edges, int64_t max_degree,
                                  int64_t F) {
  return propagate_detail::gather_plan<T>(num_rows, num_edges, max_degree, F).bytes;
}

template <typename T>
size_t propagate_sddmm_workspace(int64_t num_rows, int64_t num_edges, int64_t max_degree) {
  return propagate_detail::sddmm_plan(num_rows, num_edges, max_degree).bytes;
}

template <typename T, typename index_t>
void propagate_forward(const index_t* rowptr, const index_t* col, const acc_t<T>* weight,
                       const T* x, int64_t x_stride, int64_t num_dst, int64_t num_edges,
                       int64_t max_degree, int64_t F, PropagateReduce reduce, const T* bias, T* out,
                       void* workspace, size_t workspace_bytes, cudaStream_t stream) {
  using namespace propagate_detail;
  const ForwardEdges<T, index_t> edges{col, weight, reduce == PropagateReduce::kMean, bias};
  run_gather<T>(rowptr, edges, x, x_stride, num_dst, num_edges, max_degree, F, out, workspace,
                workspace_bytes, stream, "propagate");
}

template <typename T, typename index_t>
void propagate_backward_x(const index_t* colptr, const index_t* row, const index_t* csc2csr,
                          const index_t* rowptr, const acc_t<T>* weight, const T* grad_out,
                          int64_t num_src, int64_t num_edges, int64_t max_degree, int64_t F,
                          PropagateReduce reduce, T* grad_x, void* workspace,
                          size_t workspace_bytes, cudaStream_t stream) {
  using namespace propagate_detail;
  const BackwardXEdges<T, index_t> edges{row, csc2csr, rowptr, weight,
                                         reduce == PropagateReduce::kMean};
  run_gather<T>(colptr, edges, grad_out, F, num_src, num_edges, max_degree, F, grad_x, workspace,
                workspace_bytes, stream, "propagate_backward_x");
}

template <typename T, typename index_t>
void propagate_backward_weight(const index_t* rowptr, const index_t* col, const T* grad_out,
                               const T* x, int64_t x_stride, int64_t num_dst, int64_t num_edges,
                               int64_t max_degree, int64_t F, PropagateReduce reduce,
                               acc_t<T>* grad_w, void* workspace, size_t workspace_bytes,
                               cudaStream_t stream) {
  using namespace propagate_detail;
  const SddmmOp<T, index_t> op{rowptr, col, grad_out, x, x_stride, F,
                               reduce == PropagateReduce::kMean, grad_w};
  const HeavyPlan plan = sddmm_plan(num_dst, num_edges, max_degree);
  constexpr int V = kVec<T>;
  constexpr const char* name = "propagate_backward_weight";
  if (F % V == 0 && x_stride % V == 0 && is_aligned16(x) && is_aligned16(grad_out))
    run_schedule<V>(op, rowptr, num_dst, plan, workspace, workspace_bytes, stream, name);
  else
    run_schedule<1>(op, rowptr, num_dst, plan, workspace, workspace_bytes, stream, name);
}

}  // namespace iognn::cuda

// Instantiates the entry points for storage type T and both index types.
#define IOGNN_CUDA_PROPAGATE_INSTANTIATE_INDEX(T, I)                                               \
  template void propagate_forward<T, I>(const I*, const I*, const acc_t<T>*, const T*, int64_t,    \
                                        int64_t, int64_t, int64_t, int64_t, PropagateReduce,       \
                                        const T*, T*, void*, size_t, cudaStream_t);                \
  template void propagate_backward_x<T, I>(const I*, const I*, const I*, const I*,                 \
                                           const acc_t<T>*, const T*, int64_t, int64_t, int64_t,   \
                                           int64_t, PropagateReduce, T*, void*, size_t,            \
                                           cudaStream_t);                                          \
  template void propagate_backward_weight<T, I>(const I*, const I*, const T*, const T*, int64_t,   \
                                                int64_t, int64_t, int64_t, int64_t,                \
                                                PropagateReduce, acc_t<T>*, void*, size_t,         \
                                                cudaStream_t);
#define IOGNN_CUDA_PROPAGATE_INSTANTIATE(T)                                                 \
  namespace iognn::cuda {                                                                   \
  template size_t propagate_gather_workspace<T>(int64_t, int64_t, int64_t, int64_t);        \
  template size_t propagate_sddmm_workspace<T>(int64_t, int64_t, int64_t);                  \
  IOGNN_CUDA_PROPAGATE_INSTANTIATE_INDEX(T, int32_t)                                        \
  IOGNN_CUDA_PROPAGATE_INSTANTIATE_INDEX(T, int64_t)                                        \
  }

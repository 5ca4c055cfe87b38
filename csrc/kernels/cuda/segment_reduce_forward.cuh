// CUDA segment-reduction forward: the per-lane fold of a destination row's in-edges (all requested
// reductions at once) and the entry points instantiated by segment_reduce_forward_*.cu.
#pragma once

#include <type_traits>
#include <vector>

#include "kernels/cpu/segment_extremum.h"
#include "kernels/cuda/segment_reduce.h"
#include "kernels/cuda/segment_reduce_common.cuh"
#include "kernels/cuda/segment_reduce_schedule.cuh"

namespace iognn::cuda {
namespace sr {

// PyG's StdAggregation: sqrt(clamp(var, min=1e-5)), 0 where <= sqrt(1e-5); a NaN var stays NaN.
template <typename acc>
__device__ __forceinline__ acc masked_std(acc var) {
  const acc clamped = var < acc(1e-5) ? acc(1e-5) : var;
  acc s;
  if constexpr (std::is_same_v<acc, double>) {
    s = ::sqrt(clamped);
  } else {
    s = ::sqrtf(clamped);
  }
  return s <= acc(0.0031622776601683794) ? acc(0) : s;
}

// Workspace bytes of one forward State for all F features: four acc arrays (sum, sum of squares,
// min, max), then two int64 arrays (their tie counts). Written and read only for requested parts.
template <typename T>
size_t forward_slot_bytes(int64_t F) {
  return align_up(4 * size_t(F) * sizeof(acc_t<T>), 16) + align_up(2 * size_t(F) * 8, 16);
}

// kScaled: PNA's degree scalers in the epilogue, a kernel of its own so that the plain kernel keeps
// its registers (the scaled epilogue takes 16 more, 56 -> 72 for fp32 with int32 indices: in one
// kernel with a runtime switch, the plain forward on an H200 slowed by ~20%).
template <typename T, typename index_t, bool kScaled>
struct ForwardOp {
  using acc = acc_t<T>;
  static constexpr int kMinBlocks = 1;  // blocks per SM the kernels are compiled for (no cap)
  template <int VEC>  // one lane's VEC consecutive features
  struct State {
    acc sum[VEC], sq[VEC], lo[VEC], hi[VEC];
    int64_t lo_n[VEC], hi_n[VEC];  // edges holding the current min / max (segment_extremum.h)
  };

  const index_t* rowptr;
  const index_t* col;
  const T* x;
  int64_t x_stride;
  int64_t F;
  ReduceList reduces;
  bool want_sum, want_sq, want_min, want_max;
  T* out;
  index_t* count_min;
  index_t* count_max;
  acc* mean;
  DegreeScales<T> scales;  // kScaled: PNA's degree scalers, applied as the results are written

  __device__ int64_t offset(int64_t r) const { return int64_t(rowptr[r]); }

  template <int VEC>
  __device__ void init(State<VEC>& s) const {
#pragma unroll
    for (int e = 0; e < VEC; ++e) {
      s.sum[e] = s.sq[e] = acc(0);
      extremum_init<false>(s.lo[e], s.lo_n[e]);
      extremum_init<true>(s.hi[e], s.hi_n[e]);
    }
  }

  template <int VEC>
  __device__ void add(State<VEC>& s, const Pack<T, VEC>& pack) const {
#pragma unroll
    for (int e = 0; e < VEC; ++e) {
      const acc v = to_acc(pack.v[e]);
      if (want_sum) s.sum[e] += v;
      if (want_sq) s.sq[e] += mul_rn(v, v);
      if (want_min) extremum_add<false>(s.lo[e], s.lo_n[e], v);
      if (want_max) extremum_add<true>(s.hi[e], s.hi_n[e], v);
    }
  }

  // Folds edges [begin, end) in CSR order; kEdgeUnroll gathers are in flight before their use.
  template <int VEC>
  __device__ void accumulate(State<VEC>& s, int64_t, int64_t begin, int64_t end,
                             int64_t f0) const {
    const T* xf = x + f0;
    int64_t p = begin;
    for (; p + kEdgeUnroll <= end; p += kEdgeUnroll) {
      Pack<T, VEC> v[kEdgeUnroll];
#pragma unroll
      for (int u = 0; u < kEdgeUnroll; ++u)
        v[u] = load_pack<T, VEC>(xf + int64_t(col[p + u]) * x_stride);
#pragma unroll
      for (int u = 0; u < kEdgeUnroll; ++u) add(s, v[u]);
    }
    for (; p < end; ++p) add(s, load_pack<T, VEC>(xf + int64_t(col[p]) * x_stride));
  }

  // a <- a then b (b's edges come after a's in CSR order).
  template <int VEC>
  __device__ void merge(State<VEC>& a, const State<VEC>& b) const {
#pragma unroll
    for (int e = 0; e < VEC; ++e) {
      if (want_sum) a.sum[e] += b.sum[e];
      if (want_sq) a.sq[e] += b.sq[e];
      if (want_min) extremum_merge<false>(a.lo[e], a.lo_n[e], b.lo[e], b.lo_n[e]);
      if (want_max) extremum_merge<true>(a.hi[e], a.hi_n[e], b.hi[e], b.hi_n[e]);
    }
  }

  // Workspace slot layout (forward_slot_bytes): acc sum[F], sq[F], lo[F], hi[F], then (16-byte
  // aligned) int64 lo_n[F], hi_n[F]. Only the requested parts are written and read.
  template <int VEC>
  __device__ void save(const State<VEC>& s, unsigned char* slot, int64_t f0) const {
    acc* v = reinterpret_cast<acc*>(slot) + f0;
    int64_t* n = reinterpret_cast<int64_t*>(slot + value_bytes()) + f0;
#pragma unroll
    for (int e = 0; e < VEC; ++e) {
      if (want_sum) v[e] = s.sum[e];
      if (want_sq) v[F + e] = s.sq[e];
      if (want_min) {
        v[2 * F + e] = s.lo[e];
        n[e] = s.lo_n[e];
      }
      if (want_max) {
        v[3 * F + e] = s.hi[e];
        n[F + e] = s.hi_n[e];
      }
    }
  }

  template <int VEC>
  __device__ State<VEC> load(const unsigned char* slot, int64_t f0) const {
    const acc* v = reinterpret_cast<const acc*>(slot) + f0;
    const int64_t* n = reinterpret_cast<const int64_t*>(slot + value_bytes()) + f0;
    State<VEC> s;
    init(s);
#pragma unroll
    for (int e = 0; e < VEC; ++e) {
      if (want_sum) s.sum[e] = v[e];
      if (want_sq) s.sq[e] = v[F + e];
      if (want_min) {
        s.lo[e] = v[2 * F + e];
        s.lo_n[e] = n[e];
      }
      if (want_max) {
        s.hi[e] = v[3 * F + e];
        s.hi_n[e] = n[F + e];
      }
    }
    return s;
  }

  // Writes row r's K results (and the aux outputs) for features [f0, f0 + VEC), as the host does;
  // with degree scalers the results go to plain and each scaled copy to its block of out.
  template <int VEC>
  __device__ void finalize(const State<VEC>& s, int64_t r, int64_t deg, int64_t f0) const {
    const acc count = acc(deg > 1 ? deg : 1);
    acc avg[VEC], var[VEC];
#pragma unroll
    for (int e = 0; e < VEC; ++e) {
      avg[e] = s.sum[e] / count;
      var[e] = s.sq[e] / count - mul_rn(avg[e], avg[e]);
    }
    const int64_t K = reduces.count;
    T* res_r = (kScaled ? scales.plain : out) + r * K * F + f0;
#pragma unroll
    for (int k = 0; k < kMaxReduces; ++k) {
      if (k >= reduces.count) continue;
      Pack<T, VEC> o;
#pragma unroll
      for (int e = 0; e < VEC; ++e) {
        acc v = acc(0);
        switch (SegmentReduce(reduces.code[k])) {
          case SegmentReduce::kSum: v = s.sum[e]; break;
          case SegmentReduce::kMean: v = avg[e]; break;
          case SegmentReduce::kMin: v = deg == 0 ? acc(0) : s.lo[e]; break;
          case SegmentReduce::kMax: v = deg == 0 ? acc(0) : s.hi[e]; break;
          case SegmentReduce::kVar: v = var[e]; break;
          case SegmentReduce::kStd: v = masked_std(var[e]); break;
        }
        o.v[e] = from_acc<T>(v);
      }
      store_pack<T, VEC>(res_r + k * F, o);
      if constexpr (kScaled) {
        const int64_t S = scales.count;
        for (int64_t sc = 0; sc < S; ++sc) {  // T(result) * T(scale), rounded
          const acc factor = to_acc(scales.scale[r * S + sc]);
          Pack<T, VEC> q;
#pragma unroll
          for (int e = 0; e < VEC; ++e) q.v[e] = from_acc<T>(to_acc(o.v[e]) * factor);
          store_pack<T, VEC>(out + ((r * S + sc) * K + k) * F + f0, q);
        }
      }
    }
    const int64_t aux = r * F + f0;
#pragma unroll
    for (int e = 0; e < VEC; ++e) {
      if (count_min) count_min[aux + e] = index_t(s.lo_n[e]);
      if (count_max) count_max[aux + e] = index_t(s.hi_n[e]);
      if (mean) mean[aux + e] = avg[e];
    }
  }

  __device__ size_t value_bytes() const { return align_up(4 * size_t(F) * sizeof(acc), 16); }
};

template <typename T>
HeavyPlan forward_plan(int64_t num_dst, int64_t num_edges, int64_t F) {
  return make_heavy_plan(num_dst, num_edges, forward_slot_bytes<T>(F),
                         size_t(F) * sizeof(acc_t<T>));
}

}  // namespace sr

template <typename T>
size_t segment_reduce_forward_workspace(int64_t num_dst, int64_t num_edges, int64_t F) {
  return sr::forward_plan<T>(num_dst, num_edges, F).bytes;
}

template <typename T, typename index_t>
void segment_reduce_forward(const index_t* rowptr, const index_t* col, const T* x, int64_t x_stride,
                            int64_t num_dst, int64_t num_edges, int64_t F,
                            const std::vector<SegmentReduce>& reduces, T* out, index_t* count_min,
                            index_t* count_max, acc_t<T>* mean, DegreeScales<T> scales,
                            void* workspace, size_t workspace_bytes, cudaStream_t stream) {
  const sr::ReduceList list = sr::make_reduce_list(reduces);
  const bool want_sq = cpu::segment_reduce_needs_mean(reduces);
  const bool want_sum = want_sq || cpu::segment_reduce_has(reduces, SegmentReduce::kSum) ||
                        cpu::segment_reduce_has(reduces, SegmentReduce::kMean);
  const bool want_min = cpu::segment_reduce_has(reduces, SegmentReduce::kMin);
  const bool want_max = cpu::segment_reduce_has(reduces, SegmentReduce::kMax);
  const sr::HeavyPlan plan = sr::forward_plan<T>(num_dst, num_edges, F);
  // 16-byte packs when every packed access stays aligned; one element per lane otherwise.
  constexpr int kPack = kVec<T>;  // elements of one 16-byte pack
  const bool packed = F % kPack == 0 && x_stride % kPack == 0 && is_aligned16(x) &&
                      is_aligned16(out) && (!scales.scale || is_aligned16(scales.plain));
  const auto run = [&](auto scaled) {
    const sr::ForwardOp<T, index_t, decltype(scaled)::value> op{
        rowptr, col,       x,         x_stride, F,   list,  want_sum, want_sq,
        want_min, want_max, out, count_min, count_max, mean, scales};
    if (packed)
      sr::run_schedule<kPack>(op, rowptr, num_dst, plan, workspace, workspace_bytes, stream);
    else
      sr::run_schedule<1>(op, rowptr, num_dst, plan, workspace, workspace_bytes, stream);
  };
  if (scales.scale) run(std::true_type{});
  else run(std::false_type{});
}

}  // namespace iognn::cuda

// Instantiates the forward entry points for one storage type (both index types).
#define IOGNN_SEGMENT_REDUCE_FORWARD_CUDA_FOR(T, I)                                           \
  template void iognn::cuda::segment_reduce_forward<T, I>(                                    \
      const I*, const I*, const T*, int64_t, int64_t, int64_t, int64_t,                       \
      const std::vector<iognn::cuda::SegmentReduce>&, T*, I*, I*, iognn::acc_t<T>*,           \
      iognn::cuda::DegreeScales<T>, void*, size_t, cudaStream_t);
#define IOGNN_SEGMENT_REDUCE_FORWARD_CUDA(T)                                                   \
  template size_t iognn::cuda::segment_reduce_forward_workspace<T>(int64_t, int64_t, int64_t); \
  IOGNN_SEGMENT_REDUCE_FORWARD_CUDA_FOR(T, int32_t)                                            \
  IOGNN_SEGMENT_REDUCE_FORWARD_CUDA_FOR(T, int64_t)

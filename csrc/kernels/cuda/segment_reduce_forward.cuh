// CUDA segment-reduction forward: the per-lane fold of a destination row's in-edges (all requested
// reductions at once) and its entry points, instantiated per storage type by units CMake
// generates (IOGNN_CUDA_INSTANTIATIONS: segment_reduce_forward for the general kernels,
// segment_reduce_forward_parts for the common single-purpose ones).
#pragma once

#include <iterator>
#include <type_traits>
#include <utility>
#include <vector>

#include "kernels/segment_extremum.h"
#include "kernels/cuda/segment_reduce.h"
#include "kernels/cuda/segment_reduce_common.cuh"
#include "kernels/cuda/csr_schedule.cuh"

namespace iognn::cuda {
namespace sr {

// Workspace bytes of one forward State for all F features: four acc arrays (sum, sum of squares,
// min, max), then four int64 arrays (the min / max tie counts and first holders). Written and
// read only for requested parts.
template <typename T>
size_t forward_slot_bytes(int64_t F) {
  return align_up(4 * size_t(F) * sizeof(acc_t<T>), 16) + align_up(4 * size_t(F) * 8, 16);
}

// The running statistics a forward keeps (bits of ForwardOp's kParts). kPartFirst: the min / max
// also track their first holder's CSR position, for the tie codes (every set with min or max).
constexpr unsigned kPartSum = 1, kPartSq = 2, kPartMin = 4, kPartMax = 8, kPartFirst = 16;
// kParts values of the general kernels, whose parts are read from want_* at run time: without
// first holders (no min / max requested), or with them.
constexpr unsigned kRuntimeParts = 0, kRuntimeFirst = kPartFirst;

// The parts a list of reductions needs.
inline unsigned forward_parts(const std::vector<SegmentReduce>& reduces) {
  const bool sq = segment_reduce_needs_mean(reduces);
  const bool sum = sq || segment_reduce_has(reduces, SegmentReduce::kSum) ||
                   segment_reduce_has(reduces, SegmentReduce::kMean);
  const unsigned extrema = (segment_reduce_has(reduces, SegmentReduce::kMin) ? kPartMin : 0u) |
                           (segment_reduce_has(reduces, SegmentReduce::kMax) ? kPartMax : 0u);
  return (sum ? kPartSum : 0u) | (sq ? kPartSq : 0u) | extrema | (extrema ? kPartFirst : 0u);
}

// kScaled: PNA's degree scalers in the epilogue, a kernel of its own so that the plain kernel keeps
// its registers (the scaled epilogue takes 16 more; a runtime switch would make every forward pay
// them in warps in flight).
// kParts: the parts the kernel keeps, fixed at compile time so that a single reduction holds only
// its own State in registers (kRuntimeParts / kRuntimeFirst: switched by want_*). With all four
// a bf16 lane of 8 features needed 95 registers, a quarter of the SM's threads. The first-holder
// fields, once switched at run time, would hold their registers in PNA's scaled kernel too.
template <typename T, typename index_t, bool kScaled, unsigned kParts>
struct ForwardOp {
  using acc = acc_t<T>;
  // Blocks per SM the kernels are compiled for. The specialized kernels get a register cap (else
  // ptxas spends registers on deeper unrolling: fp32 sum took 85), as tight as spill-free allows:
  // 64 registers (min / max at most 4 features a lane: kExtremumVec), but 80 for min and max
  // together with 64-bit indices (their counts and first holders; 64 spilled 48 bytes, 300 with
  // the sums; the segment kernel of all four parts still spills 16 bytes at 80). None for the
  // general kernels.
  static constexpr int kExtrema = ((kParts & kPartMin) != 0) + ((kParts & kPartMax) != 0);
  static constexpr bool kRuntime = (kParts & ~kPartFirst) == 0;
  static constexpr int kMinBlocks = kRuntime                                ? 1
                                    : sizeof(index_t) == 8 && kExtrema == 2 ? 3
                                                                            : 4;
  static constexpr bool kWholeRow = false, kMerges = true;  // (csr_schedule.cuh)
  template <int VEC>  // one lane's VEC consecutive features
  struct State {
    acc sum[VEC], sq[VEC], lo[VEC], hi[VEC];
    // Edges holding the current min / max and the CSR position of the first (segment_extremum.h).
    index_t lo_n[VEC], hi_n[VEC], lo_first[VEC], hi_first[VEC];
  };

  const index_t* rowptr;
  const index_t* col;
  const T* x;
  int64_t x_stride;
  int64_t F;
  ReduceList reduces;
  bool want_sum, want_sq, want_min, want_max;  // read when kRuntime
  T* out;
  Ties ties;
  TieSlots tie_slots;
  acc* mean;
  DegreeScales<T> scales;  // kScaled: PNA's degree scalers, applied as the results are written

  // min / max come with first holders (forward_parts): a kernel without them has no extremum code.
  __device__ bool has(unsigned part, bool want) const {
    if ((part & (kPartMin | kPartMax)) != 0 && !tracks_first()) return false;
    return kRuntime ? want : (kParts & part) != 0;
  }
  __device__ bool has_sum() const { return has(kPartSum, want_sum); }
  __device__ bool has_sq() const { return has(kPartSq, want_sq); }
  __device__ bool has_min() const { return has(kPartMin, want_min); }
  __device__ bool has_max() const { return has(kPartMax, want_max); }
  __device__ static constexpr bool tracks_first() { return (kParts & kPartFirst) != 0; }

  __device__ int64_t offset(int64_t r) const { return int64_t(rowptr[r]); }

  template <int VEC>
  __device__ void init(State<VEC>& s) const {
#pragma unroll
    for (int e = 0; e < VEC; ++e) {
      s.sum[e] = s.sq[e] = acc(0);
      // (first: set by accumulate, which knows where the row's or segment's edges begin)
      extremum_init<false>(s.lo[e], s.lo_n[e], s.lo_first[e], index_t(0));
      extremum_init<true>(s.hi[e], s.hi_n[e], s.hi_first[e], index_t(0));
    }
  }

  // Folds the edge at CSR position p.
  template <int VEC>
  __device__ void add(State<VEC>& s, const Pack<T, VEC>& pack, int64_t p) const {
#pragma unroll
    for (int e = 0; e < VEC; ++e) {
      const acc v = to_acc(pack.v[e]);
      if (has_sum()) s.sum[e] += v;
      if (has_sq()) s.sq[e] += mul_rn(v, v);
      if (has_min()) extremum_add<false>(s.lo[e], s.lo_n[e], s.lo_first[e], v, index_t(p));
      if (has_max()) extremum_add<true>(s.hi[e], s.hi_n[e], s.hi_first[e], v, index_t(p));
    }
  }

  // Folds edges [begin, end) in CSR order; kEdgeUnroll gathers are in flight before their use.
  // Each batch loads its own column indices (every lane the same address), not a tile of them
  // per group (for_edge_batches): tiles take 9 more registers (a fifth of the warps in flight),
  // and the gathers need warps more than they need the index loads.
  template <int VEC>
  __device__ void accumulate(State<VEC>& s, int64_t, int64_t begin, int64_t end, int64_t f0,
                             const GroupLanes&) const {
    const T* xf = x + f0;
    if (has_min() || has_max()) {
#pragma unroll
      for (int e = 0; e < VEC; ++e) s.lo_first[e] = s.hi_first[e] = index_t(begin);
    }
    int64_t p = begin;
    for (; p + kEdgeUnroll <= end; p += kEdgeUnroll) {
      Pack<T, VEC> v[kEdgeUnroll];
#pragma unroll
      for (int u = 0; u < kEdgeUnroll; ++u)
        v[u] = load_pack<T, VEC>(xf + int64_t(col[p + u]) * x_stride);
#pragma unroll
      for (int u = 0; u < kEdgeUnroll; ++u) add(s, v[u], p + u);
    }
    for (; p < end; ++p) add(s, load_pack<T, VEC>(xf + int64_t(col[p]) * x_stride), p);
  }

  // a <- a then b (b's edges come after a's in CSR order).
  template <int VEC>
  __device__ void merge(State<VEC>& a, const State<VEC>& b) const {
#pragma unroll
    for (int e = 0; e < VEC; ++e) {
      if (has_sum()) a.sum[e] += b.sum[e];
      if (has_sq()) a.sq[e] += b.sq[e];
      if (has_min())
        extremum_merge<false>(a.lo[e], a.lo_n[e], a.lo_first[e], b.lo[e], b.lo_n[e],
                              b.lo_first[e]);
      if (has_max())
        extremum_merge<true>(a.hi[e], a.hi_n[e], a.hi_first[e], b.hi[e], b.hi_n[e],
                             b.hi_first[e]);
    }
  }

  // Workspace slot layout (forward_slot_bytes): acc sum[F], sq[F], lo[F], hi[F], then (16-byte
  // aligned) int64 lo_n[F], hi_n[F], lo_first[F], hi_first[F]. Only the requested parts are
  // written and read.
  template <int VEC>
  __device__ void save(const State<VEC>& s, unsigned char* slot, int64_t f0) const {
    acc* v = reinterpret_cast<acc*>(slot) + f0;
    int64_t* n = reinterpret_cast<int64_t*>(slot + value_bytes()) + f0;
#pragma unroll
    for (int e = 0; e < VEC; ++e) {
      if (has_sum()) v[e] = s.sum[e];
      if (has_sq()) v[F + e] = s.sq[e];
      if (has_min()) {
        v[2 * F + e] = s.lo[e];
        n[e] = s.lo_n[e];
        n[2 * F + e] = s.lo_first[e];
      }
      if (has_max()) {
        v[3 * F + e] = s.hi[e];
        n[F + e] = s.hi_n[e];
        n[3 * F + e] = s.hi_first[e];
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
      if (has_sum()) s.sum[e] = v[e];
      if (has_sq()) s.sq[e] = v[F + e];
      if (has_min()) {
        s.lo[e] = v[2 * F + e];
        s.lo_n[e] = index_t(n[e]);
        s.lo_first[e] = index_t(n[2 * F + e]);
      }
      if (has_max()) {
        s.hi[e] = v[3 * F + e];
        s.hi_n[e] = index_t(n[F + e]);
        s.hi_first[e] = index_t(n[3 * F + e]);
      }
    }
    return s;
  }

  // The tie codes of one extremum for features [f0, f0 + VEC) of row r (in-edges from begin).
  template <int VEC>
  __device__ void write_ties(int slot, const acc (&value)[VEC], const index_t (&count)[VEC],
                             const index_t (&first)[VEC], int64_t r, int64_t begin,
                             int64_t f0) const {
    Pack<uint8_t, VEC> lead, rest;
    const int64_t w = tie_wide_row(begin);
#pragma unroll
    for (int e = 0; e < VEC; ++e) {
      const uint16_t code = tie_code(value[e], int64_t(count[e]), int64_t(first[e]) - begin);
      lead.v[e] = tie_lead(code);
      rest.v[e] = tie_rest(code);
      if (tie_saturated(code) && w < ties.wide_rows)
        ties.wide[(slot * ties.wide_rows + w) * F + f0 + e] = int64_t(count[e]);
    }
    const int64_t at = (r * tie_slots.count + slot) * F + f0;
    stream_pack<uint8_t, VEC>(ties.lead + at, lead);
    stream_pack<uint8_t, VEC>(ties.rest + at, rest);
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
      stream_pack<T, VEC>(res_r + k * F, o);
      if constexpr (kScaled) {
        const int64_t S = scales.count;
        for (int64_t sc = 0; sc < S; ++sc) {  // T(result) * T(scale), rounded
          const acc factor = to_acc(scales.scale[r * S + sc]);
          Pack<T, VEC> q;
#pragma unroll
          for (int e = 0; e < VEC; ++e) q.v[e] = from_acc<T>(to_acc(o.v[e]) * factor);
          stream_pack<T, VEC>(out + ((r * S + sc) * K + k) * F + f0, q);
        }
      }
    }
    const int64_t begin = offset(r);
    if (has_min()) write_ties(tie_slots.min, s.lo, s.lo_n, s.lo_first, r, begin, f0);
    if (has_max()) write_ties(tie_slots.max, s.hi, s.hi_n, s.hi_first, r, begin, f0);
    if (mean) {
#pragma unroll
      for (int e = 0; e < VEC; ++e) mean[r * F + f0 + e] = avg[e];
    }
  }

  __device__ size_t value_bytes() const { return align_up(4 * size_t(F) * sizeof(acc), 16); }
};

template <typename T>
HeavyPlan forward_plan(int64_t num_dst, int64_t num_edges, int64_t max_degree, int64_t F) {
  return make_heavy_plan(num_dst, num_edges, forward_slot_bytes<T>(F),
                         size_t(F) * sizeof(acc_t<T>), max_degree);
}

// One call's forward arguments, before the kernels' compile-time choices.
template <typename T, typename index_t>
struct ForwardCall {
  const index_t* rowptr;
  const index_t* col;
  const T* x;
  int64_t x_stride, num_dst, F;
  const std::vector<SegmentReduce>* reduces;
  T* out;
  Ties ties;
  acc_t<T>* mean;
  DegreeScales<T> scales;
  HeavyPlan plan;
  void* workspace;
  size_t workspace_bytes;
  cudaStream_t stream;

  template <bool kScaled, unsigned kParts>
  ForwardOp<T, index_t, kScaled, kParts> op() const {
    const unsigned parts = forward_parts(*reduces);
    return {rowptr,
            col,
            x,
            x_stride,
            F,
            make_reduce_list(*reduces),
            (parts & kPartSum) != 0,
            (parts & kPartSq) != 0,
            (parts & kPartMin) != 0,
            (parts & kPartMax) != 0,
            out,
            ties,
            segment_reduce_tie_slots(*reduces),
            mean,
            scales};
  }
  // The whole schedule, VEC features per lane.
  template <int VEC, bool kScaled, unsigned kParts>
  void run() const {
    run_schedule<VEC>(op<kScaled, kParts>(), rowptr, num_dst, plan, workspace, workspace_bytes,
                      stream, "segment_reduce");
  }
};

// The unscaled, packed forward of one fixed set of parts (kSpecializedParts); instantiated by the
// generated segment_reduce_forward_parts units (declared extern where the entry points are
// instantiated), so that these kernels build in parallel with the general ones.
constexpr unsigned kSumParts = kPartSum, kVarParts = kPartSum | kPartSq,
                   kMinParts = kPartMin | kPartFirst, kMaxParts = kPartMax | kPartFirst,
                   kMinMaxParts = kPartMin | kPartMax | kPartFirst,
                   kAllParts = kPartSum | kPartSq | kPartMin | kPartMax | kPartFirst;
constexpr unsigned kSpecializedParts[] = {kSumParts,  kVarParts,    kMinParts,
                                          kMaxParts, kMinMaxParts, kAllParts};
template <typename T, typename index_t, unsigned kParts>
void run_specialized_forward(const ForwardCall<T, index_t>& call) {
  constexpr bool kExtrema = (kParts & (kPartMin | kPartMax)) != 0;
  call.template run<kExtrema ? kExtremumVec<T> : kVec<T>, false, kParts>();
}

// Runs the specialized kernels when `parts` is one of kSpecializedParts (returns false if not).
template <typename T, typename index_t, size_t... k>
bool try_specialized_forward(const ForwardCall<T, index_t>& call, unsigned parts,
                             std::index_sequence<k...>) {
  return ((parts == kSpecializedParts[k] &&
           (run_specialized_forward<T, index_t, kSpecializedParts[k]>(call), true)) ||
          ...);
}

}  // namespace sr

template <typename T>
size_t segment_reduce_forward_workspace(int64_t num_dst, int64_t num_edges, int64_t max_degree,
                                        int64_t F) {
  return sr::forward_plan<T>(num_dst, num_edges, max_degree, F).bytes;
}

template <typename T, typename index_t>
void segment_reduce_forward(const index_t* rowptr, const index_t* col, const T* x, int64_t x_stride,
                            int64_t num_dst, int64_t num_edges, int64_t max_degree, int64_t F,
                            const std::vector<SegmentReduce>& reduces, T* out, Ties ties,
                            acc_t<T>* mean, DegreeScales<T> scales, void* workspace,
                            size_t workspace_bytes, cudaStream_t stream) {
  const HeavyPlan plan = sr::forward_plan<T>(num_dst, num_edges, max_degree, F);
  const sr::ForwardCall<T, index_t> call{rowptr, col,  x,      x_stride,  num_dst,
                                         F,      &reduces, out, ties, mean,
                                         scales, plan, workspace, workspace_bytes, stream};
  // 16-byte packs when every packed access stays aligned (at most kExtremumVec features a lane
  // with min / max); one element per lane otherwise.
  constexpr int kPack = kVec<T>;  // elements of one 16-byte pack
  constexpr int kExtremumPack = sr::kExtremumVec<T>;
  const bool packed = F % kPack == 0 && x_stride % kPack == 0 && is_aligned16(x) &&
                      is_aligned16(out) && (!scales.scale || is_aligned16(scales.plain)) &&
                      sr::tie_planes_aligned(ties, kPack);
  const unsigned parts = sr::forward_parts(reduces);
  const bool first = (parts & sr::kPartFirst) != 0;
  // The general kernels (parts switched at run time), with or without the scaled epilogue.
  const auto run_general = [&](auto scaled) {
    constexpr bool kScaled = decltype(scaled)::value;
    if (first) {
      if (packed) call.template run<kExtremumPack, kScaled, sr::kRuntimeFirst>();
      else call.template run<1, kScaled, sr::kRuntimeFirst>();
    } else {
      if (packed) call.template run<kPack, kScaled, sr::kRuntimeParts>();
      else call.template run<1, kScaled, sr::kRuntimeParts>();
    }
  };
  if (scales.scale) return run_general(std::true_type{});
  constexpr size_t kSpecialized = std::size(sr::kSpecializedParts);
  if (packed &&
      sr::try_specialized_forward(call, parts, std::make_index_sequence<kSpecialized>{}))
    return;
  run_general(std::false_type{});
}

}  // namespace iognn::cuda

// Instantiations of the specialized forwards for one storage type (both index types); PREFIX is
// `extern` for the declarations or empty for the definitions.
#define IOGNN_SEGMENT_REDUCE_FORWARD_PARTS_ONE(PREFIX, T, I, PARTS) \
  PREFIX template void iognn::cuda::sr::run_specialized_forward<T, I, PARTS>(     \
      const iognn::cuda::sr::ForwardCall<T, I>&);
#define IOGNN_SEGMENT_REDUCE_FORWARD_PARTS_FOR(PREFIX, T, I)                      \
  IOGNN_SEGMENT_REDUCE_FORWARD_PARTS_ONE(PREFIX, T, I, iognn::cuda::sr::kSumParts)    \
  IOGNN_SEGMENT_REDUCE_FORWARD_PARTS_ONE(PREFIX, T, I, iognn::cuda::sr::kVarParts)    \
  IOGNN_SEGMENT_REDUCE_FORWARD_PARTS_ONE(PREFIX, T, I, iognn::cuda::sr::kMinParts)    \
  IOGNN_SEGMENT_REDUCE_FORWARD_PARTS_ONE(PREFIX, T, I, iognn::cuda::sr::kMaxParts)    \
  IOGNN_SEGMENT_REDUCE_FORWARD_PARTS_ONE(PREFIX, T, I, iognn::cuda::sr::kMinMaxParts) \
  IOGNN_SEGMENT_REDUCE_FORWARD_PARTS_ONE(PREFIX, T, I, iognn::cuda::sr::kAllParts)
#define IOGNN_SEGMENT_REDUCE_FORWARD_PARTS(PREFIX, T)          \
  IOGNN_SEGMENT_REDUCE_FORWARD_PARTS_FOR(PREFIX, T, int32_t) \
  IOGNN_SEGMENT_REDUCE_FORWARD_PARTS_FOR(PREFIX, T, int64_t)

// Instantiates the forward entry points for one storage type (both index types).
#define IOGNN_SEGMENT_REDUCE_FORWARD_CUDA_FOR(T, I)                                           \
  template void iognn::cuda::segment_reduce_forward<T, I>(                                    \
      const I*, const I*, const T*, int64_t, int64_t, int64_t, int64_t, int64_t,              \
      const std::vector<iognn::SegmentReduce>&, T*, iognn::Ties, iognn::acc_t<T>*, \
      iognn::DegreeScales<T>, void*, size_t, cudaStream_t);
#define IOGNN_SEGMENT_REDUCE_FORWARD_CUDA(T)                                                   \
  IOGNN_SEGMENT_REDUCE_FORWARD_PARTS(extern, T)                                                \
  template size_t iognn::cuda::segment_reduce_forward_workspace<T>(int64_t, int64_t, int64_t,  \
                                                                    int64_t);                  \
  IOGNN_SEGMENT_REDUCE_FORWARD_CUDA_FOR(T, int32_t)                                            \
  IOGNN_SEGMENT_REDUCE_FORWARD_CUDA_FOR(T, int64_t)

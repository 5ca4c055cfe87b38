// CUDA segment-reduction backward: per-destination gradient coefficients, then grad_x gathered over
// the transposed CSR (one source row per group, its out-edges in transposed-CSR order), and the
// entry points (instantiated per storage type by a unit CMake generates). Sources of very large
// out-degree are split into segments and merged by the shared schedule like heavy forward rows.
#pragma once

#include <algorithm>
#include <type_traits>
#include <vector>

#include "kernels/segment_extremum.h"
#include "kernels/cuda/segment_reduce.h"
#include "kernels/cuda/segment_reduce_common.cuh"
#include "kernels/cuda/csr_schedule.cuh"

namespace iognn::cuda {
namespace sr {

// The backward in two steps. (1) coefficients_kernel, one thread per (destination i, feature f),
// coalesced: folds the gradients of the reductions that are linear in x_j into at most two
// coefficients, so that the gradient edge j -> i sends to x_j is
//     a[i,f] + b[i,f] * (x_j - mean[i,f])   +   the min / max shares,
//   a = g_sum + g_mean / deg_i,   b = 2 g_var / deg_i + g_std / (deg_i std_i)  (std_i > 0, else 0).
// b is tabulated for var / std. a is tabulated when sum and mean are both requested, or one of
// them with var / std: then a - b * mean is tabulated instead of a, so an edge reads two
// coefficients, not three (b * x_j - b * mean_i is also how PyG's autograd sums the two paths of
// E[x^2] - E[x]^2). A single sum or mean without var / std is read straight from grad_out (mean
// scaled by 1 / deg_i); var / std alone read b and the forward's mean. (2) The schedule's gather
// over the transposed CSR, one pass (kernel) per part: the linear part, then min and max together
// (split_backward; the second adds the first's sums). Each pass takes a batch of out-edges at a
// time (EdgeRef: the destination, and its in-degree or the edge's position in the destination's
// row) with every load of the batch issued before any is used; the min / max pass loads the
// batches' indices a tile at a time. The linear pass loads a or g, b, maybe mean. The min / max
// pass loads the codes' lead bytes (1 byte a feature); then the gradient only where a lead byte
// may name the edge as the sole holder or is tagged, the rest byte only in long rows and for
// tagged codes, and the result only where tagged (segment_extremum.h).
// (Tabulating the shares extremum_share(o, count, g) in step 1 instead, with every code tagged,
// would make an edge read the result and the share, 2 * sizeof(acc) bytes a feature, where the
// codes read 1-2, and would keep two more [num_dst, F] fp32 tables alive.)
struct BackwardTable {
  // a, b: [num_dst, F] acc arrays when present; partial: [num_src, F] acc, the linear part of
  // grad_x between the two passes of a split backward when T is narrower than acc (else grad_x
  // itself holds it).
  size_t a_offset = 0, b_offset = 0, partial_offset = 0, bytes = 0;
  bool has_a = false, has_b = false, has_partial = false;
};

// Whether the backward runs in two passes (split_backward): reductions linear in x_j and min / max
// together.
inline bool split_backward(const std::vector<SegmentReduce>& reduces) {
  return segment_reduce_tie_slots(reduces).count > 0 &&
         !segment_reduce_extrema_only(reduces);
}

template <typename T>
BackwardTable backward_table(int64_t num_src, int64_t num_dst, int64_t F,
                             const std::vector<SegmentReduce>& reduces) {
  BackwardTable t;
  const bool sum = segment_reduce_has(reduces, SegmentReduce::kSum);
  const bool mean = segment_reduce_has(reduces, SegmentReduce::kMean);
  t.has_b = segment_reduce_needs_mean(reduces);
  t.has_a = (sum && mean) || (t.has_b && (sum || mean));
  t.has_partial = split_backward(reduces) && !std::is_same_v<T, acc_t<T>>;
  const auto place = [&](bool present, int64_t rows, size_t& offset) {
    offset = t.bytes;
    if (present) t.bytes += align_up(size_t(rows) * size_t(F) * sizeof(acc_t<T>), 256);
  };
  place(t.has_a, num_dst, t.a_offset);
  place(t.has_b, num_dst, t.b_offset);
  place(t.has_partial, num_src, t.partial_offset);
  return t;
}

// Reduction slots (their k in out / grad_out rows) that the gather reads, -1 when absent.
struct BackwardSlots {
  int direct = -1;           // a single sum or mean read from grad_out (no table)
  bool direct_mean = false;  // ... and it is the mean (divide by deg_i)
  int min = -1, max = -1, var = -1, std = -1, sum = -1, mean = -1;
};

inline BackwardSlots backward_slots(const std::vector<SegmentReduce>& reduces) {
  BackwardSlots s;
  for (size_t k = 0; k < reduces.size(); ++k) {
    switch (reduces[k]) {
      case SegmentReduce::kSum: s.sum = int(k); break;
      case SegmentReduce::kMean: s.mean = int(k); break;
      case SegmentReduce::kMin: s.min = int(k); break;
      case SegmentReduce::kMax: s.max = int(k); break;
      case SegmentReduce::kVar: s.var = int(k); break;
      case SegmentReduce::kStd: s.std = int(k); break;
    }
  }
  if ((s.sum >= 0) != (s.mean >= 0) && s.var < 0 && s.std < 0) {
    s.direct = s.sum >= 0 ? s.sum : s.mean;
    s.direct_mean = s.mean >= 0;
  }
  return s;
}

// VEC consecutive acc values (coefficients, means) in loads of up to 16 bytes; the address is
// aligned to min(16, VEC * sizeof(V)) bytes.
template <int VEC, typename V>
__device__ __forceinline__ void load_values(const V* p, V (&v)[VEC]) {
  constexpr int kBytes = VEC * int(sizeof(V));
  if constexpr (kBytes <= 16) {
    const Pack<V, VEC> pk = load_pack<V, VEC>(p);
#pragma unroll
    for (int e = 0; e < VEC; ++e) v[e] = pk.v[e];
  } else {
    constexpr int kPer = 16 / int(sizeof(V));
#pragma unroll
    for (int h = 0; h < VEC / kPer; ++h) {
      const Pack<V, kPer> pk = load_pack<V, kPer>(p + h * kPer);
#pragma unroll
      for (int e = 0; e < kPer; ++e) v[h * kPer + e] = pk.v[e];
    }
  }
}

// The counterpart of load_values: VEC acc values in stores of up to 16 bytes (same alignment);
// kStream: evict-first stores (stream_pack), for values this kernel does not read back.
template <int VEC, bool kStream = false, typename V>
__device__ __forceinline__ void store_values(V* p, const V (&v)[VEC]) {
  constexpr int kPer = VEC * int(sizeof(V)) <= 16 ? VEC : 16 / int(sizeof(V));
#pragma unroll
  for (int h = 0; h < VEC / kPer; ++h) {
    Pack<V, kPer> pk;
#pragma unroll
    for (int e = 0; e < kPer; ++e) pk.v[e] = v[h * kPer + e];
    if constexpr (kStream) stream_pack<V, kPer>(p + h * kPer, pk);
    else store_pack<V, kPer>(p + h * kPer, pk);
  }
}

// Step 1: a and b for every (i, f) (nullptr: not tabulated); rows without in-edges get 0 (no edge
// reads them). One thread per (i, VEC consecutive features), coalesced, VEC-wide loads and stores
// (F % VEC == 0, rows aligned for them): the kernel reads four [num_dst, F] arrays and writes two.
template <typename T, typename index_t, int VEC>
__global__ void coefficients_kernel(const index_t* rowptr, const T* out, const T* grad_out,
                                    const acc_t<T>* mean, int64_t mean_stride, int64_t num_dst,
                                    int64_t F, int64_t K,
                                    BackwardSlots slots, acc_t<T>* a, acc_t<T>* b) {
  using acc = acc_t<T>;
  const int64_t chunks = F / VEC;
  const int64_t step = int64_t(gridDim.x) * blockDim.x;
  for (int64_t n = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; n < num_dst * chunks;
       n += step) {
    const int64_t i = n / chunks, f0 = (n - i * chunks) * VEC, at = i * F + f0;
    const int64_t deg_n = int64_t(rowptr[i + 1]) - int64_t(rowptr[i]);
    const acc deg = acc(deg_n > 0 ? deg_n : 1);
    const T* g = grad_out + i * K * F + f0;
    const auto grad = [&](int slot) { return load_pack<T, VEC>(g + slot * F); };
    acc bv[VEC], av[VEC];
#pragma unroll
    for (int e = 0; e < VEC; ++e) bv[e] = av[e] = acc(0);
    if (b) {
      if (slots.var >= 0) {
        const Pack<T, VEC> gv = grad(slots.var);
#pragma unroll
        for (int e = 0; e < VEC; ++e) bv[e] += acc(2) * to_acc(gv.v[e]) / deg;
      }
      if (slots.std >= 0) {
        const Pack<T, VEC> gs = grad(slots.std);
        const Pack<T, VEC> o = load_pack<T, VEC>(out + i * K * F + slots.std * F + f0);
#pragma unroll
        for (int e = 0; e < VEC; ++e) {
          const acc std_i = to_acc(o.v[e]);
          if (std_i > acc(0))  // masked or NaN std: PyG's clamp passes no gradient
            bv[e] += to_acc(gs.v[e]) / (deg * std_i);
        }
      }
    }
    if (a) {
      if (b) {  // folded: see above
        acc m[VEC];
        load_values<VEC>(mean + i * mean_stride + f0, m);
#pragma unroll
        for (int e = 0; e < VEC; ++e) av[e] = -bv[e] * m[e];
      }
      if (slots.sum >= 0) {
        const Pack<T, VEC> gs = grad(slots.sum);
#pragma unroll
        for (int e = 0; e < VEC; ++e) av[e] += to_acc(gs.v[e]);
      }
      if (slots.mean >= 0) {
        const Pack<T, VEC> gm = grad(slots.mean);
#pragma unroll
        for (int e = 0; e < VEC; ++e) av[e] += to_acc(gm.v[e]) / deg;
      }
    }
    if (deg_n == 0) {
#pragma unroll
      for (int e = 0; e < VEC; ++e) bv[e] = av[e] = acc(0);
    }
    if (b) store_values<VEC>(b + at, bv);
    if (a) store_values<VEC>(a + at, av);
  }
}

// The gradient of the unscaled results of a scaled forward, one thread per (i, c), coalesced.
template <typename T>
__global__ void fold_scales_kernel(const T* grad_out, const T* scale, int64_t num_dst,
                                   int64_t num_scales, int64_t KF, T* g) {
  using acc = acc_t<T>;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t n = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; n < num_dst * KF; n += stride) {
    const int64_t i = n / KF, c = n - i * KF;
    acc sum = acc(0);
    for (int64_t s = 0; s < num_scales; ++s) {  // scaler order, product then sum as the host does
      const int64_t is = i * num_scales + s;
      sum += mul_rn(to_acc(scale[is]), to_acc(grad_out[is * KF + c]));
    }
    g[n] = from_acc<T>(sum);
  }
}

// One out-edge j -> i as the gather sees it: i, and `aux`: for the min / max codes the edge's
// position in i's CSR row (clamped to kTieTagged), plus kLongRow when i has more in-edges than a
// lead byte tells apart; or i's in-degree for a mean read from grad_out.
template <typename index_t>
struct EdgeRef {
  index_t dst;
  index_t aux;
};

template <typename index_t>
__device__ __forceinline__ EdgeRef<index_t> shuffle_from(const GroupLanes& lanes,
                                                         EdgeRef<index_t> e, int src) {
  return {shuffle_from(lanes, e.dst, src), shuffle_from(lanes, e.aux, src)};
}

enum class EdgeAux { kNone, kDegree, kPosition };
constexpr int64_t kLongRow = int64_t(kTieTagged) << 1;  // above any clamped position

template <typename T>
size_t backward_slot_bytes(int64_t F) {
  return align_up(size_t(F) * sizeof(acc_t<T>), 16);
}

// One pass of the backward: kExtrema, the min / max pass (at most kExtremumVec features a lane),
// else the linear pass (sum, mean, var, std). Reductions of both kinds run both passes, the
// linear one first (split_backward): one kernel for both, under the register cap the linear
// gather needs, spills the extremum sweep's loads and cannot pipeline them.
template <typename T, typename index_t, bool kExtrema>
struct BackwardOp : SumFold<acc_t<T>> {  // slot layout (backward_slot_bytes): acc sum[F]
  using acc = acc_t<T>;
  // Out-edges per batch, all their loads in flight at once (halved for 8-wide packs; the
  // extremum pass halves it again for min and max together).
  template <int VEC>
  static constexpr int kLinearBatch = VEC >= 8 ? 2 : 4;
  static constexpr int kExtremumBatch = 2;
  // Blocks of kLightThreads per SM the light / segment kernels are compiled for, a register cap:
  // 3 (~80 registers, 24 warps per SM in flight to hide the gathers) for the linear pass, 4 (64,
  // 32 warps) for the extremum pass (ptxas spills a little there, yet the extra warps hide more
  // latency than the spills cost). That pass alone takes its indices in tiles
  // (for_edge_batches): it waits on them between batches, while the linear pass's registers are
  // better spent on gathers.
  static constexpr int kMinBlocks = kExtrema ? 4 : 3;
  static constexpr bool kWholeRow = false, kMerges = true;  // (csr_schedule.cuh)
  static constexpr bool kTiledIndices = kExtrema;
  template <int VEC>  // one lane's VEC consecutive features
  using State = typename SumFold<acc>::template State<VEC>;

  const index_t* colptr;
  const index_t* row;
  const index_t* csc2csr;
  const index_t* rowptr;
  const T* x;
  int64_t x_stride;
  const T* out;
  const T* grad_out;
  TiesView ties;
  TieSlots tie_slots;
  const acc* a;     // [num_dst, F] or nullptr (with b: b * mean folded in)
  const acc* b;     // [num_dst, F] or nullptr (var / std)
  const acc* mean;  // the forward's mean when b is not folded into a, else nullptr
  int64_t mean_stride;  // its row stride (F: the mean output; K*F: out's mean slot)
  int64_t F, K;
  BackwardSlots slots;
  T* grad_x;
  // The two passes of a split backward: the first stores its sums (acc) in `partial` instead of
  // grad_x; the second adds `base` (the first's partial) to its sums before storing grad_x. Both
  // null in a single pass.
  acc* partial;
  const acc* base;

  __device__ int64_t offset(int64_t j) const { return int64_t(colptr[j]); }

  // What a lane's tie codes give the edge at `aux` (EdgeRef), as bit masks over its VEC features:
  // `held`, the features whose sole holder it is (lead byte = its position mod 128 and, in a long
  // row, rest byte = the position's bits 7-14: read only then, the rare case), and `tagged`, those
  // whose holders are found by value.
  struct Claims {
    unsigned held = 0, tagged = 0;
    __device__ bool any() const { return (held | tagged) != 0; }
  };

  template <int VEC>
  __device__ Claims claims(const Pack<uint8_t, VEC>& lead, index_t aux, int64_t at) const {
    const uint8_t mine = tie_lead_of_position(int64_t(aux));
    Claims c;
#pragma unroll
    for (int e = 0; e < VEC; ++e) {
      c.held |= unsigned(lead.v[e] == mine) << e;
      c.tagged |= unsigned(tie_lead_tagged(lead.v[e])) << e;
    }
    if (c.held && int64_t(aux) >= kLongRow) {
      const int rest = int((int64_t(aux) - kLongRow) >> 7);  // 256 for a clamped position: none
#pragma unroll
      for (int e = 0; e < VEC; ++e)
        if (int(__ldg(ties.rest + at + e)) != rest) c.held &= ~(1u << e);
    }
    return c;
  }

  // Folds one extremum (slot: its k in out / grad_out rows, tie: its tie-code slot) of the edge
  // j -> i into the lane's sums, given its claims and, where it has any, the gradients g: a sole
  // holder receives g itself; for tagged codes the edge receives extremum_share where x_j equals
  // the result, with the holder count. The result and the tagged codes' bytes are loaded only
  // here: the rare case, whose loads held with the others would cost registers; so is x_j (xj:
  // source j's features from f0), which only tagged codes compare.
  template <int VEC>
  __device__ void fold_extremum(State<VEC>& s, const T* xj, int64_t i, const Claims& c,
                                const Pack<T, VEC>& g, int slot, int tie, int64_t f0) const {
#pragma unroll
    for (int e = 0; e < VEC; ++e)
      if (c.held >> e & 1u) s.sum[e] += to_acc(g.v[e]);
    if (!c.tagged) return;
    const int64_t at = (i * tie_slots.count + tie) * F + f0;
    const Pack<T, VEC> o = load_pack<T, VEC>(out + (i * K + slot) * F + f0);
#pragma unroll
    for (int e = 0; e < VEC; ++e) {
      const acc oe = to_acc(o.v[e]);
      if (!(c.tagged >> e & 1u) || !extremum_receives(to_acc(xj[e]), oe)) continue;
      const int64_t* wide = tie_wide_entry(ties.wide + tie * ties.wide_rows * F, ties.wide_rows,
                                           int64_t(rowptr[i]), F);
      const uint16_t code = tie_join(__ldg(ties.lead + at + e), __ldg(ties.rest + at + e));
      s.sum[e] += extremum_share(oe, acc(tie_count(code, wide ? wide + f0 + e : nullptr)),
                                 to_acc(g.v[e]));
    }
  }

  // The lead bytes of U out-edges (ref[]) for NS = 1 or 2 reductions (tie[]: their tie-code
  // slots), loaded for the features [f0, f0 + VEC).
  template <int VEC, int U, int NS>
  struct Leads {
    Pack<uint8_t, VEC> v[NS][U];
  };

  template <int VEC, int U, int NS>
  __device__ Leads<VEC, U, NS> load_leads(const EdgeRef<index_t> (&ref)[U], const int (&tie)[NS],
                                          int64_t f0) const {
    Leads<VEC, U, NS> lead;
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int64_t i = int64_t(ref[u].dst);
#pragma unroll
      for (int r = 0; r < NS; ++r)
        lead.v[r][u] =
            load_pack<uint8_t, VEC>(ties.lead + (i * tie_slots.count + tie[r]) * F + f0);
    }
    return lead;
  }

  // The min and / or max gradients of U out-edges (ref[]: with their positions; ok[]: real edges)
  // for NS = 1 or 2 reductions (slot[], tie[]: as fold_extremum's), given their lead bytes: the
  // claims the bytes make and, where a lane has any, the gradients; then the folds.
  template <int VEC, int U, int NS>
  __device__ void add_extrema(State<VEC>& s, const T* xj, const EdgeRef<index_t> (&ref)[U],
                              const bool (&ok)[U], const Leads<VEC, U, NS>& lead,
                              const int (&slot)[NS], const int (&tie)[NS], int64_t f0) const {
    Pack<T, VEC> g[NS][U];
    Claims claim[NS][U];
#pragma unroll
    for (int r = 0; r < NS; ++r)
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int64_t i = int64_t(ref[u].dst);
        if (ok[u]) claim[r][u] = claims<VEC>(lead.v[r][u], ref[u].aux,
                                             (i * tie_slots.count + tie[r]) * F + f0);
        g[r][u] = claim[r][u].any() ? load_pack<T, VEC>(grad_out + (i * K + slot[r]) * F + f0)
                                    : Pack<T, VEC>{};
      }
#pragma unroll
    for (int u = 0; u < U; ++u)
#pragma unroll
      for (int r = 0; r < NS; ++r)
        fold_extremum<VEC>(s, xj, int64_t(ref[u].dst), claim[r][u], g[r][u], slot[r], tie[r], f0);
  }

  // The min and / or max sweep of NS reductions over the out-edges [begin, end), U edges a batch,
  // pipelined: a batch's lead bytes are loaded before the previous batch's gradients are loaded
  // and folded, so that a batch waits for one round trip (its gradients) instead of two; one byte
  // a feature makes the held batch cheap (a register per pack of 4 features).
  template <int VEC, int U, int NS>
  __device__ void sweep_extrema(State<VEC>& s, const T* xj, int64_t begin, int64_t end,
                                int64_t f0, const GroupLanes& lanes, const int (&slot)[NS],
                                const int (&tie)[NS]) const {
    using Ref = EdgeRef<index_t>;
    Ref held_ref[U];
    bool held_ok[U];
    Leads<VEC, U, NS> held_lead;
    bool holding = false;
    for_out_edges<U, EdgeAux::kPosition>(
        begin, end, lanes, [&](const Ref(&e)[U], const bool(&ok)[U]) {
          const Leads<VEC, U, NS> lead = load_leads<VEC, U, NS>(e, tie, f0);
          if (holding) add_extrema<VEC, U, NS>(s, xj, held_ref, held_ok, held_lead, slot, tie, f0);
#pragma unroll
          for (int u = 0; u < U; ++u) {
            held_ref[u] = e[u];
            held_ok[u] = ok[u];
          }
          held_lead = lead;
          holding = true;
        });
    if (holding) add_extrema<VEC, U, NS>(s, xj, held_ref, held_ok, held_lead, slot, tie, f0);
  }

  // The linear part of U edges: a (or one grad_out slot), then b * x_j, or b * (x_j - mean).
  template <int VEC, int U>
  __device__ void add_linear(State<VEC>& s, const acc (&xj)[VEC], const EdgeRef<index_t> (&ref)[U],
                             const bool (&ok)[U], int64_t f0) const {
    acc av[U][VEC], bv[U][VEC], mv[U][VEC];
    acc scale[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int64_t i = int64_t(ref[u].dst);
      const int64_t n = i * F + f0;
      scale[u] = acc(1);
      if (a) {
        load_values<VEC>(a + n, av[u]);
      } else if (slots.direct >= 0) {
        const Pack<T, VEC> g = load_pack<T, VEC>(grad_out + (i * K + slots.direct) * F + f0);
#pragma unroll
        for (int e = 0; e < VEC; ++e) av[u][e] = to_acc(g.v[e]);
        if (slots.direct_mean) scale[u] = acc(1) / acc(int64_t(ref[u].aux));
      }
      if (b) load_values<VEC>(b + n, bv[u]);
      if (mean) load_values<VEC>(mean + i * mean_stride + f0, mv[u]);
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      if (!ok[u]) continue;
#pragma unroll
      for (int e = 0; e < VEC; ++e) {
        if (a || slots.direct >= 0) s.sum[e] += slots.direct_mean ? av[u][e] * scale[u] : av[u][e];
        if (b) s.sum[e] += bv[u][e] * (mean ? xj[e] - mv[u][e] : xj[e]);
      }
    }
  }

  // Calls part(e, ok) for the out-edges [begin, end) in transposed-CSR order, U at a time (a
  // short last batch repeats its first edge as padding, with ok = false); kAux: what EdgeRef::aux
  // holds (kDegree: only when a mean is read from grad_out).
  template <int U, EdgeAux kAux, class Part>
  __device__ void for_out_edges(int64_t begin, int64_t end, const GroupLanes& lanes,
                                Part&& part) const {
    for_edge_batches<U, kTiledIndices, EdgeRef<index_t>>(
        lanes, begin, end,
        [&](int64_t q) {
          EdgeRef<index_t> e{row[q], index_t(0)};
          if constexpr (kAux == EdgeAux::kPosition) {
            const int64_t begin = int64_t(rowptr[e.dst]), p = int64_t(csc2csr[q]) - begin;
            const bool long_row = int64_t(rowptr[e.dst + 1]) - begin > kTieLeadRowLength;
            e.aux = index_t(min(p, int64_t(kTieTagged)) + (long_row ? kLongRow : 0));
          } else if constexpr (kAux == EdgeAux::kDegree) {
            if (slots.direct_mean) e.aux = rowptr[e.dst + 1] - rowptr[e.dst];
          }
          return e;
        },
        [&](int64_t, const EdgeRef<index_t>(&e)[U], const bool(&ok)[U]) { part(e, ok); });
  }

  // Folds source j's out-edges [begin, end) into the lane's sums, in a fixed order per feature
  // (deterministic): this pass's reductions only.
  template <int VEC>
  __device__ void accumulate(State<VEC>& s, int64_t j, int64_t begin, int64_t end, int64_t f0,
                             const GroupLanes& lanes) const {
    if constexpr (kExtrema) {
      add_extremum_sweep<VEC>(s, x + j * x_stride + f0, begin, end, f0, lanes);
    } else {
      acc xj[VEC];
      if (b) {  // var / std: b * x_j
        const Pack<T, VEC> px = load_pack<T, VEC>(x + j * x_stride + f0);
#pragma unroll
        for (int e = 0; e < VEC; ++e) xj[e] = to_acc(px.v[e]);
      } else {
#pragma unroll
        for (int e = 0; e < VEC; ++e) xj[e] = acc(0);
      }
      constexpr int L = kLinearBatch<VEC>;
      constexpr int L2 = L > 1 ? L / 2 : 1;
      constexpr EdgeAux kDeg = EdgeAux::kDegree;
      using Ref = EdgeRef<index_t>;
      if (mean) {  // three loads per edge (b, mean, maybe a): half the batch, so none spills
        for_out_edges<L2, kDeg>(begin, end, lanes, [&](const Ref(&e)[L2], const bool(&ok)[L2]) {
          add_linear<VEC, L2>(s, xj, e, ok, f0);
        });
      } else {
        for_out_edges<L, kDeg>(begin, end, lanes, [&](const Ref(&e)[L], const bool(&ok)[L]) {
          add_linear<VEC, L>(s, xj, e, ok, f0);
        });
      }
    }
  }

  // The min and / or max sweep over the out-edges [begin, end) (both: half the edges per batch,
  // so that the loads in flight stay those of one reduction).
  template <int VEC>
  __device__ void add_extremum_sweep(State<VEC>& s, const T* xj, int64_t begin, int64_t end,
                                     int64_t f0, const GroupLanes& lanes) const {
    constexpr int X = kExtremumBatch;
    if (slots.min >= 0 && slots.max >= 0) {
      const int both[2] = {slots.min, slots.max};
      const int ties_of[2] = {tie_slots.min, tie_slots.max};
      sweep_extrema<VEC, X / 2, 2>(s, xj, begin, end, f0, lanes, both, ties_of);
    } else {
      const bool min = slots.min >= 0;
      const int one[1] = {min ? slots.min : slots.max};
      const int tie_of[1] = {min ? tie_slots.min : tie_slots.max};
      sweep_extrema<VEC, X, 1>(s, xj, begin, end, f0, lanes, one, tie_of);
    }
  }

  template <int VEC>
  __device__ void finalize(const State<VEC>& s, int64_t j, int64_t, int64_t f0) const {
    const int64_t n = j * F + f0;
    if (partial) {
      store_values<VEC, true>(partial + n, s.sum);
      return;
    }
    Pack<T, VEC> o;
#pragma unroll
    for (int e = 0; e < VEC; ++e)  // (a plain load: with T == acc, base is grad_x itself)
      o.v[e] = from_acc<T>(base ? base[n + e] + s.sum[e] : s.sum[e]);
    stream_pack<T, VEC>(grad_x + n, o);
  }
};

template <typename T>
HeavyPlan backward_plan(int64_t num_src, int64_t num_edges, int64_t max_degree, int64_t F) {
  return make_heavy_plan(num_src, num_edges, backward_slot_bytes<T>(F),
                         size_t(F) * sizeof(acc_t<T>), max_degree);
}

}  // namespace sr

template <typename T>
size_t segment_reduce_backward_workspace(int64_t num_src, int64_t num_dst, int64_t num_edges,
                                         int64_t max_degree, int64_t F,
                                         const std::vector<SegmentReduce>& reduces) {
  return align_up(sr::backward_table<T>(num_src, num_dst, F, reduces).bytes, 256) +
         sr::backward_plan<T>(num_src, num_edges, max_degree, F).bytes;
}

template <typename T>
void segment_reduce_fold_scales(const T* grad_out, const T* scale, int64_t num_dst,
                                int64_t num_scales, int64_t KF, T* g, cudaStream_t stream) {
  if (num_dst <= 0 || KF <= 0) return;
  const int64_t blocks = std::min<int64_t>(ceil_div(num_dst * KF, 256), 65536);
  sr::fold_scales_kernel<T><<<unsigned(blocks), 256, 0, stream>>>(grad_out, scale, num_dst,
                                                                   num_scales, KF, g);
  IOGNN_CUDA_CHECK_LAUNCH("segment_reduce fold scales");
}

template <typename T, typename index_t>
void segment_reduce_backward(const index_t* colptr, const index_t* row, const index_t* csc2csr,
                             const index_t* rowptr, const T* x, int64_t x_stride, const T* out,
                             TiesView ties, const acc_t<T>* mean, int64_t mean_stride,
                             const T* grad_out,
                             int64_t num_src, int64_t num_dst, int64_t num_edges,
                             int64_t max_degree, int64_t F,
                             const std::vector<SegmentReduce>& reduces, T* grad_x,
                             void* workspace, size_t workspace_bytes, cudaStream_t stream) {
  using acc = acc_t<T>;
  const int64_t K = sr::make_reduce_list(reduces).count;
  const sr::BackwardSlots slots = sr::backward_slots(reduces);
  const TieSlots tie_slots = segment_reduce_tie_slots(reduces);
  const sr::BackwardTable table = sr::backward_table<T>(num_src, num_dst, F, reduces);
  const size_t table_bytes = align_up(table.bytes, 256);
  IOGNN_CHECK(table_bytes == 0 || (workspace != nullptr && workspace_bytes >= table_bytes),
              ValueError, "segment_reduce_backward: the workspace has ", workspace_bytes,
              " bytes but ", table_bytes, " are needed");
  auto* ws = static_cast<unsigned char*>(workspace);
  const auto array = [&](bool present, size_t offset) {
    return present ? reinterpret_cast<acc*>(ws + offset) : nullptr;
  };
  acc* const a = array(table.has_a, table.a_offset);
  acc* const b = array(table.has_b, table.b_offset);
  const HeavyPlan plan = sr::backward_plan<T>(num_src, num_edges, max_degree, F);
  void* heavy_ws = ws ? ws + table_bytes : nullptr;
  const size_t heavy_bytes = workspace_bytes > table_bytes ? workspace_bytes - table_bytes : 0;
  // 16-byte packs when every packed access stays aligned (the table rows are then aligned too: F
  // is a multiple of the pack); the min / max pass takes at most kExtremumVec features a lane.
  constexpr int kPack = kVec<T>;  // elements of one 16-byte pack
  const bool packed = F % kPack == 0 && x_stride % kPack == 0 && is_aligned16(x) &&
                      is_aligned16(out) && is_aligned16(grad_out) && is_aligned16(grad_x) &&
                      (!mean || (is_aligned16(mean) && mean_stride % kPack == 0)) &&
                      sr::tie_planes_aligned(ties, kPack);
  if ((a || b) && num_dst > 0 && F > 0) {
    const auto coefficients = [&](auto vec) {
      constexpr int VEC = decltype(vec)::value;
      const int64_t blocks = std::min<int64_t>(ceil_div(num_dst * (F / VEC), 256), 65536);
      sr::coefficients_kernel<T, index_t, VEC><<<unsigned(blocks), 256, 0, stream>>>(
          rowptr, out, grad_out, mean, mean_stride, num_dst, F, K, slots, a, b);
      IOGNN_CUDA_CHECK_LAUNCH("segment_reduce backward coefficients");
    };
    // acc's 16-byte packs divide T's (kPack), so `packed` aligns them too.
    if (packed) coefficients(std::integral_constant<int, int(16 / sizeof(acc))>{});
    else coefficients(std::integral_constant<int, 1>{});
  }
  // The passes: the linear one (sums, means, var / std) and the min / max one; with both, the
  // first leaves its sums in `partial` (acc: grad_x itself when T is acc, else the workspace's
  // array) and the second adds them when it stores grad_x.
  const bool extrema = tie_slots.count > 0, linear = !segment_reduce_extrema_only(reduces);
  acc* partial = nullptr;
  if (sr::split_backward(reduces))
    partial =
        table.has_partial ? array(true, table.partial_offset) : reinterpret_cast<acc*>(grad_x);
  const auto run = [&](auto extrema_pass, const sr::BackwardSlots& pass_slots, acc* pass_partial,
                       const acc* pass_base) {
    constexpr bool kExtrema = decltype(extrema_pass)::value;
    const sr::BackwardOp<T, index_t, kExtrema> op{
        {}, colptr, row, csc2csr, rowptr, x, x_stride, out, grad_out, ties, tie_slots, a, b,
        a ? nullptr : mean, mean_stride, F, K, pass_slots, grad_x, pass_partial, pass_base};
    constexpr int kLanes = kExtrema ? sr::kExtremumVec<T> : kPack;
    if (packed) run_schedule<kLanes>(op, colptr, num_src, plan, heavy_ws, heavy_bytes, stream,
                                     "segment_reduce_backward");
    else run_schedule<1>(op, colptr, num_src, plan, heavy_ws, heavy_bytes, stream,
                                "segment_reduce_backward");
  };
  if (linear) {
    sr::BackwardSlots linear_slots = slots;
    linear_slots.min = linear_slots.max = -1;
    run(std::false_type{}, linear_slots, partial, nullptr);
  }
  if (extrema) run(std::true_type{}, slots, nullptr, partial);
}

}  // namespace iognn::cuda

// Instantiates the backward entry points for one storage type (both index types).
#define IOGNN_SEGMENT_REDUCE_BACKWARD_CUDA_FOR(T, I)                                         \
  template void iognn::cuda::segment_reduce_backward<T, I>(                                  \
      const I*, const I*, const I*, const I*, const T*, int64_t, const T*,                   \
      iognn::TiesView, const iognn::acc_t<T>*, int64_t, const T*, int64_t, int64_t,    \
      int64_t, int64_t, int64_t, const std::vector<iognn::SegmentReduce>&, T*, void*, size_t,   \
      cudaStream_t);
#define IOGNN_SEGMENT_REDUCE_BACKWARD_CUDA(T)                                                  \
  template size_t iognn::cuda::segment_reduce_backward_workspace<T>(                           \
      int64_t, int64_t, int64_t, int64_t, int64_t,                                             \
      const std::vector<iognn::SegmentReduce>&);                                         \
  template void iognn::cuda::segment_reduce_fold_scales<T>(const T*, const T*, int64_t,        \
                                                           int64_t, int64_t, T*, cudaStream_t); \
  IOGNN_SEGMENT_REDUCE_BACKWARD_CUDA_FOR(T, int32_t)                                           \
  IOGNN_SEGMENT_REDUCE_BACKWARD_CUDA_FOR(T, int64_t)

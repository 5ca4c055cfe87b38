// The CUDA CSR execution layer: the one degree-aware row schedule under every CSR op family
// (propagate_kernels.cuh, segment_reduce_forward.cuh / _backward.cuh), its lane geometry and its
// launches. It never synchronises with the host and allocates nothing, so it is capturable.
//
// A "row" is a CSR row (forward: a destination and its in-edges; backward: a source and its
// out-edges in the transposed CSR). An Op says how to
// fold the edges [begin, end) of a row into a per-lane State<VEC> (VEC consecutive features), how
// to merge two States (the first one earlier in CSR order), how to spill a State to the workspace
// (per-feature arrays, so any VEC reads what any VEC wrote), and how to write a finished row.
// Lanes run over features: a group of G lanes (G a power of two <= 32, from F) owns one row and
// G*VEC consecutive features (a "chunk"); rows wider than that are split into chunks handled by
// independent groups. The lanes of a group share one thing: the row's edge indices, which they
// may load a tile at a time, one edge per lane, and pass around by warp shuffles
// (for_edge_batches), so that a batch of edges waits for no index load of its own.
// Otherwise no lane needs another lane's data except in the merge pass. Two traits of an Op change
// the geometry: kWholeRow (one group covers all F features, looping over them itself: an op that
// reduces across features, such as propagate's sampled dense-dense product) and kMerges (false:
// segments write their results directly, so there are no slot states and no merge pass).
//
//   light rows (degree <= heavy_degree): one group folds the whole row in CSR order and writes it
//     (VEC = 16 bytes of features per lane where alignment allows, else 1).
//   heavy rows: cut into segments of segment_edges edges; one group folds each segment into a
//     workspace slot (same VEC); then the merge pass adds the row's slots in segment order, one
//     feature per lane (a group alone for rows of few slots, a block for the others: merge_kernel)
//     and writes the row. Every
//     row's arithmetic order is fixed by the graph and the plan alone, so results are
//     bit-identical run to run.
//
// Heavy rows are found per call by a small kernel that hands out heavy-row indices and slot ranges
// with 64-bit integer atomics (the order of that list varies between runs, which cannot change any
// value: a row's segments, their edges and their merge order depend only on the row). Nothing is
// read back to the host: the segment kernel's grid is sized from the host-side bound max_slots
// (its surplus blocks exit at once), the slot-table and merge kernels loop over the heavy rows
// found with a grid of a few resident waves (their bound, max_heavy, is far above the rows found
// on most graphs, and launching that many 512-thread blocks costs more than the merge itself even
// when they all exit). When the caller knows the CSR's longest row (a Graph
// does: both builds measure it) and no row is heavy, the plan is empty and a call is the light
// kernel alone: one launch.
#pragma once

#include <algorithm>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "kernels/cuda/common.cuh"

namespace iognn::cuda {

// ---- tuning constants (one place; every choice below derives from these) --------------------
constexpr int kLightThreads = 256;         // threads per block of the light and segment kernels
constexpr int kMergeThreads = 512;         // threads per block of the merge kernel
constexpr int kMergeUnroll = 4;            // slots whose loads a merging lane issues at once
constexpr int kEdgeUnroll = 4;             // edges whose loads a lane issues before using them
constexpr int64_t kMinSegmentEdges = 128;  // shortest segment (a heavy row has >= 2 of them)
constexpr int64_t kShortSegmentEdges = 16;  // ... on graphs too small to fill the GPU (below)
constexpr int64_t kTargetSlots = 16384;     // segments that fill an H100 / H200 about twice
constexpr int64_t kMeanDegreeFactor = 2;   // a heavy row has more than 2x the mean degree
constexpr int64_t kMinSlots = 64;
constexpr int64_t kMaxSlots = int64_t(1) << 20;
// Slot-state budget: a quarter of an fp32 copy of the output rows, clamped to [16 MiB, 512 MiB].
constexpr double kBudgetFraction = 0.25;
constexpr size_t kMinBudgetBytes = size_t(16) << 20;
constexpr size_t kMaxBudgetBytes = size_t(512) << 20;

__host__ __device__ inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
__host__ __device__ inline size_t align_up(size_t n, size_t a) { return (n + a - 1) / a * a; }

// Sizes of the heavy-row machinery for one call, computed on the host from sizes alone.
//   shortest      = clamp(E / 16384, 16, 128)
//   segment_edges = max(shortest, ceil(E / slot_cap))   slot_cap = budget / slot_bytes
//   heavy_degree  = max(2 * segment_edges, 2 * ceil(E / num_rows) * shortest / 128)
//   max_heavy     = min(num_rows, E / (heavy_degree + 1))   (rows of degree > heavy_degree)
//   max_slots     = E / segment_edges + max_heavy          (sum of ceil(deg / segment_edges))
// so the slot states never exceed 1.5x max(budget, 64 slots). A known max_degree (-1: unknown) no
// longer than heavy_degree, or than the policy's light_only_degree, gives the empty plan. E is the
// CSR's edge count; the bounds hold for any valid CSR (rowptr[num_rows] == E), and the kernels stay
// in bounds for any other.
// A group's time is a chain of dependent loads as long as its row or segment, so below 2M edges
// (too few rows to keep the GPU busy while the longest light rows finish) segments and the heavy
// threshold shrink with E, down to 16 / 32 edges, and a row more than twice the mean degree is cut:
// on mid-size graphs whose operand sits in L2 (tolokers, the Amazon and Coauthor graphs) the
// longest light rows, not the bytes, set the kernel time. Graphs of 2M edges or more keep 128 / 256.
struct HeavyPlan {
  int64_t segment_edges = 0;
  int64_t heavy_degree = INT64_MAX;  // INT64_MAX: no row can be heavy, the workspace is empty
  int64_t max_heavy = 0;
  int64_t max_slots = 0;
  size_t slot_bytes = 0;
  size_t heavy_row_offset = 0, heavy_base_offset = 0, slot_heavy_offset = 0, states_offset = 0;
  size_t bytes = 0;  // workspace size
};

// What an op family adds to the rules above: floors under the heavy degree and the segment length
// (an op whose per-edge work is small pays more for the heavy passes than it saves on short rows),
// and light_only_degree: a known longest row up to this length keeps every row light, so that the
// call is one launch (the heavy passes cost a few launches, more than they save on such rows).
struct HeavyPolicy {
  int64_t min_heavy_degree = 0;
  int64_t min_segment_edges = 0;
  int64_t light_only_degree = 0;
};

// A known longest row up to this length runs whole, in one launch: the heavy passes (attention:
// its chunk plan's scan, chunk and merge kernels) cost a few launches, more than they save on rows
// this short (cora's longest has 169 edges). Propagate's light_only_degree and attention's
// chunking (attention_common.cuh, chunked) both use it.
constexpr int64_t kLightOnlyDegree = 256;

// slot_bytes: workspace bytes of one segment's State for all F features; row_bytes: bytes of one
// output row in the accumulation type (sets the budget); slot_bytes == 0 for an Op without merges.
inline HeavyPlan make_heavy_plan(int64_t num_rows, int64_t num_edges, size_t slot_bytes,
                                 size_t row_bytes, int64_t max_degree, HeavyPolicy policy = {}) {
  HeavyPlan plan;
  if (num_rows <= 0 || num_edges <= 0) return plan;
  const double wanted = double(num_rows) * double(row_bytes) * kBudgetFraction;
  const size_t budget =
      size_t(std::clamp(wanted, double(kMinBudgetBytes), double(kMaxBudgetBytes)));
  const int64_t slot_cap =
      slot_bytes ? std::clamp(int64_t(budget / slot_bytes), kMinSlots, kMaxSlots) : kMaxSlots;
  const int64_t shortest =
      std::clamp(num_edges / kTargetSlots, kShortSegmentEdges, kMinSegmentEdges);
  const int64_t segment_edges =
      std::max({shortest, ceil_div(num_edges, slot_cap), policy.min_segment_edges});
  const int64_t heavy_degree = std::max(
      {2 * segment_edges,
       kMeanDegreeFactor * ceil_div(num_edges, num_rows) * shortest / kMinSegmentEdges,
       policy.min_heavy_degree});
  const int64_t max_heavy = std::min(num_rows, num_edges / (heavy_degree + 1));
  const int64_t light_only = std::max(heavy_degree, policy.light_only_degree);
  if (max_heavy == 0 || (max_degree >= 0 && max_degree <= light_only)) return plan;
  plan.segment_edges = segment_edges;
  plan.heavy_degree = heavy_degree;
  plan.max_heavy = max_heavy;
  plan.max_slots = num_edges / segment_edges + max_heavy;
  plan.slot_bytes = slot_bytes;
  constexpr size_t kAlign = 256;
  plan.heavy_row_offset = kAlign;  // [0, 16): the two counters
  plan.heavy_base_offset = align_up(plan.heavy_row_offset + sizeof(int64_t) * max_heavy, kAlign);
  plan.slot_heavy_offset = align_up(plan.heavy_base_offset + sizeof(uint32_t) * max_heavy, kAlign);
  plan.states_offset = align_up(plan.slot_heavy_offset + sizeof(uint32_t) * plan.max_slots, kAlign);
  plan.bytes = plan.states_offset + slot_bytes * size_t(plan.max_slots);
  return plan;
}

// Lanes per group and feature chunks per row for F features handled VEC at a time (F % VEC == 0).
struct Lanes {
  int group;       // G: lanes per group, a power of two <= 32
  int64_t chunks;  // groups per row
};

inline Lanes make_lanes(int64_t F, int vec) {
  const int64_t lanes = F / vec;
  int group = 1;
  while (group < lanes && group < 32) group *= 2;
  return Lanes{group, ceil_div(lanes, group)};
}

// Device view of the workspace.
struct HeavyRows {
  unsigned long long* counters;  // [0]: heavy rows found, [1]: slots handed out
  int64_t* heavy_row;            // [max_heavy]: the row, or -1 when it did not fit (invalid CSR)
  uint32_t* heavy_base;          // [max_heavy]: its first slot
  uint32_t* slot_heavy;          // [max_slots]: the heavy-row index owning each slot
  unsigned char* states;         // [max_slots][slot_bytes]
  int64_t segment_edges, heavy_degree, max_heavy, max_slots;
  size_t slot_bytes;

  __device__ int64_t num_heavy() const { return min(int64_t(counters[0]), max_heavy); }
  __device__ int64_t num_slots() const { return min(int64_t(counters[1]), max_slots); }
  __device__ unsigned char* slot(int64_t s) const { return states + size_t(s) * slot_bytes; }
};

// The lanes of one group that own features of a chunk: a prefix of the group (the last chunk of a
// row may be narrower), each lane one edge of an index tile. Lanes past `width` have no features
// and exit before any shuffle, so `mask` names exactly the lanes that take part.
struct GroupLanes {
  unsigned mask;  // the active lanes, as warp lanes
  int base;       // warp lane of the group's lane 0
  int lane;       // this lane in the group
  int width;      // active lanes (edges per index tile)
};

// Lane `src`'s v, for every active lane of the group (an Op's own edge types overload it).
template <typename V, typename = std::enable_if_t<std::is_arithmetic_v<V>>>
__device__ __forceinline__ V shuffle_from(const GroupLanes& lanes, V v, int src) {
  return __shfl_sync(lanes.mask, v, lanes.base + src);
}

// Index of this thread's group among all groups of the grid, its lane, and its first feature.
template <int VEC>
struct GroupPos {
  int64_t task;
  int lane;
  __device__ explicit GroupPos(int group)
      : task(int64_t(blockIdx.x) * (blockDim.x / group) + threadIdx.x / group),
        lane(int(threadIdx.x) & (group - 1)) {}
  __device__ int64_t first_feature(int64_t chunk, int group) const {
    return (chunk * group + lane) * VEC;
  }
  // The active lanes of the group for chunk `chunk` of F features.
  __device__ GroupLanes lanes_of(int64_t chunk, int group, int64_t F) const {
    const int width = int(min(int64_t(group), F / VEC - chunk * group));
    const int base = int(threadIdx.x & 31u) & ~(group - 1);
    const unsigned prefix = width >= 32 ? ~0u : (1u << width) - 1u;
    return GroupLanes{prefix << base, base, lane, width};
  }
};

// A row's edges [begin, end) as body(q0, v, ok) for batches of U edges q0, q0 + 1, ... (v[u] =
// load(q0 + u), an edge's reference; a short last batch repeats its first edge, with ok = false).
// Every lane of the group sees the same batches in the same order. kTiled: the references are
// loaded a tile of lanes.width edges at a time, one per lane, and moved by shuffle_from, so that a
// batch waits for no index load of its own (it costs registers: a kernel short of them loads each
// batch's references itself, every lane the same address).
template <int U, bool kTiled, typename V, class Load, class Body>
__device__ __forceinline__ void for_edge_batches(const GroupLanes& lanes, int64_t begin,
                                                 int64_t end, Load&& load, Body&& body) {
  if constexpr (!kTiled) {
    for (int64_t q = begin; q < end; q += U) {
      V v[U];
      bool ok[U];
#pragma unroll
      for (int u = 0; u < U; ++u) {
        ok[u] = q + u < end;
        v[u] = load(ok[u] ? q + u : q);
      }
      body(q, v, ok);
    }
  } else {
    for (int64_t t = begin; t < end; t += lanes.width) {
      const int n = int(min(int64_t(lanes.width), end - t));
      V mine{};
      if (lanes.lane < n) mine = load(t + lanes.lane);
      for (int u0 = 0; u0 < n; u0 += U) {
        V v[U];
        bool ok[U];
#pragma unroll
        for (int u = 0; u < U; ++u) {
          ok[u] = u0 + u < n;
          v[u] = shuffle_from(lanes, mine, ok[u] ? u0 + u : u0);
        }
        body(t + u0, v, ok);
      }
    }
  }
}

// The State of an Op that folds a row into one sum a feature (propagate's gather, the
// segment-reduce backward), with its merge and its workspace slot (acc sum[F]); such an Op derives
// from it and names State<VEC> with `using`.
template <typename acc>
struct SumFold {
  template <int VEC>
  struct State {
    acc sum[VEC];
  };

  template <int VEC>
  __device__ void init(State<VEC>& s) const {
#pragma unroll
    for (int e = 0; e < VEC; ++e) s.sum[e] = acc(0);
  }
  template <int VEC>
  __device__ void merge(State<VEC>& a, const State<VEC>& b) const {
#pragma unroll
    for (int e = 0; e < VEC; ++e) a.sum[e] += b.sum[e];
  }
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
};

// ---- kernels ----------------------------------------------------------------------------------
// The lanes of a group for chunk `chunk` (for a kWholeRow Op: the whole group, chunk 0).
template <class Op, int VEC>
__device__ __forceinline__ GroupLanes op_lanes(const GroupPos<VEC>& pos, int64_t chunk, int group,
                                               int64_t F) {
  if constexpr (Op::kWholeRow) {
    const int base = int(threadIdx.x & 31u) & ~(group - 1);
    const unsigned bits = group >= 32 ? ~0u : (1u << group) - 1u;
    return GroupLanes{bits << base, base, pos.lane, group};
  } else {
    return pos.lanes_of(chunk, group, F);
  }
}

template <int VEC, class Op>
__global__ void __launch_bounds__(kLightThreads, Op::kMinBlocks)
    light_rows_kernel(const Op op, int64_t num_rows, int64_t heavy_degree, Lanes lanes) {
  const GroupPos<VEC> pos(lanes.group);
  if (pos.task >= num_rows * lanes.chunks) return;
  const int64_t r = pos.task / lanes.chunks;
  const int64_t chunk = pos.task - r * lanes.chunks;
  const int64_t f0 = pos.first_feature(chunk, lanes.group);
  if (!Op::kWholeRow && f0 >= op.F) return;  // (whole-row lanes all stay: they shuffle)
  const int64_t begin = op.offset(r), end = op.offset(r + 1);
  if (end - begin > heavy_degree) return;  // left to the segment + merge passes
  typename Op::template State<VEC> st;
  op.init(st);
  op.accumulate(st, r, begin, end, f0, op_lanes<Op>(pos, chunk, lanes.group, op.F));
  op.finalize(st, r, end - begin, f0);
}

// Lists the heavy rows and hands each ceil(deg / segment_edges) consecutive slots.
template <typename index_t>
__global__ void find_heavy_rows_kernel(const index_t* offsets, int64_t num_rows, HeavyRows hr) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t r = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; r < num_rows; r += stride) {
    const int64_t deg = int64_t(offsets[r + 1]) - int64_t(offsets[r]);
    if (deg <= hr.heavy_degree) continue;
    const unsigned long long nseg = ceil_div(deg, hr.segment_edges);
    const unsigned long long h = atomicAdd(&hr.counters[0], 1ull);
    const unsigned long long base = atomicAdd(&hr.counters[1], nseg);
    if (h >= (unsigned long long)hr.max_heavy) continue;
    const bool fits = base + nseg <= (unsigned long long)hr.max_slots;
    hr.heavy_row[h] = fits ? r : -1;
    hr.heavy_base[h] = fits ? uint32_t(base) : 0u;
  }
}

// slot_heavy[heavy_base[h] + k] = h for each segment k of heavy row h: a block per heavy row at a
// time, the blocks striding over the rows found.
template <typename index_t>
__global__ void fill_slot_table_kernel(const index_t* offsets, HeavyRows hr) {
  const int64_t num_heavy = hr.num_heavy();
  for (int64_t h = blockIdx.x; h < num_heavy; h += gridDim.x) {
    const int64_t r = hr.heavy_row[h];
    if (r < 0) continue;
    const int64_t nseg = ceil_div(int64_t(offsets[r + 1]) - int64_t(offsets[r]), hr.segment_edges);
    const int64_t base = hr.heavy_base[h];
    for (int64_t k = threadIdx.x; k < nseg; k += blockDim.x) hr.slot_heavy[base + k] = uint32_t(h);
  }
}

// One group per (slot, chunk): folds the slot's segment into its workspace State.
template <int VEC, class Op>
__global__ void __launch_bounds__(kLightThreads, Op::kMinBlocks)
    segment_kernel(const Op op, HeavyRows hr, Lanes lanes) {
  const GroupPos<VEC> pos(lanes.group);
  const int64_t s = pos.task / lanes.chunks;
  if (s >= hr.num_slots()) return;
  const int64_t chunk = pos.task - s * lanes.chunks;
  const int64_t f0 = pos.first_feature(chunk, lanes.group);
  if (!Op::kWholeRow && f0 >= op.F) return;
  // Every field is re-validated so that an inconsistent CSR cannot send a lane out of bounds.
  const uint32_t h = hr.slot_heavy[s];
  if (int64_t(h) >= hr.num_heavy()) return;
  const int64_t r = hr.heavy_row[h];
  if (r < 0) return;
  const int64_t row_begin = op.offset(r), row_end = op.offset(r + 1);
  const int64_t k = s - int64_t(hr.heavy_base[h]);
  if (k < 0 || k >= ceil_div(row_end - row_begin, hr.segment_edges)) return;
  const int64_t begin = row_begin + k * hr.segment_edges;
  const int64_t end = min(begin + hr.segment_edges, row_end);
  typename Op::template State<VEC> st;
  op.init(st);
  op.accumulate(st, r, begin, end, f0, op_lanes<Op>(pos, chunk, lanes.group, op.F));
  if constexpr (Op::kMerges) op.save(st, hr.slot(s), f0);
  else op.finalize(st, r, row_end - row_begin, f0);  // the segment's results are final
}

// Folds slots [lo, hi) of a heavy row into st, in segment order (feature f of each slot).
template <class Op, class State>
__device__ __forceinline__ void merge_slots(const Op& op, const HeavyRows& hr, int64_t base,
                                            int64_t lo, int64_t hi, int64_t f, State& st) {
  int64_t k = lo;
  for (; k + kMergeUnroll <= hi; k += kMergeUnroll) {
    State part[kMergeUnroll];
#pragma unroll
    for (int u = 0; u < kMergeUnroll; ++u) part[u] = op.template load<1>(hr.slot(base + k + u), f);
#pragma unroll
    for (int u = 0; u < kMergeUnroll; ++u) op.merge(st, part[u]);
  }
  for (; k < hi; ++k) op.merge(st, op.template load<1>(hr.slot(base + k), f));
}

// Merges every heavy row's slots in segment order, one feature per lane, and writes the row; a
// task is a (heavy row, chunk of group features). Rows of at most kSoloSegments slots (most heavy
// rows) are merged by one group alone, the groups of the grid striding over the tasks: no shared
// memory, no barrier. Longer rows are merged by a whole block, the blocks striding over their
// tasks: group g merges the contiguous run [nseg*g/groups, nseg*(g+1)/groups) of the slots, then
// group 0 merges the groups' States in group order. (One block per task for every row spends most
// of its time in barriers and idle groups when rows have few slots, as most heavy rows do.)
constexpr int64_t kSoloSegments = 16;

template <class Op>
__global__ void __launch_bounds__(kMergeThreads) merge_kernel(const Op op, HeavyRows hr, Lanes lanes) {
  extern __shared__ __align__(16) unsigned char merge_smem[];
  using State = typename Op::template State<1>;
  State* group_states = reinterpret_cast<State*>(merge_smem);
  const int lane = int(threadIdx.x) & (lanes.group - 1);
  const int group = int(threadIdx.x) / lanes.group;
  const int groups = int(blockDim.x) / lanes.group;
  const int64_t tasks = hr.num_heavy() * lanes.chunks;
  const auto row_of = [&](int64_t task, int64_t& h, int64_t& r, int64_t& deg, int64_t& nseg) {
    h = task / lanes.chunks;
    r = hr.heavy_row[h];
    if (r < 0) return false;
    deg = op.offset(r + 1) - op.offset(r);
    nseg = ceil_div(deg, hr.segment_edges);
    return true;
  };
  int64_t h, r, deg, nseg;
  for (int64_t task = int64_t(blockIdx.x) * groups + group; task < tasks;
       task += int64_t(gridDim.x) * groups) {
    if (!row_of(task, h, r, deg, nseg) || nseg > kSoloSegments) continue;
    const int64_t f = (task - h * lanes.chunks) * lanes.group + lane;
    if (f >= op.F) continue;
    State st;
    op.init(st);
    merge_slots(op, hr, hr.heavy_base[h], 0, nseg, f, st);
    op.finalize(st, r, deg, f);
  }
  for (int64_t task = blockIdx.x; task < tasks; task += gridDim.x) {  // uniform over the block
    if (!row_of(task, h, r, deg, nseg) || nseg <= kSoloSegments) continue;
    const int64_t f = (task - h * lanes.chunks) * lanes.group + lane;
    const bool active = f < op.F;
    State st;
    op.init(st);
    if (active)
      merge_slots(op, hr, hr.heavy_base[h], nseg * group / groups, nseg * (group + 1) / groups, f,
                  st);
    group_states[threadIdx.x] = st;
    __syncthreads();
    if (group == 0 && active) {
      for (int g = 1; g < groups; ++g) op.merge(st, group_states[g * lanes.group + lane]);
      op.finalize(st, r, deg, f);
    }
    __syncthreads();  // group_states is reused by the next task
  }
}

// ---- host driver ------------------------------------------------------------------------------
inline unsigned grid_size(int64_t blocks, const char* kernel) {
  IOGNN_CHECK(blocks <= INT_MAX, ValueError, kernel, ": the problem needs ", blocks,
              " blocks, more than a CUDA grid holds");
  return unsigned(blocks);
}

// Lanes of an Op's light and segment passes: a kWholeRow Op's group covers every feature.
template <class Op>
Lanes op_lanes_host(int64_t F, int vec) {
  Lanes lanes = make_lanes(F, vec);
  if constexpr (Op::kWholeRow) lanes.chunks = 1;
  return lanes;
}

// Grids of kernels that stride over at most `tasks` block-sized tasks: a few waves of the current
// device's resident blocks (kStrideWaves), fewer when there are fewer tasks. Read once per
// schedule run (attribute queries, no synchronisation).
constexpr int kStrideWaves = 2;
struct StridedGrids {
  int sms = 0, threads_per_sm = 0;
  StridedGrids() {
    int device = 0;
    IOGNN_CUDA_CHECK(cudaGetDevice(&device));
    IOGNN_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    IOGNN_CUDA_CHECK(
        cudaDeviceGetAttribute(&threads_per_sm, cudaDevAttrMaxThreadsPerMultiProcessor, device));
  }
  // Blocks of `threads` threads for `tasks` tasks.
  unsigned blocks(int64_t tasks, int threads) const {
    const int64_t waves = int64_t(kStrideWaves) * sms * std::max(1, threads_per_sm / threads);
    return unsigned(std::max<int64_t>(1, std::min(tasks, waves)));
  }
};

// Runs the whole schedule of `op` over num_rows rows (offsets: the op's row offsets) on `stream`,
// VEC features per lane in the light and segment passes; `name` labels launch errors.
template <int VEC, class Op, typename index_t>
void run_schedule(const Op& op, const index_t* offsets, int64_t num_rows, const HeavyPlan& plan,
                  void* workspace, size_t workspace_bytes, cudaStream_t stream,
                  const char* name) {
  using MergeState = typename Op::template State<1>;
  static_assert(kMergeThreads * sizeof(MergeState) <= 48 * 1024,
                "merge States must fit the default shared-memory limit");
  if (num_rows == 0 || op.F == 0) return;
  const Lanes lanes = op_lanes_host<Op>(op.F, VEC);
  const int64_t groups_per_block = kLightThreads / lanes.group;
  light_rows_kernel<VEC, Op>
      <<<grid_size(ceil_div(num_rows * lanes.chunks, groups_per_block), name), kLightThreads, 0,
         stream>>>(op, num_rows, plan.heavy_degree, lanes);
  IOGNN_CUDA_CHECK_LAUNCH(name);
  if (plan.max_heavy == 0) return;

  IOGNN_CHECK(workspace != nullptr && workspace_bytes >= plan.bytes, ValueError, name,
              ": the workspace has ", workspace_bytes, " bytes but ", plan.bytes, " are needed");
  IOGNN_CHECK(reinterpret_cast<uintptr_t>(workspace) % 256 == 0, ValueError, name,
              ": the workspace must be 256-byte aligned");
  auto* ws = static_cast<unsigned char*>(workspace);
  const HeavyRows hr{reinterpret_cast<unsigned long long*>(ws),
                     reinterpret_cast<int64_t*>(ws + plan.heavy_row_offset),
                     reinterpret_cast<uint32_t*>(ws + plan.heavy_base_offset),
                     reinterpret_cast<uint32_t*>(ws + plan.slot_heavy_offset),
                     ws + plan.states_offset,
                     plan.segment_edges,
                     plan.heavy_degree,
                     plan.max_heavy,
                     plan.max_slots,
                     plan.slot_bytes};
  IOGNN_CUDA_CHECK(cudaMemsetAsync(ws, 0, 2 * sizeof(unsigned long long), stream));
  const int64_t find_blocks = std::min<int64_t>(ceil_div(num_rows, 256), 1024);
  find_heavy_rows_kernel<index_t><<<unsigned(find_blocks), 256, 0, stream>>>(offsets, num_rows, hr);
  IOGNN_CUDA_CHECK_LAUNCH(name);
  const StridedGrids strided;
  fill_slot_table_kernel<index_t><<<strided.blocks(plan.max_heavy, 256), 256, 0, stream>>>(offsets,
                                                                                           hr);
  IOGNN_CUDA_CHECK_LAUNCH(name);
  segment_kernel<VEC, Op>
      <<<grid_size(ceil_div(plan.max_slots * lanes.chunks, groups_per_block), name), kLightThreads,
         0, stream>>>(op, hr, lanes);
  IOGNN_CUDA_CHECK_LAUNCH(name);
  if constexpr (Op::kMerges) {
    const Lanes merge_lanes = make_lanes(op.F, 1);
    merge_kernel<Op><<<strided.blocks(plan.max_heavy * merge_lanes.chunks, kMergeThreads),
                       kMergeThreads, kMergeThreads * sizeof(MergeState), stream>>>(op, hr,
                                                                                    merge_lanes);
    IOGNN_CUDA_CHECK_LAUNCH(name);
  }
}

}  // namespace iognn::cuda

// Shared device helpers of the CUDA attention kernels (contract: attention.h; math:
// kernels/cpu/attention_common.h).
//
// Thread mapping. A *group* of G lanes (G a power of two <= 32, inside one warp) owns one item:
// a (row, head, tile). Lane gl of a group holds kLaneChannels = 4 channels of the head row as
// 4 / VEC slots of VEC channels (VEC = 4 for fp32, fp16, bf16: 16- or 8-byte vectors; 2 for fp64;
// 1 when C or the alignment does not allow vectors), vector index (tile * slots + k) * G + gl, so
// that a group reads a head row with coalesced vector loads. Four channels per lane keep the
// kernels within 128 registers with a batch of edges in flight. A head row of nvec = C / VEC
// vectors fits one tile when C <= 128, the usual case: the destination row then stays in
// registers. Larger C is split over tiles; every tile group of a (row, head) recomputes the
// scalars that need all channels (scores, g . value) by the same loop over all tiles in the same
// order, so every tile sees the same softmax weights bit for bit and each channel is still
// written by one lane. Sums over a head's channels are xor butterflies inside the group: every
// lane ends with the same bits (IEEE addition is commutative), so all lanes agree on every score.
//
// Degree awareness. A row with more than `chunk_edges` in-edges is *heavy*: it is cut into chunks
// of chunk_edges edges (ChunkPlan, an exclusive scan over the rows' chunk counts), each chunk is a
// separate item whose partial state goes to a workspace slot, and the row's item merges the
// partial states in chunk order afterwards (deterministic). chunk_edges depends on E' only, so a
// graph is always cut the same way.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#include "core/cuda_check.h"
#include "core/dropout_rng.h"
#include "core/error.h"
#include "core/numeric.h"
#include "core/workspace.h"
#include "kernels/cuda/attention.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/csr_schedule.cuh"

namespace iognn::cuda::attention_detail {

constexpr int kThreads = 256;     // threads per block of every attention kernel
constexpr int kLaneChannels = 4;  // channels of a head row per lane and tile
constexpr int kMergeBatch = 4;    // heavy-row partial states loaded at once when merging

// Resident blocks per SM a kernel is compiled for (launch bounds): the policy's figure for its
// pass (kBlocksForward / kBlocksDst / kBlocksSrc: 4 blocks = <= 64 registers and 32 warps per SM
// to hide the gathers' latency, 2 = <= 128 registers), chosen per variant (heavier passes spill
// when squeezed); 1 with fp64 accumulation, whose values take two registers.
enum class Pass { kForward, kDst, kSrc };
template <class V, Pass P>
constexpr int min_blocks() {
  if constexpr (sizeof(typename V::acc) == 8) return 1;
  else if constexpr (P == Pass::kForward) return V::kBlocksForward;
  else if constexpr (P == Pass::kDst) return V::kBlocksDst;
  else return V::kBlocksSrc;
}

// Edges a group has in flight at once: 4 with vector loads (8 measured slower: registers), 2 with
// scalar loads (whose separate addresses cost more registers).
template <int VEC>
constexpr int batch_for() {
  return VEC == 1 ? 2 : 4;
}

// Channels per vector load of a T row: 4 (2 for fp64, whose 16-byte vectors hold 2).
template <typename T>
constexpr int vector_width() {
  return sizeof(T) == 8 ? 2 : 4;
}

// Vectors of VEC channels per lane and tile.
template <int VEC>
constexpr int slots_for() {
  return kLaneChannels / VEC;
}

// ---- scalar and vector access (device) -------------------------------------------------------
template <typename T>
__device__ __forceinline__ acc_t<T> ld(const T* p) {
  return to_acc(*p);
}
template <typename T>
__device__ __forceinline__ void st(T* p, acc_t<T> v) {
  *p = from_acc<T>(v);
}

// The raw vector type of VEC elements of T (8 or 16 bytes).
template <typename T, int VEC>
using RawVec = std::conditional_t<VEC * sizeof(T) == 16, uint4, uint2>;

// VEC consecutive elements at p (aligned to VEC * sizeof(T) bytes when VEC > 1), widened.
template <typename T, int VEC>
__device__ __forceinline__ void load_vec(const T* p, acc_t<T> (&out)[VEC]) {
  if constexpr (VEC == 1) {
    out[0] = ld(p);
  } else {
    using Raw = RawVec<T, VEC>;
    static_assert(sizeof(Raw) == VEC * sizeof(T), "vectors are 8 or 16 bytes");
    const Raw raw = __ldg(reinterpret_cast<const Raw*>(p));
    T tmp[VEC];
    memcpy(tmp, &raw, sizeof raw);
#pragma unroll
    for (int v = 0; v < VEC; ++v) out[v] = to_acc(tmp[v]);
  }
}

template <typename T, int VEC>
__device__ __forceinline__ void store_vec(T* p, const acc_t<T> (&in)[VEC]) {
  if constexpr (VEC == 1) {
    st(p, in[0]);
  } else {
    using Raw = RawVec<T, VEC>;
    T tmp[VEC];
#pragma unroll
    for (int v = 0; v < VEC; ++v) tmp[v] = from_acc<T>(in[v]);
    Raw raw;
    memcpy(&raw, tmp, sizeof raw);
    *reinterpret_cast<Raw*>(p) = raw;
  }
}

template <typename acc>
__device__ __forceinline__ acc exp_acc(acc x) {
  if constexpr (std::is_same_v<acc, double>) return exp(x); else return expf(x);
}
template <typename acc>
__device__ __forceinline__ acc log_acc(acc x) {
  if constexpr (std::is_same_v<acc, double>) return log(x); else return logf(x);
}
template <typename acc>
__device__ __forceinline__ acc neg_inf() {
  return -std::numeric_limits<acc>::infinity();
}

template <typename acc>
__device__ __forceinline__ acc leaky_relu(acc x, acc slope) {
  return x > acc(0) ? x : x * slope;
}
// d leaky_relu / dx, with PyTorch's convention at 0 (the negative side).
template <typename acc>
__device__ __forceinline__ acc leaky_relu_grad(acc x, acc slope) {
  return x > acc(0) ? acc(1) : slope;
}

template <typename acc>
__device__ __forceinline__ acc dropout_factor(const AttentionConfig& cfg, int64_t e, int64_t h) {
  return acc(dropout_scale(cfg.seed, uint64_t(e), uint64_t(h), uint64_t(cfg.heads), cfg.dropout));
}

// ---- groups, slots and tiles -----------------------------------------------------------------
// Launch geometry of one op call (plain data: host and kernel argument).
struct Geometry {
  int vec;       // channels per vector: 1 or vector_width<T>()
  int slots;     // vectors per lane and tile (slots_for)
  int group;     // lanes per group G
  int tiles;     // tiles per head row
  int64_t nvec;  // vectors per head row, C / vec
};

// Smallest power of two >= n (n >= 1), at most 32.
inline int lanes_for(int64_t n) {
  int g = 1;
  while (g < 32 && g < n) g *= 2;
  return g;
}

inline Geometry make_geometry(int64_t channels, int vec, int slots) {
  const int64_t nvec = channels / vec;
  const int group = lanes_for(nvec);
  const int64_t per_tile = int64_t(group) * slots;
  return {vec, slots, group, int((nvec + per_tile - 1) / per_tile), nvec};
}

// This lane's place in its group; `tile` is set by the kernel once it has decoded its item.
struct GroupLane {
  int slots;
  int G;
  int gl;
  int tile;
  int ntiles;
  unsigned mask;  // the group's lanes within the warp
  int64_t nvec;
  __device__ int64_t vidx(int t, int k) const { return (int64_t(t) * slots + k) * G + gl; }
  __device__ bool valid(int t, int k) const { return vidx(t, k) < nvec; }
};

// The group of this thread; `item` = its global group number.
__device__ __forceinline__ GroupLane group_lane(const Geometry& geo, int64_t& item) {
  const int lane = int(threadIdx.x & 31);
  const int G = geo.group;
  item = int64_t(blockIdx.x) * (kThreads / G) + threadIdx.x / G;
  const unsigned mask = G == 32 ? 0xffffffffu : ((1u << G) - 1u) << (lane & ~(G - 1));
  return {geo.slots, G, lane & (G - 1), 0, geo.tiles, mask, geo.nvec};
}

// kN vectors of VEC channels: one lane's share of a tile of a head row.
template <typename acc, int VEC>
struct Slots {
  static constexpr int kN = slots_for<VEC>();
  acc v[kN][VEC];
  __device__ void zero() {
#pragma unroll
    for (int k = 0; k < kN; ++k)
#pragma unroll
      for (int x = 0; x < VEC; ++x) v[k][x] = acc(0);
  }
};

// The lane's slots of tile t of the head row at `row` (0 where the slot is past the row's end).
template <typename T, int VEC>
__device__ __forceinline__ void load_slots(const T* row, const GroupLane& g, int t,
                                           Slots<acc_t<T>, VEC>& s) {
  using acc = acc_t<T>;
#pragma unroll
  for (int k = 0; k < Slots<acc, VEC>::kN; ++k) {
    if (g.valid(t, k)) {
      load_vec<T, VEC>(row + g.vidx(t, k) * VEC, s.v[k]);
    } else {
#pragma unroll
      for (int x = 0; x < VEC; ++x) s.v[k][x] = acc_t<T>(0);
    }
  }
}

template <typename T, int VEC>
__device__ __forceinline__ void store_slots(T* row, const GroupLane& g, int t,
                                            const Slots<acc_t<T>, VEC>& s) {
  using acc = acc_t<T>;
#pragma unroll
  for (int k = 0; k < Slots<acc, VEC>::kN; ++k)
    if (g.valid(t, k)) store_vec<T, VEC>(row + g.vidx(t, k) * VEC, s.v[k]);
}

// Workspace partial rows are plain acc arrays indexed by channel.
template <typename acc, int VEC>
__device__ __forceinline__ void load_partial(const acc* row, const GroupLane& g,
                                             Slots<acc, VEC>& s) {
#pragma unroll
  for (int k = 0; k < Slots<acc, VEC>::kN; ++k)
#pragma unroll
    for (int x = 0; x < VEC; ++x)
      s.v[k][x] = g.valid(g.tile, k) ? row[g.vidx(g.tile, k) * VEC + x] : acc(0);
}
template <typename acc, int VEC>
__device__ __forceinline__ void store_partial(acc* row, const GroupLane& g,
                                              const Slots<acc, VEC>& s) {
#pragma unroll
  for (int k = 0; k < Slots<acc, VEC>::kN; ++k)
    if (g.valid(g.tile, k))
#pragma unroll
      for (int x = 0; x < VEC; ++x) row[g.vidx(g.tile, k) * VEC + x] = s.v[k][x];
}

template <typename acc, int VEC>
__device__ __forceinline__ acc dot(const Slots<acc, VEC>& a, const Slots<acc, VEC>& b) {
  acc s = 0;
#pragma unroll
  for (int k = 0; k < Slots<acc, VEC>::kN; ++k)
#pragma unroll
    for (int x = 0; x < VEC; ++x) s += a.v[k][x] * b.v[k][x];
  return s;
}

// y = y * a + x * b, elementwise.
template <typename acc, int VEC>
__device__ __forceinline__ void scale_add(Slots<acc, VEC>& y, acc a, const Slots<acc, VEC>& x,
                                          acc b) {
#pragma unroll
  for (int k = 0; k < Slots<acc, VEC>::kN; ++k)
#pragma unroll
    for (int v = 0; v < VEC; ++v) y.v[k][v] = y.v[k][v] * a + x.v[k][v] * b;
}

// y += x * b, elementwise.
template <typename acc, int VEC>
__device__ __forceinline__ void add_scaled(Slots<acc, VEC>& y, const Slots<acc, VEC>& x, acc b) {
#pragma unroll
  for (int k = 0; k < Slots<acc, VEC>::kN; ++k)
#pragma unroll
    for (int v = 0; v < VEC; ++v) y.v[k][v] += x.v[k][v] * b;
}

// Sums each of the N values over the lanes of the group (every lane gets the same bits).
template <int N, typename acc>
__device__ __forceinline__ void group_sum(acc (&v)[N], const GroupLane& g) {
  for (int o = g.G >> 1; o > 0; o >>= 1)
#pragma unroll
    for (int n = 0; n < N; ++n) v[n] += __shfl_xor_sync(g.mask, v[n], o);
}

// ---- chunked heavy rows ----------------------------------------------------------------------
struct ChunkPlan {
  const int64_t* chunk_ptr;  // [rows + 1]: first chunk of each row (0 chunks for a light row);
                             // null when no row can be heavy (E' <= chunk_edges)
  int64_t chunk_edges;       // rows with more edges than this are heavy
  int64_t max_chunks;        // host bound on chunk_ptr[rows]
  __device__ bool heavy(int64_t degree) const {
    return chunk_ptr != nullptr && degree > chunk_edges;
  }
};

// Edges per chunk for a graph of E' edges: about sqrt(E') / 2, a power of two in [64, 1024], so
// that both a chunk and the merge of a hub's chunks stay short.
inline int64_t chunk_edges_for(int64_t num_edges) {
  int64_t t = 64;
  while (t < 1024 && 4 * (2 * t) * (2 * t) <= num_edges) t *= 2;
  return t;
}

// Whether a direction of E' edges whose rows have at most max_degree edges (-1: unknown) builds
// the chunk plan for rows longer than chunk_edges: not when a known longest row is within
// kLightOnlyDegree (csr_schedule.cuh), where every row stays whole in its group.
inline bool chunked(int64_t num_edges, int64_t chunk_edges, int64_t max_degree) {
  return num_edges > chunk_edges &&
         (max_degree < 0 || max_degree > std::max(chunk_edges, kLightOnlyDegree));
}

// Heavy rows have d > T edges and ceil(d / T) < 2 d / T chunks: fewer than 2 E' / T in all.
inline int64_t max_chunks_for(int64_t num_edges, int64_t chunk_edges) {
  return 2 * num_edges / chunk_edges + 1;
}

// First index k in [0, n) with a[k] > x (n when none).
template <typename P>
__device__ __forceinline__ int64_t upper_bound(const P* a, int64_t n, int64_t x) {
  int64_t lo = 0, hi = n;
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo) / 2;
    if (int64_t(a[mid]) <= x) lo = mid + 1; else hi = mid;
  }
  return lo;
}

// Row and position range of heavy chunk c (c < chunk_ptr[rows]).
template <typename index_t>
__device__ __forceinline__ void chunk_range(const ChunkPlan& plan, const index_t* offsets,
                                            int64_t rows, int64_t c, int64_t& row,
                                            int64_t& begin, int64_t& end) {
  row = upper_bound(plan.chunk_ptr, rows + 1, c) - 1;
  const int64_t first = int64_t(offsets[row]) + (c - plan.chunk_ptr[row]) * plan.chunk_edges;
  begin = first;
  end = min(int64_t(offsets[row + 1]), first + plan.chunk_edges);
}

// ---- heavy chunk items ------------------------------------------------------------------------
// The rows a plan chunks: a.graph's destination rows (rowptr) or, kSources, its source rows
// (colptr, the transposed CSR).
template <bool kSources, typename index_t>
__device__ __forceinline__ int64_t plan_rows(const AttentionGraph<index_t>& graph) {
  return kSources ? graph.num_src : graph.num_dst;
}
template <bool kSources, typename index_t>
__device__ __forceinline__ const index_t* plan_offsets(const AttentionGraph<index_t>& graph) {
  return kSources ? graph.colptr : graph.rowptr;
}

// One item of a chunks kernel: this thread's group folds the positions of its (chunk, head, tile)
// item over the heavy chunks of `plan` (the tile fastest, then the head) into a fresh State with
// kFold(a, g, row, head, begin, end, state) and hands the state to kStore(a, chunk, head, g,
// state), which writes the chunk's workspace slot for the rows kernel to merge in chunk order.
template <auto kFold, auto kStore, class State, bool kSources, class Args>
__device__ __forceinline__ void fold_chunk(const Args& a, const ChunkPlan& plan) {
  int64_t item;
  GroupLane g = group_lane(a.geo, item);
  const int64_t H = a.cfg.heads;
  const int64_t c = item / (H * g.ntiles);
  if (c >= plan.chunk_ptr[plan_rows<kSources>(a.graph)]) return;
  g.tile = int(item % g.ntiles);
  const int64_t h = (item / g.ntiles) % H;
  int64_t i, pb, pe;
  chunk_range(plan, plan_offsets<kSources>(a.graph), plan_rows<kSources>(a.graph), c, i, pb, pe);
  State state;
  state.init();
  kFold(a, g, i, h, pb, pe, state);
  kStore(a, c, h, g, state);
}

// ---- host side -------------------------------------------------------------------------------
// Blocks for `items` groups of `group` lanes (0 when there is nothing to do).
inline unsigned blocks_for(int64_t items, int group) {
  const int64_t per_block = kThreads / group;
  const int64_t blocks = (items + per_block - 1) / per_block;
  IOGNN_CHECK(blocks < (int64_t(1) << 31), ValueError, "attention: ", items,
              " work items exceed the CUDA grid limit");
  return unsigned(blocks);
}

// True when vector loads of rows at p with a row stride of `stride` elements stay aligned.
template <typename T>
bool vector_aligned(const T* p, int64_t stride = 0) {
  constexpr int64_t vec = vector_width<T>();
  return reinterpret_cast<uintptr_t>(p) % (vec * sizeof(T)) == 0 && stride % vec == 0;
}

}  // namespace iognn::cuda::attention_detail

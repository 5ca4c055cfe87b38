// Backward of the attention skeleton on a CUDA device: alpha is recomputed from lse, nothing of
// size E' x C is stored, and every gradient element is summed by one thread in a fixed order.
//
// With g = grad_out[i, h], drop_p the dropout multiplier and ga_p = grad_alpha[e_p, h]:
//   da_p = (g . value_p + ga_p) drop_p   (alpha output after dropout: GAT, GATv2)
//        =  g . value_p drop_p + ga_p    (alpha output before dropout: Transformer)
//   D_i  = sum_p alpha_p da_p / A_i (A_i = sum_p alpha_p),  ds_p = alpha_p (da_p - D_i),
//   alpha~_p = alpha_p drop_p.
// A_i is 1 up to the rounding of the forward's lse (eps * |lse| relative, and the forward's sum
// of exp over the row). Normalising D_i by it keeps the destination gradient sum_p ds_p w_p free
// of a term proportional to that rounding: GAT's w_p is a LeakyReLU slope, so on a row whose
// logits share a sign that gradient is an almost exactly cancelling sum, which the term could
// dominate.
// Pass 1 (destination rows, CSR; items (row, head, tile); heavy rows chunked like the forward and
// their chunks' states folded by dst_merge_kernel):
//   recomputes s_p, alpha_p and da_p, stores alpha_p and da_p ([E', H] scalars, CSR order), and
//   accumulates D_i (the alpha-weighted mean of da) and, centred on it (DstState), the destination
//   gradient sum_p ds_p w_p (w = d s / d dst), all in the same single pass.
// Pass 2 (sources over the transposed CSR colptr / row / csc2csr; heavy sources chunked): the
//   source gradients from ds_p = alpha_p (da_p - D_i) and alpha~_p: a gather, no atomics, whose
//   destination rows (V::gather_dst) are loaded for a whole batch of edges before any is used.
//   GATv2's att gradient sum_p ds_p LeakyReLU(z_p) is summed here too, from the z_p pass 2 forms
//   anyway (no extra traffic), when every block's groups hold fixed heads (att_plan_for): each
//   block folds its groups in group order into one [H, C] partial, and the partials are summed
//   over fixed block ranges, then over the ranges (att_column_kernel, param_reduce_kernel).
// Pass 3 (only with edge features, or GATv2's att outside that case): per-edge gradients of
//   edge_attr (one warp per edge, sums over the projection rows in order) and the parameter
//   gradients as per-chunk partial sums over fixed CSR position chunks, then a fixed-order sum
//   over the chunks.
#pragma once

#include "kernels/cuda/attention_scores.cuh"

namespace iognn::cuda::attention_detail {

constexpr int kEdgesPerWarp = 16;  // pass 3a: consecutive CSR positions per warp
constexpr int kUChunk = 256;       // pass 3a: projection rows staged in shared memory per warp
constexpr int kParamD = 8;         // pass 3b: edge features per thread
constexpr int64_t kParamEdgesPerChunk = 4096;
constexpr int64_t kParamMaxChunks = 512;
constexpr int64_t kAttMaxRanges = 512;  // block ranges of the pass 2 att partial sums

// GATv2's att gradient in pass 2: the number of src_rows_kernel blocks whose [H, C] partials are
// kept, or 0 when the blocks' groups do not hold fixed heads (groups per block not a multiple of
// H * tiles): pass 3 then sums the att term itself.
inline int64_t att_blocks_for(const Geometry& geo, int64_t num_src, int64_t H) {
  const int64_t per_block = kThreads / geo.group, head_tiles = H * geo.tiles;
  if (head_tiles == 0 || per_block % head_tiles != 0) return 0;
  return (num_src * head_tiles + per_block - 1) / per_block;
}
inline int64_t att_ranges_for(int64_t blocks) {
  return std::max<int64_t>(1, std::min(blocks, kAttMaxRanges));
}

// Number of fixed CSR position chunks of the parameter reduction (depends on E' only).
inline int64_t param_chunks_for(int64_t num_edges) {
  const int64_t n = (num_edges + kParamEdgesPerChunk - 1) / kParamEdgesPerChunk;
  return n < 1 ? 1 : (n > kParamMaxChunks ? kParamMaxChunks : n);
}

template <class V, typename index_t>
struct BackwardArgs {
  using T = typename V::value_type;
  using acc = typename V::acc;
  V v;
  AttentionGraph<index_t> graph;
  AttentionConfig cfg;
  Geometry geo;
  ChunkPlan dst_plan;  // over rowptr
  ChunkPlan src_plan;  // over colptr
  const acc* lse;
  const T* grad_out;
  const T* grad_alpha;  // or null
  acc* alpha;           // [E', H] alpha_p, CSR order
  acc* dalpha;          // [E', H] da_p, CSR order
  acc* dsum;            // [num_dst, H] D_i
  acc* partial;         // heavy chunk partials [max_chunks, H, width]
  acc* params;          // pass 3 partials [param_chunks, P]
  int64_t param_chunks;
  acc* att_partial;     // GATv2 in pass 2: [src_rows_kernel blocks, H * C], else null
};

// Widths of the per-chunk partials of pass 1 ([A, M, S, X]) and pass 2 (source gradient).
template <class V>
__host__ __device__ int64_t dst_width(int64_t C) {
  return 2 + 2 * (V::kChannelScore ? C : 1);
}
template <class V>
__host__ __device__ int64_t src_width(int64_t C) {
  return C * (V::kSrcB || V::kAttGrad ? 2 : 1) + (V::kSrcS ? 1 : 0);
}
// Pass 3 parameter partial count: W [K * De] (+ att [K] for GATv2).
template <class V>
__host__ __device__ int64_t param_count(int64_t H, int64_t C, int64_t edge_dim) {
  return V::proj_rows(H, C) * (edge_dim + (V::kAttGrad ? 1 : 0));
}

// ds_p and alpha~_p of CSR position p (destination i, augmented id e), head h.
template <class V, typename index_t>
__device__ __forceinline__ void edge_grads(const BackwardArgs<V, index_t>& a, int64_t p, int64_t i,
                                           int64_t e, int64_t h, typename V::acc& ds,
                                           typename V::acc& at) {
  const int64_t H = a.cfg.heads;
  const typename V::acc alpha = a.alpha[p * H + h];
  ds = alpha * (a.dalpha[p * H + h] - a.dsum[i * H + h]);
  at = alpha * dropout_factor<typename V::acc>(a.cfg, e, h);
}

// ---- pass 1 ----------------------------------------------------------------------------------
// Destination state of (i, h) over a set of in-edges, with w_p = d s_p / d dst (slots, or GAT's
// scalar): A = sum alpha, M = sum alpha da / A (the alpha-weighted mean of da, D_i),
// X = sum alpha w and S = sum alpha (da - M) w, kept centred on M as edges or chunks are folded in
// (Welford's update), so the gradient sum_p alpha_p (da_p - M) w_p = S involves no cancellation
// between large sums even when one edge dominates the softmax.
template <class V>
struct DstState {
  using acc = typename V::acc;
  using S = typename V::S;
  acc A, M;
  S s, x;      // channel variants
  acc s1, x1;  // GAT
  __device__ void init() {
    A = M = s1 = x1 = acc(0);
    s.zero();
    x.zero();
  }
  // Folds in a state with A2 = sum alpha, M2, S (s2 / s1_2) and X (x2 / x1_2) of other edges.
  __device__ void merge(acc A2, acc M2, const S& s2, const S& x2, acc s1_2, acc x1_2) {
    if (A2 == acc(0)) return;  // only zero weights: nothing else changes
    const acc A_new = A + A2;
    const acc M_new = M + (A2 / A_new) * (M2 - M);
    const acc shift = M - M_new, shift2 = M2 - M_new;
    if constexpr (V::kChannelScore) {
#pragma unroll
      for (int k = 0; k < S::kN; ++k)
#pragma unroll
        for (int v = 0; v < V::kVec; ++v) {
          s.v[k][v] += shift * x.v[k][v] + s2.v[k][v] + shift2 * x2.v[k][v];
          x.v[k][v] += x2.v[k][v];
        }
    } else {
      s1 += shift * x1 + s1_2 + shift2 * x1_2;
      x1 += x1_2;
    }
    A = A_new;
    M = M_new;
  }
  // One edge: weight alpha, da, direction w (or dw).
  __device__ void add(acc alpha, acc da, const S& w, acc dw) {
    S s2, x2;
    s2.zero();
    x2 = w;
#pragma unroll
    for (int k = 0; k < S::kN; ++k)
#pragma unroll
      for (int v = 0; v < V::kVec; ++v) x2.v[k][v] *= alpha;
    merge(alpha, da, s2, x2, acc(0), alpha * dw);
  }
};

template <bool kTiled, class V, typename index_t>
__device__ void dst_edges(const BackwardArgs<V, index_t>& a, const GroupLane& g, int64_t i,
                          int64_t h, int64_t pb, int64_t pe, DstState<V>& state) {
  using acc = typename V::acc;
  using T = typename V::value_type;
  const int64_t H = a.cfg.heads, C = a.cfg.channels;
  typename V::Dst dcache;
  a.v.load_dst(i, h, g, g.tile, dcache);
  const T* grad_row = a.grad_out + (i * H + h) * C;
  typename V::S gcache;
  load_slots(grad_row, g, g.tile, gcache);
  const acc lse = a.lse[i * H + h];
  for (int64_t p0 = pb; p0 < pe; p0 += EdgeBatch<V>::kN) {
    EdgeBatch<V> b;
    score_batch<false, true, kTiled>(a.v, a.graph, g, i, h, p0, pe, dcache, gcache, grad_row, b);
#pragma unroll
    for (int u = 0; u < EdgeBatch<V>::kN; ++u) {
      if (!b.ok[u]) continue;
      const int64_t e = b.e[u];
      const acc alpha = exp_acc(b.s[u] - lse);
      const acc drop = dropout_factor<acc>(a.cfg, e, h);
      const acc ga = a.grad_alpha ? ld(a.grad_alpha + e * H + h) : acc(0);
      const acc da = V::kAlphaAfterDropout ? (b.vdot[u] + ga) * drop : b.vdot[u] * drop + ga;
      if (g.gl == 0 && g.tile == 0) {
        a.alpha[(p0 + u) * H + h] = alpha;
        a.dalpha[(p0 + u) * H + h] = da;
      }
      state.add(alpha, da, b.w[u], b.dw[u]);
    }
  }
}

template <class V, typename index_t>
__device__ void dst_range(const BackwardArgs<V, index_t>& a, const GroupLane& g, int64_t i,
                          int64_t h, int64_t pb, int64_t pe, DstState<V>& state) {
  if (g.ntiles == 1) dst_edges<false>(a, g, i, h, pb, pe, state);
  else dst_edges<true>(a, g, i, h, pb, pe, state);
}

// Partial layout of a chunk: [A, M, S (C, or 1 for GAT), X (C, or 1)].
template <class V, typename index_t>
__device__ __forceinline__ void store_dst_partial(const BackwardArgs<V, index_t>& a, int64_t c,
                                                  int64_t h, const GroupLane& g,
                                                  const DstState<V>& state) {
  const int64_t H = a.cfg.heads, C = a.cfg.channels;
  typename V::acc* slot = a.partial + (c * H + h) * dst_width<V>(C);
  if (g.gl == 0 && g.tile == 0) {
    slot[0] = state.A;
    slot[1] = state.M;
    if (!V::kChannelScore) {
      slot[2] = state.s1;
      slot[3] = state.x1;
    }
  }
  if (V::kChannelScore) {
    store_partial(slot + 2, g, state.s);
    store_partial(slot + 2 + C, g, state.x);
  }
}

template <class V>
__device__ void merge_dst_partial(const typename V::acc* slot, int64_t C, const GroupLane& g,
                                  DstState<V>& state) {
  typename V::S s2, x2;
  if constexpr (V::kChannelScore) {
    load_partial(slot + 2, g, s2);
    load_partial(slot + 2 + C, g, x2);
    state.merge(slot[0], slot[1], s2, x2, 0, 0);
  } else {
    state.merge(slot[0], slot[1], s2, x2, slot[2], slot[3]);
  }
}

template <class V, typename index_t>
__global__ void __launch_bounds__(kThreads, min_blocks<V, Pass::kDst>())
    dst_chunks_kernel(const BackwardArgs<V, index_t> a) {
  fold_chunk<dst_range<V, index_t>, store_dst_partial<V, index_t>, DstState<V>, false>(
      a, a.dst_plan);
}

// The results of pass 1 for (i, h): D_i and the destination gradient.
template <class V, typename index_t>
__device__ void finish_dst(const BackwardArgs<V, index_t>& a, const GroupLane& g, int64_t i,
                           int64_t h, const DstState<V>& state) {
  if (g.gl == 0 && g.tile == 0) a.dsum[i * a.cfg.heads + h] = state.M;
  a.v.store_dst_grad(i, h, g, state.s, state.s1);
}

// Light rows of pass 1 (heavy rows: dst_merge_kernel).
template <class V, typename index_t>
__global__ void __launch_bounds__(kThreads, min_blocks<V, Pass::kDst>())
    dst_rows_kernel(const BackwardArgs<V, index_t> a) {
  int64_t item;
  GroupLane g = group_lane(a.geo, item);
  const int64_t H = a.cfg.heads;
  if (item >= a.graph.num_dst * H * g.ntiles) return;
  g.tile = int(item % g.ntiles);
  const int64_t h = (item / g.ntiles) % H, i = item / (g.ntiles * H);
  const int64_t pb = a.graph.rowptr[i], pe = a.graph.rowptr[i + 1];
  if (a.dst_plan.heavy(pe - pb)) return;
  DstState<V> state;
  state.init();
  dst_range(a, g, i, h, pb, pe, state);
  finish_dst(a, g, i, h, state);
}

// Heavy rows of pass 1: the chunks' states folded in in chunk order. A kernel of its own: in the
// rows kernel this branch would push the edge loop past its register budget.
template <class V, typename index_t>
__global__ void __launch_bounds__(kThreads, min_blocks<V, Pass::kDst>())
    dst_merge_kernel(const BackwardArgs<V, index_t> a) {
  int64_t item;
  GroupLane g = group_lane(a.geo, item);
  const int64_t H = a.cfg.heads, C = a.cfg.channels;
  if (item >= a.graph.num_dst * H * g.ntiles) return;
  g.tile = int(item % g.ntiles);
  const int64_t h = (item / g.ntiles) % H, i = item / (g.ntiles * H);
  if (!a.dst_plan.heavy(int64_t(a.graph.rowptr[i + 1]) - int64_t(a.graph.rowptr[i]))) return;
  DstState<V> state;
  state.init();
  const int64_t width = dst_width<V>(C);
  for (int64_t c = a.dst_plan.chunk_ptr[i]; c < a.dst_plan.chunk_ptr[i + 1]; ++c)
    merge_dst_partial(a.partial + (c * H + h) * width, C, g, state);
  finish_dst(a, g, i, h, state);
}

// ---- pass 2 ----------------------------------------------------------------------------------
template <class V, typename index_t>
__device__ void src_range(const BackwardArgs<V, index_t>& a, const GroupLane& g, int64_t j,
                          int64_t h, int64_t qb, int64_t qe,
                          SrcGrad<typename V::acc, V::kVec>& grad) {
  using acc = typename V::acc;
  const AttentionGraph<index_t>& graph = a.graph;
  constexpr int kN = batch_for<V::kVec>();
  typename V::Src src;
  a.v.load_src(j, h, g, src);
  for (int64_t q0 = qb; q0 < qe; q0 += kN) {
    int64_t i[kN], e[kN];
    acc ds[kN], at[kN];
#pragma unroll
    for (int u = 0; u < kN; ++u) {
      // Padding repeats the first edge with zero weights.
      const bool ok = q0 + u < qe;
      const int64_t q = ok ? q0 + u : q0;
      const int64_t p = graph.csc2csr[q];
      i[u] = graph.row[q];
      e[u] = graph.eid[p];
      edge_grads(a, p, i[u], e[u], h, ds[u], at[u]);
      if (!ok) ds[u] = at[u] = acc(0);
    }
    typename V::DstRows rows[kN];  // every gather of the batch in flight before any is used
#pragma unroll
    for (int u = 0; u < kN; ++u) a.v.gather_dst(i[u], h, g, a.grad_out, rows[u]);
#pragma unroll
    for (int u = 0; u < kN; ++u) a.v.src_edge(src, rows[u], e[u], h, g, ds[u], at[u], grad);
  }
}

// A heavy chunk's source gradient in its workspace slot: [a (C), b (C, kSrcB or kAttGrad), s].
template <class V, typename index_t>
__device__ __forceinline__ void store_src_partial(const BackwardArgs<V, index_t>& a, int64_t c,
                                                  int64_t h, const GroupLane& g,
                                                  const SrcGrad<typename V::acc, V::kVec>& grad) {
  const int64_t H = a.cfg.heads, C = a.cfg.channels;
  typename V::acc* slot = a.partial + (c * H + h) * src_width<V>(C);
  store_partial(slot, g, grad.a);
  if (V::kSrcB || V::kAttGrad) store_partial(slot + C, g, grad.b);
  if (V::kSrcS && g.gl == 0 && g.tile == 0) slot[src_width<V>(C) - 1] = grad.s;
}

template <class V, typename index_t>
__global__ void __launch_bounds__(kThreads, min_blocks<V, Pass::kSrc>())
    src_chunks_kernel(const BackwardArgs<V, index_t> a) {
  fold_chunk<src_range<V, index_t>, store_src_partial<V, index_t>,
             SrcGrad<typename V::acc, V::kVec>, true>(a, a.src_plan);
}

// The block's [H, C] partial of GATv2's att gradient: the lanes' att slots (grad.b) staged in
// shared memory, then entry (h, c) sums the groups holding head h and c's tile in group order.
// Every thread of the block calls it (it synchronises); inactive groups stage zeros.
template <class V, typename index_t>
__device__ void store_att_partial(const BackwardArgs<V, index_t>& a, const GroupLane& g,
                                  bool active, const typename V::S& att) {
  using acc = typename V::acc;
  constexpr int kVec = V::kVec, kN = V::S::kN;
  __shared__ acc staged[kThreads][kLaneChannels];
#pragma unroll
  for (int k = 0; k < kN; ++k)
#pragma unroll
    for (int x = 0; x < kVec; ++x)
      staged[threadIdx.x][k * kVec + x] = active && g.valid(g.tile, k) ? att.v[k][x] : acc(0);
  __syncthreads();
  const int64_t H = a.cfg.heads, C = a.cfg.channels, HC = H * C;
  const int per_block = kThreads / g.G, head_tiles = int(H) * g.ntiles;
  for (int64_t idx = threadIdx.x; idx < HC; idx += kThreads) {
    const int64_t h = idx / C, c = idx % C, n = c / kVec;
    const int t = int(n / (int64_t(g.slots) * g.G)), r = int(n % (int64_t(g.slots) * g.G));
    const int k = r / g.G, gl = r % g.G, x = int(c % kVec);
    acc sum = 0;
    for (int grp = int(h) * g.ntiles + t; grp < per_block; grp += head_tiles)
      sum += staged[grp * g.G + gl][k * kVec + x];
    a.att_partial[int64_t(blockIdx.x) * HC + idx] = sum;
  }
}

template <class V, typename index_t>
__global__ void __launch_bounds__(kThreads, min_blocks<V, Pass::kSrc>())
    src_rows_kernel(const BackwardArgs<V, index_t> a) {
  using acc = typename V::acc;
  int64_t item;
  GroupLane g = group_lane(a.geo, item);
  const int64_t H = a.cfg.heads, C = a.cfg.channels;
  const bool active = item < a.graph.num_src * H * g.ntiles;
  const bool att_here = V::kAttGrad && a.att_partial != nullptr;
  if (!active && !att_here) return;
  g.tile = int(item % g.ntiles);
  const int64_t h = (item / g.ntiles) % H, j = item / (g.ntiles * H);
  SrcGrad<acc, V::kVec> grad;
  grad.init();
  if (active) {
    const int64_t qb = a.graph.colptr[j], qe = a.graph.colptr[j + 1];
    if (a.src_plan.heavy(qe - qb)) {  // sum the chunks' partials in chunk order
      constexpr bool kB = V::kSrcB || V::kAttGrad;
      const int64_t width = src_width<V>(C), c_end = a.src_plan.chunk_ptr[j + 1];
      for (int64_t c0 = a.src_plan.chunk_ptr[j]; c0 < c_end; c0 += kMergeBatch) {
        SrcGrad<acc, V::kVec> part[kMergeBatch];
#pragma unroll
        for (int u = 0; u < kMergeBatch; ++u) {
          const acc* slot = a.partial + (min(c0 + u, c_end - 1) * H + h) * width;
          load_partial(slot, g, part[u].a);
          if (kB) load_partial(slot + C, g, part[u].b);
          part[u].s = V::kSrcS ? slot[width - 1] : acc(0);
        }
#pragma unroll
        for (int u = 0; u < kMergeBatch; ++u) {
          if (c0 + u >= c_end) continue;
          add_scaled(grad.a, part[u].a, acc(1));
          if (kB) add_scaled(grad.b, part[u].b, acc(1));
          if (V::kSrcS) grad.s += part[u].s;
        }
      }
    } else {
      src_range(a, g, j, h, qb, qe, grad);
    }
    a.v.store_src_grad(j, h, g, grad);
  }
  if constexpr (V::kAttGrad)
    if (att_here) store_att_partial(a, g, active, grad.b);
}

// Pass 2's att partials [blocks, HC] summed over kAttMaxRanges fixed block ranges, in block order:
// out[range, idx] (the ranges are then summed in order by param_reduce_kernel).
template <typename acc>
__global__ void __launch_bounds__(kThreads) att_column_kernel(const acc* partial, int64_t blocks,
                                                              int64_t HC, int64_t ranges,
                                                              acc* out) {
  const int64_t idx = int64_t(blockIdx.y) * kThreads + threadIdx.x;
  if (idx >= HC) return;
  const int64_t r = blockIdx.x, lo = blocks * r / ranges, hi = blocks * (r + 1) / ranges;
  acc sum = 0;
  for (int64_t b = lo; b < hi; ++b) sum += partial[b * HC + idx];
  out[r * HC + idx] = sum;
}

// ---- pass 3 ----------------------------------------------------------------------------------
// Destination row of CSR position p: the last row whose offset is <= p.
template <typename index_t>
__device__ __forceinline__ int64_t row_of(const AttentionGraph<index_t>& graph, int64_t p) {
  return upper_bound(graph.rowptr, graph.num_dst + 1, p) - 1;
}

// grad_edge_attr[e, d] = sum_k u(p, k) W[k, d]: one warp per edge, kEdgesPerWarp consecutive CSR
// positions per warp. The warp stages u for kUChunk rows k in shared memory, then lane d sums
// its column in k order.
template <class V, typename index_t>
__global__ void __launch_bounds__(kThreads) edge_attr_grad_kernel(
    const BackwardArgs<V, index_t> a, typename V::value_type* grad_edge_attr, int64_t edge_dim) {
  using acc = typename V::acc;
  __shared__ acc staged[kThreads / 32][kUChunk];
  const int lane = int(threadIdx.x & 31), warp = int(threadIdx.x >> 5);
  acc* u = staged[warp];
  const int64_t E = a.graph.num_edges, K = V::proj_rows(a.cfg.heads, a.cfg.channels);
  const int64_t first = (int64_t(blockIdx.x) * (kThreads / 32) + warp) * kEdgesPerWarp;
  if (first >= E) return;
  const int64_t last = min(E, first + kEdgesPerWarp);
  int64_t i = row_of(a.graph, first);
  for (int64_t p = first; p < last; ++p) {
    while (int64_t(a.graph.rowptr[i + 1]) <= p) ++i;
    const int64_t j = a.graph.col[p], e = a.graph.eid[p];
    for (int64_t d0 = 0; d0 < edge_dim; d0 += 32) {
      const int64_t d = d0 + lane;
      acc sum = 0;
      for (int64_t k0 = 0; k0 < K; k0 += kUChunk) {
        const int64_t n = min(K - k0, int64_t(kUChunk));
        __syncwarp();
        for (int64_t r = lane; r < n; r += 32) {
          const int64_t k = k0 + r;
          acc ds, at, unused;
          edge_grads(a, p, i, e, a.v.head_of(k), ds, at);
          u[r] = a.v.edge_u(i, j, e, k, ds, at, a.grad_out, unused);
        }
        __syncwarp();
        if (d < edge_dim)
          for (int64_t r = 0; r < n; ++r) sum += u[r] * a.v.weight(k0 + r, d);
      }
      if (d < edge_dim) st(grad_edge_attr + e * edge_dim + d, sum);
    }
  }
}

// Parameter partials of CSR chunk blockIdx.x, rows k of tile blockIdx.y, features d of tile
// blockIdx.z: thread (el, kl) sums u(p, k) edge_attr[e, d] (and GATv2's att term) over the chunk's
// positions p = lo + el, lo + el + EL, ...; the EL partial sums are then added in el order.
template <class V, typename index_t>
__global__ void __launch_bounds__(kThreads) param_partials_kernel(
    const BackwardArgs<V, index_t> a, int lanes_k, int64_t edge_dim) {
  using acc = typename V::acc;
  __shared__ acc sums[kThreads][kParamD + 1];
  // att's term: here unless pass 2 summed it (a.att_partial).
  const int lanes_e = kThreads / lanes_k;
  const int kl = int(threadIdx.x) % lanes_k, el = int(threadIdx.x) / lanes_k;
  const int64_t K = V::proj_rows(a.cfg.heads, a.cfg.channels), E = a.graph.num_edges;
  const int64_t k = int64_t(blockIdx.y) * lanes_k + kl;
  const int64_t d0 = int64_t(blockIdx.z) * kParamD;
  const bool with_att = V::kAttGrad && a.att_partial == nullptr && blockIdx.z == 0;
  const int64_t lo = E * blockIdx.x / a.param_chunks, hi = E * (blockIdx.x + 1) / a.param_chunks;
  acc wsum[kParamD], att_sum = 0;
#pragma unroll
  for (int x = 0; x < kParamD; ++x) wsum[x] = acc(0);
  if (k < K && lo + el < hi) {
    const int64_t h = a.v.head_of(k);
    const auto& edges = a.v.in.edge_attr;
    int64_t i = row_of(a.graph, lo + el);
    for (int64_t p = lo + el; p < hi; p += lanes_e) {
      while (int64_t(a.graph.rowptr[i + 1]) <= p) ++i;
      const int64_t j = a.graph.col[p], e = a.graph.eid[p];
      acc ds, at, att_term = 0;
      edge_grads(a, p, i, e, h, ds, at);
      const acc u = a.v.edge_u(i, j, e, k, ds, at, a.grad_out, att_term);
      if (with_att) att_sum += att_term;
#pragma unroll
      for (int x = 0; x < kParamD; ++x)
        if (d0 + x < edge_dim) wsum[x] += u * ld(edges.data + e * edges.row_stride + d0 + x);
    }
  }
#pragma unroll
  for (int x = 0; x < kParamD; ++x) sums[threadIdx.x][x] = wsum[x];
  sums[threadIdx.x][kParamD] = att_sum;
  __syncthreads();
  if (el != 0 || k >= K) return;
  const int64_t P = param_count<V>(a.cfg.heads, a.cfg.channels, edge_dim);
  acc* out = a.params + int64_t(blockIdx.x) * P;
  for (int x = 0; x <= kParamD; ++x) {
    const bool is_att = x == kParamD;
    if (is_att ? !with_att : d0 + x >= edge_dim) continue;
    acc total = 0;
    for (int r = 0; r < lanes_e; ++r) total += sums[r * lanes_k + kl][x];
    out[is_att ? K * edge_dim + k : k * edge_dim + d0 + x] = total;
  }
}

// Parameter gradients: entry first + idx (store_param numbering) = sum over the chunks' partials
// [chunks, P] in chunk order, for idx < count.
template <class V>
__global__ void __launch_bounds__(kThreads) param_reduce_kernel(const V v,
                                                                const typename V::acc* partials,
                                                                int64_t chunks, int64_t P,
                                                                int64_t first, int64_t count) {
  for (int64_t idx = int64_t(blockIdx.x) * kThreads + threadIdx.x; idx < count;
       idx += int64_t(gridDim.x) * kThreads) {
    typename V::acc total = 0;
    for (int64_t c = 0; c < chunks; ++c) total += partials[c * P + idx];
    v.store_param(first + idx, total);
  }
}

}  // namespace iognn::cuda::attention_detail

// Forward of the attention skeleton on a CUDA device (FlashAttention-style over CSR rows).
//
// Items are (row, head, tile) groups (attention_common.cuh). A light row's group streams the
// row's in-edges once with an online softmax in registers (running max m, sum l, accumulator
// rescaled when m grows), then writes out = acc / l and lse = m + log l, and, when alpha is asked
// for, walks the row again to write alpha = exp(s - lse) (x dropout for GAT/GATv2).
// Heavy rows (> chunk_edges in-edges) take three launches:
//   forward_chunks : one group per (chunk, head, tile) writes its (m, l, acc) to the workspace;
//   forward_rows   : the row's group merges its chunks' states in chunk order (exact rescaling);
//   forward_alpha  : one group per (chunk, head) writes the chunk's alpha from the row's lse.
// Workspace: the chunk plan and partial states [max_chunks, H, 2 + C]; nothing of size E' x C.
#pragma once

#include "kernels/cuda/attention_scores.cuh"

namespace iognn::cuda::attention_detail {

template <class V, typename index_t>
struct ForwardArgs {
  using T = typename V::value_type;
  using acc = typename V::acc;
  V v;
  AttentionGraph<index_t> graph;
  AttentionConfig cfg;
  Geometry geo;
  ChunkPlan plan;
  AttentionOutputs<T> out;
  acc* partial;  // [max_chunks, H, 2 + C]: m, l, acc[C]
};

template <class V>
struct SoftmaxState {
  using acc = typename V::acc;
  acc m, l;
  typename V::S sum;
  __device__ void init() {
    m = neg_inf<acc>();
    l = acc(0);
    sum.zero();
  }
  // Folds in a state (m2, l2, sum2) computed with its own running max.
  __device__ void merge(acc m2, acc l2, const typename V::S& sum2) {
    const acc m_new = max(m, m2);
    if (m_new == neg_inf<acc>()) return;
    const acc a = exp_acc(m - m_new), b = exp_acc(m2 - m_new);
    l = l * a + l2 * b;
    scale_add(sum, a, sum2, b);
    m = m_new;
  }
};

// Online softmax over the in-edges [pb, pe) of row i, head h.
template <bool kTiled, class V, typename index_t>
__device__ void attend_edges(const ForwardArgs<V, index_t>& a, const GroupLane& g, int64_t i,
                             int64_t h, int64_t pb, int64_t pe, SoftmaxState<V>& state) {
  using acc = typename V::acc;
  const typename V::S unused{};
  typename V::Dst dcache;
  a.v.load_dst(i, h, g, g.tile, dcache);
  for (int64_t p0 = pb; p0 < pe; p0 += EdgeBatch<V>::kN) {
    EdgeBatch<V> b;
    score_batch<true, false, kTiled>(a.v, a.graph, g, i, h, p0, pe, dcache, unused, nullptr, b);
    acc m_new = state.m;
#pragma unroll
    for (int u = 0; u < EdgeBatch<V>::kN; ++u) m_new = max(m_new, b.s[u]);
    if (m_new == neg_inf<acc>()) continue;
    const acc rescale = exp_acc(state.m - m_new);
    state.l *= rescale;
#pragma unroll
    for (int k = 0; k < V::S::kN; ++k)
#pragma unroll
      for (int x = 0; x < V::kVec; ++x) state.sum.v[k][x] *= rescale;
#pragma unroll
    for (int u = 0; u < EdgeBatch<V>::kN; ++u) {
      const acc p = exp_acc(b.s[u] - m_new);  // 0 for padding (whose value slots are zeroed)
      state.l += p;
      add_scaled(state.sum, b.value[u], p * dropout_factor<acc>(a.cfg, b.e[u], h));
    }
    state.m = m_new;
  }
}

template <class V, typename index_t>
__device__ void attend_range(const ForwardArgs<V, index_t>& a, const GroupLane& g, int64_t i,
                             int64_t h, int64_t pb, int64_t pe, SoftmaxState<V>& state) {
  if (g.ntiles == 1) attend_edges<false>(a, g, i, h, pb, pe, state);
  else attend_edges<true>(a, g, i, h, pb, pe, state);
}

// alpha of the in-edges [pb, pe) of row i, head h, from the row's lse (tile-0 groups only).
template <bool kTiled, class V, typename index_t>
__device__ void alpha_edges(const ForwardArgs<V, index_t>& a, const GroupLane& g, int64_t i,
                            int64_t h, int64_t pb, int64_t pe, typename V::acc lse) {
  using acc = typename V::acc;
  const typename V::S unused{};
  const int64_t H = a.cfg.heads;
  typename V::Dst dcache;
  a.v.load_dst(i, h, g, g.tile, dcache);
  for (int64_t p0 = pb; p0 < pe; p0 += EdgeBatch<V>::kN) {
    EdgeBatch<V> b;
    score_batch<false, false, kTiled>(a.v, a.graph, g, i, h, p0, pe, dcache, unused, nullptr, b);
    if (g.gl != 0) continue;
#pragma unroll
    for (int u = 0; u < EdgeBatch<V>::kN; ++u) {
      if (!b.ok[u]) continue;
      const acc alpha = exp_acc(b.s[u] - lse);
      const acc value =
          V::kAlphaAfterDropout ? alpha * dropout_factor<acc>(a.cfg, b.e[u], h) : alpha;
      st(a.out.alpha + b.e[u] * H + h, value);
    }
  }
}

template <class V, typename index_t>
__device__ void write_alpha(const ForwardArgs<V, index_t>& a, const GroupLane& g, int64_t i,
                            int64_t h, int64_t pb, int64_t pe, typename V::acc lse) {
  if (g.ntiles == 1) alpha_edges<false>(a, g, i, h, pb, pe, lse);
  else alpha_edges<true>(a, g, i, h, pb, pe, lse);
}

// A heavy chunk's state (m, l, acc) in its workspace slot.
template <class V, typename index_t>
__device__ __forceinline__ void store_chunk_state(const ForwardArgs<V, index_t>& a, int64_t c,
                                                  int64_t h, const GroupLane& g,
                                                  const SoftmaxState<V>& state) {
  const int64_t H = a.cfg.heads, C = a.cfg.channels;
  typename V::acc* slot = a.partial + (c * H + h) * (2 + C);
  if (g.gl == 0 && g.tile == 0) {
    slot[0] = state.m;
    slot[1] = state.l;
  }
  store_partial(slot + 2, g, state.sum);
}

template <class V, typename index_t>
__global__ void __launch_bounds__(kThreads, min_blocks<V, Pass::kForward>())
    forward_chunks_kernel(const ForwardArgs<V, index_t> a) {
  fold_chunk<attend_range<V, index_t>, store_chunk_state<V, index_t>, SoftmaxState<V>, false>(
      a, a.plan);
}

template <class V, typename index_t>
__global__ void __launch_bounds__(kThreads, min_blocks<V, Pass::kForward>())
    forward_rows_kernel(const ForwardArgs<V, index_t> a) {
  using acc = typename V::acc;
  int64_t item;
  GroupLane g = group_lane(a.geo, item);
  const int64_t H = a.cfg.heads, C = a.cfg.channels;
  if (item >= a.graph.num_dst * H * g.ntiles) return;
  g.tile = int(item % g.ntiles);
  const int64_t h = (item / g.ntiles) % H, i = item / (g.ntiles * H);
  const int64_t pb = a.graph.rowptr[i], pe = a.graph.rowptr[i + 1];
  const bool heavy = a.plan.heavy(pe - pb);
  SoftmaxState<V> state;
  state.init();
  if (heavy) {  // merge the chunks' states in chunk order, kMergeBatch loaded at once
    const int64_t c_end = a.plan.chunk_ptr[i + 1];
    for (int64_t c0 = a.plan.chunk_ptr[i]; c0 < c_end; c0 += kMergeBatch) {
      acc m[kMergeBatch], l[kMergeBatch];
      typename V::S sum[kMergeBatch];
#pragma unroll
      for (int u = 0; u < kMergeBatch; ++u) {
        const acc* slot = a.partial + (min(c0 + u, c_end - 1) * H + h) * (2 + C);
        m[u] = slot[0];
        l[u] = slot[1];
        load_partial(slot + 2, g, sum[u]);
      }
#pragma unroll
      for (int u = 0; u < kMergeBatch; ++u)
        if (c0 + u < c_end) state.merge(m[u], l[u], sum[u]);
    }
  } else {
    attend_range(a, g, i, h, pb, pe, state);
  }
  // As in PyG: a row without in-edges gets 0; a row whose scores are all -inf (l = 0) or hold a
  // NaN or +inf (l = NaN) gets NaN (0 / 0), so does its lse and with it the backward.
  const bool any = pe > pb;
  const acc lse = any ? state.m + log_acc(state.l) : neg_inf<acc>();
  typename V::S out;
#pragma unroll
  for (int k = 0; k < V::S::kN; ++k)
#pragma unroll
    for (int x = 0; x < V::kVec; ++x) out.v[k][x] = any ? state.sum.v[k][x] / state.l : acc(0);
  store_slots(a.out.out + (i * H + h) * C, g, g.tile, out);
  if (g.gl == 0 && g.tile == 0) a.out.lse[i * H + h] = lse;
  if (a.out.alpha && g.tile == 0 && !heavy) write_alpha(a, g, i, h, pb, pe, lse);
}

template <class V, typename index_t>
__global__ void __launch_bounds__(kThreads, min_blocks<V, Pass::kForward>())
    forward_alpha_kernel(const ForwardArgs<V, index_t> a) {
  int64_t item;
  GroupLane g = group_lane(a.geo, item);
  const int64_t H = a.cfg.heads;
  const int64_t c = item / H;
  if (c >= a.plan.chunk_ptr[a.graph.num_dst]) return;
  const int64_t h = item % H;
  int64_t i, pb, pe;
  chunk_range(a.plan, a.graph.rowptr, a.graph.num_dst, c, i, pb, pe);
  write_alpha(a, g, i, h, pb, pe, a.out.lse[i * H + h]);
}

}  // namespace iognn::cuda::attention_detail

// Scoring a batch of a destination row's in-edges: shared by the forward (online softmax, alpha)
// and backward pass 1 (alpha recomputed from lse, g . value, destination-gradient directions).
//
// A group handles a batch of kN consecutive CSR positions at once (positions past the range are
// padding: ok = false, score -inf). The batch's source rows are gathered in a phase of loads alone
// (V::gather) before the first is used: a load issued after another edge's arithmetic would wait
// for it (in-order issue), and the edge projection's branch between the edges kept the compiler
// from hoisting them, so each edge paid a full memory latency instead of each batch. For every
// tile t the group needs (all tiles when the score or g . value sums over channels, else only its
// own), it adds the lane's share of those sums; the own tile's value and w slots are kept. Every
// tile group of (i, h) runs the same loop in the same order, so they all get the same sums.
#pragma once

#include "kernels/cuda/attention_variants.cuh"

namespace iognn::cuda::attention_detail {

template <class V>
struct EdgeBatch {
  using acc = typename V::acc;
  using S = typename V::S;
  static constexpr int kN = batch_for<V::kVec>();
  bool ok[kN];
  int64_t e[kN];  // augmented edge ids
  acc s[kN];      // scores; -inf for padding
  S value[kN];    // own-tile value slots (kValue)
  S w[kN];        // own-tile d s / d dst slots (kGrad)
  acc dw[kN];     // GAT's scalar d s / d a_dst (kGrad)
  acc vdot[kN];   // grad_out[i, h] . value over all channels (kGrad)
};

// kTiled = false (one tile per head row, the usual case): dcache (V::Dst) and gcache
// (grad_out[i, h] slots, kGrad only) hold the whole head row. kTiled = true: they are reloaded
// for every tile t from the row (grad_row: grad_out[i, h]); only GAT's dcache is read then.
template <bool kValue, bool kGrad, bool kTiled, class V, typename index_t>
__device__ __forceinline__ void score_batch(const V& v, const AttentionGraph<index_t>& graph,
                                            const GroupLane& g, int64_t i, int64_t h, int64_t p0,
                                            int64_t pe, const typename V::Dst& dcache,
                                            const typename V::S& gcache,
                                            const typename V::value_type* grad_row,
                                            EdgeBatch<V>& b) {
  using acc = typename V::acc;
  using S = typename V::S;
  constexpr int kN = EdgeBatch<V>::kN;
  constexpr bool kLoad = kValue || kGrad;  // the value rows are needed
  index_t j[kN];
  acc src[kN];
#pragma unroll
  for (int u = 0; u < kN; ++u) {
    b.ok[u] = p0 + u < pe;
    const int64_t p = b.ok[u] ? p0 + u : p0;
    j[u] = graph.col[p];
    b.e[u] = graph.eid[p];
  }
#pragma unroll
  for (int u = 0; u < kN; ++u) src[u] = v.source_term(j[u], h);
  acc part[kN], vd[kN];
  if constexpr (!kTiled) {
    typename V::Rows rows[kN];
#pragma unroll
    for (int u = 0; u < kN; ++u) v.template gather<kLoad>(j[u], h, g, 0, rows[u]);
#pragma unroll
    for (int u = 0; u < kN; ++u) {
      S value, w;
      part[u] = v.template score_part<kLoad>(dcache, rows[u], b.e[u], h, g, 0, value, w);
      vd[u] = kGrad ? dot(gcache, value) : acc(0);
      if (kValue) b.value[u] = value;
      if (kGrad) b.w[u] = w;
    }
  } else {
#pragma unroll
    for (int u = 0; u < kN; ++u) part[u] = vd[u] = acc(0);
    constexpr bool kAllTiles = V::kChannelScore || kGrad;
    for (int t = 0; t < g.ntiles; ++t) {
      if (!kAllTiles && t != g.tile) continue;
      typename V::Dst d;
      v.load_dst(i, h, g, t, d);
      S gt;
      if (kGrad) load_slots(grad_row, g, t, gt);
      typename V::Rows rows[kN];
#pragma unroll
      for (int u = 0; u < kN; ++u) v.template gather<kLoad>(j[u], h, g, t, rows[u]);
#pragma unroll
      for (int u = 0; u < kN; ++u) {
        S value, w;
        part[u] += v.template score_part<kLoad>(d, rows[u], b.e[u], h, g, t, value, w);
        if (kGrad) vd[u] += dot(gt, value);
        if (t == g.tile) {
          if (kValue) b.value[u] = value;
          if (kGrad) b.w[u] = w;
        }
      }
    }
  }
  if constexpr (V::kChannelScore) group_sum(part, g);
  if constexpr (kGrad) group_sum(vd, g);
#pragma unroll
  for (int u = 0; u < kN; ++u) {
    // Padding repeats a real edge's row: its value slots are zeroed, so that its zero weight
    // cannot meet an Inf or NaN value (0 * Inf would poison the row's sum).
    if (kValue && !b.ok[u]) b.value[u].zero();
    b.dw[u] = acc(0);
    b.s[u] = b.ok[u] ? v.finish_score(part[u], dcache, src[u], b.e[u], h, b.dw[u]) : neg_inf<acc>();
    b.vdot[u] = vd[u];
  }
}

}  // namespace iognn::cuda::attention_detail

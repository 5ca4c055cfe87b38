// The three attention variants as device policies of the shared skeleton (attention_forward.cuh,
// attention_backward.cuh). Each policy supplies, for the lane's slots of a tile (see
// attention_common.cuh), the pieces its score, value and gradients are made of:
//
//   Dst, load_dst(i, h, g, t, d)        destination-side registers of (i, h), tile t
//   source_term(j, h)                   a per-source scalar of the score (GAT's a_src, else 0)
//   Rows, gather<kValue>(j, h, g, t, r) the source rows' slots of tile t the score (and, when
//                                       kValue, the value) needs: loads only, so that a batch's
//                                       gathers are all in flight before any is used
//   score_part<kValue>(d, r, e, h, g, t, value, w)
//                                       the lane's part of the channel sum of the score (0 for
//                                       GAT), the value slots (when kValue) and w = d s / d dst
//   finish_score(sum, d, src, e, h, dw) the score from the group's channel sum and source_term;
//                                       GAT's scalar d s / d a_dst in dw
//   store_dst_grad(i, h, g, slots, scalar)          pass 1 result (x_dst / query, or a_dst)
//   Src, load_src(j, h, g, s); DstRows, gather_dst(i, h, g, grad_out, r) (loads only, as gather);
//   src_edge(s, r, e, h, g, ds, alpha~, SrcGrad&);
//   store_src_grad(j, h, g, SrcGrad)                pass 2 (x / x_src / key+value, a_src;
//                                       GATv2 sums its att term into SrcGrad::b)
//   proj_rows(H, C), head_of(k), weight(k, d), store_param(idx, v),
//   edge_u(i, j, e, k, ds, alpha~, grad_out, att_term)
//                                       pass 3: per (edge, row k of the edge projection) the
//                                       gradient u of the projected edge term; parameters in the
//                                       partial layout [K * De (+ K for att)]
//   kBlocksForward, kBlocksDst, kBlocksSrc           launch bounds of each pass (min_blocks)
// Sums follow the host kernels' order where one thread owns them (edge projections over d, the
// GAT pre-activation); channel sums are the group's butterflies.
#pragma once

#include "kernels/cuda/attention_common.cuh"

namespace iognn::cuda::attention_detail {

// The source-side gradient of one (source, head, tile): up to two channel arrays and a scalar.
template <typename acc, int VEC>
struct SrcGrad {
  Slots<acc, VEC> a, b;
  acc s;
  __device__ void init() {
    a.zero();
    b.zero();
    s = acc(0);
  }
};

template <typename T>
__device__ __forceinline__ const T* head_row(const NodeRows<T>& r, int64_t n, int64_t h,
                                             int64_t C) {
  return r.data + n * r.row_stride + h * C;
}

// ep = lin_edge(edge_attr[e])[h, tile t] for the lane's slots: W_t is W_e transposed [De, H*C].
template <typename T, int VEC>
__device__ __forceinline__ void project_edge(const EdgeRows<T>& edge, const T* w_t, int64_t HC,
                                             int64_t e, int64_t h, int64_t C, const GroupLane& g,
                                             int t, Slots<acc_t<T>, VEC>& ep) {
  using acc = acc_t<T>;
  using S = Slots<acc, VEC>;
  ep.zero();
  const T* x = edge.data + e * edge.row_stride;
  for (int64_t d = 0; d < edge.dim; ++d) {
    const acc xd = ld(x + d);
    const T* w = w_t + d * HC + h * C;
#pragma unroll
    for (int k = 0; k < S::kN; ++k) {
      if (!g.valid(t, k)) continue;
      acc wv[VEC];
      load_vec<T, VEC>(w + g.vidx(t, k) * VEC, wv);
#pragma unroll
      for (int v = 0; v < VEC; ++v) ep.v[k][v] += wv[v] * xd;
    }
  }
}

// One element of the same projection (pass 3): sum_d W_t[d, k] edge_attr[e, d].
template <typename T>
__device__ __forceinline__ acc_t<T> project_edge_at(const EdgeRows<T>& edge, const T* w_t,
                                                    int64_t HC, int64_t e, int64_t k) {
  acc_t<T> ep = 0;
  const T* x = edge.data + e * edge.row_stride;
  for (int64_t d = 0; d < edge.dim; ++d) ep += ld(w_t + d * HC + k) * ld(x + d);
  return ep;
}

// ---- GAT -------------------------------------------------------------------------------------
template <typename T, int VEC>
struct GatPolicy {
  using value_type = T;
  using acc = acc_t<T>;
  using S = Slots<acc, VEC>;
  static constexpr int kVec = VEC;
  static constexpr bool kChannelScore = false;
  static constexpr bool kAlphaAfterDropout = true;
  static constexpr bool kSrcB = false;  // source gradient: x (a) and a_src (s)
  static constexpr bool kSrcS = true;
  static constexpr bool kAttGrad = false;
  static constexpr int kBlocksForward = 4, kBlocksDst = 4, kBlocksSrc = 4;  // min_blocks

  GatInputs<T> in;
  GatGrads<T> grads;
  int64_t H, C;
  acc slope;

  __host__ __device__ static int64_t proj_rows(int64_t H, int64_t) { return H; }

  __device__ acc edge_term(int64_t e, int64_t h) const {
    acc s = 0;
    const T* x = in.edge_attr.data + e * in.edge_attr.row_stride;
    for (int64_t d = 0; d < in.edge_attr.dim; ++d) s += ld(x + d) * ld(in.w_edge + d * H + h);
    return s;
  }
  __device__ acc a_src_of(int64_t j, int64_t h) const {
    return ld(in.a_src.data + j * in.a_src.row_stride + h);
  }
  __device__ acc a_dst_of(int64_t i, int64_t h) const {
    return in.a_dst.data ? ld(in.a_dst.data + i * in.a_dst.row_stride + h) : acc(0);
  }
  // The leaky_relu input from its node terms, summed in the host kernel's order.
  __device__ acc pre_of(acc a_src, acc a_dst, int64_t e, int64_t h) const {
    acc p = a_src;
    if (in.a_dst.data) p += a_dst;
    if (in.edge_attr.data) p += edge_term(e, h);
    return p;
  }
  __device__ acc pre(int64_t i, int64_t j, int64_t e, int64_t h) const {
    return pre_of(a_src_of(j, h), a_dst_of(i, h), e, h);
  }

  struct Dst {
    acc a_dst;
  };
  __device__ void load_dst(int64_t i, int64_t h, const GroupLane&, int, Dst& d) const {
    d.a_dst = a_dst_of(i, h);
  }

  __device__ acc source_term(int64_t j, int64_t h) const { return a_src_of(j, h); }
  struct Rows {
    S x;
  };
  template <bool kValue>
  __device__ void gather(int64_t j, int64_t h, const GroupLane& g, int t, Rows& r) const {
    if (kValue) load_slots(head_row(in.x, j, h, C), g, t, r.x);
  }
  template <bool kValue>
  __device__ acc score_part(const Dst&, const Rows& r, int64_t, int64_t, const GroupLane&, int,
                            S& value, S& w) const {
    if (kValue) value = r.x;
    w.zero();
    return acc(0);
  }
  __device__ acc finish_score(acc, const Dst& d, acc a_src, int64_t e, int64_t h,
                              acc& dw) const {
    const acc p = pre_of(a_src, d.a_dst, e, h);
    dw = leaky_relu_grad(p, slope);
    return leaky_relu(p, slope);
  }
  __device__ void store_dst_grad(int64_t i, int64_t h, const GroupLane& g, const S&,
                                 acc scalar) const {
    if (grads.a_dst && g.gl == 0 && g.tile == 0) st(grads.a_dst + i * H + h, scalar);
  }

  struct Src {
    acc a_src;
  };
  __device__ void load_src(int64_t j, int64_t h, const GroupLane&, Src& s) const {
    s.a_src = a_src_of(j, h);
  }
  struct DstRows {
    S gi;
    acc a_dst;
  };
  __device__ void gather_dst(int64_t i, int64_t h, const GroupLane& g, const T* grad_out,
                             DstRows& r) const {
    load_slots(grad_out + (i * H + h) * C, g, g.tile, r.gi);
    r.a_dst = a_dst_of(i, h);
  }
  __device__ void src_edge(const Src& s, const DstRows& r, int64_t e, int64_t h,
                           const GroupLane& g, acc ds, acc at, SrcGrad<acc, VEC>& out) const {
    add_scaled(out.a, r.gi, at);
    if (g.tile == 0) out.s += ds * leaky_relu_grad(pre_of(s.a_src, r.a_dst, e, h), slope);
  }
  __device__ void store_src_grad(int64_t j, int64_t h, const GroupLane& g,
                                 const SrcGrad<acc, VEC>& s) const {
    store_slots(grads.x + (j * H + h) * C, g, g.tile, s.a);
    if (g.gl == 0 && g.tile == 0) st(grads.a_src + j * H + h, s.s);
  }

  // Pass 3: rows k = heads of w_edge [De, H]; u = d loss / d pre.
  __device__ int64_t head_of(int64_t k) const { return k; }
  __device__ acc weight(int64_t k, int64_t d) const { return ld(in.w_edge + d * H + k); }
  __device__ acc edge_u(int64_t i, int64_t j, int64_t e, int64_t k, acc ds, acc, const T*,
                        acc&) const {
    return ds * leaky_relu_grad(pre(i, j, e, k), slope);
  }
  __device__ void store_param(int64_t idx, acc v) const {
    const int64_t De = in.edge_attr.dim;
    st(grads.w_edge + (idx % De) * H + idx / De, v);
  }
};

// ---- GATv2 -----------------------------------------------------------------------------------
template <typename T, int VEC>
struct GatV2Policy {
  using value_type = T;
  using acc = acc_t<T>;
  using S = Slots<acc, VEC>;
  static constexpr int kVec = VEC;
  static constexpr bool kChannelScore = true;
  static constexpr bool kAlphaAfterDropout = true;
  static constexpr bool kSrcB = false;  // source gradient: x_src (a)
  static constexpr bool kSrcS = false;
  static constexpr bool kAttGrad = true;
  static constexpr int kBlocksForward = 4, kBlocksDst = 2, kBlocksSrc = 3;  // min_blocks

  GatV2Inputs<T> in;
  GatV2Grads<T> grads;
  const T* w_t;  // W_e transposed [De, H*C] (workspace), with edge_attr
  int64_t H, C;
  acc slope;

  __host__ __device__ static int64_t proj_rows(int64_t H, int64_t C) { return H * C; }

  struct Dst {
    S xd, att;
  };
  __device__ void load_dst(int64_t i, int64_t h, const GroupLane& g, int t, Dst& d) const {
    load_slots(head_row(in.x_dst, i, h, C), g, t, d.xd);
    load_slots(in.att + h * C, g, t, d.att);
  }

  __device__ acc source_term(int64_t, int64_t) const { return acc(0); }
  // The source rows are loaded in score_part (not yet measured gathered up front, where the 64
  // registers of the forward would hold them in local memory).
  struct Rows {
    int64_t j;
  };
  template <bool>
  __device__ void gather(int64_t j, int64_t, const GroupLane&, int, Rows& r) const {
    r.j = j;
  }
  template <bool kValue>
  __device__ acc score_part(const Dst& d, const Rows& r, int64_t e, int64_t h, const GroupLane& g,
                            int t, S& value, S& w) const {
    load_slots(head_row(in.x_src, r.j, h, C), g, t, value);
    S ep;
    if (in.edge_attr.data) project_edge(in.edge_attr, w_t, H * C, e, h, C, g, t, ep);
    acc s = 0;
#pragma unroll
    for (int k = 0; k < S::kN; ++k)
#pragma unroll
      for (int v = 0; v < VEC; ++v) {
        acc z = d.xd.v[k][v] + value.v[k][v];  // PyG's order: (x_i + x_j) + ep
        if (in.edge_attr.data) z += ep.v[k][v];
        s += d.att.v[k][v] * leaky_relu(z, slope);
        w.v[k][v] = d.att.v[k][v] * leaky_relu_grad(z, slope);
      }
    return s;
  }
  __device__ acc finish_score(acc sum, const Dst&, acc, int64_t, int64_t, acc& dw) const {
    dw = acc(0);
    return sum;
  }
  __device__ void store_dst_grad(int64_t i, int64_t h, const GroupLane& g, const S& slots,
                                 acc) const {
    store_slots(grads.x_dst + (i * H + h) * C, g, g.tile, slots);
  }

  struct Src {
    S xs, att;
  };
  __device__ void load_src(int64_t j, int64_t h, const GroupLane& g, Src& s) const {
    load_slots(head_row(in.x_src, j, h, C), g, g.tile, s.xs);
    load_slots(in.att + h * C, g, g.tile, s.att);
  }
  // The destination rows are loaded in src_edge: gathered up front, a batch's eight rows next to
  // the source's slot arrays would not fit pass 2's 80 registers.
  struct DstRows {
    int64_t i;
    const T* grad_out;
  };
  __device__ void gather_dst(int64_t i, int64_t, const GroupLane&, const T* grad_out,
                             DstRows& r) const {
    r = {i, grad_out};
  }
  __device__ void src_edge(const Src& s, const DstRows& r, int64_t e, int64_t h,
                           const GroupLane& g, acc ds, acc at, SrcGrad<acc, VEC>& out) const {
    S gi, xd, ep;
    load_slots(r.grad_out + (r.i * H + h) * C, g, g.tile, gi);
    load_slots(head_row(in.x_dst, r.i, h, C), g, g.tile, xd);
    if (in.edge_attr.data) project_edge(in.edge_attr, w_t, H * C, e, h, C, g, g.tile, ep);
#pragma unroll
    for (int k = 0; k < S::kN; ++k)
#pragma unroll
      for (int v = 0; v < VEC; ++v) {
        acc z = xd.v[k][v] + s.xs.v[k][v];
        if (in.edge_attr.data) z += ep.v[k][v];
        out.a.v[k][v] += at * gi.v[k][v] + ds * (s.att.v[k][v] * leaky_relu_grad(z, slope));
        out.b.v[k][v] += ds * leaky_relu(z, slope);  // att's term (summed by pass 2's blocks)
      }
  }
  __device__ void store_src_grad(int64_t j, int64_t h, const GroupLane& g,
                                 const SrcGrad<acc, VEC>& s) const {
    store_slots(grads.x_src + (j * H + h) * C, g, g.tile, s.a);
  }

  // Pass 3: rows k = h * C + c of W_e [H*C, De]; u = d loss / d ep[k]; att_term = d loss / d att.
  __device__ int64_t head_of(int64_t k) const { return k / C; }
  __device__ acc weight(int64_t k, int64_t d) const {
    return ld(in.w_edge + k * in.edge_attr.dim + d);
  }
  __device__ acc edge_u(int64_t i, int64_t j, int64_t e, int64_t k, acc ds, acc, const T*,
                        acc& att_term) const {
    acc z = ld(in.x_dst.data + i * in.x_dst.row_stride + k) +
            ld(in.x_src.data + j * in.x_src.row_stride + k);
    if (in.edge_attr.data) z += project_edge_at(in.edge_attr, w_t, H * C, e, k);
    att_term = ds * leaky_relu(z, slope);
    return ds * (ld(in.att + k) * leaky_relu_grad(z, slope));
  }
  __device__ void store_param(int64_t idx, acc v) const {
    const int64_t weights = H * C * in.edge_attr.dim;
    if (idx < weights) st(grads.w_edge + idx, v); else st(grads.att + (idx - weights), v);
  }
};

// ---- Graph Transformer -----------------------------------------------------------------------
template <typename T, int VEC>
struct TransformerPolicy {
  using value_type = T;
  using acc = acc_t<T>;
  using S = Slots<acc, VEC>;
  static constexpr int kVec = VEC;
  static constexpr bool kChannelScore = true;
  static constexpr bool kAlphaAfterDropout = false;
  static constexpr bool kSrcB = true;  // source gradient: key (a) and value (b)
  static constexpr bool kSrcS = false;
  static constexpr bool kAttGrad = false;
  // min_blocks. The forward's 3 (80 registers) holds a batch's key and value rows (8 vectors of
  // 4 channels) in registers; at 4 (64) ptxas keeps them in local memory.
  static constexpr int kBlocksForward = 3, kBlocksDst = 2, kBlocksSrc = 3;

  TransformerInputs<T> in;
  TransformerGrads<T> grads;
  const T* w_t;  // W_e transposed [De, H*C] (workspace), with edge_attr
  int64_t H, C;
  acc scale;

  __host__ __device__ static int64_t proj_rows(int64_t H, int64_t C) { return H * C; }

  struct Dst {
    S q;
  };
  __device__ void load_dst(int64_t i, int64_t h, const GroupLane& g, int t, Dst& d) const {
    load_slots(head_row(in.query, i, h, C), g, t, d.q);
  }

  __device__ acc source_term(int64_t, int64_t) const { return acc(0); }
  struct Rows {
    S key, value;
  };
  template <bool kValue>
  __device__ void gather(int64_t j, int64_t h, const GroupLane& g, int t, Rows& r) const {
    load_slots(head_row(in.key, j, h, C), g, t, r.key);
    if (kValue) load_slots(head_row(in.value, j, h, C), g, t, r.value);
  }
  template <bool kValue>
  __device__ acc score_part(const Dst& d, const Rows& r, int64_t e, int64_t h, const GroupLane& g,
                            int t, S& value, S& w) const {
    S ep;
    if (in.edge_attr.data) project_edge(in.edge_attr, w_t, H * C, e, h, C, g, t, ep);
    if (kValue) value = r.value;
    acc s = 0;
#pragma unroll
    for (int k = 0; k < S::kN; ++k)
#pragma unroll
      for (int v = 0; v < VEC; ++v) {
        acc kk = r.key.v[k][v];
        if (in.edge_attr.data) {
          kk += ep.v[k][v];
          if (kValue) value.v[k][v] += ep.v[k][v];
        }
        s += d.q.v[k][v] * kk;
        w.v[k][v] = scale * kk;
      }
    return s;
  }
  __device__ acc finish_score(acc sum, const Dst&, acc, int64_t, int64_t, acc& dw) const {
    dw = acc(0);
    return sum * scale;
  }
  __device__ void store_dst_grad(int64_t i, int64_t h, const GroupLane& g, const S& slots,
                                 acc) const {
    store_slots(grads.query + (i * H + h) * C, g, g.tile, slots);
  }

  struct Src {};
  __device__ void load_src(int64_t, int64_t, const GroupLane&, Src&) const {}
  struct DstRows {
    S qi, gi;
  };
  __device__ void gather_dst(int64_t i, int64_t h, const GroupLane& g, const T* grad_out,
                             DstRows& r) const {
    load_slots(head_row(in.query, i, h, C), g, g.tile, r.qi);
    load_slots(grad_out + (i * H + h) * C, g, g.tile, r.gi);
  }
  __device__ void src_edge(const Src&, const DstRows& r, int64_t, int64_t, const GroupLane&,
                           acc ds, acc at, SrcGrad<acc, VEC>& out) const {
    add_scaled(out.a, r.qi, ds * scale);
    add_scaled(out.b, r.gi, at);
  }
  __device__ void store_src_grad(int64_t j, int64_t h, const GroupLane& g,
                                 const SrcGrad<acc, VEC>& s) const {
    store_slots(grads.key + (j * H + h) * C, g, g.tile, s.a);
    store_slots(grads.value + (j * H + h) * C, g, g.tile, s.b);
  }

  // Pass 3: rows k = h * C + c of W_e; ep enters the key (through the score) and the value.
  __device__ int64_t head_of(int64_t k) const { return k / C; }
  __device__ acc weight(int64_t k, int64_t d) const {
    return ld(in.w_edge + k * in.edge_attr.dim + d);
  }
  __device__ acc edge_u(int64_t i, int64_t, int64_t, int64_t k, acc ds, acc at,
                        const T* grad_out, acc&) const {
    return ds * scale * ld(in.query.data + i * in.query.row_stride + k) +
           at * ld(grad_out + i * H * C + k);
  }
  __device__ void store_param(int64_t idx, acc v) const { st(grads.w_edge + idx, v); }
};

}  // namespace iognn::cuda::attention_detail

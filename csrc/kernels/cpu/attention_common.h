// Attention family (GAT, GATv2, Graph Transformer), host kernels: shared types and the skeleton.
//
// For every destination i and head h the variants score each in-edge p of i (CSR position p,
// source j = col[p], augmented edge id e = eid[p]) and aggregate a value per edge:
//   lse[i,h]   = log sum_p exp(s_p)                 (max subtracted first; -inf for an empty row)
//   alpha_p    = exp(s_p - lse[i,h])                 (the same formula in forward and backward)
//   alpha~_p   = alpha_p * dropout_scale(seed, e, h, H, dropout)
//   out[i,h,:] = sum_p alpha~_p * value_p            (0 for an empty row)
// The skeleton below owns the softmax, the dropout mask (regenerated, never stored), the optional
// alpha output, the FlashAttention-style recomputation in backward and every reduction; a variant
// (gat.cpp, gatv2.cpp, transformer.cpp) supplies only its score, its value and their gradients.
//
// Backward, with g = grad_out[i,h,:] and drop_p the dropout multiplier:
//   d_alpha~_p = g . value_p (+ grad_alpha when the alpha output is alpha~),
//   d_alpha_p  = d_alpha~_p * drop_p (+ grad_alpha when the alpha output is alpha before dropout),
//   D_i = sum_p alpha_p d_alpha_p / sum_p alpha_p,  ds_p = alpha_p (d_alpha_p - D_i).
// (sum_p alpha_p is 1 up to the rounding of lse; normalising by it keeps the destination gradient,
// an almost exactly cancelling sum for GAT, free of a term proportional to that rounding.)
// It runs three passes, each output element owned by one thread (no atomics, deterministic):
//   1. CSR rows: ds_p and alpha~_p into [E', H] scratch (CSR order), destination-side gradients.
//   2. transposed CSR (colptr, row, csc2csr): source-side gradients.
//   3. CSR positions in kParamChunks fixed chunks: per-edge gradients (edge_attr) and per-chunk
//      partials of the parameter gradients, summed in chunk order, so the result does not depend
//      on the number of threads.
// Accumulation is in acc_t<T> (fp32, fp64 for fp64); no [E', H*C] tensor is ever materialised.
//
// Variant interface (a struct V with value_type T and acc = acc_t<T>; VariantBase below holds the
// state and members every variant has):
//   kAlphaAfterDropout             the alpha output is alpha~ (GAT, GATv2) or alpha (Transformer)
//   dst_width, src_width           per-head widths of the destination / source gradient rows
//   edge_dim, param_width          De (0 without edge features), size of the parameter gradients
//   struct EdgeHead(const V&)      per-thread temporaries describing one (edge, head)
//   prepare(i, j, e, h, EdgeHead&) computes what the score depends on (recomputed in each pass)
//   score(eh) -> s_p               add_value(eh, w, out_h): out_h[c] += w * value_p[c]
//   value_dot(eh, g_h) -> g . value_p
//   add_dst_grad(eh, ds, dst_h)                         dst_h [dst_width]
//   add_src_grad(eh, ds, alpha~, g_h, src_h)            src_h [src_width]
//   add_edge_grad(eh, ds, alpha~, g_h, edge_g, params)  edge_g [edge_dim], params [param_width]
//   store_dst_grad(i, buf [H*dst_width]), store_src_grad(j, buf [H*src_width]),
//   store_edge_grad(e, edge_g), store_param_grad(params)
// A variant's header declares its two entry points with IOGNN_CPU_ATTENTION_API, and its .cpp
// defines them on this skeleton with IOGNN_CPU_ATTENTION_DEFINE (both at the end of this file).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "core/dropout_rng.h"
#include "core/numeric.h"
#include "core/parallel.h"
#include "kernels/attention_types.h"
#include "kernels/cpu/instantiate.h"

namespace iognn::cpu {

template <typename acc>
inline acc leaky_relu(acc x, acc slope) {
  return x > acc(0) ? x : x * slope;
}
// d leaky_relu / dx, with PyTorch's convention at 0 (the negative side).
template <typename acc>
inline acc leaky_relu_grad(acc x, acc slope) {
  return x > acc(0) ? acc(1) : slope;
}

// lin_edge without bias, one head: ep[c] = sum_d W[(h*C + c), d] * edge[d], W [H*C, De] contiguous.
template <typename T>
void project_edge(const T* weight, const T* edge, int64_t h, int64_t C, int64_t De, acc_t<T>* ep) {
  for (int64_t c = 0; c < C; ++c) {
    const T* w = weight + (h * C + c) * De;
    acc_t<T> sum = 0;
    for (int64_t d = 0; d < De; ++d) sum += load(w + d) * load(edge + d);
    ep[c] = sum;
  }
}

// Backward of project_edge given u[c] = dL/d ep[c]: edge_grad[d] += sum_c u[c] W[hC+c, d] and
// weight_grad[(hC+c)*De + d] += u[c] * edge[d].
template <typename T>
void project_edge_backward(const T* weight, const T* edge, int64_t h, int64_t C, int64_t De,
                           const acc_t<T>* u, acc_t<T>* edge_grad, acc_t<T>* weight_grad) {
  for (int64_t c = 0; c < C; ++c) {
    const T* w = weight + (h * C + c) * De;
    acc_t<T>* wg = weight_grad + (h * C + c) * De;
    for (int64_t d = 0; d < De; ++d) {
      edge_grad[d] += u[c] * load(w + d);
      wg[d] += u[c] * load(edge + d);
    }
  }
}

template <typename T>
void store_row(T* dst, const acc_t<T>* src, int64_t n) {
  for (int64_t k = 0; k < n; ++k) store(dst + k, src[k]);
}

template <typename T>
void load_row(const T* src, int64_t n, acc_t<T>* dst) {
  for (int64_t k = 0; k < n; ++k) dst[k] = load(src + k);
}

// out[k] += w * row[k], and the dot product g . row, over n elements (a value that is a node row).
template <typename T>
void add_scaled_row(const T* row, acc_t<T> w, int64_t n, acc_t<T>* out) {
  for (int64_t k = 0; k < n; ++k) out[k] += w * load(row + k);
}

template <typename T>
acc_t<T> dot_row(const acc_t<T>* g, const T* row, int64_t n) {
  acc_t<T> dot = 0;
  for (int64_t k = 0; k < n; ++k) dot += g[k] * load(row + k);
  return dot;
}

// What every variant's pieces hold: its inputs and gradient outputs, H and C, and the widths the
// skeleton reads (the variant gives those of its own gradient rows). The edge features have the
// same layout [E', De] in every variant, so their gradient is stored here.
template <typename T, typename Inputs, typename Grads>
struct VariantBase {
  using value_type = T;
  using acc = acc_t<T>;

  Inputs in;
  Grads grads;
  int64_t H, C;
  int64_t dst_width, src_width, edge_dim, param_width;

  VariantBase(const Inputs& in_, const Grads& grads_, const AttentionConfig& cfg,
              int64_t dst_width_, int64_t src_width_, int64_t param_width_)
      : in(in_), grads(grads_), H(cfg.heads), C(cfg.channels), dst_width(dst_width_),
        src_width(src_width_), edge_dim(in_.edge_attr.dim), param_width(param_width_) {}

  void store_edge_grad(int64_t e, const acc* buf) const {
    store_row(grads.edge_attr + e * edge_dim, buf, edge_dim);
  }
};

// Number of chunks the parameter-gradient reduction is split into: fixed, so the summation order
// (and the result, bit for bit) is the same for any thread count.
constexpr int64_t kParamChunks = 64;
constexpr int64_t kRowGrain = 16;

template <typename acc>
inline acc dropout_factor(const AttentionConfig& cfg, int64_t e, int64_t h) {
  return acc(dropout_scale(cfg.seed, uint64_t(e), uint64_t(h), uint64_t(cfg.heads), cfg.dropout));
}

template <typename index_t, typename V>
void attention_forward(const AttentionGraph<index_t>& g, const AttentionConfig& cfg, const V& v,
                       const AttentionOutputs<typename V::value_type>& o) {
  using T = typename V::value_type;
  using acc = acc_t<T>;
  const int64_t H = cfg.heads, C = cfg.channels;
  parallel_for(0, g.num_dst, kRowGrain, [&](int64_t lo, int64_t hi) {
    typename V::EdgeHead eh(v);
    std::vector<acc> scores, sum(C);
    for (int64_t i = lo; i < hi; ++i) {
      const int64_t begin = g.rowptr[i], deg = g.rowptr[i + 1] - begin;
      scores.resize(deg);
      for (int64_t h = 0; h < H; ++h) {
        acc max_s = -std::numeric_limits<acc>::infinity();
        for (int64_t k = 0; k < deg; ++k) {
          v.prepare(i, g.col[begin + k], g.eid[begin + k], h, eh);
          scores[k] = v.score(eh);
          max_s = std::max(max_s, scores[k]);
        }
        acc lse = -std::numeric_limits<acc>::infinity();
        if (deg > 0) {
          acc total = 0;
          for (int64_t k = 0; k < deg; ++k) total += std::exp(scores[k] - max_s);
          lse = max_s + std::log(total);
        }
        std::fill(sum.begin(), sum.end(), acc(0));
        for (int64_t k = 0; k < deg; ++k) {
          const int64_t j = g.col[begin + k], e = g.eid[begin + k];
          const acc alpha = std::exp(scores[k] - lse);
          const acc alpha_t = alpha * dropout_factor<acc>(cfg, e, h);
          if (o.alpha) store(o.alpha + e * H + h, V::kAlphaAfterDropout ? alpha_t : alpha);
          // No skip for alpha~ = 0 (a dropped or underflowed edge): as in PyG (and the CUDA
          // kernels), 0 * an Inf / NaN value is NaN.
          v.prepare(i, j, e, h, eh);
          v.add_value(eh, alpha_t, sum.data());
        }
        store_row(o.out + (i * H + h) * C, sum.data(), C);
        o.lse[i * H + h] = lse;
      }
    }
  });
}

// grad_out [num_dst, H, C] contiguous; grad_alpha [E', H] contiguous or null. The gradients go
// wherever the variant's store_* functions put them.
template <typename index_t, typename V>
void attention_backward(const AttentionGraph<index_t>& g, const AttentionConfig& cfg, const V& v,
                        const acc_t<typename V::value_type>* lse,
                        const typename V::value_type* grad_out,
                        const typename V::value_type* grad_alpha) {
  using T = typename V::value_type;
  using acc = acc_t<T>;
  const int64_t H = cfg.heads, C = cfg.channels, E = g.num_edges;
  // Per-edge scalars in CSR order (the only edge-sized state): ds_p and alpha~_p per head.
  std::vector<acc> ds(E * H), alpha_t(E * H);

  // Pass 1: destination rows. ds first holds alpha_p until D_i is known.
  parallel_for(0, g.num_dst, kRowGrain, [&](int64_t lo, int64_t hi) {
    typename V::EdgeHead eh(v);
    std::vector<acc> gh(C), d_alpha, dst(H * v.dst_width);
    for (int64_t i = lo; i < hi; ++i) {
      const int64_t begin = g.rowptr[i], deg = g.rowptr[i + 1] - begin;
      d_alpha.resize(deg);
      std::fill(dst.begin(), dst.end(), acc(0));
      for (int64_t h = 0; h < H; ++h) {
        load_row(grad_out + (i * H + h) * C, C, gh.data());
        acc D = 0, A = 0;
        for (int64_t k = 0; k < deg; ++k) {
          const int64_t p = begin + k, e = g.eid[p];
          v.prepare(i, g.col[p], e, h, eh);
          const acc alpha = std::exp(v.score(eh) - lse[i * H + h]);
          const acc drop = dropout_factor<acc>(cfg, e, h);
          acc da = v.value_dot(eh, gh.data());  // d loss / d alpha~_p
          const acc ga = grad_alpha ? load(grad_alpha + e * H + h) : acc(0);
          da = V::kAlphaAfterDropout ? (da + ga) * drop : da * drop + ga;
          d_alpha[k] = da;
          ds[p * H + h] = alpha;
          alpha_t[p * H + h] = alpha * drop;
          D += alpha * da;
          A += alpha;
        }
        if (A > acc(0)) D /= A;
        for (int64_t k = 0; k < deg; ++k) {
          const int64_t p = begin + k;
          const acc s = ds[p * H + h] * (d_alpha[k] - D);
          ds[p * H + h] = s;
          if (v.dst_width == 0) continue;
          v.prepare(i, g.col[p], g.eid[p], h, eh);
          v.add_dst_grad(eh, s, dst.data() + h * v.dst_width);
        }
      }
      v.store_dst_grad(i, dst.data());
    }
  });

  // Pass 2: sources, over their out-edges in the transposed CSR.
  parallel_for(0, g.num_src, kRowGrain, [&](int64_t lo, int64_t hi) {
    typename V::EdgeHead eh(v);
    std::vector<acc> gh(C), src(H * v.src_width);
    for (int64_t j = lo; j < hi; ++j) {
      std::fill(src.begin(), src.end(), acc(0));
      for (int64_t q = g.colptr[j]; q < g.colptr[j + 1]; ++q) {
        const int64_t p = g.csc2csr[q], i = g.row[q], e = g.eid[p];
        for (int64_t h = 0; h < H; ++h) {
          load_row(grad_out + (i * H + h) * C, C, gh.data());
          v.prepare(i, j, e, h, eh);
          v.add_src_grad(eh, ds[p * H + h], alpha_t[p * H + h], gh.data(),
                         src.data() + h * v.src_width);
        }
      }
      v.store_src_grad(j, src.data());
    }
  });

  // Pass 3: per-edge gradients and chunked parameter partials.
  if (v.edge_dim == 0 && v.param_width == 0) return;
  const int64_t P = v.param_width;
  std::vector<acc> partial(kParamChunks * P, acc(0));
  parallel_for(0, kParamChunks, 1, [&](int64_t c_lo, int64_t c_hi) {
    typename V::EdgeHead eh(v);
    std::vector<acc> gh(C), edge_grad(v.edge_dim);
    for (int64_t c = c_lo; c < c_hi; ++c) {
      const int64_t lo = E * c / kParamChunks, hi = E * (c + 1) / kParamChunks;
      if (lo == hi) continue;
      // The row holding position lo: the last row whose offset is <= lo.
      int64_t i = std::upper_bound(g.rowptr, g.rowptr + g.num_dst + 1, lo) - g.rowptr - 1;
      for (int64_t p = lo; p < hi; ++p) {
        while (g.rowptr[i + 1] <= p) ++i;
        const int64_t j = g.col[p], e = g.eid[p];
        std::fill(edge_grad.begin(), edge_grad.end(), acc(0));
        for (int64_t h = 0; h < H; ++h) {
          load_row(grad_out + (i * H + h) * C, C, gh.data());
          v.prepare(i, j, e, h, eh);
          v.add_edge_grad(eh, ds[p * H + h], alpha_t[p * H + h], gh.data(), edge_grad.data(),
                          partial.data() + c * P);
        }
        if (v.edge_dim > 0) v.store_edge_grad(e, edge_grad.data());
      }
    }
  });
  std::vector<acc> total(P, acc(0));
  for (int64_t c = 0; c < kParamChunks; ++c)
    for (int64_t k = 0; k < P; ++k) total[k] += partial[c * P + k];
  v.store_param_grad(total.data());
}

}  // namespace iognn::cpu

// Declares the entry points of the variant `name` (gat, gatv2, transformer), whose inputs and
// gradient outputs are Inputs<T> and Grads<T> (kernels/attention_types.h):
//   name_forward<T, index_t>   out, lse and (when out.alpha is set) alpha;
//   name_backward<T, index_t>  grad_out [num_dst, H, C] contiguous, grad_alpha [E', H] (of the
//                              alpha output, see the variant's header) or null, lse from forward.
#define IOGNN_CPU_ATTENTION_API(name, Inputs, Grads)                                               \
  template <typename T, typename index_t>                                                          \
  void name##_forward(const AttentionGraph<index_t>& g, const AttentionConfig& cfg,                \
                      const Inputs<T>& in, const AttentionOutputs<T>& out);                        \
  template <typename T, typename index_t>                                                          \
  void name##_backward(const AttentionGraph<index_t>& g, const AttentionConfig& cfg,               \
                       const Inputs<T>& in, const acc_t<T>* lse, const T* grad_out,                \
                       const T* grad_alpha, const Grads<T>& grads);

// Defines the entry points declared by IOGNN_CPU_ATTENTION_API(name, Inputs, Grads) on the
// skeleton, with Variant<T> as the variant's pieces, and instantiates them for every type
// (instantiate.h). Used once, in the variant's .cpp, inside namespace iognn::cpu.
#define IOGNN_CPU_ATTENTION_DEFINE(name, Variant, Inputs, Grads)                                   \
  template <typename T, typename index_t>                                                          \
  void name##_forward(const AttentionGraph<index_t>& g, const AttentionConfig& cfg,                \
                      const Inputs<T>& in, const AttentionOutputs<T>& out) {                       \
    attention_forward(g, cfg, Variant<T>(in, Grads<T>{}, cfg), out);                               \
  }                                                                                                \
  template <typename T, typename index_t>                                                          \
  void name##_backward(const AttentionGraph<index_t>& g, const AttentionConfig& cfg,               \
                       const Inputs<T>& in, const acc_t<T>* lse, const T* grad_out,                \
                       const T* grad_alpha, const Grads<T>& grads) {                               \
    attention_backward(g, cfg, Variant<T>(in, grads, cfg), lse, grad_out, grad_alpha);             \
  }                                                                                                \
  IOGNN_FOR_ALL_TYPES_WITH(IOGNN_CPU_ATTENTION_INSTANTIATE, name, Inputs, Grads)

#define IOGNN_CPU_ATTENTION_INSTANTIATE(T, index_t, name, Inputs, Grads)                           \
  template void name##_forward<T, index_t>(const AttentionGraph<index_t>&,                         \
                                           const AttentionConfig&, const Inputs<T>&,               \
                                           const AttentionOutputs<T>&);                            \
  template void name##_backward<T, index_t>(const AttentionGraph<index_t>&,                        \
                                            const AttentionConfig&, const Inputs<T>&,              \
                                            const acc_t<T>*, const T*, const T*, const Grads<T>&);

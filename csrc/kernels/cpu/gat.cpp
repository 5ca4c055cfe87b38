#include "kernels/cpu/gat.h"

#include "kernels/cpu/instantiate.h"

namespace iognn::cpu {
namespace {

// GAT's pieces for the attention skeleton. Gradient row layouts: destination [a_dst] per head
// (width 0 without a_dst), source [x (C), a_src (1)] per head, parameters w_edge [De, H].
template <typename T>
struct Gat {
  using value_type = T;
  using acc = acc_t<T>;
  static constexpr bool kAlphaAfterDropout = true;

  GatInputs<T> in;
  GatGrads<T> grads;
  int64_t H, C;
  acc slope;
  int64_t dst_width, src_width, edge_dim, param_width;

  Gat(const GatInputs<T>& in_, const GatGrads<T>& grads_, const AttentionConfig& cfg)
      : in(in_), grads(grads_), H(cfg.heads), C(cfg.channels), slope(acc(in_.negative_slope)),
        dst_width(in_.a_dst.data ? 1 : 0), src_width(cfg.channels + 1),
        edge_dim(in_.edge_attr.dim), param_width(in_.edge_attr.dim * cfg.heads) {}

  struct EdgeHead {
    explicit EdgeHead(const Gat&) {}
    const T* x_j;      // x[j, h, :]
    const T* edge;     // edge_attr[e, :] or null
    int64_t h;
    acc pre;           // the leaky_relu input
  };

  void prepare(int64_t i, int64_t j, int64_t e, int64_t h, EdgeHead& eh) const {
    eh.x_j = in.x.at(j, h, C);
    eh.h = h;
    acc pre = load(in.a_src.at(j, h, 1));
    if (in.a_dst.data) pre += load(in.a_dst.at(i, h, 1));
    eh.edge = in.edge_attr.present() ? in.edge_attr.at(e) : nullptr;
    if (eh.edge) {
      acc edge_term = 0;
      for (int64_t d = 0; d < edge_dim; ++d)
        edge_term += load(eh.edge + d) * load(in.w_edge + d * H + h);
      pre += edge_term;
    }
    eh.pre = pre;
  }

  acc score(const EdgeHead& eh) const { return leaky_relu(eh.pre, slope); }

  void add_value(const EdgeHead& eh, acc w, acc* out) const {
    for (int64_t c = 0; c < C; ++c) out[c] += w * load(eh.x_j + c);
  }

  acc value_dot(const EdgeHead& eh, const acc* g) const {
    acc dot = 0;
    for (int64_t c = 0; c < C; ++c) dot += g[c] * load(eh.x_j + c);
    return dot;
  }

  void add_dst_grad(const EdgeHead& eh, acc ds, acc* dst) const {
    dst[0] += ds * leaky_relu_grad(eh.pre, slope);
  }

  void add_src_grad(const EdgeHead& eh, acc ds, acc alpha_t, const acc* g, acc* src) const {
    for (int64_t c = 0; c < C; ++c) src[c] += alpha_t * g[c];
    src[C] += ds * leaky_relu_grad(eh.pre, slope);
  }

  void add_edge_grad(const EdgeHead& eh, acc ds, acc, const acc*, acc* edge_grad,
                     acc* params) const {
    const acc d_pre = ds * leaky_relu_grad(eh.pre, slope);
    for (int64_t d = 0; d < edge_dim; ++d) {
      edge_grad[d] += d_pre * load(in.w_edge + d * H + eh.h);
      params[d * H + eh.h] += d_pre * load(eh.edge + d);
    }
  }

  void store_dst_grad(int64_t i, const acc* buf) const {
    if (grads.a_dst) store_row(grads.a_dst + i * H, buf, H);
  }

  void store_src_grad(int64_t j, const acc* buf) const {
    for (int64_t h = 0; h < H; ++h) {
      store_row(grads.x + (j * H + h) * C, buf + h * src_width, C);
      store(grads.a_src + j * H + h, buf[h * src_width + C]);
    }
  }

  void store_edge_grad(int64_t e, const acc* buf) const {
    store_row(grads.edge_attr + e * edge_dim, buf, edge_dim);
  }

  void store_param_grad(const acc* buf) const { store_row(grads.w_edge, buf, param_width); }
};

}  // namespace

template <typename T, typename index_t>
void gat_forward(const AttentionGraph<index_t>& g, const AttentionConfig& cfg,
                 const GatInputs<T>& in, const AttentionOutputs<T>& out) {
  attention_forward(g, cfg, Gat<T>(in, GatGrads<T>{}, cfg), out);
}

template <typename T, typename index_t>
void gat_backward(const AttentionGraph<index_t>& g, const AttentionConfig& cfg,
                  const GatInputs<T>& in, const acc_t<T>* lse, const T* grad_out,
                  const T* grad_alpha, const GatGrads<T>& grads) {
  attention_backward(g, cfg, Gat<T>(in, grads, cfg), lse, grad_out, grad_alpha);
}

#define IOGNN_GAT(T, index_t)                                                                   \
  template void gat_forward<T, index_t>(const AttentionGraph<index_t>&, const AttentionConfig&, \
                                        const GatInputs<T>&, const AttentionOutputs<T>&);       \
  template void gat_backward<T, index_t>(const AttentionGraph<index_t>&,                        \
                                         const AttentionConfig&, const GatInputs<T>&,           \
                                         const acc_t<T>*, const T*, const T*, const GatGrads<T>&);
IOGNN_FOR_ALL_TYPES(IOGNN_GAT)

}  // namespace iognn::cpu

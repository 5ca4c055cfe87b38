#include "kernels/cpu/gat.h"

namespace iognn::cpu {
namespace {

// GAT's pieces for the attention skeleton. Gradient row layouts: destination [a_dst] per head
// (width 0 without a_dst), source [x (C), a_src (1)] per head, parameters w_edge [De, H].
template <typename T>
struct Gat : VariantBase<T, GatInputs<T>, GatGrads<T>> {
  using Base = VariantBase<T, GatInputs<T>, GatGrads<T>>;
  using typename Base::acc;
  using Base::in, Base::grads, Base::H, Base::C, Base::edge_dim, Base::src_width, Base::param_width;
  static constexpr bool kAlphaAfterDropout = true;

  acc slope;

  Gat(const GatInputs<T>& in_, const GatGrads<T>& grads_, const AttentionConfig& cfg)
      : Base(in_, grads_, cfg, /*dst_width=*/in_.a_dst.data ? 1 : 0,
             /*src_width=*/cfg.channels + 1, /*param_width=*/in_.edge_attr.dim * cfg.heads),
        slope(acc(in_.negative_slope)) {}

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

  void add_value(const EdgeHead& eh, acc w, acc* out) const { add_scaled_row(eh.x_j, w, C, out); }
  acc value_dot(const EdgeHead& eh, const acc* g) const { return dot_row(g, eh.x_j, C); }

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

  void store_param_grad(const acc* buf) const { store_row(grads.w_edge, buf, param_width); }
};

}  // namespace

IOGNN_CPU_ATTENTION_DEFINE(gat, Gat, GatInputs, GatGrads)

}  // namespace iognn::cpu

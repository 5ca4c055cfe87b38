#include "kernels/cpu/transformer.h"

#include <vector>

namespace iognn::cpu {
namespace {

// TransformerConv's pieces for the attention skeleton. Gradient row layouts: destination
// [query (C)] and source [key (C), value (C)] per head; parameters W_e [H*C, De].
template <typename T>
struct Transformer : VariantBase<T, TransformerInputs<T>, TransformerGrads<T>> {
  using Base = VariantBase<T, TransformerInputs<T>, TransformerGrads<T>>;
  using typename Base::acc;
  using Base::in, Base::grads, Base::H, Base::C, Base::edge_dim, Base::src_width, Base::param_width;
  static constexpr bool kAlphaAfterDropout = false;

  acc scale;

  Transformer(const TransformerInputs<T>& in_, const TransformerGrads<T>& grads_,
              const AttentionConfig& cfg)
      : Base(in_, grads_, cfg, /*dst_width=*/cfg.channels, /*src_width=*/2 * cfg.channels,
             /*param_width=*/cfg.heads * cfg.channels * in_.edge_attr.dim),
        scale(acc(in_.scale)) {}

  struct EdgeHead {
    explicit EdgeHead(const Transformer& t) : ep(t.C), u(t.C) {}
    const T* q_i;         // query[i, h, :]
    const T* k_j;         // key[j, h, :]
    const T* v_j;         // value[j, h, :]
    const T* edge;        // edge_attr[e, :] or null
    int64_t h;
    std::vector<acc> ep;  // lin_edge(edge_attr[e])[h, :]
    std::vector<acc> u;   // d loss / d ep (scratch of add_edge_grad)
  };

  void prepare(int64_t i, int64_t j, int64_t e, int64_t h, EdgeHead& eh) const {
    eh.q_i = in.query.at(i, h, C);
    eh.k_j = in.key.at(j, h, C);
    eh.v_j = in.value.at(j, h, C);
    eh.h = h;
    eh.edge = in.edge_attr.present() ? in.edge_attr.at(e) : nullptr;
    if (eh.edge) project_edge(in.w_edge, eh.edge, h, C, edge_dim, eh.ep.data());
  }

  acc edge_term(const EdgeHead& eh, int64_t c) const { return eh.edge ? eh.ep[c] : acc(0); }

  acc score(const EdgeHead& eh) const {
    acc s = 0;
    for (int64_t c = 0; c < C; ++c) s += load(eh.q_i + c) * (load(eh.k_j + c) + edge_term(eh, c));
    return s * scale;
  }

  void add_value(const EdgeHead& eh, acc w, acc* out) const {
    for (int64_t c = 0; c < C; ++c) out[c] += w * (load(eh.v_j + c) + edge_term(eh, c));
  }

  acc value_dot(const EdgeHead& eh, const acc* g) const {
    acc dot = 0;
    for (int64_t c = 0; c < C; ++c) dot += g[c] * (load(eh.v_j + c) + edge_term(eh, c));
    return dot;
  }

  void add_dst_grad(const EdgeHead& eh, acc ds, acc* dst) const {
    const acc w = ds * scale;
    for (int64_t c = 0; c < C; ++c) dst[c] += w * (load(eh.k_j + c) + edge_term(eh, c));
  }

  void add_src_grad(const EdgeHead& eh, acc ds, acc alpha_t, const acc* g, acc* src) const {
    const acc w = ds * scale;
    for (int64_t c = 0; c < C; ++c) {
      src[c] += w * load(eh.q_i + c);
      src[C + c] += alpha_t * g[c];
    }
  }

  // ep enters both the key (through the score) and the value.
  void add_edge_grad(EdgeHead& eh, acc ds, acc alpha_t, const acc* g, acc* edge_grad,
                     acc* params) const {
    const acc w = ds * scale;
    for (int64_t c = 0; c < C; ++c) eh.u[c] = w * load(eh.q_i + c) + alpha_t * g[c];
    project_edge_backward(in.w_edge, eh.edge, eh.h, C, edge_dim, eh.u.data(), edge_grad, params);
  }

  void store_dst_grad(int64_t i, const acc* buf) const {
    store_row(grads.query + i * H * C, buf, H * C);
  }
  void store_src_grad(int64_t j, const acc* buf) const {
    for (int64_t h = 0; h < H; ++h) {
      store_row(grads.key + (j * H + h) * C, buf + h * src_width, C);
      store_row(grads.value + (j * H + h) * C, buf + h * src_width + C, C);
    }
  }
  void store_param_grad(const acc* buf) const { store_row(grads.w_edge, buf, param_width); }
};

}  // namespace

IOGNN_CPU_ATTENTION_DEFINE(transformer, Transformer, TransformerInputs, TransformerGrads)

}  // namespace iognn::cpu

#include "kernels/cpu/gatv2.h"

#include <vector>

namespace iognn::cpu {
namespace {

// GATv2's pieces for the attention skeleton. Gradient row layouts: destination [x_dst (C)] and
// source [x_src (C)] per head; parameters [att (H*C), W_e (H*C*De)].
template <typename T>
struct GatV2 : VariantBase<T, GatV2Inputs<T>, GatV2Grads<T>> {
  using Base = VariantBase<T, GatV2Inputs<T>, GatV2Grads<T>>;
  using typename Base::acc;
  using Base::in, Base::grads, Base::H, Base::C, Base::edge_dim;
  static constexpr bool kAlphaAfterDropout = true;

  acc slope;

  GatV2(const GatV2Inputs<T>& in_, const GatV2Grads<T>& grads_, const AttentionConfig& cfg)
      : Base(in_, grads_, cfg, /*dst_width=*/cfg.channels, /*src_width=*/cfg.channels,
             /*param_width=*/cfg.heads * cfg.channels * (1 + in_.edge_attr.dim)),
        slope(acc(in_.negative_slope)) {}

  struct EdgeHead {
    explicit EdgeHead(const GatV2& v) : z(v.C), u(v.C) {}
    const T* x_j;       // x_src[j, h, :]
    const T* edge;      // edge_attr[e, :] or null
    const T* att;       // att[h, :]
    int64_t h;
    std::vector<acc> z;  // leaky_relu inputs; first holds ep_p[h, :]
    std::vector<acc> u;  // d loss / d z (scratch of add_edge_grad)
  };

  void prepare(int64_t i, int64_t j, int64_t e, int64_t h, EdgeHead& eh) const {
    eh.x_j = in.x_src.at(j, h, C);
    eh.att = in.att + h * C;
    eh.h = h;
    eh.edge = in.edge_attr.present() ? in.edge_attr.at(e) : nullptr;
    if (eh.edge) project_edge(in.w_edge, eh.edge, h, C, edge_dim, eh.z.data());
    const T* x_i = in.x_dst.at(i, h, C);
    for (int64_t c = 0; c < C; ++c) {
      const acc sum = load(x_i + c) + load(eh.x_j + c);  // PyG's order: (x_i + x_j) + ep
      eh.z[c] = eh.edge ? sum + eh.z[c] : sum;
    }
  }

  acc score(const EdgeHead& eh) const {
    acc s = 0;
    for (int64_t c = 0; c < C; ++c) s += load(eh.att + c) * leaky_relu(eh.z[c], slope);
    return s;
  }

  void add_value(const EdgeHead& eh, acc w, acc* out) const { add_scaled_row(eh.x_j, w, C, out); }
  acc value_dot(const EdgeHead& eh, const acc* g) const { return dot_row(g, eh.x_j, C); }

  // d s / d z[c] = att[h,c] * leaky_relu'(z[c]).
  acc score_grad(const EdgeHead& eh, int64_t c) const {
    return load(eh.att + c) * leaky_relu_grad(eh.z[c], slope);
  }

  void add_dst_grad(const EdgeHead& eh, acc ds, acc* dst) const {
    for (int64_t c = 0; c < C; ++c) dst[c] += ds * score_grad(eh, c);
  }

  void add_src_grad(const EdgeHead& eh, acc ds, acc alpha_t, const acc* g, acc* src) const {
    for (int64_t c = 0; c < C; ++c) src[c] += alpha_t * g[c] + ds * score_grad(eh, c);
  }

  void add_edge_grad(EdgeHead& eh, acc ds, acc, const acc*, acc* edge_grad, acc* params) const {
    acc* att_grad = params + eh.h * C;
    for (int64_t c = 0; c < C; ++c) {
      att_grad[c] += ds * leaky_relu(eh.z[c], slope);
      eh.u[c] = ds * score_grad(eh, c);
    }
    if (eh.edge)
      project_edge_backward(in.w_edge, eh.edge, eh.h, C, edge_dim, eh.u.data(), edge_grad,
                            params + H * C);
  }

  void store_dst_grad(int64_t i, const acc* buf) const {
    store_row(grads.x_dst + i * H * C, buf, H * C);
  }
  void store_src_grad(int64_t j, const acc* buf) const {
    store_row(grads.x_src + j * H * C, buf, H * C);
  }
  void store_param_grad(const acc* buf) const {
    store_row(grads.att, buf, H * C);
    if (grads.w_edge) store_row(grads.w_edge, buf + H * C, H * C * edge_dim);
  }
};

}  // namespace

IOGNN_CPU_ATTENTION_DEFINE(gatv2, GatV2, GatV2Inputs, GatV2Grads)

}  // namespace iognn::cpu

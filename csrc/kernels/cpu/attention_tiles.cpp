#include "kernels/cpu/attention_tiles.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "core/parallel.h"
#include "core/tiles.h"
#include "kernels/cpu/attention_common.h"
#include "kernels/cpu/instantiate.h"

namespace iognn::cpu {
namespace {

// The rows of window w (row_order applied) into ids; returns how many there are (16, or fewer
// in the last window).
template <typename acc, typename I>
int64_t window_rows(const TileLayoutView<acc, I>& L, int64_t w, int64_t* ids) {
  const int64_t n = std::min(kTileRows, L.num_rows - w * kTileRows);
  for (int64_t r = 0; r < n; ++r) {
    const int64_t slot = w * kTileRows + r;
    ids[r] = L.row_order ? int64_t(L.row_order[slot]) : slot;
  }
  return n;
}

// The columns of tile t that hold a node (padding ends a window's last tile).
template <typename acc, typename I>
int64_t tile_width(const TileLayoutView<acc, I>& L, int64_t t) {
  int64_t c = 0;
  while (c < kTileCols && L.tile_cols[t * kTileCols + c] >= 0) ++c;
  return c;
}

template <typename acc, typename I>
acc slot_count(const TileLayoutView<acc, I>& L, int64_t t, int64_t r, int64_t c) {
  return L.counts[(t * kTileRows + r) * kTileCols + c];
}

template <typename acc>
constexpr acc kNegInf = -std::numeric_limits<acc>::infinity();

// A variant's scores for the window loops below. V::Window<kDst> holds a window's 16 rows for one
// pass - destinations (kDst; the columns are sources) or sources (the columns are destinations) -
// and their gradient sums:
//   load(ids, n, h)              the rows' inputs for head h; the gradient sums cleared
//   score(r, col, h) -> s        the score of row r and column node col
//   add_grad(r, col, h, ds)      adds ds's share to row r's gradient sum
//   store_grads(w, ids, n, h)    writes row r's gradient sum to node ids[r] (w: the window)
//   add_value_grads(n, dv)       (sources) adds the rows' share of their value gradient to dv
// and V::values() the value rows [num_src, H, C].

// The window of a variant whose score pairs a destination's row of dst_rows with a source's row
// of src_rows (head h): the window's rows of one (dst_rows for kDst) [16][C], loaded per head,
// the column nodes' rows of the other, and the rows' gradient sums [16][C].
template <typename T, bool kDst>
struct PairedRows {
  using acc = acc_t<T>;
  NodeRows<T> dst_rows, src_rows;
  int64_t C;
  std::vector<acc> rows, grad;
  PairedRows(NodeRows<T> dst_rows_, NodeRows<T> src_rows_, int64_t C_)
      : dst_rows(dst_rows_), src_rows(src_rows_), C(C_), rows(kTileRows * C_),
        grad(kTileRows * C_) {}
  const T* col_row(int64_t col, int64_t h) const {
    return (kDst ? src_rows : dst_rows).at(col, h, C);
  }
  void load(const int64_t* ids, int64_t n, int64_t h) {
    for (int64_t r = 0; r < n; ++r)
      load_row((kDst ? dst_rows : src_rows).at(ids[r], h, C), C, rows.data() + r * C);
    std::fill(grad.begin(), grad.end(), acc(0));
  }
};

// The Transformer: s = scale <q_i, k_j>; the rows' gradients dQ (kDst) or dK.
template <typename T>
struct TransformerScores {
  using acc = acc_t<T>;
  static constexpr bool kDeltaFromSteps = false;  // D = <dO, out>
  NodeRows<T> query, key, value;
  int64_t H, C;
  acc scale;
  T *grad_query, *grad_key;  // the backward's

  template <class Args>
  explicit TransformerScores(const Args& a, T* grad_query_ = nullptr, T* grad_key_ = nullptr)
      : query(a.query), key(a.key), value(a.value), H(a.heads), C(a.channels),
        scale(acc(a.scale)), grad_query(grad_query_), grad_key(grad_key_) {}
  NodeRows<T> values() const { return value; }

  template <bool kDst>
  struct Window : PairedRows<T, kDst> {  // rows: the queries (kDst) or keys
    using PairedRows<T, kDst>::rows, PairedRows<T, kDst>::grad, PairedRows<T, kDst>::col_row;
    const TransformerScores& v;
    explicit Window(const TransformerScores& v_)
        : PairedRows<T, kDst>(v_.query, v_.key, v_.C), v(v_) {}
    acc score(int64_t r, int64_t col, int64_t h) const {
      return v.scale * dot_row(rows.data() + r * v.C, col_row(col, h), v.C);
    }
    void add_grad(int64_t r, int64_t col, int64_t h, acc ds) {
      add_scaled_row(col_row(col, h), ds, v.C, grad.data() + r * v.C);
    }
    void add_value_grads(int64_t, acc*) const {}  // the keys are not the values
    void store_grads(int64_t, const int64_t* ids, int64_t n, int64_t h) const {
      T* dst = kDst ? v.grad_query : v.grad_key;
      for (int64_t r = 0; r < n; ++r) {
        T* out = dst + (ids[r] * v.H + h) * v.C;
        for (int64_t k = 0; k < v.C; ++k) store(out + k, v.scale * grad[r * v.C + k]);
      }
    }
  };
};

// GAT: s = leaky_relu(a_src[j] + a_dst[i]); the rows' gradients d a_dst (kDst) or d a_src.
template <typename T>
struct GatScores {
  using acc = acc_t<T>;
  static constexpr bool kDeltaFromSteps = false;  // D = <dO, out>
  NodeRows<T> x, a_src, a_dst;
  int64_t H;
  acc slope;
  T *grad_a_src, *grad_a_dst;  // the backward's

  template <class Args>
  explicit GatScores(const Args& a, T* grad_a_src_ = nullptr, T* grad_a_dst_ = nullptr)
      : x(a.x), a_src(a.a_src), a_dst(a.a_dst), H(a.heads), slope(acc(a.negative_slope)),
        grad_a_src(grad_a_src_), grad_a_dst(grad_a_dst_) {}
  NodeRows<T> values() const { return x; }

  // The leaky_relu input of (destination i, source j), as the CSR kernels add it.
  acc pre(int64_t i, int64_t j, int64_t h) const {
    acc p = load(a_src.at(j, h, 1));
    if (a_dst.data) p += load(a_dst.at(i, h, 1));
    return p;
  }

  template <bool kDst>
  struct Window {
    const GatScores& v;
    int64_t rows[kTileRows];
    acc grad[kTileRows];
    explicit Window(const GatScores& v_) : v(v_) {}
    void load(const int64_t* ids, int64_t n, int64_t) {
      std::copy(ids, ids + n, rows);
      std::fill(grad, grad + n, acc(0));
    }
    acc pre(int64_t r, int64_t col, int64_t h) const {
      return kDst ? v.pre(rows[r], col, h) : v.pre(col, rows[r], h);
    }
    acc score(int64_t r, int64_t col, int64_t h) const {
      return leaky_relu(pre(r, col, h), v.slope);
    }
    void add_grad(int64_t r, int64_t col, int64_t h, acc ds) {
      grad[r] += ds * leaky_relu_grad(pre(r, col, h), v.slope);
    }
    void add_value_grads(int64_t, acc*) const {}  // the logits are not the values
    void store_grads(int64_t, const int64_t* ids, int64_t n, int64_t h) const {
      T* dst = kDst ? v.grad_a_dst : v.grad_a_src;
      if (dst)
        for (int64_t r = 0; r < n; ++r) store(dst + ids[r] * v.H + h, grad[r]);
    }
  };
};

// GATv2: s = sum_c att[c] leaky_relu(z[c]), z = x_dst[i] + x_src[j] (head h); the rows' gradient
// sums g = sum ds att leaky_relu'(z): d x_dst (kDst, with the window's share of d att, sum
// ds leaky_relu(z), into att_partial) or the scores' part of d x_src, added to its value gradient.
template <typename T>
struct GatV2Scores {
  using acc = acc_t<T>;
  // D = sum_j P dP / sum_j P of the backward's own P and dP, as on CUDA (kernels/cuda/
  // attention_tiles.cu, GatV2Tiles): d x_dst is an almost cancelling sum over a row's slots.
  static constexpr bool kDeltaFromSteps = true;
  GatV2TileInputs<T> in;
  int64_t H, C;
  acc slope;
  T* grad_x_dst;     // the backward's
  acc* att_partial;  // the backward's: [num_windows, H, C]

  template <class Args>
  explicit GatV2Scores(const Args& a, T* grad_x_dst_ = nullptr, acc* att_partial_ = nullptr)
      : in(a), H(a.heads), C(a.channels), slope(acc(a.negative_slope)), grad_x_dst(grad_x_dst_),
        att_partial(att_partial_) {}
  NodeRows<T> values() const { return in.x_src; }

  template <bool kDst>
  struct Window : PairedRows<T, kDst> {  // rows: the x_dst (kDst) or x_src rows
    using PairedRows<T, kDst>::rows, PairedRows<T, kDst>::grad, PairedRows<T, kDst>::col_row;
    const GatV2Scores& v;
    std::vector<acc> att, att_grad;  // head h's att, the window's share of d att
    explicit Window(const GatV2Scores& v_)
        : PairedRows<T, kDst>(v_.in.x_dst, v_.in.x_src, v_.C), v(v_), att(v_.C),
          att_grad(v_.C) {}
    void load(const int64_t* ids, int64_t n, int64_t h) {
      PairedRows<T, kDst>::load(ids, n, h);
      load_row(v.in.att.at(0, h, v.C), v.C, att.data());
      std::fill(att_grad.begin(), att_grad.end(), acc(0));
    }
    acc score(int64_t r, int64_t col, int64_t h) const {
      const T* x = col_row(col, h);
      acc s = 0;
      for (int64_t c = 0; c < v.C; ++c)
        s += att[c] * leaky_relu(rows[r * v.C + c] + iognn::load(x + c), v.slope);
      return s;
    }
    void add_grad(int64_t r, int64_t col, int64_t h, acc ds) {
      const T* x = col_row(col, h);
      for (int64_t c = 0; c < v.C; ++c) {
        const acc z = rows[r * v.C + c] + iognn::load(x + c);
        grad[r * v.C + c] += ds * (att[c] * leaky_relu_grad(z, v.slope));
        if (kDst) att_grad[c] += ds * leaky_relu(z, v.slope);
      }
    }
    void add_value_grads(int64_t n, acc* dv) const {
      for (int64_t k = 0; k < n * v.C; ++k) dv[k] += grad[k];
    }
    void store_grads(int64_t w, const int64_t* ids, int64_t n, int64_t h) const {
      if (!kDst) return;  // the sources' share went to their value gradient
      for (int64_t r = 0; r < n; ++r)
        store_row(v.grad_x_dst + (ids[r] * v.H + h) * v.C, grad.data() + r * v.C, v.C);
      std::copy(att_grad.begin(), att_grad.end(), v.att_partial + (w * v.H + h) * v.C);
    }
  };
};

// Every (window, head) of layout L, over the threads: each thread makes its body with make_body()
// (the body owns the thread's scratch) and a V::Window<kDst> of rows; per window w and head h the
// rows are loaded and body(rows, w, ids, n, h) runs (ids: the window's n rows).
template <bool kDst, class V, typename acc, typename I, class MakeBody>
void for_each_window_head(const V& v, const TileLayoutView<acc, I>& L, int64_t H,
                          MakeBody&& make_body) {
  parallel_for(0, num_tile_windows(L.num_rows), 1, [&](int64_t lo, int64_t hi) {
    typename V::template Window<kDst> rows(v);
    auto body = make_body();
    int64_t ids[kTileRows];
    for (int64_t w = lo; w < hi; ++w) {
      const int64_t n = window_rows(L, w, ids);
      for (int64_t h = 0; h < H; ++h) {
        rows.load(ids, n, h);
        body(rows, w, ids, n, h);
      }
    }
  });
}

// out and lse of every destination row.
template <class V, typename T, typename I>
void window_forward(const V& v, const TileLayoutView<acc_t<T>, I>& L, int64_t H, int64_t C, T* out,
                   acc_t<T>* lse) {
  using acc = acc_t<T>;
  const NodeRows<T> values = v.values();
  for_each_window_head<true>(v, L, H, [&] {
    return [&, o = std::vector<acc>(kTileRows * C), s = std::vector<acc>(kTileSlots)](
               auto& rows, int64_t w, const int64_t* ids, int64_t n, int64_t h) mutable {
      acc m[kTileRows], l[kTileRows];
      std::fill(m, m + n, kNegInf<acc>);
      std::fill(l, l + n, acc(0));
      std::fill(o.begin(), o.end(), acc(0));
      for (int64_t t = L.window_ptr[w]; t < L.window_ptr[w + 1]; ++t) {
        const int64_t width = tile_width(L, t);
        // The tile's scores, then one rescale per row whose running max grows.
        for (int64_t c = 0; c < width; ++c) {
          const int64_t j = L.tile_cols[t * kTileCols + c];
          for (int64_t r = 0; r < n; ++r)
            if (slot_count(L, t, r, c) != acc(0)) s[r * kTileCols + c] = rows.score(r, j, h);
        }
        for (int64_t r = 0; r < n; ++r) {
          acc tile_max = kNegInf<acc>;
          for (int64_t c = 0; c < width; ++c)
            if (slot_count(L, t, r, c) != acc(0))
              tile_max = std::max(tile_max, s[r * kTileCols + c]);
          if (!(tile_max > m[r])) continue;
          const acc f = m[r] == kNegInf<acc> ? acc(0) : std::exp(m[r] - tile_max);
          l[r] *= f;
          for (int64_t k = 0; k < C; ++k) o[r * C + k] *= f;
          m[r] = tile_max;
        }
        for (int64_t c = 0; c < width; ++c) {
          const T* value = values.at(int64_t(L.tile_cols[t * kTileCols + c]), h, C);
          for (int64_t r = 0; r < n; ++r) {
            const acc count = slot_count(L, t, r, c);
            if (count == acc(0)) continue;
            const acc p = count * std::exp(s[r * kTileCols + c] - m[r]);
            l[r] += p;
            add_scaled_row(value, p, C, o.data() + r * C);
          }
        }
      }
      for (int64_t r = 0; r < n; ++r) {
        const int64_t i = ids[r];
        T* dst = out + (i * H + h) * C;
        for (int64_t k = 0; k < C; ++k)
          store(dst + k, l[r] > acc(0) ? o[r * C + k] / l[r] : acc(0));
        lse[i * H + h] = l[r] > acc(0) ? m[r] + std::log(l[r]) : kNegInf<acc>;
      }
    };
  });
}

// delta and the destination rows' gradients over the forward layout, then the value gradient
// (into grad_value) and the source rows' gradients over the transposed one.
template <class V, typename T, typename I, class Args>
void window_backward(const V& v, const Args& a, T* grad_value) {
  using acc = acc_t<T>;
  const int64_t H = a.heads, C = a.channels;
  const NodeRows<T> values = v.values();
  auto grad_row = [&](int64_t i, int64_t h) { return a.grad_out + (i * H + h) * C; };

  // Over the windows of destinations.
  const TileLayoutView<acc, I>& L = a.layout;
  for_each_window_head<true>(v, L, H, [&] {
    return [&, g = std::vector<acc>(kTileRows * C)](auto& rows, int64_t w, const int64_t* ids,
                                                     int64_t n, int64_t h) mutable {
      acc lse[kTileRows], D[kTileRows];
      for (int64_t r = 0; r < n; ++r) {
        const int64_t i = ids[r];
        load_row(grad_row(i, h), C, g.data() + r * C);
        if constexpr (!V::kDeltaFromSteps) D[r] = dot_row(g.data() + r * C, a.out + (i * H + h) * C, C);
        lse[r] = a.lse[i * H + h];
      }
      auto each_slot = [&](auto&& fn) {  // fn(r, j, P, dP) for every pair of the window's rows
        for (int64_t t = L.window_ptr[w]; t < L.window_ptr[w + 1]; ++t) {
          const int64_t width = tile_width(L, t);
          for (int64_t c = 0; c < width; ++c) {
            const int64_t j = L.tile_cols[t * kTileCols + c];
            const T* value = values.at(j, h, C);
            for (int64_t r = 0; r < n; ++r) {
              const acc count = slot_count(L, t, r, c);
              if (count == acc(0)) continue;
              fn(r, j, count * std::exp(rows.score(r, j, h) - lse[r]),
                 dot_row(g.data() + r * C, value, C));
            }
          }
        }
      };
      if constexpr (V::kDeltaFromSteps) {
        acc p_sum[kTileRows] = {}, pdp_sum[kTileRows] = {};
        each_slot([&](int64_t r, int64_t, acc p, acc dp) {
          p_sum[r] += p;
          pdp_sum[r] += p * dp;
        });
        for (int64_t r = 0; r < n; ++r) D[r] = p_sum[r] > acc(0) ? pdp_sum[r] / p_sum[r] : acc(0);
      }
      for (int64_t r = 0; r < n; ++r) a.delta[ids[r] * H + h] = D[r];
      each_slot([&](int64_t r, int64_t j, acc p, acc dp) { rows.add_grad(r, j, h, p * (dp - D[r])); });
      rows.store_grads(w, ids, n, h);
    };
  });

  // Over the windows of sources; the columns are destinations.
  const TileLayoutView<acc, I>& Lt = a.transposed;
  for_each_window_head<false>(v, Lt, H, [&] {
    return [&, val = std::vector<acc>(kTileRows * C), dv = std::vector<acc>(kTileRows * C)](
               auto& rows, int64_t w, const int64_t* ids, int64_t n, int64_t h) mutable {
      for (int64_t r = 0; r < n; ++r) load_row(values.at(ids[r], h, C), C, val.data() + r * C);
      std::fill(dv.begin(), dv.end(), acc(0));
      for (int64_t t = Lt.window_ptr[w]; t < Lt.window_ptr[w + 1]; ++t) {
        const int64_t width = tile_width(Lt, t);
        for (int64_t c = 0; c < width; ++c) {
          const int64_t i = Lt.tile_cols[t * kTileCols + c];
          const T* g = grad_row(i, h);
          const acc lse = a.lse[i * H + h], D = a.delta[i * H + h];
          for (int64_t r = 0; r < n; ++r) {
            const acc count = slot_count(Lt, t, r, c);
            if (count == acc(0)) continue;
            const acc p = count * std::exp(rows.score(r, i, h) - lse);
            const acc ds = p * (dot_row(val.data() + r * C, g, C) - D);
            add_scaled_row(g, p, C, dv.data() + r * C);
            rows.add_grad(r, i, h, ds);
          }
        }
      }
      rows.store_grads(w, ids, n, h);
      rows.add_value_grads(n, dv.data());
      for (int64_t r = 0; r < n; ++r) {
        T* dst = grad_value + (ids[r] * H + h) * C;
        for (int64_t x = 0; x < C; ++x) store(dst + x, dv[r * C + x]);
      }
    };
  });
}

// d att of GATv2: the windows' shares summed in window order by one thread (the same for any
// thread count).
template <typename T, typename I>
void sum_att_partial(const GatV2TileBackward<T, I>& a) {
  const int64_t windows = num_tile_windows(a.layout.num_rows), K = a.heads * a.channels;
  for (int64_t k = 0; k < K; ++k) {
    acc_t<T> sum = 0;
    for (int64_t w = 0; w < windows; ++w) sum += a.att_partial[w * K + k];
    store(a.grad_att + k, sum);
  }
}

}  // namespace

// Each variant's scores, chosen by its Inputs struct.
template <template <typename> class Inputs, typename T, typename I>
void tiles_forward(const TileForward<Inputs, T, I>& a) {
  auto run = [&](const auto& scores) {
    window_forward(scores, a.layout, a.heads, a.channels, a.out, a.lse);
  };
  if constexpr (std::is_same_v<Inputs<T>, TransformerTileInputs<T>>)
    run(TransformerScores<T>(a));
  else if constexpr (std::is_same_v<Inputs<T>, GatTileInputs<T>>)
    run(GatScores<T>(a));
  else
    run(GatV2Scores<T>(a));
}

template <template <typename> class Inputs, template <typename> class Grads, typename T,
          typename I>
void tiles_backward(const TileBackward<Inputs, Grads, T, I>& a) {
  if constexpr (std::is_same_v<Inputs<T>, TransformerTileInputs<T>>) {
    window_backward<TransformerScores<T>, T, I>(
        TransformerScores<T>(a, a.grad_query, a.grad_key), a, a.grad_value);
  } else if constexpr (std::is_same_v<Inputs<T>, GatTileInputs<T>>) {
    window_backward<GatScores<T>, T, I>(GatScores<T>(a, a.grad_a_src, a.grad_a_dst), a, a.grad_x);
  } else {
    window_backward<GatV2Scores<T>, T, I>(GatV2Scores<T>(a, a.grad_x_dst, a.att_partial), a,
                                          a.grad_x_src);
    sum_att_partial(a);
  }
}

#define IOGNN_ATTENTION_TILES(T, I)                                                       \
  template void tiles_forward(const TileAttentionForward<T, I>&);                         \
  template void tiles_backward(const TileAttentionBackward<T, I>&);                       \
  template void tiles_forward(const GatTileForward<T, I>&);                               \
  template void tiles_backward(const GatTileBackward<T, I>&);                             \
  template void tiles_forward(const GatV2TileForward<T, I>&);                             \
  template void tiles_backward(const GatV2TileBackward<T, I>&);
IOGNN_FOR_ALL_TYPES(IOGNN_ATTENTION_TILES)

}  // namespace iognn::cpu

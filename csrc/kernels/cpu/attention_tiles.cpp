#include "kernels/cpu/attention_tiles.h"

#include <algorithm>
#include <cmath>
#include <limits>
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

}  // namespace

template <typename T, typename I>
void transformer_tiles_forward(const TileAttentionForward<T, I>& a) {
  using acc = acc_t<T>;
  const auto& L = a.layout;
  const int64_t H = a.heads, C = a.channels;
  const acc scale = acc(a.scale);
  parallel_for(0, num_tile_windows(L.num_rows), 1, [&](int64_t lo, int64_t hi) {
    std::vector<acc> q(kTileRows * C), o(kTileRows * C), s(kTileSlots);
    acc m[kTileRows], l[kTileRows];
    int64_t ids[kTileRows];
    for (int64_t w = lo; w < hi; ++w) {
      const int64_t n = window_rows(L, w, ids);
      for (int64_t h = 0; h < H; ++h) {
        for (int64_t r = 0; r < n; ++r) load_row(a.query.at(ids[r], h, C), C, q.data() + r * C);
        std::fill(m, m + n, kNegInf<acc>);
        std::fill(l, l + n, acc(0));
        std::fill(o.begin(), o.end(), acc(0));
        for (int64_t t = L.window_ptr[w]; t < L.window_ptr[w + 1]; ++t) {
          const int64_t width = tile_width(L, t);
          // The tile's scores, then one rescale per row whose running max grows.
          for (int64_t c = 0; c < width; ++c) {
            const T* k = a.key.at(int64_t(L.tile_cols[t * kTileCols + c]), h, C);
            for (int64_t r = 0; r < n; ++r)
              if (slot_count(L, t, r, c) != acc(0))
                s[r * kTileCols + c] = scale * dot_row(q.data() + r * C, k, C);
          }
          for (int64_t r = 0; r < n; ++r) {
            acc tile_max = kNegInf<acc>;
            for (int64_t c = 0; c < width; ++c)
              if (slot_count(L, t, r, c) != acc(0)) tile_max = std::max(tile_max, s[r * kTileCols + c]);
            if (!(tile_max > m[r])) continue;
            const acc f = m[r] == kNegInf<acc> ? acc(0) : std::exp(m[r] - tile_max);
            l[r] *= f;
            for (int64_t k = 0; k < C; ++k) o[r * C + k] *= f;
            m[r] = tile_max;
          }
          for (int64_t c = 0; c < width; ++c) {
            const T* v = a.value.at(int64_t(L.tile_cols[t * kTileCols + c]), h, C);
            for (int64_t r = 0; r < n; ++r) {
              const acc count = slot_count(L, t, r, c);
              if (count == acc(0)) continue;
              const acc p = count * std::exp(s[r * kTileCols + c] - m[r]);
              l[r] += p;
              add_scaled_row(v, p, C, o.data() + r * C);
            }
          }
        }
        for (int64_t r = 0; r < n; ++r) {
          const int64_t i = ids[r];
          T* out = a.out + (i * H + h) * C;
          for (int64_t k = 0; k < C; ++k)
            store(out + k, l[r] > acc(0) ? o[r * C + k] / l[r] : acc(0));
          a.lse[i * H + h] = l[r] > acc(0) ? m[r] + std::log(l[r]) : kNegInf<acc>;
        }
      }
    }
  });
}

template <typename T, typename I>
void transformer_tiles_backward(const TileAttentionBackward<T, I>& a) {
  using acc = acc_t<T>;
  const int64_t H = a.heads, C = a.channels;
  const acc scale = acc(a.scale);
  auto grad_row = [&](int64_t i, int64_t h) { return a.grad_out + (i * H + h) * C; };

  // dQ (and D) over the windows of destinations.
  const auto& L = a.layout;
  parallel_for(0, num_tile_windows(L.num_rows), 1, [&](int64_t lo, int64_t hi) {
    std::vector<acc> q(kTileRows * C), g(kTileRows * C), dq(kTileRows * C);
    acc lse[kTileRows], D[kTileRows];
    int64_t ids[kTileRows];
    for (int64_t w = lo; w < hi; ++w) {
      const int64_t n = window_rows(L, w, ids);
      for (int64_t h = 0; h < H; ++h) {
        for (int64_t r = 0; r < n; ++r) {
          const int64_t i = ids[r];
          load_row(a.query.at(i, h, C), C, q.data() + r * C);
          load_row(grad_row(i, h), C, g.data() + r * C);
          D[r] = dot_row(g.data() + r * C, a.out + (i * H + h) * C, C);
          a.delta[i * H + h] = D[r];
          lse[r] = a.lse[i * H + h];
        }
        std::fill(dq.begin(), dq.end(), acc(0));
        for (int64_t t = L.window_ptr[w]; t < L.window_ptr[w + 1]; ++t) {
          const int64_t width = tile_width(L, t);
          for (int64_t c = 0; c < width; ++c) {
            const int64_t j = L.tile_cols[t * kTileCols + c];
            const T *k = a.key.at(j, h, C), *v = a.value.at(j, h, C);
            for (int64_t r = 0; r < n; ++r) {
              const acc count = slot_count(L, t, r, c);
              if (count == acc(0)) continue;
              const acc p = count * std::exp(scale * dot_row(q.data() + r * C, k, C) - lse[r]);
              const acc ds = p * (dot_row(g.data() + r * C, v, C) - D[r]);
              add_scaled_row(k, ds, C, dq.data() + r * C);
            }
          }
        }
        for (int64_t r = 0; r < n; ++r) {
          T* out = a.grad_query + (ids[r] * H + h) * C;
          for (int64_t k = 0; k < C; ++k) store(out + k, scale * dq[r * C + k]);
        }
      }
    }
  });

  // dK and dV over the windows of sources; the columns are destinations.
  const auto& Lt = a.transposed;
  parallel_for(0, num_tile_windows(Lt.num_rows), 1, [&](int64_t lo, int64_t hi) {
    std::vector<acc> k(kTileRows * C), v(kTileRows * C), dk(kTileRows * C), dv(kTileRows * C);
    int64_t ids[kTileRows];
    for (int64_t w = lo; w < hi; ++w) {
      const int64_t n = window_rows(Lt, w, ids);
      for (int64_t h = 0; h < H; ++h) {
        for (int64_t r = 0; r < n; ++r) {
          load_row(a.key.at(ids[r], h, C), C, k.data() + r * C);
          load_row(a.value.at(ids[r], h, C), C, v.data() + r * C);
        }
        std::fill(dk.begin(), dk.end(), acc(0));
        std::fill(dv.begin(), dv.end(), acc(0));
        for (int64_t t = Lt.window_ptr[w]; t < Lt.window_ptr[w + 1]; ++t) {
          const int64_t width = tile_width(Lt, t);
          for (int64_t c = 0; c < width; ++c) {
            const int64_t i = Lt.tile_cols[t * kTileCols + c];
            const T *q = a.query.at(i, h, C), *g = grad_row(i, h);
            const acc lse = a.lse[i * H + h], D = a.delta[i * H + h];
            for (int64_t r = 0; r < n; ++r) {
              const acc count = slot_count(Lt, t, r, c);
              if (count == acc(0)) continue;
              const acc p = count * std::exp(scale * dot_row(k.data() + r * C, q, C) - lse);
              const acc ds = p * (dot_row(v.data() + r * C, g, C) - D);
              add_scaled_row(g, p, C, dv.data() + r * C);
              add_scaled_row(q, ds, C, dk.data() + r * C);
            }
          }
        }
        for (int64_t r = 0; r < n; ++r) {
          const int64_t base = (ids[r] * H + h) * C;
          for (int64_t x = 0; x < C; ++x) {
            store(a.grad_key + base + x, scale * dk[r * C + x]);
            store(a.grad_value + base + x, dv[r * C + x]);
          }
        }
      }
    }
  });
}

#define IOGNN_ATTENTION_TILES(T, I)                                                              \
  template void transformer_tiles_forward<T, I>(const TileAttentionForward<T, I>&);              \
  template void transformer_tiles_backward<T, I>(const TileAttentionBackward<T, I>&);
IOGNN_FOR_ALL_TYPES(IOGNN_ATTENTION_TILES)

}  // namespace iognn::cpu

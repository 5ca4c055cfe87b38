#include "kernels/cpu/propagate_tiles.h"

#include <algorithm>
#include <vector>

#include "core/parallel.h"
#include "core/tiles.h"
#include "kernels/cpu/instantiate.h"

namespace iognn::cpu {

template <typename acc, typename index_t>
void tile_values(const index_t* ptr, const int64_t* edge_slot, const acc* weight,
                 const index_t* perm, const index_t* target, const index_t* deg_ptr,
                 int64_t num_rows, acc* vals) {
  // A walked row's positions all lie in its own tile rows, so rows write disjoint slots.
  parallel_for(0, num_rows, 256, [&](int64_t lo, int64_t hi) {
    for (int64_t r = lo; r < hi; ++r) {
      for (int64_t p = ptr[r]; p < ptr[r + 1]; ++p) {
        acc v = weight ? weight[perm ? int64_t(perm[p]) : p] : acc(1);
        if (deg_ptr) {
          const int64_t i = target ? int64_t(target[p]) : r;
          v /= acc(deg_ptr[i + 1] - deg_ptr[i]);  // the row holds p: its degree is >= 1
        }
        vals[edge_slot[p]] += v;
      }
    }
  });
}

template <typename T, typename index_t>
void tile_spmm(const int64_t* window_ptr, const index_t* tile_cols, const index_t* row_order,
               const acc_t<T>* vals, const T* x, int64_t x_stride, int64_t num_rows, int64_t F,
               const T* bias, T* out) {
  using acc = acc_t<T>;
  parallel_for(0, num_tile_windows(num_rows), 16, [&](int64_t lo, int64_t hi) {
    std::vector<acc> sum(size_t(kTileRows * F));
    for (int64_t w = lo; w < hi; ++w) {
      std::fill(sum.begin(), sum.end(), acc(0));
      for (int64_t t = window_ptr[w]; t < window_ptr[w + 1]; ++t) {
        for (int64_t c = 0; c < kTileCols; ++c) {
          const int64_t src = tile_cols[t * kTileCols + c];
          if (src < 0) break;  // padding ends a window's last tile
          const T* xs = x + src * x_stride;
          for (int64_t r = 0; r < kTileRows; ++r) {
            const acc v = vals[(t * kTileRows + r) * kTileCols + c];
            if (v == acc(0)) continue;
            acc* s = sum.data() + r * F;
            for (int64_t f = 0; f < F; ++f) s[f] += v * load(xs + f);
          }
        }
      }
      const int64_t rows = std::min(kTileRows, num_rows - w * kTileRows);
      for (int64_t r = 0; r < rows; ++r) {
        const int64_t slot = w * kTileRows + r;
        const int64_t i = row_order ? int64_t(row_order[slot]) : slot;
        for (int64_t f = 0; f < F; ++f)
          store(out + i * F + f, sum[r * F + f] + (bias ? load(bias + f) : acc(0)));
      }
    }
  });
}

#define IOGNN_PROPAGATE_TILES(T, index_t)                                                        \
  template void tile_spmm<T, index_t>(const int64_t*, const index_t*, const index_t*,            \
                                      const acc_t<T>*, const T*, int64_t, int64_t, int64_t,      \
                                      const T*, T*);
IOGNN_FOR_ALL_TYPES(IOGNN_PROPAGATE_TILES)
#define IOGNN_TILE_VALUES(acc, index_t)                                                          \
  template void tile_values<acc, index_t>(const index_t*, const int64_t*, const acc*,            \
                                          const index_t*, const index_t*, const index_t*,        \
                                          int64_t, acc*);
IOGNN_TILE_VALUES(float, int32_t)
IOGNN_TILE_VALUES(float, int64_t)
IOGNN_TILE_VALUES(double, int32_t)
IOGNN_TILE_VALUES(double, int64_t)

}  // namespace iognn::cpu

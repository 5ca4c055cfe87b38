// Host builder of the tile layout (core/tiles.h).
#include "core/tiles.h"

#include <algorithm>
#include <bitset>
#include <vector>

#include "core/error.h"
#include "core/parallel.h"

namespace iognn {
namespace {

template <typename index_t>
void check_csr(const index_t* rowptr, const index_t* col, int64_t num_dst, int64_t num_src,
               int64_t num_edges) {
  IOGNN_CHECK(num_dst >= 0 && num_src >= 0, ValueError,
              "num_dst and num_src must be >= 0, got ", num_dst, " and ", num_src);
  IOGNN_CHECK(rowptr[0] == 0, ValueError, "rowptr[0] must be 0, got ", int64_t(rowptr[0]));
  for (int64_t r = 0; r < num_dst; ++r)
    IOGNN_CHECK(rowptr[r + 1] >= rowptr[r], ValueError, "rowptr must be non-decreasing, rowptr[",
                r + 1, "] = ", int64_t(rowptr[r + 1]), " < rowptr[", r, "] = ", int64_t(rowptr[r]));
  IOGNN_CHECK(rowptr[num_dst] == num_edges, ValueError, "rowptr[", num_dst, "] = ",
              int64_t(rowptr[num_dst]), " must equal the ", num_edges, " entries of col");
  for (int64_t e = 0; e < num_edges; ++e)
    IOGNN_CHECK(col[e] >= 0 && col[e] < num_src, IndexError, "col[", e, "] = ", int64_t(col[e]),
                " is outside [0, ", num_src, ")");
}

// row_order must be a permutation of [0, num_dst): each entry in range, none repeated.
template <typename index_t>
void check_row_order(const index_t* row_order, int64_t num_dst) {
  std::vector<bool> seen(size_t(num_dst), false);
  for (int64_t k = 0; k < num_dst; ++k) {
    const int64_t row = row_order[k];
    IOGNN_CHECK(row >= 0 && row < num_dst, IndexError, "row_order[", k, "] = ", row,
                " is outside [0, ", num_dst, ")");
    IOGNN_CHECK(!seen[size_t(row)], ValueError, "row_order[", k, "] = ", row,
                " repeats an earlier entry: row_order must be a permutation of [0, ", num_dst, ")");
    seen[size_t(row)] = true;
  }
}

// The rows of window w: the k-th is row_order[16 w + k], or 16 w + k without a row order.
template <typename index_t>
struct WindowRows {
  const index_t* row_order;
  int64_t first, count;
  WindowRows(const index_t* order, int64_t num_dst, int64_t w)
      : row_order(order), first(w * kTileRows), count(std::min(kTileRows, num_dst - first)) {}
  int64_t operator[](int64_t k) const {
    return row_order ? int64_t(row_order[first + k]) : first + k;
  }
};

// The sorted distinct sources of a window's edges, in `columns` (reused between windows).
template <typename index_t>
void condensed_columns(const index_t* rowptr, const index_t* col, const WindowRows<index_t>& rows,
                       std::vector<index_t>& columns) {
  columns.clear();
  for (int64_t k = 0; k < rows.count; ++k)
    columns.insert(columns.end(), col + rowptr[rows[k]], col + rowptr[rows[k] + 1]);
  std::sort(columns.begin(), columns.end());
  columns.erase(std::unique(columns.begin(), columns.end()), columns.end());
}

int64_t tiles_for(int64_t num_columns) { return (num_columns + kTileCols - 1) / kTileCols; }

// Windows per parallel chunk: enough work to amortise the scheduling, small enough to balance.
constexpr int64_t kWindowGrain = 64;

}  // namespace

template <typename index_t>
void check_tile_input(const index_t* rowptr, const index_t* col, int64_t num_dst, int64_t num_src,
                      int64_t num_edges, const index_t* row_order) {
  check_csr(rowptr, col, num_dst, num_src, num_edges);
  if (row_order) check_row_order(row_order, num_dst);
}

template <typename index_t>
void count_tiles(const index_t* rowptr, const index_t* col, int64_t num_dst, int64_t num_src,
                 int64_t num_edges, const index_t* row_order, int64_t* window_ptr) {
  check_tile_input(rowptr, col, num_dst, num_src, num_edges, row_order);
  const int64_t num_windows = num_tile_windows(num_dst);
  window_ptr[0] = 0;
  parallel_for(0, num_windows, kWindowGrain, [&](int64_t lo, int64_t hi) {
    std::vector<index_t> columns;
    for (int64_t w = lo; w < hi; ++w) {
      condensed_columns(rowptr, col, WindowRows<index_t>(row_order, num_dst, w), columns);
      window_ptr[w + 1] = tiles_for(int64_t(columns.size()));
    }
  });
  for (int64_t w = 0; w < num_windows; ++w) window_ptr[w + 1] += window_ptr[w];
}

template <typename index_t>
int64_t fill_tiles(const index_t* rowptr, const index_t* col, int64_t num_dst,
                   const index_t* row_order, const int64_t* window_ptr, index_t* tile_cols,
                   uint32_t* tile_bitmap, int64_t* edge_slot) {
  const int64_t num_windows = num_tile_windows(num_dst);
  // Distinct pairs per window, summed in window order after the parallel loop.
  std::vector<int64_t> window_pairs(size_t(num_windows), 0);
  parallel_for(0, num_windows, kWindowGrain, [&](int64_t lo, int64_t hi) {
    std::vector<index_t> columns;
    for (int64_t w = lo; w < hi; ++w) {
      const WindowRows<index_t> rows(row_order, num_dst, w);
      condensed_columns(rowptr, col, rows, columns);
      const int64_t first_tile = window_ptr[w];
      const int64_t num_tiles = window_ptr[w + 1] - first_tile;
      index_t* cols = tile_cols + first_tile * kTileCols;
      std::fill(cols, cols + num_tiles * kTileCols, index_t(-1));
      std::copy(columns.begin(), columns.end(), cols);
      uint32_t* bitmap = tile_bitmap + first_tile * kTileWords;
      std::fill(bitmap, bitmap + num_tiles * kTileWords, 0u);
      for (int64_t r = 0; r < rows.count; ++r) {
        const int64_t row = rows[r];
        for (int64_t e = rowptr[row]; e < rowptr[row + 1]; ++e) {
          const int64_t slot =
              std::lower_bound(columns.begin(), columns.end(), col[e]) - columns.begin();
          const int64_t tile = slot / kTileCols;
          const int64_t bit = r * kTileCols + slot % kTileCols;
          bitmap[tile * kTileWords + bit / 32] |= uint32_t(1) << (bit % 32);
          edge_slot[e] = (first_tile + tile) * kTileSlots + bit;
        }
      }
      int64_t pairs = 0;
      for (int64_t k = 0; k < num_tiles * kTileWords; ++k)
        pairs += int64_t(std::bitset<32>(bitmap[k]).count());
      window_pairs[size_t(w)] = pairs;
    }
  });
  int64_t total = 0;
  for (int64_t pairs : window_pairs) total += pairs;
  return total;
}

#define IOGNN_INSTANTIATE_TILES(index_t)                                                         \
  template void check_tile_input<index_t>(const index_t*, const index_t*, int64_t, int64_t,      \
                                          int64_t, const index_t*);                              \
  template void count_tiles<index_t>(const index_t*, const index_t*, int64_t, int64_t, int64_t,  \
                                     const index_t*, int64_t*);                                  \
  template int64_t fill_tiles<index_t>(const index_t*, const index_t*, int64_t, const index_t*,   \
                                       const int64_t*, index_t*, uint32_t*, int64_t*);
IOGNN_INSTANTIATE_TILES(int32_t)
IOGNN_INSTANTIATE_TILES(int64_t)
#undef IOGNN_INSTANTIATE_TILES

}  // namespace iognn

// The tile layout (core/tiles.h) against a direct reference: windows of 16 rows (in the identity
// order or a given row order), condensed columns in tiles of 8, bitmaps, edge slots, distinct pair
// counts; both index types and the errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <cstdint>
#include <random>
#include <set>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/tiles.h"
#include "expect_error.h"

namespace iognn::test {
namespace {

// A CSR by destination; rows are given as lists of sources (duplicates allowed).
template <typename index_t>
struct Csr {
  explicit Csr(const std::vector<std::vector<int64_t>>& rows) : rowptr{0} {
    for (const auto& sources : rows) {
      for (int64_t s : sources) col.push_back(index_t(s));
      rowptr.push_back(index_t(col.size()));
    }
  }
  int64_t num_dst() const { return int64_t(rowptr.size()) - 1; }
  std::vector<index_t> rowptr, col;
};

template <typename index_t>
struct Tiles {
  std::vector<int64_t> window_ptr;
  std::vector<index_t> cols;
  std::vector<uint32_t> bitmap;
  std::vector<int64_t> edge_slot;
  int64_t pairs = 0;
};

// The layout of `csr` with windows by `order` (empty: the identity order).
template <typename index_t>
Tiles<index_t> build(const Csr<index_t>& csr, int64_t num_src,
                     const std::vector<int64_t>& order = {}) {
  const std::vector<index_t> row_order(order.begin(), order.end());
  const index_t* order_ptr = order.empty() ? nullptr : row_order.data();
  Tiles<index_t> t;
  t.window_ptr.assign(size_t(num_tile_windows(csr.num_dst()) + 1), -1);
  count_tiles<index_t>(csr.rowptr.data(), csr.col.data(), csr.num_dst(), num_src,
                       int64_t(csr.col.size()), order_ptr, t.window_ptr.data());
  const int64_t num_tiles = t.window_ptr.back();
  t.cols.assign(size_t(num_tiles * kTileCols), index_t(-7));
  t.bitmap.assign(size_t(num_tiles * kTileWords), 0xdeadbeefu);
  t.edge_slot.assign(csr.col.size(), -7);
  t.pairs = fill_tiles<index_t>(csr.rowptr.data(), csr.col.data(), csr.num_dst(), order_ptr,
                                t.window_ptr.data(), t.cols.data(), t.bitmap.data(),
                                t.edge_slot.data());
  return t;
}

bool bit(const Tiles<int64_t>& t, int64_t tile, int64_t r, int64_t c) {
  const int64_t b = r * kTileCols + c;
  return (t.bitmap[size_t(tile * kTileWords + b / 32)] >> (b % 32)) & 1u;
}

// Every edge's slot names a tile of its row's window, its row there and a column holding its
// source, whose bit is set.
void expect_edge_slots(const Csr<int64_t>& csr, const Tiles<int64_t>& t,
                       const std::vector<int64_t>& order) {
  for (int64_t k = 0; k < csr.num_dst(); ++k) {
    const int64_t row = order[size_t(k)], w = k / kTileRows;
    for (int64_t p = csr.rowptr[size_t(row)]; p < csr.rowptr[size_t(row) + 1]; ++p) {
      const int64_t slot = t.edge_slot[size_t(p)];
      const int64_t tile = slot / kTileSlots, r = slot % kTileSlots / kTileCols,
                    c = slot % kTileCols;
      EXPECT_GE(tile, t.window_ptr[size_t(w)]) << "position " << p;
      EXPECT_LT(tile, t.window_ptr[size_t(w) + 1]) << "position " << p;
      EXPECT_EQ(r, k % kTileRows) << "position " << p;
      EXPECT_EQ(t.cols[size_t(tile * kTileCols + c)], csr.col[size_t(p)]) << "position " << p;
      EXPECT_TRUE(bit(t, tile, r, c)) << "position " << p;
    }
  }
}

// Every window's columns are the sorted distinct sources of its rows (then -1), every bit is set
// exactly for the pairs of the CSR, every edge slot decodes to its pair, and the pair count is the
// number of distinct pairs. Windows by `order` (empty: the identity order).
void expect_matches_reference(const std::vector<std::vector<int64_t>>& rows, int64_t num_src,
                              std::vector<int64_t> order = {}) {
  const Csr<int64_t> csr(rows);
  const Tiles<int64_t> t = build(csr, num_src, order);
  if (order.empty()) {
    order.resize(rows.size());
    std::iota(order.begin(), order.end(), int64_t(0));
  }
  std::set<std::pair<int64_t, int64_t>> pairs;  // (position in the order, source)
  const int64_t num_windows = num_tile_windows(csr.num_dst());
  ASSERT_EQ(t.window_ptr.front(), 0);
  for (int64_t w = 0; w < num_windows; ++w) {
    std::set<int64_t> window_cols;
    const int64_t end = std::min<int64_t>((w + 1) * kTileRows, csr.num_dst());
    for (int64_t k = w * kTileRows; k < end; ++k)
      for (int64_t s : rows[size_t(order[size_t(k)])]) {
        window_cols.insert(s);
        pairs.insert({k, s});
      }
    std::vector<int64_t> want(window_cols.begin(), window_cols.end());
    const int64_t tiles = (int64_t(want.size()) + kTileCols - 1) / kTileCols;
    ASSERT_EQ(t.window_ptr[size_t(w + 1)] - t.window_ptr[size_t(w)], tiles) << "window " << w;
    want.resize(size_t(tiles * kTileCols), -1);
    const auto first = t.cols.begin() + t.window_ptr[size_t(w)] * kTileCols;
    EXPECT_EQ(std::vector<int64_t>(first, first + tiles * kTileCols), want) << "window " << w;
    for (int64_t k = 0; k < tiles; ++k)
      for (int64_t r = 0; r < kTileRows; ++r)
        for (int64_t c = 0; c < kTileCols; ++c) {
          const int64_t src = want[size_t(k * kTileCols + c)];
          const int64_t dst = w * kTileRows + r;
          EXPECT_EQ(bit(t, t.window_ptr[size_t(w)] + k, r, c), pairs.count({dst, src}) == 1)
              << "window " << w << " tile " << k << " row " << r << " column " << c;
        }
  }
  EXPECT_EQ(t.pairs, int64_t(pairs.size()));
  expect_edge_slots(csr, t, order);
}

TEST(Tiles, SmallGraphsMatchTheReference) {
  // Isolated rows, duplicates, self-loops and a last window of 3 rows (19 rows).
  std::vector<std::vector<int64_t>> rows(19);
  rows[0] = {0, 5, 5, 3};
  rows[2] = {2, 2, 11, 30};
  rows[15] = {15, 0, 9, 10, 11, 12, 13, 14, 16};
  rows[16] = {1, 1, 1};
  rows[18] = {18, 0};
  expect_matches_reference(rows, 31);
  expect_matches_reference({{}, {}, {}}, 4);  // no edges: no tiles
  expect_matches_reference({}, 0);            // no rows
  expect_matches_reference({{0, 1}, {2}}, 3);
}

TEST(Tiles, DenseBlocksFillEveryTile) {
  // Two dense 16 x 16 blocks on the diagonal: 4 full tiles.
  std::vector<std::vector<int64_t>> rows(32);
  for (int64_t r = 0; r < 32; ++r)
    for (int64_t c = 0; c < 16; ++c) rows[size_t(r)].push_back((r / 16) * 16 + c);
  const Tiles<int64_t> t = build(Csr<int64_t>(rows), 32);
  EXPECT_EQ(t.window_ptr, (std::vector<int64_t>{0, 2, 4}));
  EXPECT_EQ(t.pairs, 4 * kTileRows * kTileCols);
  for (uint32_t word : t.bitmap) EXPECT_EQ(word, 0xffffffffu);
  expect_matches_reference(rows, 32);
}

// Random graphs (from `seed`) in the identity order or a shuffled one: the reference,
// and the same layout in both index types.
void expect_random_graphs_match(uint64_t seed, bool shuffle_rows) {
  std::mt19937_64 gen(seed);
  for (int trial = 0; trial < 5; ++trial) {
    const int64_t num_dst = 1 + int64_t(gen() % 70), num_src = 1 + int64_t(gen() % 90);
    std::vector<std::vector<int64_t>> rows(static_cast<size_t>(num_dst));
    for (auto& row : rows)
      for (uint64_t k = gen() % 9; k > 0; --k) row.push_back(int64_t(gen() % uint64_t(num_src)));
    std::vector<int64_t> order;
    if (shuffle_rows) {
      order.resize(rows.size());
      std::iota(order.begin(), order.end(), int64_t(0));
      std::shuffle(order.begin(), order.end(), gen);
    }
    expect_matches_reference(rows, num_src, order);
    const Tiles<int64_t> wide = build(Csr<int64_t>(rows), num_src, order);
    const Tiles<int32_t> narrow = build(Csr<int32_t>(rows), num_src, order);
    EXPECT_EQ(narrow.window_ptr, wide.window_ptr);
    EXPECT_EQ(std::vector<int64_t>(narrow.cols.begin(), narrow.cols.end()), wide.cols);
    EXPECT_EQ(narrow.bitmap, wide.bitmap);
    EXPECT_EQ(narrow.edge_slot, wide.edge_slot);
    EXPECT_EQ(narrow.pairs, wide.pairs);
  }
}

TEST(Tiles, RandomGraphsMatchTheReferenceInBothIndexTypes) { expect_random_graphs_match(3, false); }

TEST(Tiles, RowOrderWindowsMatchTheReference) { expect_random_graphs_match(7, true); }

TEST(Tiles, RowOrderGathersRowsIntoOneWindow) {
  // Rows 0 and 20 share source 5 but sit in windows 0 and 1; ordered first, they share a tile
  // column, and the duplicate edge of row 20 shares its slot.
  std::vector<std::vector<int64_t>> rows(21);
  rows[0] = {5};
  rows[20] = {5, 5};
  std::vector<int64_t> order(21);
  std::iota(order.begin(), order.end(), int64_t(0));
  std::swap(order[1], order[20]);
  const Tiles<int64_t> t = build(Csr<int64_t>(rows), 6, order);
  EXPECT_EQ(t.window_ptr, (std::vector<int64_t>{0, 1, 1}));
  EXPECT_EQ(t.cols, (std::vector<int64_t>{5, -1, -1, -1, -1, -1, -1, -1}));
  EXPECT_EQ(t.edge_slot, (std::vector<int64_t>{0, kTileCols, kTileCols}));
  EXPECT_EQ(t.pairs, 2);
  expect_matches_reference(rows, 6, order);
}

// count_tiles over the columns {0, 1}, with the given row offsets, sources and column count.
void count_over_two_columns(const std::vector<int64_t>& rowptr, int64_t num_src,
                            int64_t num_edges) {
  const std::vector<int64_t> col{0, 1};
  std::vector<int64_t> window_ptr(2);
  count_tiles<int64_t>(rowptr.data(), col.data(), int64_t(rowptr.size()) - 1, num_src, num_edges,
                       nullptr, window_ptr.data());
}

TEST(Tiles, RejectsABadCsr) {
  expect_error<ValueError>([] { count_over_two_columns({0, 2, 1}, 4, 2); }, "non-decreasing");
  expect_error<ValueError>([] { count_over_two_columns({1, 2}, 4, 1); }, "rowptr[0] must be 0");
  expect_error<ValueError>([] { count_over_two_columns({0, 1}, 4, 2); },
                           "must equal the 2 entries of col");
  expect_error<IndexError>([] { count_over_two_columns({0, 2}, 1, 2); },
                           "col[1] = 1 is outside [0, 1)");
}

// count_tiles of three empty rows in the given row order.
void count_with_order(const std::vector<int64_t>& order) {
  const std::vector<int64_t> rowptr{0, 0, 0, 0}, col{};
  std::vector<int64_t> window_ptr(2);
  count_tiles<int64_t>(rowptr.data(), col.data(), 3, 1, 0, order.data(), window_ptr.data());
}

TEST(Tiles, RejectsABadRowOrder) {
  expect_error<IndexError>([] { count_with_order({0, 3, 1}); },
                           "row_order[1] = 3 is outside [0, 3)");
  expect_error<IndexError>([] { count_with_order({0, -1, 1}); },
                           "row_order[1] = -1 is outside [0, 3)");
  expect_error<ValueError>([] { count_with_order({2, 0, 2}); },
                           "row_order[2] = 2 repeats an earlier entry");
}

}  // namespace
}  // namespace iognn::test

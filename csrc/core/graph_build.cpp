// Host construction of the CSR / transposed CSR (see graph.h for the contract).
#include <algorithm>
#include <limits>
#include <vector>

#include "error.h"
#include "graph.h"

namespace iognn {

bool GraphSizes::fits_int32() const {
  constexpr int64_t kMax = std::numeric_limits<int32_t>::max();
  return num_edges < kMax && num_src < kMax && num_dst < kMax && num_input_edges < kMax;
}

void infer_num_nodes(const EdgeIndexView& ei, int64_t* num_src, int64_t* num_dst) {
  int64_t ms = -1, md = -1;
  for (int64_t k = 0; k < ei.num_edges; ++k) {
    const int64_t s = ei.src(k), d = ei.dst(k);
    IOGNN_CHECK(s >= 0, IndexError, "edge_index[0][", k, "] = ", s, " is negative");
    IOGNN_CHECK(d >= 0, IndexError, "edge_index[1][", k, "] = ", d, " is negative");
    ms = std::max(ms, s);
    md = std::max(md, d);
  }
  *num_src = ms + 1;
  *num_dst = md + 1;
}

void check_graph_sizes(int64_t num_src, int64_t num_dst, int64_t num_edges) {
  IOGNN_CHECK(num_src >= 0, ValueError, "num_src_nodes must be >= 0, got ", num_src);
  IOGNN_CHECK(num_dst >= 0, ValueError, "num_dst_nodes must be >= 0, got ", num_dst);
  IOGNN_CHECK(num_edges >= 0, ValueError, "edge_index has a negative edge count");
}

void throw_edge_out_of_range(int row, int64_t k, int64_t value, int64_t num_src,
                             int64_t num_dst) {
  if (row == 0)
    throw IndexError(detail::concat("edge_index[0][", k, "] = ", value, " is out of range for ",
                                    num_src, " source nodes"));
  throw IndexError(detail::concat("edge_index[1][", k, "] = ", value, " is out of range for ",
                                  num_dst, " destination nodes"));
}

GraphSizes graph_sizes(int64_t num_src, int64_t num_dst, int64_t num_input_edges,
                       int64_t num_input_loops, SelfLoops loops) {
  GraphSizes sz;
  sz.num_src = num_src;
  sz.num_dst = num_dst;
  sz.num_input_edges = num_input_edges;
  if (loops == SelfLoops::kKeep) {
    sz.num_edges = num_input_edges;
  } else {
    sz.num_loops = std::min(num_src, num_dst);
    sz.num_edges = num_input_edges - num_input_loops + sz.num_loops;
  }
  return sz;
}

GraphSizes plan_graph(const EdgeIndexView& ei, int64_t num_src, int64_t num_dst, SelfLoops loops) {
  check_graph_sizes(num_src, num_dst, ei.num_edges);
  int64_t self_loops = 0;
  for (int64_t k = 0; k < ei.num_edges; ++k) {
    const int64_t s = ei.src(k), d = ei.dst(k);
    if (s < 0 || s >= num_src) throw_edge_out_of_range(0, k, s, num_src, num_dst);
    if (d < 0 || d >= num_dst) throw_edge_out_of_range(1, k, d, num_src, num_dst);
    self_loops += (s == d);
  }
  return graph_sizes(num_src, num_dst, ei.num_edges, self_loops, loops);
}

namespace {

// Stable counting sort of `order` (a permutation of positions) by key(position) in [0, num_keys).
// Writes the sorted permutation to `sorted` and the key offsets (size num_keys + 1) to `ptr`.
template <typename index_t, typename Key>
void counting_sort(const std::vector<index_t>& order, int64_t num_keys, Key key, index_t* ptr,
                   std::vector<index_t>& sorted) {
  std::fill(ptr, ptr + num_keys + 1, index_t(0));
  for (index_t p : order) ++ptr[key(p) + 1];
  for (int64_t k = 0; k < num_keys; ++k) ptr[k + 1] += ptr[k];
  std::vector<index_t> cursor(ptr, ptr + num_keys);
  sorted.resize(order.size());
  for (index_t p : order) sorted[cursor[key(p)]++] = p;
}

}  // namespace

template <typename index_t>
void build_graph_cpu(const EdgeIndexView& ei, const GraphSizes& sz, SelfLoops loops,
                     const GraphArrays<index_t>& out) {
  const int64_t E = sz.num_edges;
  // 1. The augmented edge list in PyG's order: kept input edges, then the appended loops.
  std::vector<index_t> src(E), dst(E);
  int64_t a = 0;
  std::vector<int64_t> last_loop;  // kAddRemaining: last input loop of each node, or -1
  if (loops == SelfLoops::kAddRemaining) last_loop.assign(sz.num_loops, -1);
  for (int64_t k = 0; k < ei.num_edges; ++k) {
    const int64_t s = ei.src(k), d = ei.dst(k);
    if (loops != SelfLoops::kKeep && s == d) {
      if (loops == SelfLoops::kAddRemaining && s < sz.num_loops) last_loop[s] = k;
      continue;
    }
    src[a] = index_t(s);
    dst[a] = index_t(d);
    out.edge_map[a] = index_t(k);
    ++a;
  }
  for (int64_t i = 0; i < sz.num_loops; ++i, ++a) {
    src[a] = dst[a] = index_t(i);
    out.edge_map[a] = loops == SelfLoops::kAddRemaining ? index_t(last_loop[i]) : index_t(-1);
  }

  // 2. CSR: stable sort by source, then stable sort by destination => rows ordered by (src, id).
  std::vector<index_t> ids(E), by_src, by_dst;
  for (int64_t k = 0; k < E; ++k) ids[k] = index_t(k);
  counting_sort<index_t>(ids, sz.num_src, [&](index_t p) { return src[p]; }, out.colptr, by_src);
  counting_sort<index_t>(by_src, sz.num_dst, [&](index_t p) { return dst[p]; }, out.rowptr, by_dst);
  for (int64_t p = 0; p < E; ++p) {
    out.eid[p] = by_dst[p];
    out.col[p] = src[by_dst[p]];
  }

  // 3. Transposed CSR: stable sort of CSR positions by source => rows ordered by (dst, position).
  std::vector<index_t> positions(E), by_col;
  for (int64_t p = 0; p < E; ++p) positions[p] = index_t(p);
  counting_sort<index_t>(positions, sz.num_src, [&](index_t p) { return out.col[p]; }, out.colptr,
                         by_col);
  for (int64_t q = 0; q < E; ++q) {
    out.csc2csr[q] = by_col[q];
    out.row[q] = dst[out.eid[by_col[q]]];
  }
}

template <typename index_t>
GraphStats compute_graph_stats(const index_t* rowptr, int64_t num_dst, const index_t* colptr,
                               int64_t num_src, const index_t* col, const index_t* row) {
  GraphStats st;
  const int64_t E = num_dst > 0 ? int64_t(rowptr[num_dst]) : 0;
  std::vector<int64_t> hist;
  for (int64_t i = 0; i < num_dst; ++i) {
    const int64_t d = rowptr[i + 1] - rowptr[i];
    st.max_in_degree = std::max(st.max_in_degree, d);
    if (d >= int64_t(hist.size())) hist.resize(d + 1, 0);
    ++hist[d];
    int b = 0;
    while (b + 1 < GraphStats::kBuckets && (int64_t(1) << b) <= d) ++b;
    ++st.in_degree_log2_buckets[b];
  }
  for (int64_t j = 0; j < num_src; ++j)
    st.max_out_degree = std::max<int64_t>(st.max_out_degree, colptr[j + 1] - colptr[j]);
  st.num_isolated_dst = hist.empty() ? 0 : hist[0];
  st.mean_in_degree = num_dst > 0 ? double(E) / double(num_dst) : 0.0;
  // Exact percentiles from the cumulative histogram: the smallest d with count(deg <= d) >= q * n.
  auto percentile = [&](double q) -> int64_t {
    const double target = q * double(num_dst);
    int64_t acc = 0;
    for (int64_t d = 0; d < int64_t(hist.size()); ++d) {
      acc += hist[d];
      if (double(acc) >= target) return d;
    }
    return 0;
  };
  st.p50_in_degree = percentile(0.5);
  st.p90_in_degree = percentile(0.9);
  st.p99_in_degree = percentile(0.99);
  st.symmetric = col != nullptr && row != nullptr && num_src == num_dst &&
                 std::equal(rowptr, rowptr + num_dst + 1, colptr) && std::equal(col, col + E, row);
  return st;
}

#define IOGNN_INSTANTIATE(index_t)                                                                 \
  template void build_graph_cpu<index_t>(const EdgeIndexView&, const GraphSizes&, SelfLoops,       \
                                         const GraphArrays<index_t>&);                             \
  template GraphStats compute_graph_stats<index_t>(const index_t*, int64_t, const index_t*, int64_t, \
                                                   const index_t*, const index_t*);
IOGNN_INSTANTIATE(int32_t)
IOGNN_INSTANTIATE(int64_t)
#undef IOGNN_INSTANTIATE

}  // namespace iognn

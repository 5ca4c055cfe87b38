// Partition layouts, random assignment and the METIS call (see partition.h for the contract).
#include "core/partition.h"

#include <algorithm>
#include <limits>
#include <stdexcept>
#include <utility>

#include "core/counter_rng.h"
#include "core/error.h"
#include "core/parallel.h"

#if defined(IOGNN_HAS_METIS)
#include <metis.h>
#endif

namespace iognn {
namespace {

// Items per OpenMP task in the passes over edges and nodes: large enough that scheduling is noise,
// small enough that a products-scale edge list (~10^8 edges) splits into thousands of tasks.
constexpr int64_t kEdgesPerTask = 1 << 16;

int64_t num_chunks(int64_t n, int64_t grain) { return (n + grain - 1) / grain; }

// fn(chunk, lo, hi) over [0, n) in chunks of `grain`, in parallel: per-chunk results indexed by
// `chunk` and combined in chunk order are independent of the thread count.
template <typename Fn>
void for_each_chunk(int64_t n, int64_t grain, const Fn& fn) {
  parallel_for(0, n, grain, [&](int64_t lo, int64_t hi) { fn(lo / grain, lo, hi); });
}

// Integer additions commute, so concurrent counts are exact and deterministic.
void atomic_increment(int64_t* counter) { __atomic_fetch_add(counter, 1, __ATOMIC_RELAXED); }

void check_node(const EdgeIndexView& edges, int64_t k, int64_t num_nodes) {
  const int64_t u = edges.src(k), v = edges.dst(k);
  if (u < 0 || u >= num_nodes) throw_edge_out_of_range(0, k, u, num_nodes, num_nodes);
  if (v < 0 || v >= num_nodes) throw_edge_out_of_range(1, k, v, num_nodes, num_nodes);
}

// Rethrows the first out-of-range edge that a chunked pass recorded (-1: none), so the error names
// the same edge for any thread count.
void throw_first_bad_edge(const EdgeIndexView& edges, const std::vector<int64_t>& first_bad,
                          int64_t num_nodes) {
  for (int64_t k : first_bad)
    if (k >= 0) check_node(edges, k, num_nodes);
}

bool in_range(const EdgeIndexView& edges, int64_t k, int64_t num_nodes) {
  const int64_t u = edges.src(k), v = edges.dst(k);
  return u >= 0 && u < num_nodes && v >= 0 && v < num_nodes;
}

uint64_t hash_pair(uint64_t a, uint64_t b) { return mix64(mix64(a + kGoldenGamma) ^ b); }

void check_num_parts(int64_t num_nodes, int64_t num_parts) {
  IOGNN_CHECK(num_nodes >= 0, ValueError, "num_nodes must be >= 0, got ", num_nodes);
  IOGNN_CHECK(num_parts >= 1 && num_parts <= num_nodes, ValueError,
              "num_parts must be in [1, num_nodes = ", num_nodes, "], got ", num_parts);
}

}  // namespace

PartitionLayout::PartitionLayout(const EdgeIndexView& edges, int64_t num_nodes,
                                 const int64_t* parts, int64_t num_parts)
    : edges_(edges), num_nodes_(num_nodes), parts_(parts), num_parts_(num_parts) {
  IOGNN_CHECK(num_nodes >= 0, ValueError, "num_nodes must be >= 0, got ", num_nodes);
  IOGNN_CHECK(num_parts >= 1, ValueError, "num_parts must be >= 1, got ", num_parts);
  const int64_t N = num_nodes, P = num_parts, E = edges.num_edges;
  const int64_t P1 = P + 1;

  uint64_t parts_hash = 0;
  for (int64_t v = 0; v < N; ++v) {
    IOGNN_CHECK(parts[v] >= 0 && parts[v] < P, ValueError, "parts[", v, "] = ", parts[v],
                " is outside [0, num_parts = ", P, ")");
    parts_hash += hash_pair(uint64_t(v), uint64_t(parts[v]));
  }

  // One pass over the edges: validation, global in-degrees, boundary marks, the cut and the edge
  // multiset's hash (a sum, so independent of edge order and of the chunking).
  in_degree_.assign(N, 0);
  std::vector<uint8_t> boundary(N, 0);
  const int64_t chunks = num_chunks(E, kEdgesPerTask);
  std::vector<int64_t> first_bad(chunks, -1), chunk_cut(chunks, 0);
  std::vector<uint64_t> chunk_hash(chunks, 0);
  for_each_chunk(E, kEdgesPerTask, [&](int64_t c, int64_t lo, int64_t hi) {
    int64_t cut = 0;
    uint64_t hash = 0;
    for (int64_t k = lo; k < hi; ++k) {
      if (!in_range(edges, k, N)) {
        first_bad[c] = k;
        return;
      }
      const int64_t u = edges.src(k), v = edges.dst(k);
      atomic_increment(&in_degree_[v]);
      hash += hash_pair(uint64_t(u), uint64_t(v));
      if (parts[u] != parts[v]) {
        ++cut;
        __atomic_store_n(&boundary[u], uint8_t(1), __ATOMIC_RELAXED);
        __atomic_store_n(&boundary[v], uint8_t(1), __ATOMIC_RELAXED);
      }
    }
    chunk_cut[c] = cut;
    chunk_hash[c] = hash;
  });
  throw_first_bad_edge(edges, first_bad, N);
  uint64_t edge_hash = 0;
  for (int64_t c = 0; c < chunks; ++c) {
    edge_cut_ += chunk_cut[c];
    edge_hash += chunk_hash[c];
  }
  fingerprint_ = mix64(hash_pair(hash_pair(uint64_t(N), uint64_t(P)), parts_hash) + edge_hash);

  // Local ids: each part's interior then its boundary, both in ascending global id.
  std::vector<int64_t> owned(P, 0), interior(P, 0);
  for (int64_t v = 0; v < N; ++v) {
    ++owned[parts[v]];
    if (!boundary[v]) ++interior[parts[v]];
  }
  part_begin_.assign(P1, 0);
  for (int64_t p = 0; p < P; ++p) part_begin_[p + 1] = part_begin_[p] + owned[p];
  std::vector<int64_t> next_interior(part_begin_.begin(), part_begin_.end() - 1);
  std::vector<int64_t> next_boundary(P);
  for (int64_t p = 0; p < P; ++p)
    next_boundary[p] = part_begin_[p] + interior[p];
  order_.resize(N);
  local_id_.resize(N);
  for (int64_t v = 0; v < N; ++v) {
    const int64_t p = parts[v];
    const int64_t pos = boundary[v] ? next_boundary[p]++ : next_interior[p]++;
    order_[pos] = v;
    local_id_[v] = pos - part_begin_[p];
  }

  // The edges grouped by destination part, input order within a part (a stable bucket pass).
  std::vector<int64_t> bucket(chunks * P, 0);  // [chunk][part]
  for_each_chunk(E, kEdgesPerTask, [&](int64_t c, int64_t lo, int64_t hi) {
    int64_t* count = bucket.data() + c * P;
    for (int64_t k = lo; k < hi; ++k) ++count[parts[edges.dst(k)]];
  });
  part_edge_begin_.assign(P1, 0);
  int64_t offset = 0;
  for (int64_t p = 0; p < P; ++p) {
    part_edge_begin_[p] = offset;
    for (int64_t c = 0; c < chunks; ++c) {  // counts become each chunk's first slot
      int64_t& slot = bucket[c * P + p];
      const int64_t count = slot;
      slot = offset;
      offset += count;
    }
  }
  part_edge_begin_[P] = offset;
  part_edges_.resize(E);
  for_each_chunk(E, kEdgesPerTask, [&](int64_t c, int64_t lo, int64_t hi) {
    int64_t* next = bucket.data() + c * P;
    for (int64_t k = lo; k < hi; ++k) part_edges_[next[parts[edges.dst(k)]]++] = k;
  });

  // Each part's halo: the marked sources, read off the owners' boundaries in (owner, local id)
  // order, which is the order the contract fixes (a halo node is on its owner's boundary).
  halo_.assign(P, {});
  halo_group_.assign(P, std::vector<int64_t>(P1, 0));
  parallel_for(0, P, 1, [&](int64_t lo, int64_t hi) {
    std::vector<uint8_t> needed(N);
    for (int64_t r = lo; r < hi; ++r) {
      std::fill(needed.begin(), needed.end(), uint8_t(0));
      for (int64_t i = part_edge_begin_[r]; i < part_edge_begin_[r + 1]; ++i) {
        const int64_t u = edges.src(part_edges_[i]);
        if (parts[u] != r) needed[u] = 1;
      }
      std::vector<int64_t>& halo = halo_[r];
      std::vector<int64_t>& group = halo_group_[r];
      for (int64_t q = 0; q < P; ++q) {
        group[q] = int64_t(halo.size());
        if (q == r) continue;
        for (int64_t pos = part_begin_[q] + interior[q];
             pos < part_begin_[q + 1]; ++pos)
          if (needed[order_[pos]]) halo.push_back(order_[pos]);
      }
      group[P] = int64_t(halo.size());
    }
  });

  sizes_.resize(P);
  for (int64_t r = 0; r < P; ++r) {
    PartSizes& s = sizes_[r];
    s.num_owned = owned[r];
    s.num_interior = interior[r];
    s.num_halo = int64_t(halo_[r].size());
    s.num_edges = part_edge_begin_[r + 1] - part_edge_begin_[r];
    for (int64_t q = 0; q < P; ++q)
      s.num_sent += halo_group_[q][r + 1] - halo_group_[q][r];
  }
}

void PartitionLayout::fill(int64_t r, const PartArrays& out) const {
  IOGNN_CHECK(r >= 0 && r < num_parts_, ValueError, "part must be in [0, num_parts = ", num_parts_,
              "), got ", r);
  const PartSizes& s = sizes_[r];
  const int64_t begin = part_begin_[r];
  const std::vector<int64_t>& halo = halo_[r];
  std::copy(order_.begin() + begin, order_.begin() + begin + s.num_owned, out.owned_nodes);
  std::copy(halo.begin(), halo.end(), out.halo_nodes);
  for (int64_t i = 0; i < s.num_owned; ++i) out.in_degree[i] = in_degree_[out.owned_nodes[i]];
  for (int64_t i = 0; i < s.num_halo; ++i)
    out.in_degree[s.num_owned + i] = in_degree_[halo[i]];

  // Global id -> local id of the halo sources (only their entries are read).
  std::vector<int64_t> halo_local(s.num_halo > 0 ? num_nodes_ : 0);
  for (int64_t i = 0; i < s.num_halo; ++i) halo_local[halo[i]] = s.num_owned + i;

  // Counting sort of the part's edges by local destination; stable, since they arrive in input order.
  // The part holds every edge into its nodes, so a destination's count is its global in-degree.
  const int64_t* first = part_edges_.data() + part_edge_begin_[r];
  std::vector<int64_t> next(s.num_owned, 0);
  for (int64_t d = 1; d < s.num_owned; ++d) next[d] = next[d - 1] + out.in_degree[d - 1];
  for (int64_t i = 0; i < s.num_edges; ++i) {
    const int64_t k = first[i], u = edges_.src(k);
    const int64_t d = local_id_[edges_.dst(k)];
    const int64_t pos = next[d]++;
    out.edge_dst[pos] = d;
    out.edge_src[pos] = parts_[u] == r ? local_id_[u] : halo_local[u];
    out.edge_ids[pos] = k;
  }

  // Part q's halo group owned by r lists r's boundary rows in r's local order: r sends exactly those.
  int64_t sent = 0;
  for (int64_t q = 0; q < num_parts_; ++q) {
    const std::vector<int64_t>& group = halo_group_[q];
    const int64_t lo = group[r], hi = group[r + 1];
    for (int64_t i = lo; i < hi; ++i) out.send_index[sent++] = local_id_[halo_[q][i]];
    out.send_counts[q] = hi - lo;
    out.recv_counts[q] = halo_group_[r][q + 1] - halo_group_[r][q];
  }
}

void random_partition(int64_t num_nodes, int64_t num_parts, uint64_t seed, int64_t* parts) {
  check_num_parts(num_nodes, num_parts);
  // A seeded Fisher-Yates shuffle of the balanced sequence 0, 1, ..., P-1, 0, 1, ...: each draw is
  // a pure function of (seed, position), so the result does not depend on the platform's RNG.
  for (int64_t v = 0; v < num_nodes; ++v) parts[v] = v % num_parts;
  const uint64_t key = mix64(seed ^ 0x5061727469746E21ull);
  for (int64_t i = num_nodes - 1; i > 0; --i) {
    const uint64_t j = mul_high64(mix64(key + uint64_t(i) * kGoldenGamma), uint64_t(i) + 1);
    std::swap(parts[i], parts[j]);
  }
}

template <typename index_t>
void symmetric_adjacency(const EdgeIndexView& edges, int64_t num_nodes, std::vector<index_t>* xadj,
                         std::vector<index_t>* adjncy) {
  IOGNN_CHECK(num_nodes >= 0, ValueError, "num_nodes must be >= 0, got ", num_nodes);
  const int64_t N = num_nodes, E = edges.num_edges;
  constexpr int64_t kMax = std::numeric_limits<index_t>::max();
  IOGNN_CHECK(N < kMax, ValueError, "the graph has ", N, " nodes, more than METIS's ",
              8 * sizeof(index_t), "-bit indices hold");

  // Both directions of every non-loop edge, bucketed by node; the slots a row's entries land in
  // vary with the threads, but each row is sorted afterwards, so the result does not.
  std::vector<int64_t> begin(N + 1, 0);
  const int64_t chunks = num_chunks(E, kEdgesPerTask);
  std::vector<int64_t> first_bad(chunks, -1);
  for_each_chunk(E, kEdgesPerTask, [&](int64_t c, int64_t lo, int64_t hi) {
    for (int64_t k = lo; k < hi; ++k) {
      if (!in_range(edges, k, N)) {
        first_bad[c] = k;
        return;
      }
      const int64_t u = edges.src(k), v = edges.dst(k);
      if (u == v) continue;
      atomic_increment(&begin[u + 1]);
      atomic_increment(&begin[v + 1]);
    }
  });
  throw_first_bad_edge(edges, first_bad, N);
  for (int64_t v = 0; v < N; ++v) begin[v + 1] += begin[v];
  std::vector<index_t> neighbours(begin.back());
  std::vector<int64_t> next(begin.begin(), begin.end() - 1);
  for_each_chunk(E, kEdgesPerTask, [&](int64_t, int64_t lo, int64_t hi) {
    for (int64_t k = lo; k < hi; ++k) {
      const int64_t u = edges.src(k), v = edges.dst(k);
      if (u == v) continue;
      neighbours[__atomic_fetch_add(&next[u], 1, __ATOMIC_RELAXED)] = index_t(v);
      neighbours[__atomic_fetch_add(&next[v], 1, __ATOMIC_RELAXED)] = index_t(u);
    }
  });
  std::vector<int64_t> degree(N);
  parallel_for(0, N, kEdgesPerTask / 16, [&](int64_t lo, int64_t hi) {
    for (int64_t v = lo; v < hi; ++v) {
      index_t* row = neighbours.data() + begin[v];
      index_t* end = neighbours.data() + begin[v + 1];
      std::sort(row, end);
      degree[v] = int64_t(std::unique(row, end) - row);
    }
  });
  // Compact the rows in place: a row only moves towards the front.
  xadj->assign(N + 1, 0);
  int64_t size = 0;
  for (int64_t v = 0; v < N; ++v) {
    const index_t* row = neighbours.data() + begin[v];
    if (begin[v] != size) std::copy(row, row + degree[v], neighbours.data() + size);
    size += degree[v];
    IOGNN_CHECK(size <= kMax, ValueError, "the symmetrised graph has more than ", kMax,
                " adjacency entries, more than METIS's ", 8 * sizeof(index_t), "-bit indices hold");
    (*xadj)[v + 1] = index_t(size);
  }
  neighbours.resize(size);
  neighbours.shrink_to_fit();
  *adjncy = std::move(neighbours);
}

template void symmetric_adjacency<int32_t>(const EdgeIndexView&, int64_t, std::vector<int32_t>*,
                                           std::vector<int32_t>*);
template void symmetric_adjacency<int64_t>(const EdgeIndexView&, int64_t, std::vector<int64_t>*,
                                           std::vector<int64_t>*);

bool has_metis() {
#if defined(IOGNN_HAS_METIS)
  return true;
#else
  return false;
#endif
}

void metis_partition(const EdgeIndexView& edges, int64_t num_nodes, int64_t num_parts,
                     int64_t seed, int64_t* parts) {
  check_num_parts(num_nodes, num_parts);
  IOGNN_CHECK(seed >= 0 && seed <= std::numeric_limits<int32_t>::max(), ValueError,
              "seed must be in [0, 2^31) for METIS, got ", seed);
#if !defined(IOGNN_HAS_METIS)
  (void)edges;
  (void)parts;
  throw ValueError("iognn was built without libmetis (install libmetis-dev and rebuild)");
#else
  if (num_parts == 1) {
    std::fill(parts, parts + num_nodes, int64_t(0));
    return;
  }
  std::vector<idx_t> xadj, adjncy;
  symmetric_adjacency<idx_t>(edges, num_nodes, &xadj, &adjncy);
  idx_t nvtxs = idx_t(num_nodes), ncon = 1, nparts = idx_t(num_parts), objval = 0;
  idx_t options[METIS_NOPTIONS];
  METIS_SetDefaultOptions(options);
  options[METIS_OPTION_SEED] = idx_t(seed);
  std::vector<idx_t> part(num_nodes);
  // An edgeless graph's adjncy is empty: METIS still gets a valid pointer.
  idx_t no_neighbour = 0;
  const int status = METIS_PartGraphKway(
      &nvtxs, &ncon, xadj.data(), adjncy.empty() ? &no_neighbour : adjncy.data(), nullptr, nullptr,
      nullptr, &nparts, nullptr, nullptr, options, &objval, part.data());
  if (status != METIS_OK)
    throw std::runtime_error(detail::concat("METIS_PartGraphKway failed with status ", status,
                                            (status == METIS_ERROR_MEMORY ? " (out of memory)" : "")));
  std::copy(part.begin(), part.end(), parts);
#endif
}

}  // namespace iognn

// Partition layouts (core/partition.h) against a brute-force reference of the definitions (sets and
// sorts instead of the counting passes): a hand-made graph, random multigraphs with self-loops,
// duplicate edges, isolated nodes and an empty part, both index types and strides; the
// fingerprint, the random assignment, the symmetrised adjacency METIS reads, METIS and the errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <numeric>
#include <random>
#include <set>
#include <vector>

#include "core/error.h"
#include "core/partition.h"
#include "expect_error.h"
#include "graph_reference.h"

namespace iognn::test {
namespace {

using Vec = std::vector<int64_t>;

struct Part {
  Vec owned, halo, src, dst, ids, in_degree, send, send_counts, recv_counts;
  int64_t num_interior = 0;
};

std::vector<Part> layout_parts(const PartitionLayout& layout) {
  std::vector<Part> out(size_t(layout.num_parts()));
  for (int64_t r = 0; r < layout.num_parts(); ++r) {
    const PartSizes& s = layout.sizes(r);
    Part& p = out[size_t(r)];
    p.owned.resize(size_t(s.num_owned));
    p.halo.resize(size_t(s.num_halo));
    p.src.resize(size_t(s.num_edges));
    p.dst.resize(size_t(s.num_edges));
    p.ids.resize(size_t(s.num_edges));
    p.in_degree.resize(size_t(s.num_owned + s.num_halo));
    p.send.resize(size_t(s.num_sent));
    p.send_counts.resize(size_t(layout.num_parts()));
    p.recv_counts.resize(size_t(layout.num_parts()));
    p.num_interior = s.num_interior;
    layout.fill(r, {p.owned.data(), p.halo.data(), p.src.data(), p.dst.data(), p.ids.data(),
                    p.in_degree.data(), p.send.data(), p.send_counts.data(), p.recv_counts.data()});
  }
  return out;
}

std::vector<Part> partition_parts(const RandomEdges& e, const Vec& parts, int64_t num_parts) {
  EdgeList<int64_t> edges(e.src, e.dst);
  return layout_parts(PartitionLayout(edges.view, int64_t(parts.size()), parts.data(), num_parts));
}

// Recomputes every part from the definitions and compares.
void expect_matches_definitions(const RandomEdges& e, const Vec& parts, int64_t P,
                                const std::vector<Part>& got) {
  const int64_t N = int64_t(parts.size()), E = int64_t(e.src.size());
  std::vector<bool> boundary(size_t(N), false);
  Vec in_degree(size_t(N), 0);
  for (int64_t k = 0; k < E; ++k) {
    ++in_degree[size_t(e.dst[k])];
    if (parts[e.src[k]] != parts[e.dst[k]]) boundary[e.src[k]] = boundary[e.dst[k]] = true;
  }
  Vec times_seen(size_t(E), 0);
  for (int64_t r = 0; r < P; ++r) {
    const Part& p = got[size_t(r)];
    Vec interior, border;
    for (int64_t v = 0; v < N; ++v)
      if (parts[v] == r) (boundary[v] ? border : interior).push_back(v);
    Vec owned = interior;
    owned.insert(owned.end(), border.begin(), border.end());
    EXPECT_EQ(p.owned, owned) << "part " << r;
    EXPECT_EQ(p.num_interior, int64_t(interior.size()));
    std::set<std::pair<int64_t, int64_t>> halo_keys;  // (owner, id): the owner's boundary order
    for (int64_t k = 0; k < E; ++k)
      if (parts[e.dst[k]] == r && parts[e.src[k]] != r) halo_keys.insert({parts[e.src[k]], e.src[k]});
    Vec halo, recv(size_t(P), 0);
    for (const auto& [owner, v] : halo_keys) halo.push_back(v), ++recv[size_t(owner)];
    EXPECT_EQ(p.halo, halo) << "part " << r;
    EXPECT_EQ(p.recv_counts, recv);
    std::map<int64_t, int64_t> local;
    for (size_t i = 0; i < owned.size(); ++i) local[owned[i]] = int64_t(i);
    for (size_t i = 0; i < halo.size(); ++i) local[halo[i]] = int64_t(owned.size() + i);
    Vec ids;  // edges into the part, stably sorted by local destination
    for (int64_t k = 0; k < E; ++k)
      if (parts[e.dst[k]] == r) ids.push_back(k);
    std::stable_sort(ids.begin(), ids.end(),
                     [&](int64_t a, int64_t b) { return local[e.dst[a]] < local[e.dst[b]]; });
    EXPECT_EQ(p.ids, ids);
    for (size_t i = 0; i < ids.size() && i < p.src.size(); ++i) {
      EXPECT_EQ(p.src[i], local[e.src[ids[i]]]);
      EXPECT_EQ(p.dst[i], local[e.dst[ids[i]]]);
      ++times_seen[size_t(ids[i])];
    }
    for (const auto& [v, id] : local) EXPECT_EQ(p.in_degree[size_t(id)], in_degree[size_t(v)]);
  }
  EXPECT_EQ(times_seen, Vec(size_t(E), 1));
  for (int64_t r = 0; r < P; ++r) {  // what r sends q is q's halo group owned by r, in order
    int64_t offset = 0;
    for (int64_t q = 0; q < P; ++q) {
      const Part& other = got[size_t(q)];
      const int64_t begin = std::accumulate(other.recv_counts.begin(), other.recv_counts.begin() + r,
                                            int64_t(0));
      ASSERT_EQ(got[size_t(r)].send_counts[size_t(q)], other.recv_counts[size_t(r)]);
      for (int64_t i = 0; i < other.recv_counts[size_t(r)]; ++i)
        EXPECT_EQ(got[size_t(r)].owned[size_t(got[size_t(r)].send[size_t(offset + i)])],
                  other.halo[size_t(begin + i)]);
      offset += other.recv_counts[size_t(r)];
    }
    EXPECT_EQ(offset, int64_t(got[size_t(r)].send.size()));
  }
}

TEST(Partition, HandMadeGraph) {
  // 0 -> 1 -> 2 -> 3, a loop on 3 and a duplicate 1 -> 2; parts {0, 1} | {2, 3}
  const RandomEdges e{{0, 1, 2, 3, 1}, {1, 2, 3, 3, 2}};
  const Vec parts{0, 0, 1, 1};
  EdgeList<int64_t> edges(e.src, e.dst);
  PartitionLayout layout(edges.view, 4, parts.data(), 2);
  EXPECT_EQ(layout.edge_cut(), 2);
  const std::vector<Part> got = layout_parts(layout);
  EXPECT_EQ(got[0].owned, (Vec{0, 1}));
  EXPECT_EQ(got[0].send, (Vec{1}));
  EXPECT_EQ(got[1].owned, (Vec{3, 2}));
  EXPECT_EQ(got[1].halo, (Vec{1}));
  EXPECT_EQ(got[1].src, (Vec{1, 0, 2, 2}));
  EXPECT_EQ(got[1].dst, (Vec{0, 0, 1, 1}));
  EXPECT_EQ(got[1].ids, (Vec{2, 3, 1, 4}));
  EXPECT_EQ(got[1].in_degree, (Vec{2, 2, 1}));
  expect_matches_definitions(e, parts, 2, got);
}

TEST(Partition, RandomMultigraphsWithIsolatedNodesAndAnEmptyPart) {
  for (int64_t P = 1; P <= 4; ++P) {
    const int64_t N = 60;
    RandomEdges e = random_edges(N - 5, N - 5, 300, uint64_t(P), 0.1);  // 5 isolated nodes
    e.src.insert(e.src.end(), e.src.begin(), e.src.begin() + 20);      // duplicates
    e.dst.insert(e.dst.end(), e.dst.begin(), e.dst.begin() + 20);
    std::mt19937_64 rng{uint64_t(P)};
    Vec parts(static_cast<size_t>(N));
    const int64_t used = P >= 3 ? P - 1 : P;  // with 3 or more parts, the last one stays empty
    for (auto& p : parts) p = int64_t(rng() % uint64_t(used));
    const std::vector<Part> got = partition_parts(e, parts, P);
    expect_matches_definitions(e, parts, P, got);
    if (P >= 3) EXPECT_TRUE(got[size_t(P - 1)].owned.empty() && got[size_t(P - 1)].src.empty());
  }
}

TEST(Partition, IndexTypesAndStridesGiveTheSameLayout) {
  const RandomEdges e = random_edges(40, 40, 200, 7);
  Vec parts(40);
  random_partition(40, 3, 1, parts.data());
  const std::vector<Part> ref = partition_parts(e, parts, 3);
  EdgeList<int32_t> narrow(e.src, e.dst, /*edge_major=*/true, /*gap=*/2);
  PartitionLayout layout(narrow.view, 40, parts.data(), 3);
  const std::vector<Part> got = layout_parts(layout);
  for (int64_t r = 0; r < 3; ++r) {
    EXPECT_EQ(got[size_t(r)].src, ref[size_t(r)].src);
    EXPECT_EQ(got[size_t(r)].ids, ref[size_t(r)].ids);
    EXPECT_EQ(got[size_t(r)].send, ref[size_t(r)].send);
  }
  EdgeList<int64_t> wide(e.src, e.dst);
  EXPECT_EQ(layout.fingerprint(), PartitionLayout(wide.view, 40, parts.data(), 3).fingerprint());
}

TEST(Partition, FingerprintIgnoresEdgeOrderOnly) {
  RandomEdges e = random_edges(30, 30, 100, 3);
  Vec parts(30);
  random_partition(30, 2, 0, parts.data());
  auto fingerprint = [](const RandomEdges& edges, const Vec& p, int64_t P) {
    EdgeList<int64_t> list(edges.src, edges.dst);
    return PartitionLayout(list.view, int64_t(p.size()), p.data(), P).fingerprint();
  };
  const uint64_t ref = fingerprint(e, parts, 2);
  RandomEdges reversed{Vec(e.src.rbegin(), e.src.rend()), Vec(e.dst.rbegin(), e.dst.rend())};
  EXPECT_EQ(fingerprint(reversed, parts, 2), ref);
  EXPECT_NE(fingerprint(e, parts, 3), ref);
  Vec moved = parts;
  moved[0] = 1 - moved[0];
  EXPECT_NE(fingerprint(e, moved, 2), ref);
  e.dst[0] = (e.dst[0] + 1) % 30;
  EXPECT_NE(fingerprint(e, parts, 2), ref);
}

TEST(Partition, RandomAssignmentIsBalancedAndSeeded) {
  for (int64_t P : {1, 3, 7}) {
    Vec a(100), b(100), c(100);
    random_partition(100, P, 5, a.data());
    random_partition(100, P, 5, b.data());
    random_partition(100, P, 6, c.data());
    EXPECT_EQ(a, b);
    if (P > 1) EXPECT_NE(a, c);
    Vec sizes(size_t(P), 0);
    for (int64_t p : a) ++sizes[size_t(p)];
    EXPECT_LE(*std::max_element(sizes.begin(), sizes.end()) -
                  *std::min_element(sizes.begin(), sizes.end()), 1);
  }
}

TEST(Partition, SymmetricAdjacencyDropsLoopsAndDuplicates) {
  // 0 -> 1 twice, 1 -> 0, a loop on 2, 3 -> 1; node 4 isolated
  const RandomEdges e{{0, 0, 1, 2, 3}, {1, 1, 0, 2, 1}};
  EdgeList<int32_t> edges(e.src, e.dst);
  std::vector<int32_t> xadj, adjncy;
  symmetric_adjacency<int32_t>(edges.view, 5, &xadj, &adjncy);
  EXPECT_EQ(xadj, (std::vector<int32_t>{0, 1, 3, 3, 4, 4}));
  EXPECT_EQ(adjncy, (std::vector<int32_t>{1, 0, 3, 1}));
  std::vector<int64_t> xadj64, adjncy64;
  symmetric_adjacency<int64_t>(edges.view, 5, &xadj64, &adjncy64);
  EXPECT_EQ(xadj64, (Vec{0, 1, 3, 3, 4, 4}));
  EXPECT_EQ(adjncy64, (Vec{1, 0, 3, 1}));
}

TEST(Partition, Metis) {
  const RandomEdges e = random_edges(200, 200, 1000, 11);
  EdgeList<int64_t> edges(e.src, e.dst);
  Vec a(200), b(200);
  if (!has_metis()) {
    expect_error<ValueError>([&] { metis_partition(edges.view, 200, 4, 0, a.data()); }, "libmetis");
    return;
  }
  metis_partition(edges.view, 200, 4, 3, a.data());
  metis_partition(edges.view, 200, 4, 3, b.data());
  EXPECT_EQ(a, b);
  for (int64_t p : a) EXPECT_TRUE(p >= 0 && p < 4);
  metis_partition(edges.view, 200, 1, 3, a.data());
  EXPECT_EQ(a, Vec(200, 0));
  EdgeList<int64_t> none({}, {});
  metis_partition(none.view, 200, 3, 0, a.data());  // an edgeless graph is fine too
  for (int64_t p : a) EXPECT_TRUE(p >= 0 && p < 3);
  expect_error<ValueError>([&] { metis_partition(edges.view, 200, 2, -1, a.data()); }, "seed");
}

TEST(Partition, Errors) {
  const RandomEdges e{{0, 1, 2, 1}, {1, 2, 0, 3}};
  EdgeList<int64_t> edges(e.src, e.dst);
  const Vec parts{0, 1, 0}, bad{0, 2, 1};
  expect_error<IndexError>([&] { PartitionLayout(edges.view, 3, parts.data(), 2); },
                           "edge_index[1][3] = 3");
  const Vec four{0, 1, 0, 1};
  expect_error<ValueError>([&] { PartitionLayout(edges.view, 4, four.data(), 0); }, "num_parts");
  EdgeList<int64_t> ok({0, 1}, {1, 2});
  expect_error<ValueError>([&] { PartitionLayout(ok.view, 3, bad.data(), 2); }, "parts[1] = 2");
  PartitionLayout layout(ok.view, 3, parts.data(), 2);
  Vec sink(8);
  int64_t* s = sink.data();
  expect_error<ValueError>([&] { layout.fill(2, {s, s, s, s, s, s, s, s, s}); }, "part");
  Vec out(3);
  expect_error<ValueError>([&] { random_partition(3, 4, 0, out.data()); }, "num_parts");
  expect_error<ValueError>([&] { random_partition(3, 0, 0, out.data()); }, "num_parts");
  std::vector<int32_t> xadj, adjncy;
  expect_error<IndexError>([&] { symmetric_adjacency<int32_t>(edges.view, 3, &xadj, &adjncy); },
                           "edge_index[1][3]");
}

}  // namespace
}  // namespace iognn::test

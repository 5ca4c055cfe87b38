// The host kernels (propagate, segment_reduce, GAT attention) on graphs built by the core, against
// brute-force references over the edge list. Their main job is coverage for the AddressSanitizer /
// UBSan build (`make sanitize-cpp`): every kernel reads and writes its whole extent on graphs with
// empty rows, a heavy row, self-loops, bipartite sides, int32 and int64 indices and strided rows.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "core/graph.h"
#include "graph_reference.h"
#include "kernels/cpu/gat.h"
#include "kernels/cpu/propagate.h"
#include "kernels/segment_extremum.h"
#include "kernels/cpu/segment_reduce.h"

namespace iognn::test {
namespace {

// A built graph in index type I, plus its edge list by CSR position (destination, source).
template <typename I>
struct Built {
  std::vector<I> rowptr, col, eid, colptr, row, csc2csr;
  std::vector<int64_t> dst_of;  // destination of each CSR position
  int64_t num_src, num_dst;
  int64_t edges() const { return int64_t(col.size()); }
};

struct Shape {
  int64_t num_src, num_dst, num_edges, hub_edges;
};

// Random edges plus `hub_edges` more into destination 0 (a heavy row); destinations >= 2/3 of the
// range get no edges (isolated rows).
template <typename I>
Built<I> build(const Shape& s, uint64_t seed) {
  const int64_t active_dst = std::max<int64_t>(1, s.num_dst * 2 / 3);
  RandomEdges e = random_edges(s.num_src, active_dst, s.num_edges, seed);
  std::mt19937_64 rng(seed + 1);
  for (int64_t k = 0; k < s.hub_edges; ++k) {
    e.src.push_back(std::uniform_int_distribution<int64_t>(0, s.num_src - 1)(rng));
    e.dst.push_back(0);
  }
  const EdgeList<int64_t> list(e.src, e.dst);
  const ReferenceGraph g = core_graph<I>(list.view, s.num_src, s.num_dst, SelfLoops::kKeep);
  auto narrow = [](const std::vector<int64_t>& v) { return std::vector<I>(v.begin(), v.end()); };
  Built<I> b{narrow(g.rowptr), narrow(g.col), narrow(g.eid), narrow(g.colptr), narrow(g.row),
             narrow(g.csc2csr), {}, s.num_src, s.num_dst};
  for (int64_t i = 0; i < s.num_dst; ++i)
    for (int64_t p = g.rowptr[i]; p < g.rowptr[i + 1]; ++p) b.dst_of.push_back(i);
  return b;
}

template <typename T>
std::vector<T> random_values(int64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> dist;
  std::vector<T> v(n);
  for (auto& x : v) x = T(dist(rng));
  return v;
}

// Allowed error of a T result against a double reference `want` (relative above magnitude 1).
template <typename T>
double tol(double want = 0) {
  return (std::is_same_v<T, double> ? 1e-10 : 2e-4) * std::max(1.0, std::abs(want));
}

// Every element of `got` (kernel output in T or acc_t<T>) near the double reference `want`.
template <typename T, typename V>
void expect_near_all(const std::vector<V>& got, const std::vector<double>& want, double slack = 1) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t k = 0; k < got.size(); ++k)
    EXPECT_NEAR(double(got[k]), want[k], slack * tol<T>(want[k])) << "element " << k;
}

const Shape kShapes[] = {{1, 1, 0, 0}, {7, 7, 30, 0}, {40, 25, 120, 700}, {9, 60, 200, 0}};

template <typename T, typename I>
void run_propagate(const Shape& s, uint64_t seed) {
  const Built<I> g = build<I>(s, seed);
  const int64_t F = 5, stride = F + 3, E = g.edges();  // x rows padded: a row stride != F
  const std::vector<T> x = random_values<T>(s.num_src * stride, seed + 2);
  const std::vector<T> grad = random_values<T>(s.num_dst * F, seed + 3);
  const std::vector<T> bias = random_values<T>(F, seed + 6);  // fused into the forward
  std::vector<acc_t<T>> w(E);
  for (int64_t p = 0; p < E; ++p) w[p] = acc_t<T>(0.5 + 0.25 * double(p % 5));
  for (auto reduce : {PropagateReduce::kSum, PropagateReduce::kMean}) {
    SCOPED_TRACE(int(reduce));
    std::vector<T> out(s.num_dst * F), grad_x(s.num_src * F);
    std::vector<acc_t<T>> grad_w(E);
    cpu::propagate_forward<T, I>(g.rowptr.data(), g.col.data(), w.data(), x.data(), stride,
                                 s.num_dst, F, reduce, bias.data(), out.data());
    cpu::propagate_backward_x<T, I>(g.colptr.data(), g.row.data(), g.csc2csr.data(),
                                    g.rowptr.data(), w.data(), grad.data(), s.num_src, F, reduce,
                                    grad_x.data());
    cpu::propagate_backward_weight<T, I>(g.rowptr.data(), g.col.data(), grad.data(), x.data(),
                                         stride, s.num_dst, F, reduce, grad_w.data());
    std::vector<double> ref_out(s.num_dst * F, 0), ref_gx(s.num_src * F, 0), ref_gw(E, 0);
    for (int64_t i = 0; i < s.num_dst; ++i)  // every row, with in-edges or not, gets the bias
      for (int64_t f = 0; f < F; ++f) ref_out[i * F + f] = double(bias[f]);
    for (int64_t p = 0; p < E; ++p) {
      const int64_t i = g.dst_of[p], j = g.col[p];
      const double deg = double(g.rowptr[i + 1] - g.rowptr[i]);
      const double scale = reduce == PropagateReduce::kMean ? 1.0 / deg : 1.0;
      for (int64_t f = 0; f < F; ++f) {
        ref_out[i * F + f] += scale * double(w[p]) * double(x[j * stride + f]);
        ref_gx[j * F + f] += scale * double(w[p]) * double(grad[i * F + f]);
        ref_gw[p] += scale * double(grad[i * F + f]) * double(x[j * stride + f]);
      }
    }
    expect_near_all<T>(out, ref_out);
    expect_near_all<T>(grad_x, ref_gx);
    expect_near_all<T>(grad_w, ref_gw);
  }
}

template <typename T, typename I>
void run_segment_reduce(const Shape& s, uint64_t seed) {
  const Built<I> g = build<I>(s, seed);
  const int64_t F = 3;
  const std::vector<SegmentReduce> reduces = {SegmentReduce::kSum, SegmentReduce::kMean,
                                              SegmentReduce::kMin, SegmentReduce::kMax,
                                              SegmentReduce::kVar, SegmentReduce::kStd};
  const int64_t K = int64_t(reduces.size());
  const std::vector<T> x = random_values<T>(s.num_src * F, seed + 4);
  const std::vector<T> grad = random_values<T>(s.num_dst * K * F, seed + 5);
  std::vector<T> out(s.num_dst * K * F), grad_x(s.num_src * F);
  // Tie codes of min (slot 0) and max (slot 1); these graphs are far below a saturated count, so
  // the wide table is empty.
  const int64_t E = int64_t(g.col.size());
  ASSERT_EQ(tie_wide_rows(E), 0);
  // Two byte planes (lead, rest) of num_dst * 2 * F codes each.
  const int64_t plane = s.num_dst * 2 * F;
  std::vector<uint8_t> ties(2 * plane);
  std::vector<acc_t<T>> mean(s.num_dst * F);
  cpu::segment_reduce_forward<T, I>(g.rowptr.data(), g.col.data(), x.data(), F, s.num_dst, F,
                                    reduces, out.data(),
                                    Ties{ties.data(), ties.data() + plane, nullptr, 0},
                                    mean.data());
  cpu::segment_reduce_backward<T, I>(g.colptr.data(), g.row.data(), g.rowptr.data(), x.data(), F,
                                     out.data(),
                                     TiesView{ties.data(), ties.data() + plane, nullptr, 0},
                                     mean.data(), F, grad.data(), s.num_src, F, reduces,
                                     grad_x.data());
  // min and max alone: the same results and tie codes as in the call of all six.
  std::vector<T> out_extrema(s.num_dst * 2 * F);
  std::vector<uint8_t> holder_ties(2 * plane);
  cpu::segment_reduce_forward<T, I>(
      g.rowptr.data(), g.col.data(), x.data(), F, s.num_dst, F,
      {SegmentReduce::kMin, SegmentReduce::kMax}, out_extrema.data(),
      Ties{holder_ties.data(), holder_ties.data() + plane, nullptr, 0}, nullptr);
  // Forward by definition (0 for an empty row); backward: sum and mean spread the gradient over
  // the row, min / max send it to the edges holding the result (split evenly among duplicate
  // edges; random values have no other ties), var adds
  // 2 (x - mean) / deg, std that times 1 / (2 std) where std is not masked.
  std::vector<double> ref_gx(s.num_src * F, 0);
  for (int64_t i = 0; i < s.num_dst; ++i) {
    const int64_t b = g.rowptr[i], deg = g.rowptr[i + 1] - b;
    for (int64_t f = 0; f < F; ++f) {
      double sum = 0, sq = 0, lo = std::numeric_limits<double>::infinity(), hi = -lo;
      int64_t lo_p = -1, hi_p = -1;
      for (int64_t p = b; p < b + deg; ++p) {
        const double v = double(x[g.col[p] * F + f]);
        sum += v, sq += v * v;
        if (v < lo) lo = v, lo_p = p;
        if (v > hi) hi = v, hi_p = p;
      }
      // A sole holder is named by its position in the row; ties (duplicate edges) and empty
      // rows are tagged with their holder count.
      for (int slot = 0; slot < 2; ++slot) {
        const double best = slot == 0 ? lo : hi;
        int64_t holders = 0;
        for (int64_t p = b; p < b + deg; ++p) holders += double(x[g.col[p] * F + f]) == best;
        const int64_t first = (slot == 0 ? lo_p : hi_p) - b;
        const uint16_t code =
            holders == 1 && best != 0 ? uint16_t(first) : uint16_t(0x8000 | holders);
        const int64_t at = (i * 2 + slot) * F + f;
        EXPECT_EQ(tie_join(ties[at], ties[plane + at]), code) << i << " " << slot;
        EXPECT_EQ(tie_join(holder_ties[at], holder_ties[plane + at]), code) << i << " " << slot;
        EXPECT_EQ(out_extrema[at], out[(i * K + 2 + slot) * F + f]) << i << " " << slot;
      }
      const double m = deg ? sum / double(deg) : 0, var = deg ? sq / double(deg) - m * m : 0;
      const double sd = std::sqrt(std::max(var, 1e-5));
      const bool masked = sd <= std::sqrt(1e-5);
      const double want[] = {sum, m, deg ? lo : 0, deg ? hi : 0, var, masked ? 0 : sd};
      for (int64_t k = 0; k < K; ++k)
        EXPECT_NEAR(double(out[(i * K + k) * F + f]), want[k], tol<T>(want[k])) << i << " " << k;
      auto gr = [&](int64_t k) { return double(grad[i * K * F + k * F + f]); };
      for (int64_t p = b; p < b + deg; ++p) {
        const double v = double(x[g.col[p] * F + f]), dvar = 2 * (v - m) / double(deg);
        double d = gr(0) + gr(1) / double(deg) + (p == lo_p ? gr(2) : 0) +
                   (p == hi_p ? gr(3) : 0) + gr(4) * dvar;
        if (!masked && var > 1e-5) d += gr(5) * dvar / (2 * sd);
        ref_gx[g.col[p] * F + f] += d;
      }
    }
  }
  expect_near_all<T>(grad_x, ref_gx, 10);
}

template <typename T, typename I>
void run_gat(const Shape& s, uint64_t seed) {
  const Built<I> g = build<I>(s, seed);
  const int64_t H = 2, C = 3, E = g.edges(), x_stride = H * C + 1;  // padded rows
  const std::vector<T> x = random_values<T>(s.num_src * x_stride, seed + 6);
  const std::vector<T> a_src = random_values<T>(s.num_src * H, seed + 7);
  const std::vector<T> a_dst = random_values<T>(s.num_dst * H, seed + 8);
  const std::vector<T> grad = random_values<T>(s.num_dst * H * C, seed + 9);
  const AttentionGraph<I> graph{g.rowptr.data(), g.col.data(), g.eid.data(), g.colptr.data(),
                                     g.row.data(), g.csc2csr.data(), s.num_src, s.num_dst, E};
  const AttentionConfig cfg{H, C, 0.0f, 0};
  const GatInputs<T> in{{x.data(), x_stride}, {a_src.data(), H}, {a_dst.data(), H}, {},
                             nullptr, 0.2};
  std::vector<T> out(s.num_dst * H * C), alpha(E * H);
  std::vector<acc_t<T>> lse(s.num_dst * H);
  cpu::gat_forward<T, I>(graph, cfg, in, {out.data(), lse.data(), alpha.data()});
  std::vector<T> gx(s.num_src * H * C), ga_src(s.num_src * H), ga_dst(s.num_dst * H);
  cpu::gat_backward<T, I>(graph, cfg, in, lse.data(), grad.data(), nullptr,
                          {gx.data(), ga_src.data(), ga_dst.data(), nullptr, nullptr});
  // alpha = softmax over each row of leaky_relu(a_src[j] + a_dst[i]); out = sum alpha x_j, and
  // (x does not enter the scores) grad_x[j] = sum over out-edges of alpha * grad_out[i].
  std::vector<double> ref_out(out.size(), 0), ref_gx(gx.size(), 0);
  for (int64_t i = 0; i < s.num_dst; ++i) {
    for (int64_t h = 0; h < H; ++h) {
      const int64_t b = g.rowptr[i], e_end = g.rowptr[i + 1];
      std::vector<double> score;
      for (int64_t p = b; p < e_end; ++p) {
        const double v = double(a_src[g.col[p] * H + h]) + double(a_dst[i * H + h]);
        score.push_back(v > 0 ? v : 0.2 * v);
      }
      const double m = score.empty() ? 0 : *std::max_element(score.begin(), score.end());
      double total = 0;
      for (double v : score) total += std::exp(v - m);
      for (int64_t p = b; p < e_end; ++p) {
        const double a = std::exp(score[p - b] - m) / total;
        const int64_t j = g.col[p];
        EXPECT_NEAR(double(alpha[g.eid[p] * H + h]), a, tol<T>(a));
        for (int64_t c = 0; c < C; ++c) {
          ref_out[(i * H + h) * C + c] += a * double(x[j * x_stride + h * C + c]);
          ref_gx[(j * H + h) * C + c] += a * double(grad[(i * H + h) * C + c]);
        }
      }
    }
  }
  expect_near_all<T>(out, ref_out);
  expect_near_all<T>(gx, ref_gx);
  for (size_t k = 0; k < ga_src.size(); ++k) EXPECT_TRUE(std::isfinite(double(ga_src[k])));
  for (size_t k = 0; k < ga_dst.size(); ++k) EXPECT_TRUE(std::isfinite(double(ga_dst[k])));
}

template <typename T, typename I>
void run_all() {
  uint64_t seed = 11;
  for (const Shape& s : kShapes) {
    SCOPED_TRACE(testing::Message() << s.num_src << "x" << s.num_dst << " E=" << s.num_edges
                                    << " hub=" << s.hub_edges);
    run_propagate<T, I>(s, seed);
    run_segment_reduce<T, I>(s, seed);
    run_gat<T, I>(s, seed);
    seed += 17;
  }
}

TEST(CpuKernels, FloatInt32) { run_all<float, int32_t>(); }
TEST(CpuKernels, FloatInt64) { run_all<float, int64_t>(); }
TEST(CpuKernels, DoubleInt32) { run_all<double, int32_t>(); }
TEST(CpuKernels, DoubleInt64) { run_all<double, int64_t>(); }

// Every 16-bit tie code survives its split into the lead and rest bytes, the lead byte alone
// tells a tagged code, and an untagged code's lead byte is its position mod 128.
TEST(TieCodes, BytePlanesRoundTrip) {
  for (uint32_t c = 0; c <= 0xFFFF; ++c) {
    const uint16_t code = uint16_t(c);
    ASSERT_EQ(tie_join(tie_lead(code), tie_rest(code)), code) << c;
    ASSERT_EQ(tie_lead_tagged(tie_lead(code)), tie_tagged(code)) << c;
    if (!tie_tagged(code)) ASSERT_EQ(tie_lead(code), tie_lead_of_position(code)) << c;
  }
}

}  // namespace
}  // namespace iognn::test


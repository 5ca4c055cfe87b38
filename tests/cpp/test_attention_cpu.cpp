// The attention host kernels (GAT, GATv2, Graph Transformer; kernels/cpu/{gat,gatv2,transformer}.h)
// against a naive fp64 reference written here from the formulas of attention_common.h and the
// variants' headers: forward out, lse and alpha, and every backward gradient against central finite
// differences of the reference loss  L = sum grad_out * out + sum grad_alpha * alpha.
// The graph is small and has the awkward cases: a self-loop, a duplicate edge, a destination with
// no in-edges and an isolated node; H = 2 heads, with and without edge features and dropout.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "core/dropout_rng.h"
#include "kernels/cpu/gat.h"
#include "kernels/cpu/gatv2.h"
#include "kernels/cpu/transformer.h"

namespace iognn::test {
namespace {

constexpr int64_t kNodes = 6;  // sources and destinations
constexpr int64_t kH = 2, kC = 3;
// (source, destination), deliberately not in destination order (eid != CSR position). Node 5 is
// isolated; node 4 has out-edges but no in-edges (an empty row); 1 -> 1 is a self-loop and 2 -> 1
// comes twice.
const int64_t kEdges[][2] = {{2, 1}, {3, 0}, {1, 1}, {0, 2}, {2, 1}, {4, 0},
                             {1, 0}, {3, 2}, {4, 3}, {0, 1}, {2, 3}};
constexpr int64_t kE = sizeof(kEdges) / sizeof(kEdges[0]);

// CSR by destination (in-edges in list order) and its transpose, as AttentionGraph reads them.
template <typename I>
struct Graph {
  std::vector<I> rowptr, col, eid, colptr, row, csc2csr;
  Graph() {
    rowptr.push_back(0);
    for (int64_t i = 0; i < kNodes; ++i) {
      for (int64_t e = 0; e < kE; ++e)
        if (kEdges[e][1] == i) col.push_back(I(kEdges[e][0])), eid.push_back(I(e));
      rowptr.push_back(I(col.size()));
    }
    colptr.push_back(0);
    for (int64_t j = 0; j < kNodes; ++j) {
      for (int64_t i = 0; i < kNodes; ++i)
        for (int64_t p = rowptr[i]; p < rowptr[i + 1]; ++p)
          if (col[p] == j) row.push_back(I(i)), csc2csr.push_back(I(p));
      colptr.push_back(I(row.size()));
    }
  }
  AttentionGraph<I> view() const {
    return {rowptr.data(), col.data(), eid.data(), colptr.data(), row.data(), csc2csr.data(),
            kNodes, kNodes, kE};
  }
};

// One setting: De edge features (0: none), attention dropout, a gradient for alpha or not.
struct Setting {
  int64_t De;
  float dropout;
  bool grad_alpha;
};
const Setting kSettings[] = {{0, 0.0f, false}, {2, 0.0f, true}, {2, 0.3f, true}, {0, 0.5f, true}};
constexpr uint64_t kSeed = 1234;

// The inputs of a variant as fp64 tensors, indexed by the variant's enum; absent ones are empty.
using Params = std::vector<std::vector<double>>;

template <typename T>
const T* ptr(const std::vector<T>& v) {
  return v.empty() ? nullptr : v.data();
}
template <typename T>
T* ptr(std::vector<T>& v) {
  return v.empty() ? nullptr : v.data();
}

// The gradient outputs of variant V into g: V's enum lists its inputs in the order of the fields of
// its Grads struct.
template <typename V, typename T>
typename V::template Grads<T> grads_of(std::vector<std::vector<T>>& g) {
  static_assert(V::kCount == 5, "one gradient per input");
  return {ptr(g[0]), ptr(g[1]), ptr(g[2]), ptr(g[3]), ptr(g[4])};
}

double leaky_relu(double x, double slope) { return x > 0 ? x : slope * x; }

// ep[c] = sum_d W[h*C + c, d] edge_attr[e, d]  (W [H*C, De]).
double edge_proj(const Params& P, int kEdgeAttr, int kW, int64_t De, int64_t e, int64_t h,
                 int64_t c) {
  double sum = 0;
  for (int64_t d = 0; d < De; ++d) sum += P[kW][(h * kC + c) * De + d] * P[kEdgeAttr][e * De + d];
  return sum;
}

// GAT: s = leaky_relu(a_src[j,h] + a_dst[i,h] + sum_d edge_attr[e,d] w_edge[d,h]), value x[j,h,:].
struct Gat {
  enum { kX, kASrc, kADst, kEdgeAttr, kWEdge, kCount };
  static constexpr const char* kNames[] = {"x", "a_src", "a_dst", "edge_attr", "w_edge"};
  static constexpr bool kAlphaAfterDropout = true;
  static constexpr double kSlope = 0.2;
  static std::vector<int64_t> sizes(int64_t De) {
    return {kNodes * kH * kC, kNodes * kH, kNodes * kH, kE * De, De * kH};
  }
  static double score(const Params& P, int64_t De, int64_t i, int64_t j, int64_t e, int64_t h) {
    double pre = P[kASrc][j * kH + h] + P[kADst][i * kH + h];
    for (int64_t d = 0; d < De; ++d) pre += P[kEdgeAttr][e * De + d] * P[kWEdge][d * kH + h];
    return leaky_relu(pre, kSlope);
  }
  static double value(const Params& P, int64_t De, int64_t i, int64_t j, int64_t e, int64_t h,
                      int64_t c) {
    return P[kX][(j * kH + h) * kC + c];
  }
  template <typename T>
  static GatInputs<T> inputs(const std::vector<std::vector<T>>& p, int64_t De) {
    return {{ptr(p[kX]), kH * kC},
            {ptr(p[kASrc]), kH},
            {ptr(p[kADst]), kH},
            {ptr(p[kEdgeAttr]), De, De},
            ptr(p[kWEdge]),
            kSlope};
  }
  template <typename T>
  using Grads = GatGrads<T>;
  template <typename T, typename I>
  static constexpr auto forward = &cpu::gat_forward<T, I>;
  template <typename T, typename I>
  static constexpr auto backward = &cpu::gat_backward<T, I>;
};

// GATv2: s = sum_c att[h,c] leaky_relu(x_dst[i,h,c] + x_src[j,h,c] + ep[c]), value x_src[j,h,:].
struct GatV2 {
  enum { kXSrc, kXDst, kAtt, kEdgeAttr, kWEdge, kCount };
  static constexpr const char* kNames[] = {"x_src", "x_dst", "att", "edge_attr", "w_edge"};
  static constexpr bool kAlphaAfterDropout = true;
  static constexpr double kSlope = 0.2;
  static std::vector<int64_t> sizes(int64_t De) {
    return {kNodes * kH * kC, kNodes * kH * kC, kH * kC, kE * De, kH * kC * De};
  }
  static double score(const Params& P, int64_t De, int64_t i, int64_t j, int64_t e, int64_t h) {
    double s = 0;
    for (int64_t c = 0; c < kC; ++c) {
      const double z = P[kXDst][(i * kH + h) * kC + c] + P[kXSrc][(j * kH + h) * kC + c] +
                       edge_proj(P, kEdgeAttr, kWEdge, De, e, h, c);
      s += P[kAtt][h * kC + c] * leaky_relu(z, kSlope);
    }
    return s;
  }
  static double value(const Params& P, int64_t De, int64_t i, int64_t j, int64_t e, int64_t h,
                      int64_t c) {
    return P[kXSrc][(j * kH + h) * kC + c];
  }
  template <typename T>
  static GatV2Inputs<T> inputs(const std::vector<std::vector<T>>& p, int64_t De) {
    return {{ptr(p[kXSrc]), kH * kC},
            {ptr(p[kXDst]), kH * kC},
            ptr(p[kAtt]),
            {ptr(p[kEdgeAttr]), De, De},
            ptr(p[kWEdge]),
            kSlope};
  }
  template <typename T>
  using Grads = GatV2Grads<T>;
  template <typename T, typename I>
  static constexpr auto forward = &cpu::gatv2_forward<T, I>;
  template <typename T, typename I>
  static constexpr auto backward = &cpu::gatv2_backward<T, I>;
};

// Transformer: s = scale sum_c q[i,h,c] (k[j,h,c] + ep[c]), value v[j,h,:] + ep; alpha is output
// before dropout.
struct Transformer {
  enum { kQuery, kKey, kValue, kEdgeAttr, kWEdge, kCount };
  static constexpr const char* kNames[] = {"query", "key", "value", "edge_attr", "w_edge"};
  static constexpr bool kAlphaAfterDropout = false;
  static constexpr double kScale = 0.577;
  static std::vector<int64_t> sizes(int64_t De) {
    return {kNodes * kH * kC, kNodes * kH * kC, kNodes * kH * kC, kE * De, kH * kC * De};
  }
  static double score(const Params& P, int64_t De, int64_t i, int64_t j, int64_t e, int64_t h) {
    double s = 0;
    for (int64_t c = 0; c < kC; ++c)
      s += P[kQuery][(i * kH + h) * kC + c] *
           (P[kKey][(j * kH + h) * kC + c] + edge_proj(P, kEdgeAttr, kWEdge, De, e, h, c));
    return kScale * s;
  }
  static double value(const Params& P, int64_t De, int64_t i, int64_t j, int64_t e, int64_t h,
                      int64_t c) {
    return P[kValue][(j * kH + h) * kC + c] + edge_proj(P, kEdgeAttr, kWEdge, De, e, h, c);
  }
  template <typename T>
  static TransformerInputs<T> inputs(const std::vector<std::vector<T>>& p, int64_t De) {
    return {{ptr(p[kQuery]), kH * kC},
            {ptr(p[kKey]), kH * kC},
            {ptr(p[kValue]), kH * kC},
            {ptr(p[kEdgeAttr]), De, De},
            ptr(p[kWEdge]),
            kScale};
  }
  template <typename T>
  using Grads = TransformerGrads<T>;
  template <typename T, typename I>
  static constexpr auto forward = &cpu::transformer_forward<T, I>;
  template <typename T, typename I>
  static constexpr auto backward = &cpu::transformer_backward<T, I>;
};

struct Reference {
  std::vector<double> out, lse, alpha;  // [N, H, C], [N, H], [E, H]
};

// The attention of variant V, straight from the edge list: per destination i and head h a softmax
// over i's in-edges (a duplicate edge counts twice), out = sum alpha * drop * value.
template <typename V>
Reference reference(const Params& P, const Setting& s) {
  Reference r{std::vector<double>(kNodes * kH * kC, 0),
              std::vector<double>(kNodes * kH, -std::numeric_limits<double>::infinity()),
              std::vector<double>(kE * kH, 0)};
  for (int64_t i = 0; i < kNodes; ++i) {
    for (int64_t h = 0; h < kH; ++h) {
      double total = 0;
      for (int64_t e = 0; e < kE; ++e)
        if (kEdges[e][1] == i) total += std::exp(V::score(P, s.De, i, kEdges[e][0], e, h));
      if (total == 0) continue;  // no in-edges: lse = -inf, out = 0
      r.lse[i * kH + h] = std::log(total);
      for (int64_t e = 0; e < kE; ++e) {
        if (kEdges[e][1] != i) continue;
        const int64_t j = kEdges[e][0];
        const double alpha = std::exp(V::score(P, s.De, i, j, e, h)) / total;
        const double drop = dropout_scale(kSeed, uint64_t(e), uint64_t(h), uint64_t(kH), s.dropout);
        r.alpha[e * kH + h] = V::kAlphaAfterDropout ? alpha * drop : alpha;
        for (int64_t c = 0; c < kC; ++c)
          r.out[(i * kH + h) * kC + c] += alpha * drop * V::value(P, s.De, i, j, e, h, c);
      }
    }
  }
  return r;
}

double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double sum = 0;
  for (size_t k = 0; k < a.size(); ++k) sum += a[k] * b[k];
  return sum;
}

template <typename T>
std::vector<T> narrow(const std::vector<double>& v) {
  return std::vector<T>(v.begin(), v.end());
}

// Allowed error of a kernel result in T against an fp64 value (relative above magnitude 1).
template <typename T>
double tol(double want) {
  return (std::is_same_v<T, double> ? 1e-8 : 2e-4) * std::max(1.0, std::abs(want));
}

template <typename V, typename T, typename I>
void check(const Setting& s) {
  SCOPED_TRACE(testing::Message() << "De=" << s.De << " dropout=" << s.dropout
                                  << " grad_alpha=" << s.grad_alpha);
  const Graph<I> graph;
  const AttentionConfig cfg{kH, kC, s.dropout, kSeed};
  // Random inputs, rounded to T so that the reference sees exactly what the kernel reads.
  std::mt19937_64 rng(77 + uint64_t(s.De) * 7 + uint64_t(s.dropout * 10));
  std::normal_distribution<double> normal;
  auto random = [&](int64_t n) {
    std::vector<double> v(n);
    for (auto& x : v) x = double(T(normal(rng)));
    return v;
  };
  const std::vector<int64_t> sizes = V::sizes(s.De);
  Params P;
  for (int64_t n : sizes) P.push_back(random(n));
  const std::vector<double> grad_out = random(kNodes * kH * kC);
  const std::vector<double> grad_alpha = s.grad_alpha ? random(kE * kH) : std::vector<double>();

  std::vector<std::vector<T>> p_t;
  for (const auto& v : P) p_t.push_back(narrow<T>(v));
  const auto in = V::template inputs<T>(p_t, s.De);
  const AttentionGraph<I> g = graph.view();

  // Forward.
  std::vector<T> out(kNodes * kH * kC), alpha(kE * kH);
  std::vector<acc_t<T>> lse(kNodes * kH);
  V::template forward<T, I>(g, cfg, in, {out.data(), lse.data(), alpha.data()});
  const Reference ref = reference<V>(P, s);
  for (size_t k = 0; k < out.size(); ++k)
    EXPECT_NEAR(double(out[k]), ref.out[k], tol<T>(ref.out[k])) << "out " << k;
  for (size_t k = 0; k < lse.size(); ++k) {
    if (std::isinf(ref.lse[k])) EXPECT_EQ(double(lse[k]), ref.lse[k]) << "lse " << k;
    else EXPECT_NEAR(double(lse[k]), ref.lse[k], tol<T>(ref.lse[k])) << "lse " << k;
  }
  for (size_t k = 0; k < alpha.size(); ++k)
    EXPECT_NEAR(double(alpha[k]), ref.alpha[k], tol<T>(ref.alpha[k])) << "alpha " << k;
  // The row without in-edges (node 4) and the isolated node: -inf and zeros.
  for (int64_t i : {4, 5})
    for (int64_t h = 0; h < kH; ++h) EXPECT_TRUE(std::isinf(double(lse[i * kH + h])));

  // Backward, against central differences of L = grad_out . out + grad_alpha . alpha.
  const std::vector<T> grad_out_t = narrow<T>(grad_out), grad_alpha_t = narrow<T>(grad_alpha);
  std::vector<std::vector<T>> grads;
  for (int64_t n : sizes) grads.push_back(std::vector<T>(n, T(-99)));  // every element written
  V::template backward<T, I>(g, cfg, in, lse.data(), grad_out_t.data(), ptr(grad_alpha_t),
                             grads_of<V>(grads));
  auto loss = [&](const Params& q) {
    const Reference r = reference<V>(q, s);
    return dot(grad_out, r.out) + (s.grad_alpha ? dot(grad_alpha, r.alpha) : 0.0);
  };
  const double step = 1e-6;
  Params q = P;
  for (size_t t = 0; t < P.size(); ++t) {
    for (size_t k = 0; k < P[t].size(); ++k) {
      q[t][k] = P[t][k] + step;
      const double up = loss(q);
      q[t][k] = P[t][k] - step;
      const double down = loss(q);
      q[t][k] = P[t][k];
      const double want = (up - down) / (2 * step);
      EXPECT_NEAR(double(grads[t][k]), want, 10 * tol<T>(want)) << V::kNames[t] << " " << k;
    }
  }
}

// One suite over the variants: every setting, for fp64 with both index types and for fp32.
template <typename V>
class AttentionCpu : public testing::Test {};

using Variants = testing::Types<Gat, GatV2, Transformer>;
TYPED_TEST_SUITE(AttentionCpu, Variants);

TYPED_TEST(AttentionCpu, AgainstReference) {
  for (const Setting& s : kSettings) {
    check<TypeParam, double, int32_t>(s);
    check<TypeParam, double, int64_t>(s);
    check<TypeParam, float, int32_t>(s);
  }
}

}  // namespace
}  // namespace iognn::test

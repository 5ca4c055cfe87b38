#include "kernels/cpu/segment_reduce.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "core/parallel.h"
#include "kernels/cpu/instantiate.h"
#include "kernels/cpu/segment_extremum.h"

namespace iognn::cpu {

std::vector<SegmentReduce> parse_segment_reduces(const std::vector<std::string>& names) {
  static const char* const kNames[] = {"sum", "mean", "min", "max", "var", "std"};
  IOGNN_CHECK(!names.empty(), ValueError, "reduce must name at least one reduction");
  std::vector<SegmentReduce> reduces;
  for (const std::string& name : names) {
    const auto* it = std::find(std::begin(kNames), std::end(kNames), name);
    IOGNN_CHECK(it != std::end(kNames), ValueError, "reduce: unknown reduction '", name,
                "' (expected sum, mean, min, max, var or std)");
    const auto r = SegmentReduce(it - std::begin(kNames));
    IOGNN_CHECK(!segment_reduce_has(reduces, r), ValueError, "reduce: reduction '", name,
                "' is requested twice");
    reduces.push_back(r);
  }
  return reduces;
}

bool segment_reduce_has(const std::vector<SegmentReduce>& reduces, SegmentReduce r) {
  return std::find(reduces.begin(), reduces.end(), r) != reduces.end();
}

bool segment_reduce_needs_mean(const std::vector<SegmentReduce>& reduces) {
  return segment_reduce_has(reduces, SegmentReduce::kVar) ||
         segment_reduce_has(reduces, SegmentReduce::kStd);
}

bool segment_reduce_backward_needs_x(const std::vector<SegmentReduce>& reduces) {
  return segment_reduce_needs_mean(reduces) || segment_reduce_has(reduces, SegmentReduce::kMin) ||
         segment_reduce_has(reduces, SegmentReduce::kMax);
}

namespace {
// PyG's StdAggregation: sqrt(clamp(var, min=1e-5)), masked to 0 where <= sqrt(1e-5). Both
// constants are rounded to the accumulation type, as torch does for a Python scalar.
template <typename acc>
acc masked_std(acc var) {
  const acc s = std::sqrt(std::max(var, acc(1e-5)));  // std::max keeps a NaN var (first argument)
  return s <= acc(0.0031622776601683794) ? acc(0) : s;
}

// Adds the min / max gradient of row i (value o = out_i, its count and gradient g) that reaches
// source values xj: only tied edges (or every edge of a NaN result) receive a share.
template <typename T, typename index_t>
void add_extremum_grad(const T* xj, const T* o, const index_t* count, const T* g, int64_t F,
                       acc_t<T>* sum) {
  using acc = acc_t<T>;
  for (int64_t f = 0; f < F; ++f) {
    const acc out_f = load(o + f);
    if (extremum_receives(load(xj + f), out_f))
      sum[f] += extremum_share(out_f, acc(count[f]), load(g + f));
  }
}
}  // namespace

template <typename T, typename index_t>
void segment_reduce_forward(const index_t* rowptr, const index_t* col, const T* x, int64_t x_stride,
                            int64_t num_dst, int64_t F, const std::vector<SegmentReduce>& reduces,
                            T* out, index_t* count_min, index_t* count_max, acc_t<T>* mean,
                            DegreeScales<T> scales) {
  using acc = acc_t<T>;
  const int64_t K = int64_t(reduces.size());
  const int64_t S = scales.scale ? scales.count : 1;
  const bool want_min = segment_reduce_has(reduces, SegmentReduce::kMin);
  const bool want_max = segment_reduce_has(reduces, SegmentReduce::kMax);
  const bool want_sq = segment_reduce_needs_mean(reduces);
  const bool want_sum = want_sq || segment_reduce_has(reduces, SegmentReduce::kSum) ||
                        segment_reduce_has(reduces, SegmentReduce::kMean);
  parallel_for(0, num_dst, 64, [&](int64_t lo, int64_t hi) {
    std::vector<acc> sum(F), sum_sq(F), min_v(F), max_v(F), avg(F), var(F);
    std::vector<int64_t> min_n(F), max_n(F);  // edges holding the running min / max
    for (int64_t i = lo; i < hi; ++i) {
      const int64_t begin = rowptr[i], end = rowptr[i + 1];
      std::fill(sum.begin(), sum.end(), acc(0));
      std::fill(sum_sq.begin(), sum_sq.end(), acc(0));
      for (int64_t f = 0; f < F; ++f) {
        extremum_init<false>(min_v[f], min_n[f]);
        extremum_init<true>(max_v[f], max_n[f]);
      }
      for (int64_t p = begin; p < end; ++p) {
        const T* xj = x + int64_t(col[p]) * x_stride;
        if (want_sum)
          for (int64_t f = 0; f < F; ++f) sum[f] += load(xj + f);
        if (want_sq)
          for (int64_t f = 0; f < F; ++f) sum_sq[f] += load(xj + f) * load(xj + f);
        if (want_min)
          for (int64_t f = 0; f < F; ++f) extremum_add<false>(min_v[f], min_n[f], load(xj + f));
        if (want_max)
          for (int64_t f = 0; f < F; ++f) extremum_add<true>(max_v[f], max_n[f], load(xj + f));
      }
      const bool empty = end == begin;
      const acc count = acc(std::max<int64_t>(end - begin, 1));
      for (int64_t f = 0; f < F; ++f) {
        avg[f] = sum[f] / count;
        var[f] = sum_sq[f] / count - avg[f] * avg[f];
      }
      T* res_i = (scales.scale ? scales.plain : out) + i * K * F;  // the unscaled results
      for (int64_t k = 0; k < K; ++k) {
        T* o = res_i + k * F;
        for (int64_t f = 0; f < F; ++f) {
          acc v = 0;
          switch (reduces[k]) {
            case SegmentReduce::kSum: v = sum[f]; break;
            case SegmentReduce::kMean: v = avg[f]; break;
            case SegmentReduce::kMin: v = empty ? acc(0) : min_v[f]; break;
            case SegmentReduce::kMax: v = empty ? acc(0) : max_v[f]; break;
            case SegmentReduce::kVar: v = var[f]; break;
            case SegmentReduce::kStd: v = masked_std(var[f]); break;
          }
          store(o + f, v);
        }
      }
      for (int64_t s = 0; scales.scale && s < S; ++s) {  // block s: T(result) * T(scale), rounded
        const acc factor = load(scales.scale + i * S + s);
        T* block = out + (i * S + s) * K * F;
        for (int64_t c = 0; c < K * F; ++c) store(block + c, load(res_i + c) * factor);
      }
      for (int64_t f = 0; f < F; ++f) {
        if (count_min) count_min[i * F + f] = index_t(min_n[f]);
        if (count_max) count_max[i * F + f] = index_t(max_n[f]);
        if (mean) mean[i * F + f] = avg[f];
      }
    }
  });
}

template <typename T, typename index_t>
void segment_reduce_backward(const index_t* colptr, const index_t* row, const index_t* rowptr,
                             const T* x, int64_t x_stride, const T* out, const index_t* count_min,
                             const index_t* count_max, const acc_t<T>* mean, const T* grad_out,
                             int64_t num_src, int64_t F, const std::vector<SegmentReduce>& reduces,
                             T* grad_x) {
  using acc = acc_t<T>;
  const int64_t K = int64_t(reduces.size());
  parallel_for(0, num_src, 64, [&](int64_t lo, int64_t hi) {
    std::vector<acc> sum(F);
    for (int64_t j = lo; j < hi; ++j) {
      std::fill(sum.begin(), sum.end(), acc(0));
      const T* xj = x + j * x_stride;
      for (int64_t q = colptr[j]; q < colptr[j + 1]; ++q) {
        const int64_t i = row[q];
        const acc deg = acc(rowptr[i + 1] - rowptr[i]);  // >= 1: edge q is in row i
        for (int64_t k = 0; k < K; ++k) {
          const T* g = grad_out + i * K * F + k * F;
          const T* o = out + i * K * F + k * F;
          switch (reduces[k]) {
            case SegmentReduce::kSum:
              for (int64_t f = 0; f < F; ++f) sum[f] += load(g + f);
              break;
            case SegmentReduce::kMean:
              for (int64_t f = 0; f < F; ++f) sum[f] += load(g + f) / deg;
              break;
            case SegmentReduce::kMin:
              add_extremum_grad(xj, o, count_min + i * F, g, F, sum.data());
              break;
            case SegmentReduce::kMax:
              add_extremum_grad(xj, o, count_max + i * F, g, F, sum.data());
              break;
            case SegmentReduce::kVar:
              for (int64_t f = 0; f < F; ++f)
                sum[f] += acc(2) * load(g + f) * (load(xj + f) - mean[i * F + f]) / deg;
              break;
            case SegmentReduce::kStd:
              for (int64_t f = 0; f < F; ++f) {
                const acc std_i = load(o + f);
                if (std_i > acc(0))  // masked or NaN std: PyG's clamp passes no gradient
                  sum[f] += load(g + f) * (load(xj + f) - mean[i * F + f]) / (deg * std_i);
              }
              break;
          }
        }
      }
      for (int64_t f = 0; f < F; ++f) store(grad_x + j * F + f, sum[f]);
    }
  });
}

template <typename T>
void segment_reduce_fold_scales(const T* grad_out, const T* scale, int64_t num_dst,
                                int64_t num_scales, int64_t KF, T* g) {
  using acc = acc_t<T>;
  parallel_for(0, num_dst, 64, [&](int64_t lo, int64_t hi) {
    std::vector<acc> sum(KF);
    for (int64_t i = lo; i < hi; ++i) {
      std::fill(sum.begin(), sum.end(), acc(0));
      for (int64_t s = 0; s < num_scales; ++s) {
        const acc factor = load(scale + i * num_scales + s);
        const T* block = grad_out + (i * num_scales + s) * KF;
        for (int64_t c = 0; c < KF; ++c) sum[c] += factor * load(block + c);
      }
      for (int64_t c = 0; c < KF; ++c) store(g + i * KF + c, sum[c]);
    }
  });
}

template void segment_reduce_fold_scales<float>(const float*, const float*, int64_t, int64_t,
                                                int64_t, float*);
template void segment_reduce_fold_scales<double>(const double*, const double*, int64_t, int64_t,
                                                 int64_t, double*);
template void segment_reduce_fold_scales<half_t>(const half_t*, const half_t*, int64_t, int64_t,
                                                 int64_t, half_t*);
template void segment_reduce_fold_scales<bf16_t>(const bf16_t*, const bf16_t*, int64_t, int64_t,
                                                 int64_t, bf16_t*);

#define IOGNN_SEGMENT_REDUCE(T, index_t)                                                           \
  template void segment_reduce_forward<T, index_t>(                                                \
      const index_t*, const index_t*, const T*, int64_t, int64_t, int64_t,                         \
      const std::vector<SegmentReduce>&, T*, index_t*, index_t*, acc_t<T>*, DegreeScales<T>);      \
  template void segment_reduce_backward<T, index_t>(                                               \
      const index_t*, const index_t*, const index_t*, const T*, int64_t, const T*, const index_t*,  \
      const index_t*, const acc_t<T>*, const T*, int64_t, int64_t,                                 \
      const std::vector<SegmentReduce>&, T*);
IOGNN_FOR_ALL_TYPES(IOGNN_SEGMENT_REDUCE)

}  // namespace iognn::cpu

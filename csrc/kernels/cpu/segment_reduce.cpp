#include "kernels/cpu/segment_reduce.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "core/parallel.h"
#include "kernels/cpu/instantiate.h"
#include "kernels/segment_extremum.h"

namespace iognn {

// ---- the contract's helpers (kernels/segment_reduce_types.h) -------------------------------
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

TieSlots segment_reduce_tie_slots(const std::vector<SegmentReduce>& reduces) {
  TieSlots slots;
  if (segment_reduce_has(reduces, SegmentReduce::kMin)) slots.min = slots.count++;
  if (segment_reduce_has(reduces, SegmentReduce::kMax)) slots.max = slots.count++;
  return slots;
}

bool segment_reduce_extrema_only(const std::vector<SegmentReduce>& reduces) {
  return std::all_of(reduces.begin(), reduces.end(), [](SegmentReduce r) {
    return r == SegmentReduce::kMin || r == SegmentReduce::kMax;
  });
}

}  // namespace iognn

namespace iognn::cpu {

namespace {
// Adds the min / max gradient of row i (value o = out_i, its tie-code planes and wide entries,
// gradient g) that reaches source values xj: only tied edges (or every edge of a NaN result)
// receive a share. A sole holder's code counts one holder.
template <typename T>
void add_extremum_grad(const T* xj, const T* o, const uint8_t* lead, const uint8_t* rest,
                       const int64_t* wide, const T* g, int64_t F, acc_t<T>* sum) {
  using acc = acc_t<T>;
  for (int64_t f = 0; f < F; ++f) {
    const acc out_f = load(o + f);
    if (!extremum_receives(load(xj + f), out_f)) continue;
    const int64_t count = tie_lead_tagged(lead[f])
                              ? tie_count(tie_join(lead[f], rest[f]), wide ? wide + f : nullptr)
                              : 1;
    sum[f] += extremum_share(out_f, acc(count), load(g + f));
  }
}

// Writes one extremum's tie codes of row i (its in-edges start at CSR position begin; first: the
// CSR position of each feature's first holder) to their two planes, and the exact counts of the
// saturated ones to the row's wide entry.
template <typename acc>
void write_ties(const acc* value, const int64_t* count, const int64_t* first, int64_t begin,
                int64_t F, uint8_t* lead, uint8_t* rest, int64_t* wide_table, int64_t wide_rows) {
  const int64_t w = tie_wide_row(begin);
  for (int64_t f = 0; f < F; ++f) {
    const uint16_t code = tie_code(value[f], count[f], first[f] - begin);
    lead[f] = tie_lead(code);
    rest[f] = tie_rest(code);
    if (tie_saturated(code) && wide_table && w < wide_rows) wide_table[w * F + f] = count[f];
  }
}
}  // namespace

template <typename T, typename index_t>
void segment_reduce_forward(const index_t* rowptr, const index_t* col, const T* x, int64_t x_stride,
                            int64_t num_dst, int64_t F, const std::vector<SegmentReduce>& reduces,
                            T* out, Ties ties, acc_t<T>* mean, DegreeScales<T> scales) {
  using acc = acc_t<T>;
  const int64_t K = int64_t(reduces.size());
  const int64_t S = scales.scale ? scales.count : 1;
  const TieSlots tie_slots = segment_reduce_tie_slots(reduces);
  const bool want_min = tie_slots.min >= 0, want_max = tie_slots.max >= 0;
  const bool want_sq = segment_reduce_needs_mean(reduces);
  const bool want_sum = want_sq || segment_reduce_has(reduces, SegmentReduce::kSum) ||
                        segment_reduce_has(reduces, SegmentReduce::kMean);
  parallel_for(0, num_dst, 64, [&](int64_t lo, int64_t hi) {
    std::vector<acc> sum(F), sum_sq(F), min_v(F), max_v(F), avg(F), var(F);
    // Edges holding the running min / max, and the CSR position of the first of them.
    std::vector<int64_t> min_n(F), max_n(F), min_first(F), max_first(F);
    for (int64_t i = lo; i < hi; ++i) {
      const int64_t begin = rowptr[i], end = rowptr[i + 1];
      std::fill(sum.begin(), sum.end(), acc(0));
      std::fill(sum_sq.begin(), sum_sq.end(), acc(0));
      for (int64_t f = 0; f < F; ++f) {
        extremum_init<false>(min_v[f], min_n[f], min_first[f], begin);
        extremum_init<true>(max_v[f], max_n[f], max_first[f], begin);
      }
      for (int64_t p = begin; p < end; ++p) {
        const T* xj = x + int64_t(col[p]) * x_stride;
        if (want_sum)
          for (int64_t f = 0; f < F; ++f) sum[f] += load(xj + f);
        if (want_sq)
          for (int64_t f = 0; f < F; ++f) sum_sq[f] += load(xj + f) * load(xj + f);
        if (want_min)
          for (int64_t f = 0; f < F; ++f)
            extremum_add<false>(min_v[f], min_n[f], min_first[f], load(xj + f), p);
        if (want_max)
          for (int64_t f = 0; f < F; ++f)
            extremum_add<true>(max_v[f], max_n[f], max_first[f], load(xj + f), p);
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
      const auto put_ties = [&](int slot, const auto& value, const auto& count,
                                const auto& first) {
        const int64_t at = (i * tie_slots.count + slot) * F;
        write_ties(value.data(), count.data(), first.data(), begin, F, ties.lead + at,
                   ties.rest + at, ties.wide ? ties.wide + slot * ties.wide_rows * F : nullptr,
                   ties.wide_rows);
      };
      if (want_min) put_ties(tie_slots.min, min_v, min_n, min_first);
      if (want_max) put_ties(tie_slots.max, max_v, max_n, max_first);
      for (int64_t f = 0; mean && f < F; ++f) mean[i * F + f] = avg[f];
    }
  });
}

template <typename T, typename index_t>
void segment_reduce_backward(const index_t* colptr, const index_t* row, const index_t* rowptr,
                             const T* x, int64_t x_stride, const T* out, TiesView ties,
                             const acc_t<T>* mean, int64_t mean_stride, const T* grad_out,
                             int64_t num_src, int64_t F, const std::vector<SegmentReduce>& reduces,
                             T* grad_x) {
  using acc = acc_t<T>;
  const int64_t K = int64_t(reduces.size());
  const TieSlots tie_slots = segment_reduce_tie_slots(reduces);
  parallel_for(0, num_src, 64, [&](int64_t lo, int64_t hi) {
    std::vector<acc> sum(F);
    for (int64_t j = lo; j < hi; ++j) {
      std::fill(sum.begin(), sum.end(), acc(0));
      const T* xj = x + j * x_stride;
      for (int64_t q = colptr[j]; q < colptr[j + 1]; ++q) {
        const int64_t i = row[q];
        const acc deg = acc(rowptr[i + 1] - rowptr[i]);  // >= 1: edge q is in row i
        const auto extremum = [&](int slot, const T* o, const T* g) {
          const int64_t* table = ties.wide ? ties.wide + slot * ties.wide_rows * F : nullptr;
          const int64_t at = (i * tie_slots.count + slot) * F;
          add_extremum_grad(xj, o, ties.lead + at, ties.rest + at,
                            tie_wide_entry(table, ties.wide_rows, rowptr[i], F), g, F, sum.data());
        };
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
              extremum(tie_slots.min, o, g);
              break;
            case SegmentReduce::kMax:
              extremum(tie_slots.max, o, g);
              break;
            case SegmentReduce::kVar:
              for (int64_t f = 0; f < F; ++f)
                sum[f] += acc(2) * load(g + f) * (load(xj + f) - mean[i * mean_stride + f]) / deg;
              break;
            case SegmentReduce::kStd:
              for (int64_t f = 0; f < F; ++f) {
                const acc std_i = load(o + f);
                const acc centred = load(xj + f) - mean[i * mean_stride + f];
                if (std_i > acc(0))  // masked or NaN std: PyG's clamp passes no gradient
                  sum[f] += load(g + f) * centred / (deg * std_i);
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
      const std::vector<SegmentReduce>&, T*, Ties, acc_t<T>*, DegreeScales<T>);                    \
  template void segment_reduce_backward<T, index_t>(                                               \
      const index_t*, const index_t*, const index_t*, const T*, int64_t, const T*, TiesView,       \
      const acc_t<T>*, int64_t, const T*, int64_t, int64_t, const std::vector<SegmentReduce>&,     \
      T*);
IOGNN_FOR_ALL_TYPES(IOGNN_SEGMENT_REDUCE)

}  // namespace iognn::cpu

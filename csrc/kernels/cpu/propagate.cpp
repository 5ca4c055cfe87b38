#include "kernels/cpu/propagate.h"

#include <vector>

#include "core/parallel.h"
#include "kernels/cpu/instantiate.h"

namespace iognn::cpu {
namespace {
template <typename index_t>
double row_scale(const index_t* rowptr, int64_t i, PropagateReduce reduce) {
  const int64_t deg = rowptr[i + 1] - rowptr[i];
  return reduce == PropagateReduce::kMean && deg > 0 ? 1.0 / double(deg) : 1.0;
}

// One term of a gathered sum: weight * row[0 .. F).
template <typename T>
struct WeightedRow {
  acc_t<T> weight;
  const T* row;
};

// The gather both directions share, one thread per output row r (no atomics): in acc_t<T>,
// sum[:] = sum over q in [ptr[r], ptr[r + 1]) of term(q).weight * term(q).row[:], then
// finish(r, sum) writes row r.
template <typename T, typename index_t, typename Term, typename Finish>
void gather_rows(const index_t* ptr, int64_t num_rows, int64_t F, const Term& term,
                 const Finish& finish) {
  using acc = acc_t<T>;
  parallel_for(0, num_rows, 64, [&](int64_t lo, int64_t hi) {
    std::vector<acc> sum(F);
    for (int64_t r = lo; r < hi; ++r) {
      std::fill(sum.begin(), sum.end(), acc(0));
      for (int64_t q = ptr[r]; q < ptr[r + 1]; ++q) {
        const WeightedRow<T> t = term(q);
        for (int64_t f = 0; f < F; ++f) sum[f] += t.weight * load(t.row + f);
      }
      finish(r, sum.data());
    }
  });
}
}  // namespace

template <typename T, typename index_t>
void propagate_forward(const index_t* rowptr, const index_t* col, const acc_t<T>* weight,
                       const T* x, int64_t x_stride, int64_t num_dst, int64_t F,
                       PropagateReduce reduce, const T* bias, T* out) {
  using acc = acc_t<T>;
  gather_rows<T>(
      rowptr, num_dst, F,
      [&](int64_t p) {
        return WeightedRow<T>{weight ? weight[p] : acc(1), x + int64_t(col[p]) * x_stride};
      },
      [&](int64_t i, const acc* sum) {
        const acc scale = acc(row_scale(rowptr, i, reduce));
        for (int64_t f = 0; f < F; ++f)
          store(out + i * F + f, sum[f] * scale + (bias ? load(bias + f) : acc(0)));
      });
}

template <typename T, typename index_t>
void propagate_backward_x(const index_t* colptr, const index_t* row, const index_t* csc2csr,
                          const index_t* rowptr, const acc_t<T>* weight, const T* grad_out,
                          int64_t num_src, int64_t F, PropagateReduce reduce, T* grad_x) {
  using acc = acc_t<T>;
  gather_rows<T>(
      colptr, num_src, F,
      [&](int64_t q) {
        const int64_t i = row[q];
        acc w = acc(row_scale(rowptr, i, reduce));
        if (weight) w *= weight[csc2csr[q]];
        return WeightedRow<T>{w, grad_out + i * F};
      },
      [&](int64_t j, const acc* sum) {
        for (int64_t f = 0; f < F; ++f) store(grad_x + j * F + f, sum[f]);
      });
}

template <typename T, typename index_t>
void propagate_backward_weight(const index_t* rowptr, const index_t* col, const T* grad_out,
                               const T* x, int64_t x_stride, int64_t num_dst, int64_t F,
                               PropagateReduce reduce, acc_t<T>* grad_w) {
  using acc = acc_t<T>;
  parallel_for(0, num_dst, 64, [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) {
      const acc scale = acc(row_scale(rowptr, i, reduce));
      const T* gi = grad_out + i * F;
      for (int64_t p = rowptr[i]; p < rowptr[i + 1]; ++p) {
        const T* xj = x + int64_t(col[p]) * x_stride;
        acc dot = 0;
        for (int64_t f = 0; f < F; ++f) dot += load(gi + f) * load(xj + f);
        grad_w[p] = dot * scale;
      }
    }
  });
}

#define IOGNN_PROPAGATE(T, index_t)                                                                \
  template void propagate_forward<T, index_t>(const index_t*, const index_t*, const acc_t<T>*,     \
                                              const T*, int64_t, int64_t, int64_t,                 \
                                              PropagateReduce, const T*, T*);                      \
  template void propagate_backward_x<T, index_t>(const index_t*, const index_t*, const index_t*,   \
                                                 const index_t*, const acc_t<T>*, const T*,        \
                                                 int64_t, int64_t, PropagateReduce, T*);           \
  template void propagate_backward_weight<T, index_t>(const index_t*, const index_t*, const T*,    \
                                                      const T*, int64_t, int64_t, int64_t,         \
                                                      PropagateReduce, acc_t<T>*);
IOGNN_FOR_ALL_TYPES(IOGNN_PROPAGATE)

}  // namespace iognn::cpu

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
}  // namespace

template <typename T, typename index_t>
void propagate_forward(const index_t* rowptr, const index_t* col, const acc_t<T>* weight,
                       const T* x, int64_t x_stride, int64_t num_dst, int64_t F,
                       PropagateReduce reduce, const T* bias, T* out) {
  using acc = acc_t<T>;
  parallel_for(0, num_dst, 64, [&](int64_t lo, int64_t hi) {
    std::vector<acc> sum(F);
    for (int64_t i = lo; i < hi; ++i) {
      std::fill(sum.begin(), sum.end(), acc(0));
      for (int64_t p = rowptr[i]; p < rowptr[i + 1]; ++p) {
        const acc w = weight ? weight[p] : acc(1);
        const T* xj = x + int64_t(col[p]) * x_stride;
        for (int64_t f = 0; f < F; ++f) sum[f] += w * load(xj + f);
      }
      const acc scale = acc(row_scale(rowptr, i, reduce));
      for (int64_t f = 0; f < F; ++f)
        store(out + i * F + f, sum[f] * scale + (bias ? load(bias + f) : acc(0)));
    }
  });
}

template <typename T, typename index_t>
void propagate_backward_x(const index_t* colptr, const index_t* row, const index_t* csc2csr,
                          const index_t* rowptr, const acc_t<T>* weight, const T* grad_out,
                          int64_t num_src, int64_t F, PropagateReduce reduce, T* grad_x) {
  using acc = acc_t<T>;
  parallel_for(0, num_src, 64, [&](int64_t lo, int64_t hi) {
    std::vector<acc> sum(F);
    for (int64_t j = lo; j < hi; ++j) {
      std::fill(sum.begin(), sum.end(), acc(0));
      for (int64_t q = colptr[j]; q < colptr[j + 1]; ++q) {
        const int64_t i = row[q];
        acc w = acc(row_scale(rowptr, i, reduce));
        if (weight) w *= weight[csc2csr[q]];
        const T* gi = grad_out + i * F;
        for (int64_t f = 0; f < F; ++f) sum[f] += w * load(gi + f);
      }
      for (int64_t f = 0; f < F; ++f) store(grad_x + j * F + f, sum[f]);
    }
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

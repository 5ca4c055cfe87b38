// The min / max rule of the segment reductions, shared by the host and CUDA kernels so that both
// pick the same value, count the same ties and send the same gradient.
//
// Forward: a running (value, count) per feature, count = how many edges folded so far hold a value
// equal to `value`. It starts at the identity (+inf for min, -inf for max, count 0), so an empty
// row ends with count 0. A NaN beats every number and is final (torch.amin / amax); its count is 0
// since NaN equals nothing. Folding is associative: segments of a row folded separately and merged
// in CSR order give the same value and count as one sequential fold (the value kept on an equal
// candidate is the earlier one, which only matters for the sign of a zero).
//
// Backward (torch's scatter_reduce(amin / amax, include_self=False) derivative, which PyG 2.8's
// MinAggregation / MaxAggregation go through): the gradient g of out[i,f] is split evenly among
// the in-edges whose value equals out[i,f], and the output's zero fill counts as one more tied
// element when out[i,f] == 0 (torch compares the fill with the result; its share is dropped).
// A NaN result sends NaN to every in-edge of the row (torch computes 0 * (g / 0)).
#pragma once

#include <cmath>
#include <cstdint>

#include "core/numeric.h"

namespace iognn {

template <bool kMax, typename acc>
IOGNN_HD void extremum_init(acc& value, int64_t& count) {
  value = kMax ? -acc(INFINITY) : acc(INFINITY);
  count = 0;
}

// Folds a later candidate (v held by n edges) into (value, count).
template <bool kMax, typename acc>
IOGNN_HD void extremum_merge(acc& value, int64_t& count, acc v, int64_t n) {
  if (value != value) return;  // a NaN result is final
  if (v != v || (kMax ? v > value : v < value)) {
    value = v;
    count = v != v ? 0 : n;
  } else if (v == value) {
    count += n;
  }
}

template <bool kMax, typename acc>
IOGNN_HD void extremum_add(acc& value, int64_t& count, acc v) {
  extremum_merge<kMax>(value, count, v, 1);
}

// Whether an in-edge holding v receives part of the gradient of the result `out`.
template <typename acc>
IOGNN_HD bool extremum_receives(acc v, acc out) {
  return v == out || out != out;
}

// The part of g that such an in-edge receives (count: the forward's count of the result).
template <typename acc>
IOGNN_HD acc extremum_share(acc out, acc count, acc g) {
  if (out != out) return acc(NAN);
  return g / (count + (out == acc(0) ? acc(1) : acc(0)));
}

}  // namespace iognn

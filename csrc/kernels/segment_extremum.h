// The min / max rule of the segment reductions, shared by the host and CUDA kernels so that both
// pick the same value, find the same holders and send the same gradient.
//
// Forward: a running (value, count, first) per feature: count = how many edges folded so far hold
// a value equal to `value`, first = the CSR position of the earliest of them. It starts at the
// identity (+inf for min, -inf for max, count 0, first = the position of the first edge to fold,
// which holds the value when it equals the identity), so an empty row ends with count 0. A NaN
// beats every number and is final (torch.amin / amax); count and first of a NaN mean nothing (a
// NaN equals nothing: tie_code and extremum_merge read its count as 0). Folding is associative:
// segments of a row folded separately and merged in CSR order give the same value, count and first
// edge as one sequential fold (the value kept on an equal candidate is the earlier one, which only
// matters for the sign of a zero).
//
// Backward (torch's scatter_reduce(amin / amax, include_self=False) derivative, which PyG 2.8's
// MinAggregation / MaxAggregation go through): the gradient g of out[i,f] is split evenly among
// the in-edges whose value equals out[i,f], and the output's zero fill counts as one more tied
// element when out[i,f] == 0 (torch compares the fill with the result; its share is dropped).
// A NaN result sends NaN to every in-edge of the row (torch computes 0 * (g / 0)).
//
// Tie codes: what the forward keeps for the backward, 16 bits per (row i, feature f, extremum).
//   bit 15 clear ("sole holder"): exactly one in-edge holds the result, the result is neither 0
//     nor NaN, and that edge is the code-th of row i in CSR order (code < 2^15). It alone
//     receives the gradient, g itself: an edge finds its share from its position, reading no value.
//   bit 15 set ("tagged"): every other case. The holders are the edges whose value equals the
//     result (all of them for NaN); there are code & 0x7FFF of them, unless that is 0x7FFF
//     (saturated): the exact count is then the row's wide entry wide[(rowptr[i] / 0x7FFF) * F + f]
//     (one [wide_rows, F] table per extremum, wide_rows = num_edges / 0x7FFF: a saturated row has
//     degree >= 0x7FFF, so two of them start at least 0x7FFF edges apart and never share a slot).
//
// Storage: two byte planes, `lead` and `rest`, so that the backward's common case reads one byte
// per edge and feature: lead = the tag bit and the payload's low 7 bits (payload: bits 0-14, the
// position or the count), rest = payload bits 7-14. An edge at position p of row i is a candidate
// sole holder when lead == p mod 128; in a row of at most 128 in-edges that settles it, in a
// longer row the edge also reads rest (only then: 1 in 128 candidates per feature). A tagged lead
// sends the edge to rest for the count and to the result for the value. So the backward reads 1
// byte per edge and feature, plus the gradient where the edge may hold the result, instead of the
// result, its gradient and a tie count.
#pragma once

#include <cmath>
#include <cstdint>

#include "core/numeric.h"

namespace iognn {

constexpr uint16_t kTieTagged = 0x8000;
constexpr int64_t kTieSaturated = 0x7FFF;  // a tagged count field that says "see the wide table"

// Wide-table rows of a graph with num_edges edges (per extremum). Size is int64_t, or c10::SymInt
// where the binding sizes the wide table from symbolic sizes (torch.compile).
template <typename Size>
IOGNN_HD Size tie_wide_rows(const Size& num_edges) {
  return num_edges / kTieSaturated;
}
// The wide-table row of a destination whose in-edges start at CSR position row_begin.
IOGNN_HD int64_t tie_wide_row(int64_t row_begin) { return row_begin / kTieSaturated; }

template <bool kMax, typename acc, typename count_t>
IOGNN_HD void extremum_init(acc& value, count_t& count, count_t& first, count_t begin) {
  value = kMax ? -acc(INFINITY) : acc(INFINITY);
  count = 0;
  first = begin;
}

// Folds a later candidate (v held by n edges, the earliest at position v_first).
template <bool kMax, typename acc, typename count_t>
IOGNN_HD void extremum_merge(acc& value, count_t& count, count_t& first, acc v, count_t n,
                             count_t v_first) {
  if (value != value) return;  // a NaN result is final
  if (v != v || (kMax ? v > value : v < value)) {
    value = v;
    count = v != v ? count_t(0) : n;
    first = v_first;
  } else if (v == value) {  // (first unset while no edge holds the value: the identity, +-inf)
    if (count == 0) first = v_first;
    count += n;
  }
}

// Folds the edge at `position` (after the edges folded so far, in CSR order), branch-free: the
// GPU kernels run it per edge and feature, where its instruction count bounds min and max
// together. Compares with a NaN on either side are false: a NaN v becomes the value and leaves
// count and first as they were (meaningless from then on); after it only another NaN replaces it.
template <bool kMax, typename acc, typename count_t>
IOGNN_HD void extremum_add(acc& value, count_t& count, count_t& first, acc v, count_t position) {
  const bool better = kMax ? v > value : v < value;
  count = better ? count_t(1) : count + count_t(v == value);
  first = better ? position : first;
  value = better || v != v ? v : value;
}

// The tie code of a finished row (first: the earliest holder's position within the row).
template <typename acc>
IOGNN_HD uint16_t tie_code(acc value, int64_t count, int64_t first) {
  if (value != value) count = 0;  // (extremum_add leaves it undefined)
  if (count == 1 && value != acc(0) && first < int64_t(kTieTagged)) return uint16_t(first);
  return uint16_t(kTieTagged | uint16_t(count < kTieSaturated ? count : kTieSaturated));
}

// The two stored bytes of a code, and the code they hold.
IOGNN_HD uint8_t tie_lead(uint16_t code) { return uint8_t(((code >> 8) & 0x80) | (code & 0x7F)); }
IOGNN_HD uint8_t tie_rest(uint16_t code) { return uint8_t(code >> 7); }
IOGNN_HD uint16_t tie_join(uint8_t lead, uint8_t rest) {
  return uint16_t(((lead & 0x80) << 8) | (uint16_t(rest) << 7) | (lead & 0x7F));
}
IOGNN_HD bool tie_lead_tagged(uint8_t lead) { return (lead & 0x80) != 0; }
// Rows longer than this need the rest byte to tell a sole holder from edges 128k positions away.
constexpr int64_t kTieLeadRowLength = 128;
// The lead byte that would name an untagged edge at position p (p < kTieTagged).
IOGNN_HD uint8_t tie_lead_of_position(int64_t p) { return uint8_t(p & 0x7F); }

IOGNN_HD bool tie_tagged(uint16_t code) { return (code & kTieTagged) != 0; }
IOGNN_HD bool tie_saturated(uint16_t code) { return (code & 0x7FFF) == kTieSaturated; }
// The holder count of a tagged code (wide: the row's wide entry, read only when saturated;
// nullptr where the CSR gives the row none, which a valid CSR never does for a saturated code).
IOGNN_HD int64_t tie_count(uint16_t code, const int64_t* wide) {
  return tie_saturated(code) && wide ? *wide : int64_t(code & 0x7FFF);
}
// The row's wide entry for feature 0 of one extremum's table (nullptr when out of range).
IOGNN_HD const int64_t* tie_wide_entry(const int64_t* table, int64_t wide_rows, int64_t row_begin,
                                      int64_t F) {
  const int64_t w = tie_wide_row(row_begin);
  return table && w < wide_rows ? table + w * F : nullptr;
}

// Whether an in-edge holding v receives part of the gradient of the result `out` (tagged codes).
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

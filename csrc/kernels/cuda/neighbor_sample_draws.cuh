// The per-node draws of the CUDA neighbour sampler (kernels/cuda/neighbor_sample.cu): one warp per
// frontier node, every routine called by all 32 lanes of the warp with the same arguments. Each
// computes what the host kernel's sample_node / sample_node_weighted / TemporalFilter compute
// (kernels/cpu/neighbor_sample.cpp), from the same draws (kernels/sampler_draws.h), and writes a
// node's sampled CSC positions into its slice `out`.
#pragma once

#include <cstdint>

#include "kernels/sampler_draws.h"

namespace iognn::cuda::sampler_detail {

constexpr unsigned kFullMask = 0xffffffffu;
constexpr int kWarp = 32;

__device__ __forceinline__ int lane_id() { return int(threadIdx.x) & (kWarp - 1); }

__device__ __forceinline__ long long warp_sum(long long v) {
  for (int o = kWarp / 2; o > 0; o >>= 1) v += __shfl_xor_sync(kFullMask, v, o);
  return v;
}

// Index of the (n + 1)-th set bit of mask (n < popc(mask)), counting from bit 0.
__device__ __forceinline__ int nth_set_bit(unsigned mask, int n) {
  for (; n > 0; --n) mask &= mask - 1;
  return __ffs(int(mask)) - 1;
}

// Writes the positions p of [lo, hi) with take(p), in order, into out[0 ..).
template <typename index_t, typename Take>
__device__ void compact(int64_t lo, int64_t hi, Take take, index_t* out) {
  const int lane = lane_id();
  int64_t written = 0;
  for (int64_t c = lo; c < hi; c += kWarp) {
    const int64_t p = c + lane;
    const bool mine = p < hi && take(p);
    const unsigned mask = __ballot_sync(kFullMask, mine);
    if (mine) out[written + __popc(mask & ((1u << lane) - 1))] = index_t(p);
    written += __popc(mask);
  }
}

// Floyd's method, as the host: for d = 0 .. k - 1 and j = size - k + d, t uniform in [0, j], or j
// when t is already taken; out[d] = base + t. The lanes draw 32 steps at once; a step's t is
// checked against the steps of earlier rounds (in out) in parallel and against the earlier steps
// of its round one step at a time (a vote), so the warp takes the host's decisions in its order.
template <typename index_t>
__device__ void floyd(int64_t size, int64_t k, uint64_t rng_seed, uint64_t local, int64_t base,
                      index_t* out) {
  const int lane = lane_id();
  for (int64_t c = 0; c < k; c += kWarp) {
    const int64_t d = c + lane;
    const int64_t j = size - k + d;
    const int64_t t = d < k ? uniform_below(rng_seed, local, uint64_t(d), j + 1) : -1;
    bool seen = false;
    for (int64_t x = 0; x < c; ++x) seen |= int64_t(out[x]) == base + t;
    int64_t chosen = -1;
    const int steps = int(k - c < kWarp ? k - c : kWarp);
    for (int s = 0; s < steps; ++s) {
      const int64_t ts = __shfl_sync(kFullMask, t, s);
      const bool hit = __any_sync(kFullMask, lane < s && chosen == ts);
      if (lane == s) chosen = seen || hit ? j : t;
    }
    if (d < k) out[d] = index_t(base + chosen);
    __syncwarp();
  }
}

// The host's sample_node over a population of `size` positions: out[d] = base + t, t the
// population index drawn (every index in order when k < 0 or k >= size without replacement).
template <typename index_t>
__device__ void draw_uniform(int64_t size, int64_t k, bool replace, uint64_t rng_seed,
                             uint64_t local, int64_t base, index_t* out) {
  const int lane = lane_id();
  if (k < 0 || (!replace && k >= size)) {
    for (int64_t j = lane; j < size; j += kWarp) out[j] = index_t(base + j);
  } else if (replace) {
    if (size == 0) return;
    for (int64_t d = lane; d < k; d += kWarp)
      out[d] = index_t(base + uniform_below(rng_seed, local, uint64_t(d), size));
  } else {
    floyd(size, k, rng_seed, local, base, out);
  }
}

// Weighted draws with replacement (positive weights exist): position j with probability
// w[j] / sum(w), as the host: the first running sum above u * total, the sums added in CSC order
// (every lane adds the same values in the same order, so the sums are the host's bit for bit).
template <typename index_t>
__device__ void weighted_with_replacement(const double* w, int64_t lo, int64_t degree, int64_t k,
                                          uint64_t rng_seed, uint64_t local, index_t* out) {
  const int lane = lane_id();
  double total = 0;
  int64_t last_positive = 0;
  for (int64_t c = 0; c < degree; c += kWarp) {
    const double wj = c + lane < degree ? w[lo + c + lane] : 0.0;
    const unsigned positive = __ballot_sync(kFullMask, wj > 0);
    if (positive) last_positive = c + 31 - __clz(int(positive));
    const int n = int(degree - c < kWarp ? degree - c : kWarp);
    for (int i = 0; i < n; ++i) total = __dadd_rn(total, __shfl_sync(kFullMask, wj, i));
  }
  for (int64_t g = 0; g < k; g += kWarp) {
    const int64_t d = g + lane;
    const double u = d < k ? __dmul_rn(unit_interval(rng_seed, local, uint64_t(d)), total) : 0.0;
    int64_t found = d < k ? -1 : 0;
    double sum = 0;
    for (int64_t c = 0; c < degree && __any_sync(kFullMask, found < 0); c += kWarp) {
      const double wj = c + lane < degree ? w[lo + c + lane] : 0.0;
      const int n = int(degree - c < kWarp ? degree - c : kWarp);
      for (int i = 0; i < n; ++i) {
        sum = __dadd_rn(sum, __shfl_sync(kFullMask, wj, i));
        if (found < 0 && sum > u) found = c + i;
      }
    }
    if (d < k) out[d] = index_t(lo + (found >= 0 ? found : last_positive));
  }
}

// Weighted draws without replacement (k < the positive weights): the k smallest (key, j) pairs,
// key = -log1p(-U_j) / w[j], in increasing order, as the host's partial sort of the same pairs;
// one pass over the node's weights per draw, each finding the least pair above the last one.
template <typename index_t>
__device__ void weighted_without_replacement(const double* w, int64_t lo, int64_t degree,
                                             int64_t k, uint64_t rng_seed, uint64_t local,
                                             index_t* out) {
  const int lane = lane_id();
  double last_key = -1;
  int64_t last_j = -1;
  for (int64_t d = 0; d < k; ++d) {
    double best_key = __longlong_as_double(0x7ff0000000000000ll);  // +inf
    int64_t best_j = INT64_MAX;
    for (int64_t j = lane; j < degree; j += kWarp) {
      const double wj = w[lo + j];
      if (!(wj > 0)) continue;
      const double key = -log1p(-unit_interval(rng_seed, local, uint64_t(j))) / wj;
      const bool after_last = key > last_key || (key == last_key && j > last_j);
      if (after_last && (key < best_key || (key == best_key && j < best_j))) {
        best_key = key;
        best_j = j;
      }
    }
    for (int o = kWarp / 2; o > 0; o >>= 1) {
      const double other_key = __shfl_xor_sync(kFullMask, best_key, o);
      const int64_t other_j = __shfl_xor_sync(kFullMask, best_j, o);
      if (other_key < best_key || (other_key == best_key && other_j < best_j)) {
        best_key = other_key;
        best_j = other_j;
      }
    }
    if (lane == 0) out[d] = index_t(lo + best_j);
    last_key = best_key;
    last_j = best_j;
  }
}

// Signed times in an order-preserving unsigned form.
__device__ __forceinline__ uint64_t time_order(int64_t t) {
  return uint64_t(t) ^ (uint64_t(1) << 63);
}

// The temporal filter of a tree at one node: eligible positions (time <= the tree's seed time),
// and with 'last' and more of them than k, only the k most recent (the largest times, a tie going
// to the later position): those at or after a threshold (time, position).
struct TemporalPopulation {
  const int64_t* node_time;  // node times (read through row), or
  const int64_t* edge_time;  // edge times (CSC order)
  int64_t seed_time;
  bool cut = false;
  uint64_t cut_time = 0;  // time_order of the threshold time
  int64_t cut_position = 0;

  template <typename index_t>
  __device__ int64_t time_at(const index_t* row, int64_t p) const {
    return edge_time ? edge_time[p] : node_time[int64_t(row[p])];
  }
  template <typename index_t>
  __device__ bool eligible(const index_t* row, int64_t p) const {
    return time_at(row, p) <= seed_time;
  }
  template <typename index_t>
  __device__ bool contains(const index_t* row, int64_t p) const {
    const int64_t t = time_at(row, p);
    if (t > seed_time) return false;
    if (!cut) return true;
    const uint64_t o = time_order(t);
    return o > cut_time || (o == cut_time && p >= cut_position);
  }

  // Eligible positions of [lo, hi) with time_order >= at (or > at when strictly).
  template <typename index_t>
  __device__ int64_t count_from(const index_t* row, int64_t lo, int64_t hi, uint64_t at,
                                bool strictly) const {
    long long n = 0;
    for (int64_t p = lo + lane_id(); p < hi; p += kWarp) {
      const int64_t t = time_at(row, p);
      const uint64_t o = time_order(t);
      n += t <= seed_time && (strictly ? o > at : o >= at);
    }
    return warp_sum(n);
  }

  // Sets the threshold for the k most recent of [lo, hi)'s eligible positions (more than k >= 1
  // of them): the k-th largest time by bisection over the times' range, then, among the positions
  // at that time, the one that completes k counting back from the end.
  template <typename index_t>
  __device__ void cut_to_most_recent(const index_t* row, int64_t lo, int64_t hi, int64_t k) {
    const int lane = lane_id();
    uint64_t low = ~uint64_t(0), high = 0;
    for (int64_t p = lo + lane; p < hi; p += kWarp) {
      const int64_t t = time_at(row, p);
      if (t > seed_time) continue;
      low = min(low, time_order(t));
      high = max(high, time_order(t));
    }
    for (int o = kWarp / 2; o > 0; o >>= 1) {
      low = min(low, __shfl_xor_sync(kFullMask, low, o));
      high = max(high, __shfl_xor_sync(kFullMask, high, o));
    }
    while (low < high) {  // the largest time with at least k eligible positions at or after it
      const uint64_t mid = low + (high - low) / 2 + 1;
      if (count_from(row, lo, hi, mid, false) >= k) low = mid;
      else high = mid - 1;
    }
    const int64_t at_time = k - count_from(row, lo, hi, low, true);  // >= 1
    int64_t seen = 0, position = lo;
    for (int64_t c = lo + (hi - 1 - lo) / kWarp * kWarp; c >= lo; c -= kWarp) {
      const int64_t p = c + lane;
      bool same = false;
      if (p < hi) {
        const int64_t t = time_at(row, p);
        same = t <= seed_time && time_order(t) == low;
      }
      const unsigned mask = __ballot_sync(kFullMask, same);
      const int n = __popc(mask);
      if (seen + n >= at_time) {  // the (at_time - seen)-th set bit from the top
        position = c + nth_set_bit(mask, int(n - (at_time - seen)));
        break;
      }
      seen += n;
    }
    cut = true;
    cut_time = low;
    cut_position = position;
  }
};

// Replaces the population indices out[0 .. m) by the positions of [lo, hi) they stand for (the
// t-th position p with in(p), in CSC order).
template <typename index_t, typename In>
__device__ void population_positions(int64_t lo, int64_t hi, In in, int64_t m, index_t* out) {
  const int lane = lane_id();
  for (int64_t g = 0; g < m; g += kWarp) {
    const int64_t d = g + lane;
    const int64_t t = d < m ? int64_t(out[d]) : -1;
    int64_t position = -1, rank = 0;
    for (int64_t c = lo; c < hi && __any_sync(kFullMask, t >= rank); c += kWarp) {
      const int64_t p = c + lane;
      const unsigned mask = __ballot_sync(kFullMask, p < hi && in(p));
      const int n = __popc(mask);
      if (t >= rank && t < rank + n) position = c + nth_set_bit(mask, int(t - rank));
      rank += n;
    }
    if (d < m) out[d] = index_t(position);
  }
}

}  // namespace iognn::cuda::sampler_detail

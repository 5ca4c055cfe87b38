// The random draws of neighbour sampling (contract: kernels/sampler_types.h), for the host and the
// device kernels alike: draw `draw` of the frontier node with local id `local` is a pure function
// of (rng_seed, local, draw), so both backends sample the same positions.
#pragma once

#include <cstdint>

#include "core/counter_rng.h"

namespace iognn {

// How many positions a node contributes with fan-out k: `population` is its in-degree, or with
// weights its number of positive-weight in-edges (zero-weight edges are never sampled), or with
// times its eligible in-edges.
IOGNN_HD int64_t sample_size(int64_t population, int64_t k, bool replace) {
  if (k < 0 || population == 0) return population;
  return replace ? k : (k < population ? k : population);
}

// The 64 random bits of one draw.
IOGNN_HD uint64_t draw_bits(uint64_t rng_seed, uint64_t local, uint64_t draw) {
  return mix64(mix64(rng_seed + (local + 1) * kGoldenGamma) + (draw + 1) * kGoldenGamma);
}

// Uniform in [0, n) (n >= 1). The multiply-high map has a bias below n / 2^64, far under any
// test's resolution.
IOGNN_HD int64_t uniform_below(uint64_t rng_seed, uint64_t local, uint64_t draw, int64_t n) {
  return int64_t(mul_high64(draw_bits(rng_seed, local, draw), uint64_t(n)));
}

// Uniform in [0, 1), on the 53 bits a double holds.
IOGNN_HD double unit_interval(uint64_t rng_seed, uint64_t local, uint64_t draw) {
  return double(draw_bits(rng_seed, local, draw) >> 11) * 0x1.0p-53;
}

// The generator key of edge type `edge_type` in heterogeneous sampling: its frontier nodes draw as
// the homogeneous sampler's do under this key, so two edge types sampling from the same node draw
// independently.
IOGNN_HD uint64_t edge_type_key(uint64_t rng_seed, uint64_t edge_type) {
  return mix64(rng_seed + (edge_type + 1) * kGoldenGamma);
}

}  // namespace iognn

// Counter-based random numbers for attention dropout.
//
// The keep/drop decision of (seed, edge, head) is a pure function of those three numbers, so the
// forward and the backward pass regenerate the same mask without storing it, and the CPU and CUDA
// kernels produce identical masks. `edge` is the augmented edge id (Graph.eid), which does not
// depend on the CSR layout. The hash is the SplitMix64 finaliser (core/counter_rng.h) applied to
// seed + key * golden ratio (a bijection of the key for a fixed seed), keeping the top 24 bits as
// a uniform in [0, 1).
#pragma once

#include <cstdint>

#include "core/counter_rng.h"

namespace iognn {

IOGNN_HD float dropout_uniform(uint64_t seed, uint64_t edge, uint64_t head, uint64_t num_heads) {
  const uint64_t z = mix64(seed + (edge * num_heads + head + 1) * kGoldenGamma);
  return float(z >> 40) * (1.0f / 16777216.0f);
}

// Multiplier of an attention weight under dropout with probability p: 0 when dropped, 1/(1-p)
// when kept; p <= 0 keeps everything with factor 1, p >= 1 drops everything.
IOGNN_HD float dropout_scale(uint64_t seed, uint64_t edge, uint64_t head, uint64_t num_heads,
                             float p) {
  if (p <= 0.f) return 1.f;
  if (p >= 1.f) return 0.f;
  return dropout_uniform(seed, edge, head, num_heads) >= p ? 1.f / (1.f - p) : 0.f;
}

}  // namespace iognn

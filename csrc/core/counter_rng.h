// Counter-based random numbers: a random value is a pure function of a seed and a counter (no
// state to carry, split or replay), so host and device code, any thread count and any split of
// the work draw the same values. Shared by attention dropout (core/dropout_rng.h) and neighbour
// sampling (kernels/sampler_draws.h).
#pragma once

#include <cstdint>

#include "core/numeric.h"

namespace iognn {

constexpr uint64_t kGoldenGamma = 0x9E3779B97F4A7C15ull;  // 2^64 / golden ratio, odd

// The SplitMix64 finaliser: a bijection of 64-bit words that mixes every input bit into every
// output bit.
IOGNN_HD uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// The high 64 bits of a * b.
IOGNN_HD uint64_t mul_high64(uint64_t a, uint64_t b) {
#if defined(__CUDA_ARCH__)
  return __umul64hi(a, b);
#else
  return uint64_t((static_cast<unsigned __int128>(a) * b) >> 64);
#endif
}

}  // namespace iognn

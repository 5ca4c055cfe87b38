// Host parallel loop over [begin, end) in chunks, on OpenMP when the build has it.
//
// Each index is processed by exactly one thread and the body must not depend on which one, so
// results are identical for any thread count (the CPU kernels rely on this for determinism).
#pragma once

#include <algorithm>
#include <cstdint>

namespace iognn {

template <typename Fn>
void parallel_for(int64_t begin, int64_t end, int64_t grain, const Fn& fn) {
  if (end <= begin) return;
  grain = std::max<int64_t>(grain, 1);
  const int64_t chunks = (end - begin + grain - 1) / grain;
#if defined(_OPENMP)
#pragma omp parallel for schedule(dynamic, 1) if (chunks > 1)
#endif
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t lo = begin + c * grain;
    fn(lo, std::min(end, lo + grain));
  }
}

}  // namespace iognn

// Test helper: runs a computation at a chosen OpenMP thread count, for the tests that check a
// result does not depend on how many threads produced it.
#pragma once

#if defined(_OPENMP)
#include <omp.h>

namespace iognn::test {

// run() with `threads` OpenMP threads; the previous thread count is restored afterwards.
template <typename Run>
auto with_omp_threads(int threads, Run&& run) {
  const int previous = omp_get_max_threads();
  omp_set_num_threads(threads);
  auto result = run();
  omp_set_num_threads(previous);
  return result;
}

}  // namespace iognn::test
#endif

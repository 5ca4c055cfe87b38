// Small device helpers of the CUDA segment reductions (on top of kernels/cuda/common.cuh's checks,
// conversions, packed accesses and unfused products): pack widths and the requested reductions.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>
#include <vector>

#include "core/error.h"
#include "core/numeric.h"
#include "kernels/segment_reduce_types.h"
#include "kernels/cuda/common.cuh"

namespace iognn::cuda::sr {

// Elements per lane of the packed kernels that keep min / max state: 16 bytes of features, but
// at most 4 (a 16-bit lane of 8 features held 8 extremum states and their holder counts and
// positions, which spilled or halved the warps in flight).
template <typename T>
inline constexpr int kExtremumVec = kVec<T> < 4 ? kVec<T> : 4;

// Whether the tie-code byte planes take packs of up to kPack bytes (one byte a feature): the lead
// plane is allocated aligned and the rest plane starts num_dst * n * F bytes later.
template <class TieArrays>
bool tie_planes_aligned(const TieArrays& ties, int kPack) {
  const auto ok = [&](const void* p) { return reinterpret_cast<uintptr_t>(p) % kPack == 0; };
  return !ties.lead || (ok(ties.lead) && ok(ties.rest));
}

// ---- the requested reductions -------------------------------------------------------------------
constexpr int kMaxReduces = 6;  // sum, mean, min, max, var, std: each at most once

// Reduction codes (iognn::SegmentReduce values) in request order, passed by value to kernels.
struct ReduceList {
  int count;
  int8_t code[kMaxReduces];
};

inline ReduceList make_reduce_list(const std::vector<SegmentReduce>& reduces) {
  IOGNN_CHECK(!reduces.empty() && reduces.size() <= size_t(kMaxReduces), ValueError,
              "segment_reduce: between 1 and ", kMaxReduces, " reductions expected, got ",
              reduces.size());
  ReduceList list{int(reduces.size()), {}};
  for (size_t k = 0; k < reduces.size(); ++k) list.code[k] = int8_t(reduces[k]);
  return list;
}

}  // namespace iognn::cuda::sr

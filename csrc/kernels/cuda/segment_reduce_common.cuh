// Small device helpers of the CUDA segment reductions (on top of kernels/cuda/common.cuh's checks
// and conversions): packed (up to 16-byte) loads and stores, and arithmetic that the compiler may
// not contract into FMAs (so light rows round exactly as the host kernels do).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "core/error.h"
#include "core/numeric.h"
#include "kernels/cpu/segment_reduce.h"
#include "kernels/cuda/common.cuh"

namespace iognn::cuda::sr {

// a * b rounded on its own (never fused with a following add), as the host computes it.
__device__ __forceinline__ float mul_rn(float a, float b) { return __fmul_rn(a, b); }
__device__ __forceinline__ double mul_rn(double a, double b) { return __dmul_rn(a, b); }

// ---- packed accesses ----------------------------------------------------------------------------
// VEC consecutive elements of T handled by one lane; sizeof(Pack) is 1, 2, 4, 8 or 16 bytes and the
// address must be aligned to it (the host only picks VEC > 1 after checking pointers and strides).
template <typename T, int VEC>
struct Pack {
  T v[VEC];
};

template <int BYTES>
struct PackWord;
template <>
struct PackWord<1> {
  using type = unsigned char;
};
template <>
struct PackWord<2> {
  using type = unsigned short;
};
template <>
struct PackWord<4> {
  using type = unsigned int;
};
template <>
struct PackWord<8> {
  using type = uint2;
};
template <>
struct PackWord<16> {
  using type = uint4;
};

// Read-only (non-coherent cache) load of one pack.
template <typename T, int VEC>
__device__ __forceinline__ Pack<T, VEC> load_pack(const T* p) {
  using Word = typename PackWord<sizeof(T) * VEC>::type;
  const Word w = __ldg(reinterpret_cast<const Word*>(p));
  Pack<T, VEC> out;
  std::memcpy(&out, &w, sizeof out);
  return out;
}

// One pack as the machine word that stores it.
template <typename T, int VEC>
__device__ __forceinline__ typename PackWord<sizeof(T) * VEC>::type pack_word(
    const Pack<T, VEC>& v) {
  typename PackWord<sizeof(T) * VEC>::type w;
  std::memcpy(&w, &v, sizeof w);
  return w;
}

template <typename T, int VEC>
__device__ __forceinline__ void store_pack(T* p, const Pack<T, VEC>& v) {
  using Word = typename PackWord<sizeof(T) * VEC>::type;
  *reinterpret_cast<Word*>(p) = pack_word(v);
}

// A store of results this kernel never reads back (outputs, the backward's partial sums), marked
// evict-first (st.global.cs) so that its lines do not push out of L2 the gathered rows that other
// edges read again (hub rows of power-law graphs).
template <typename T, int VEC>
__device__ __forceinline__ void stream_pack(T* p, const Pack<T, VEC>& v) {
  using Word = typename PackWord<sizeof(T) * VEC>::type;
  __stcs(reinterpret_cast<Word*>(p), pack_word(v));
}

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

// Reduction codes (iognn::cpu::SegmentReduce values) in request order, passed by value to kernels.
struct ReduceList {
  int count;
  int8_t code[kMaxReduces];
};

inline ReduceList make_reduce_list(const std::vector<cpu::SegmentReduce>& reduces) {
  IOGNN_CHECK(!reduces.empty() && reduces.size() <= size_t(kMaxReduces), ValueError,
              "segment_reduce: between 1 and ", kMaxReduces, " reductions expected, got ",
              reduces.size());
  ReduceList list{int(reduces.size()), {}};
  for (size_t k = 0; k < reduces.size(); ++k) list.code[k] = int8_t(reduces[k]);
  return list;
}

}  // namespace iognn::cuda::sr

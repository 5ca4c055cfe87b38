// Small device helpers of the CUDA segment reductions: error checks, storage <-> accumulation
// conversions through the hardware instructions, packed (up to 16-byte) loads and stores, and
// arithmetic that the compiler may not contract into FMAs (so light rows round exactly as the host
// kernels do).
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

// Throws iognn::DeviceError naming the failed call unless it returned cudaSuccess.
#define IOGNN_SR_CUDA_CHECK(call)                                                     \
  do {                                                                                \
    const cudaError_t iognn_sr_err_ = (call);                                         \
    IOGNN_CHECK(iognn_sr_err_ == cudaSuccess, DeviceError, "CUDA error in ", #call, \
                ": ", cudaGetErrorString(iognn_sr_err_));                             \
  } while (0)

namespace iognn::cuda::sr {

// ---- conversions ------------------------------------------------------------------------------
__device__ __forceinline__ float to_acc(float v) { return v; }
__device__ __forceinline__ double to_acc(double v) { return v; }
__device__ __forceinline__ float to_acc(half_t v) { return __half2float(__ushort_as_half(v.bits)); }
__device__ __forceinline__ float to_acc(bf16_t v) {
  return __bfloat162float(__ushort_as_bfloat16(v.bits));
}

// Round-to-nearest-even, as core/numeric.h's store() does on the host.
template <typename T>
__device__ __forceinline__ T from_acc(acc_t<T> v) {
  if constexpr (std::is_same_v<T, half_t>) {
    return half_t{__half_as_ushort(__float2half_rn(v))};
  } else if constexpr (std::is_same_v<T, bf16_t>) {
    return bf16_t{__bfloat16_as_ushort(__float2bfloat16_rn(v))};
  } else {
    return v;
  }
}

// a * b rounded on its own (never fused with a following add), as the host computes it.
__device__ __forceinline__ float mul_rn(float a, float b) { return __fmul_rn(a, b); }
__device__ __forceinline__ double mul_rn(double a, double b) { return __dmul_rn(a, b); }

// ---- packed accesses ----------------------------------------------------------------------------
// VEC consecutive elements of T handled by one lane; sizeof(Pack) is 2, 4, 8 or 16 bytes and the
// address must be aligned to it (the host only picks VEC > 1 after checking pointers and strides).
template <typename T, int VEC>
struct Pack {
  T v[VEC];
};

template <int BYTES>
struct PackWord;
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

template <typename T, int VEC>
__device__ __forceinline__ void store_pack(T* p, const Pack<T, VEC>& v) {
  using Word = typename PackWord<sizeof(T) * VEC>::type;
  Word w;
  std::memcpy(&w, &v, sizeof w);
  *reinterpret_cast<Word*>(p) = w;
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

inline bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

}  // namespace iognn::cuda::sr

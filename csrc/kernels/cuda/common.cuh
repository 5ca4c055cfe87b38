// Shared helpers of the CUDA kernels: the core's error checks (core/cuda_check.h), conversions
// between the core storage types and their accumulation type, and 16-byte vector loads/stores.
//
// Storage types are the core's (float, double, half_t, bf16_t: see core/numeric.h); half_t and bf16_t
// are bit-compatible with __half and __nv_bfloat16, so device code converts them with the hardware
// intrinsics (round to nearest even, as the host conversion does).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "core/cuda_check.h"
#include "core/error.h"
#include "core/numeric.h"

namespace iognn::cuda {

// ---- scalar conversions ---------------------------------------------------------------------
__device__ __forceinline__ float to_acc(float v) { return v; }
__device__ __forceinline__ double to_acc(double v) { return v; }
__device__ __forceinline__ float to_acc(half_t v) { return __half2float(__ushort_as_half(v.bits)); }
__device__ __forceinline__ float to_acc(bf16_t v) {
  return __bfloat162float(__ushort_as_bfloat16(v.bits));
}

template <typename T>
__device__ __forceinline__ T from_acc(acc_t<T> v);
template <>
__device__ __forceinline__ float from_acc<float>(float v) { return v; }
template <>
__device__ __forceinline__ double from_acc<double>(double v) { return v; }
template <>
__device__ __forceinline__ half_t from_acc<half_t>(float v) {
  return half_t{__half_as_ushort(__float2half_rn(v))};
}
template <>
__device__ __forceinline__ bf16_t from_acc<bf16_t>(float v) {
  return bf16_t{__bfloat16_as_ushort(__float2bfloat16_rn(v))};
}

// ---- vector access --------------------------------------------------------------------------
// kVec<T>: elements of T in one 16-byte access (4 float, 2 double, 8 half/bf16).
template <typename T>
inline constexpr int kVec = int(16 / sizeof(T));

// Raw<T, N>: the registers holding N consecutive elements of T as loaded from memory, before
// conversion. N == 1 is a single element; N == kVec<T> is one 16-byte vector (uint4).
template <typename T, int N>
struct Raw {
  static_assert(N == 1 || N == kVec<T>, "Raw holds one element or one 16-byte vector");
  union {
    uint4 vec;
    T elem[kVec<T>];
  };
};

// Loads N consecutive elements at p through the read-only cache. For N > 1, p must be 16-byte
// aligned (the launchers check this before choosing a vector width).
template <typename T, int N>
__device__ __forceinline__ Raw<T, N> load_raw(const T* p) {
  Raw<T, N> r;
  if constexpr (N == 1) {
    if constexpr (sizeof(T) == 2) {
      r.elem[0].bits = __ldg(reinterpret_cast<const unsigned short*>(p));
    } else {
      r.elem[0] = __ldg(p);
    }
  } else {
    r.vec = __ldg(reinterpret_cast<const uint4*>(p));
  }
  return r;
}

template <typename T, int N>
__device__ __forceinline__ acc_t<T> raw_at(const Raw<T, N>& r, int k) {
  return to_acc(r.elem[k]);
}

// Stores N accumulator values at p converted to T (one 16-byte store for N > 1; p aligned).
template <typename T, int N>
__device__ __forceinline__ void store_acc(T* p, const acc_t<T> (&v)[N]) {
  if constexpr (N == 1) {
    *p = from_acc<T>(v[0]);
  } else {
    Raw<T, N> r;
#pragma unroll
    for (int k = 0; k < N; ++k) r.elem[k] = from_acc<T>(v[k]);
    *reinterpret_cast<uint4*>(p) = r.vec;
  }
}

inline bool is_aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

}  // namespace iognn::cuda

// Shared helpers of the CUDA kernels: the core's error checks (core/cuda_check.h), conversions
// between the core storage types and their accumulation type, products the compiler may not fuse
// into FMAs (so that light rows round as the host kernels do), and the packed (1- to 16-byte)
// loads and stores every CUDA family uses.
//
// Storage types are the core's (float, double, half_t, bf16_t: see core/numeric.h); half_t and bf16_t
// are bit-compatible with __half and __nv_bfloat16, so device code converts them with the hardware
// intrinsics (round to nearest even, as the host conversion does).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>

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

// a * b rounded on its own (never fused with a following add), as the host computes it.
__device__ __forceinline__ float mul_rn(float a, float b) { return __fmul_rn(a, b); }
__device__ __forceinline__ double mul_rn(double a, double b) { return __dmul_rn(a, b); }

// ---- vector access --------------------------------------------------------------------------
// kVec<T>: elements of T in one 16-byte access (4 float, 2 double, 8 half/bf16).
template <typename T>
inline constexpr int kVec = int(16 / sizeof(T));

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

inline bool is_aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

}  // namespace iognn::cuda

// Scalar storage types of the core and their accumulation types.
//
// Kernels are templated on a storage type T (float, double, half_t, bf16_t) and accumulate in
// acc_t<T> (float for the 16-bit types and float, double for double). half_t and bf16_t are plain
// 16-bit containers with round-to-nearest-even conversion, bit-compatible with at::Half,
// at::BFloat16, __half and __nv_bfloat16, so the binding can reinterpret tensor storage directly.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#if defined(__CUDACC__)
#define IOGNN_HD __host__ __device__ __forceinline__
#else
#define IOGNN_HD inline
#endif

namespace iognn {

struct half_t {
  uint16_t bits;
};
struct bf16_t {
  uint16_t bits;
};

namespace detail {
IOGNN_HD uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}
IOGNN_HD float bits_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}
}  // namespace detail

IOGNN_HD float to_float(float v) { return v; }
IOGNN_HD double to_float(double v) { return v; }

IOGNN_HD float to_float(bf16_t v) { return detail::bits_float(uint32_t(v.bits) << 16); }

IOGNN_HD float to_float(half_t v) {
  const uint32_t sign = uint32_t(v.bits & 0x8000u) << 16;
  const uint32_t exp = (v.bits >> 10) & 0x1fu;
  const uint32_t man = v.bits & 0x3ffu;
  if (exp == 0x1f) return detail::bits_float(sign | 0x7f800000u | (man << 13));  // inf / nan
  if (exp != 0) return detail::bits_float(sign | ((exp + 112u) << 23) | (man << 13));
  if (man == 0) return detail::bits_float(sign);
  // Subnormal half: value = man * 2^-24.
  const float mag = float(man) * 5.9604644775390625e-8f;
  return sign ? -mag : mag;
}

template <typename T>
IOGNN_HD T from_float(float v);

template <>
IOGNN_HD float from_float<float>(float v) { return v; }

template <typename T>
IOGNN_HD T from_double(double v) { return from_float<T>(float(v)); }
template <>
IOGNN_HD double from_double<double>(double v) { return v; }

template <>
IOGNN_HD bf16_t from_float<bf16_t>(float v) {
  uint32_t u = detail::float_bits(v);
  if ((u & 0x7fffffffu) > 0x7f800000u) return bf16_t{uint16_t((u >> 16) | 0x40u)};  // quiet nan
  u += 0x7fffu + ((u >> 16) & 1u);  // round to nearest even
  return bf16_t{uint16_t(u >> 16)};
}

template <>
IOGNN_HD half_t from_float<half_t>(float v) {
  const uint32_t u = detail::float_bits(v);
  const uint16_t sign = uint16_t((u >> 16) & 0x8000u);
  const uint32_t au = u & 0x7fffffffu;
  if (au > 0x7f800000u) return half_t{uint16_t(sign | 0x7e00u)};  // nan
  if (au >= 0x477ff000u) return half_t{uint16_t(sign | 0x7c00u)};  // overflow to inf (incl. rounding)
  if (au >= 0x38800000u) {                                          // normal half
    const uint32_t rounded = au + 0xfffu + ((au >> 13) & 1u);
    return half_t{uint16_t(sign | ((rounded - 0x38000000u) >> 13))};
  }
  // Subnormal or zero: scale so that one half ulp (2^-24) is one integer step, round to even.
  const float mag = detail::bits_float(au) * 16777216.0f;  // exact: power-of-two scaling
  float r = std::nearbyint(mag);
  return half_t{uint16_t(sign | uint16_t(r))};
}

// Accumulation type: fp32 for every storage type narrower than double.
template <typename T>
struct acc_type {
  using type = float;
};
template <>
struct acc_type<double> {
  using type = double;
};
template <typename T>
using acc_t = typename acc_type<T>::type;

template <typename T>
IOGNN_HD acc_t<T> load(const T* p) {
  return acc_t<T>(to_float(*p));
}
template <typename T>
IOGNN_HD void store(T* p, acc_t<T> v) {
  if constexpr (std::is_same_v<T, double>) {
    *p = v;
  } else {
    *p = from_float<T>(float(v));
  }
}

}  // namespace iognn

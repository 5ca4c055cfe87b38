// IOGNN_FOR_ALL_TYPES(M): expands M(T, index_t) for every storage type x index type the host kernels
// are instantiated for. Each kernel file instantiates its templates exactly once through this list.
#pragma once

#include <cstdint>

#include "core/numeric.h"

#define IOGNN_FOR_ALL_TYPES(M) \
  M(float, int32_t)            \
  M(float, int64_t)            \
  M(double, int32_t)           \
  M(double, int64_t)           \
  M(::iognn::half_t, int32_t)  \
  M(::iognn::half_t, int64_t)  \
  M(::iognn::bf16_t, int32_t)  \
  M(::iognn::bf16_t, int64_t)

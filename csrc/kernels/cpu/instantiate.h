// IOGNN_FOR_ALL_TYPES(M): expands M(T, index_t) for every storage type x index type the host kernels
// are instantiated for. Each kernel file instantiates its templates exactly once through this list.
// IOGNN_FOR_ALL_TYPES_WITH(M, args...) expands M(T, index_t, args...) instead, for an instantiation
// macro shared by several kernel files (the attention variants name their entry points this way).
#pragma once

#include <cstdint>

#include "core/numeric.h"

#define IOGNN_FOR_ALL_TYPES_WITH(M, ...)      \
  M(float, int32_t, __VA_ARGS__)              \
  M(float, int64_t, __VA_ARGS__)              \
  M(double, int32_t, __VA_ARGS__)             \
  M(double, int64_t, __VA_ARGS__)             \
  M(::iognn::half_t, int32_t, __VA_ARGS__)    \
  M(::iognn::half_t, int64_t, __VA_ARGS__)    \
  M(::iognn::bf16_t, int32_t, __VA_ARGS__)    \
  M(::iognn::bf16_t, int64_t, __VA_ARGS__)

#define IOGNN_APPLY_TO_TYPES(T, index_t, M) M(T, index_t)
#define IOGNN_FOR_ALL_TYPES(M) IOGNN_FOR_ALL_TYPES_WITH(IOGNN_APPLY_TO_TYPES, M)

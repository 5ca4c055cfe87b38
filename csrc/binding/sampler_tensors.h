// The sampler bindings' shared tensor handling (binding/sampler.cpp, binding/hetero_sampler.cpp):
// the optional per-node / per-edge / per-seed inputs' checks, the temporal strategy's parsing and
// the outputs' hand-over to tensors. The checks of the inputs' values are the kernels'
// (kernels/sampler_checks.h), which also name the optional inputs here.
#pragma once

#include <ATen/ATen.h>

#include <optional>
#include <utility>
#include <vector>

#include "binding/utils.h"
#include "kernels/sampler_checks.h"
#include "kernels/sampler_types.h"

namespace iognn::torch_ext {

// A 1-D tensor that takes over `values` without copying them.
template <typename T>
at::Tensor adopt(std::vector<T>&& values, const at::TensorOptions& options) {
  if (values.empty()) return at::empty({0}, options);
  auto* owner = new std::vector<T>(std::move(values));
  return at::from_blob(owner->data(), {int64_t(owner->size())},
                       [owner](void*) { delete owner; }, options);
}

// An optional per-node / per-edge / per-seed input: 1-D, of `dtype`, `size` entries, contiguous.
inline void check_optional_vector(const char* op, const std::optional<at::Tensor>& t,
                                  at::ScalarType dtype, int64_t size, const char* name,
                                  const char* what) {
  if (!t) return;
  check_dim(*t, 1, op, name);
  check_dtype(*t, dtype, op, name);
  check_size(*t, 0, size, op, name, what);
  TORCH_CHECK_VALUE(t->is_contiguous(), op, ": ", name, " must be contiguous");
}

// Weights with times: not supported, as pyg-lib does not support them (NotImplementedError, before
// the kernel's own ValueError for the same combination).
inline void check_not_weighted_temporal(const char* op, const OptionalInputNames& names,
                                        bool weight, bool time) {
  TORCH_CHECK_NOT_IMPLEMENTED(!(weight && time), op, ": weighted temporal sampling (", names.weight,
                              " with ", names.node_time, " / ", names.edge_time,
                              ") is not supported");
}

inline TemporalStrategy parse_temporal_strategy(const char* op, c10::string_view strategy) {
  if (strategy == "uniform") return TemporalStrategy::kUniform;
  TORCH_CHECK_VALUE(strategy == "last", op, ": temporal_strategy must be 'uniform' or 'last', got '",
                    strategy, "'");
  return TemporalStrategy::kLast;
}

}  // namespace iognn::torch_ext

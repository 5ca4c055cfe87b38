// Shared helpers of the PyTorch binding: argument checks that name the argument, dtype dispatch onto
// the core's storage types, and translation of core exceptions into Python exceptions.
#pragma once

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <string>
#include <type_traits>

#include "core/error.h"
#include "core/numeric.h"

namespace iognn::torch_ext {

// The Scope of every host backend of a binding (<family>_ops.h): a CPU call needs no device guard
// or stream.
struct HostScope {
  explicit HostScope(const at::Tensor&) {}
};

// The backend of every family's Meta kernels (binding/meta.cpp), which
// torch.compile and FakeTensorMode run on tensors without data, their sizes possibly symbolic:
// the op bodies (<family>_ops.h) return the outputs, allocated by the same shape functions as the
// real outputs, and skip the checks (the real call makes them) and the kernels.
struct MetaBackend {};
template <class Backend>
inline constexpr bool is_meta_v = std::is_same_v<Backend, MetaBackend>;

// Shape functions read sizes through sym_size / sym_numel and allocate with *_symint: the same
// code sizes the real outputs (concrete sizes) and the Meta kernels' (symbolic ones under
// torch.compile).

// [offsets.numel() - 1, F] like `features` [*, F]: one row per row of a CSR (or its transpose).
inline at::Tensor empty_csr_rows(const at::Tensor& offsets, const at::Tensor& features) {
  return at::empty_symint({offsets.sym_numel() - 1, features.sym_size(1)}, features.options());
}

template <typename T>
struct type_tag {
  using type = T;
};

// Calls fn(type_tag<T>{}) with T the core storage type of `dtype` (float, double, half_t, bf16_t).
template <typename Fn>
void dispatch_float(at::ScalarType dtype, const char* op, Fn&& fn) {
  switch (dtype) {
    case at::kFloat: return fn(type_tag<float>{});
    case at::kDouble: return fn(type_tag<double>{});
    case at::kHalf: return fn(type_tag<half_t>{});
    case at::kBFloat16: return fn(type_tag<bf16_t>{});
    default: TORCH_CHECK_TYPE(false, op, ": unsupported feature dtype ", dtype,
                              " (expected float32, float64, float16 or bfloat16)");
  }
}

// Calls fn(type_tag<I>{}) with I = int32_t or int64_t.
template <typename Fn>
void dispatch_index(at::ScalarType dtype, const char* op, Fn&& fn) {
  switch (dtype) {
    case at::kInt: return fn(type_tag<int32_t>{});
    case at::kLong: return fn(type_tag<int64_t>{});
    default: TORCH_CHECK_TYPE(false, op, ": graph index tensors must be int32 or int64, got ", dtype);
  }
}

// Calls fn(type_tag<T>{}, type_tag<I>{}) with T the core storage type of the float dtype `x` and
// I that of the index dtype `index`.
template <typename Fn>
void dispatch_float_index(at::ScalarType x, at::ScalarType index, const char* op, Fn&& fn) {
  dispatch_float(x, op, [&](auto ft) { dispatch_index(index, op, [&](auto it) { fn(ft, it); }); });
}

// Pointer to a tensor's storage reinterpreted as the core type T.
template <typename T>
T* ptr(const at::Tensor& t) {
  return reinterpret_cast<T*>(t.data_ptr());
}
template <typename T>
const T* cptr(const at::Tensor& t) {
  return reinterpret_cast<const T*>(t.data_ptr());
}
template <typename T>
const T* optional_cptr(const std::optional<at::Tensor>& t) {
  return t.has_value() ? cptr<T>(*t) : nullptr;
}

// The dtype edge weights and statistics are kept in for features of dtype `x`: fp32, or fp64 for fp64.
inline at::ScalarType acc_dtype(at::ScalarType x) {
  return x == at::kDouble ? at::kDouble : at::kFloat;
}

// Runs fn, converting core exceptions into the matching c10 errors (IndexError, ValueError, ...).
template <typename Fn>
auto translate_errors(Fn&& fn) -> decltype(fn()) {
  try {
    return fn();
  } catch (const iognn::IndexError& e) {
    TORCH_CHECK_INDEX(false, e.what());
  } catch (const iognn::ValueError& e) {
    TORCH_CHECK_VALUE(false, e.what());
  } catch (const iognn::DeviceError& e) {
    TORCH_CHECK(false, e.what());
  }
}

// Argument checks. `op` and `name` appear in the message: "iognn::propagate: x must be ...".
void check_index_vector(const at::Tensor& t, const char* op, const char* name, int64_t size = -1);
void check_same_index_dtype(const at::Tensor& a, const at::Tensor& b, const char* op,
                            const char* name);
void check_device(const at::Tensor& t, const at::Tensor& ref, const char* op, const char* name,
                  const char* ref_name);
// edge_index must be an int32/int64 tensor of shape [2, E] (any strides).
void check_edge_index(const at::Tensor& edge_index, const char* op);
void check_dim(const at::Tensor& t, int64_t dim, const char* op, const char* name);
void check_size(const at::Tensor& t, int64_t d, int64_t size, const char* op, const char* name,
                const char* what);
void check_dtype(const at::Tensor& t, at::ScalarType dtype, const char* op, const char* name);

// Returns t with a unit stride in its last dimension (a copy only when it does not have one).
at::Tensor last_dim_contiguous(const at::Tensor& t);

}  // namespace iognn::torch_ext

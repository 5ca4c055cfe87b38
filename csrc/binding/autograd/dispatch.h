// Helpers of the C++ autograd formulas (binding/autograd/*.cpp): typed handles of iognn::* ops
// (called below the Autograd key, so the CPU / CUDA / fake implementations run), conversions
// between optional arguments and the undefined tensors autograd saves for absent ones, and
// reductions the formulas share.
#pragma once

#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/autograd.h>

#include <optional>

namespace iognn::torch_ext {

// The typed handle of the op `name` ("iognn::<op>", overload ""), looked up once per call site.
template <typename Signature>
c10::TypedOperatorHandle<Signature> typed_op(const char* name) {
  return c10::Dispatcher::singleton().findSchemaOrThrow(name, "").typed<Signature>();
}

// The Autograd kernel of a torch::autograd::Function F: F::apply over the arguments of F::forward
// after the context (register &AutogradKernel<F>::call; no hand-written wrapper).
template <class F, class Signature = decltype(F::forward)>
struct AutogradKernel;
template <class F, class R, class... Args>
struct AutogradKernel<F, R(torch::autograd::AutogradContext*, Args...)> {
  static R call(Args... args) { return F::apply(std::forward<Args>(args)...); }
};

// An optional argument as a tensor to save (undefined when absent), and back.
inline at::Tensor value_or_undefined(const at::Tensor& t) { return t; }
inline at::Tensor value_or_undefined(const std::optional<at::Tensor>& t) {
  return t.has_value() ? *t : at::Tensor();
}
inline std::optional<at::Tensor> optional_of(const at::Tensor& t) {
  return t.defined() ? std::optional<at::Tensor>(t) : std::nullopt;
}

// t.sum(0) of a 2-D tensor. On CUDA in fp32 / fp64, from kMvColumnSumElements elements on, as a
// matrix-vector product with ones: cuBLAS reads the [N, F] rows about twice as fast as the
// generic reduction, deterministic run to run like it; below,
// the reduction's single launch is cheaper than filling the ones and the product. 16-bit dtypes
// keep the reduction, whose accumulation stays in fp32 whatever the cuBLAS settings.
inline constexpr int64_t kMvColumnSumElements = int64_t(1) << 20;
inline at::Tensor column_sum(const at::Tensor& t) {
  if (t.is_cuda() && (t.scalar_type() == at::kFloat || t.scalar_type() == at::kDouble) &&
      TORCH_GUARD_OR_TRUE(t.sym_numel() >= kMvColumnSumElements))
    return at::mv(t.t(), at::ones_symint({t.sym_size(0)}, t.options()));  // symbolic: compile
  return t.sum(0);
}

}  // namespace iognn::torch_ext

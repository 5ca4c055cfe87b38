// iognn attention family (GAT, GATv2, Graph Transformer): schemas and the host backend. The op
// bodies (checks, outputs, dispatch) are binding/attention_ops.h, shared with the CUDA backend
// (binding/cuda/attention.cpp); the argument checks are attention_checks.h. Math and
// conventions: csrc/kernels/attention_types.h and csrc/kernels/cpu/attention_common.h.
//
// Every forward takes the whole graph (rowptr, col, eid, colptr, row, csc2csr) so the autograd
// formula (binding/autograd/attention.cpp) can hand the transposed CSR to the backward op, and
// returns
//   (out [num_dst, H, C], lse [num_dst, H] fp32 (fp64 for fp64), alpha [E', H] or [0, H]).
// Each backward recomputes the attention from lse and returns one gradient per tensor input; the
// gradient of an absent optional input is an empty tensor.
// All float tensors share one dtype; node tensors may have any row stride (the other dimensions are
// made dense, copying only when they are not); edge_attr [E', De] is in augmented edge order.
#include <ATen/ATen.h>
#include <torch/library.h>

#include <type_traits>

#include "binding/attention_ops.h"
#include "kernels/cpu/gat.h"
#include "kernels/cpu/gatv2.h"
#include "kernels/cpu/transformer.h"

namespace iognn::torch_ext {
namespace {

using namespace attention;

// The host kernels (kernels/cpu/) of each variant, picked by its Inputs type.
struct CpuAttention {
  using Scope = HostScope;

  template <typename T, typename I, class Inputs>
  static void forward(const Scope&, const AttentionGraph<I>& g, const AttentionConfig& cfg,
                      int64_t, const Inputs& in, const AttentionOutputs<T>& out) {
    if constexpr (std::is_same_v<Inputs, GatInputs<T>>) cpu::gat_forward<T, I>(g, cfg, in, out);
    if constexpr (std::is_same_v<Inputs, GatV2Inputs<T>>) cpu::gatv2_forward<T, I>(g, cfg, in, out);
    if constexpr (std::is_same_v<Inputs, TransformerInputs<T>>)
      cpu::transformer_forward<T, I>(g, cfg, in, out);
  }

  template <typename T, typename I, class Inputs>
  static void backward(const Scope&, const AttentionGraph<I>& g, const AttentionConfig& cfg,
                       int64_t, const Inputs& in, const acc_t<T>* lse, const T* grad_out,
                       const T* grad_alpha, const typename Inputs::Grads& grads) {
    if constexpr (std::is_same_v<Inputs, GatInputs<T>>)
      cpu::gat_backward<T, I>(g, cfg, in, lse, grad_out, grad_alpha, grads);
    if constexpr (std::is_same_v<Inputs, GatV2Inputs<T>>)
      cpu::gatv2_backward<T, I>(g, cfg, in, lse, grad_out, grad_alpha, grads);
    if constexpr (std::is_same_v<Inputs, TransformerInputs<T>>)
      cpu::transformer_backward<T, I>(g, cfg, in, lse, grad_out, grad_alpha, grads);
  }
};

}  // namespace

TORCH_LIBRARY_FRAGMENT(iognn, m) {
  m.def(
      "gat_attention(Tensor rowptr, Tensor col, Tensor eid, Tensor colptr, Tensor row, "
      "Tensor csc2csr, Tensor x, Tensor alpha_src, Tensor? alpha_dst, Tensor? edge_attr, "
      "Tensor? w_edge, float negative_slope, float dropout, SymInt seed, bool return_alpha, "
      "SymInt max_in_degree=-1, SymInt max_out_degree=-1) -> "
      "(Tensor out, Tensor lse, Tensor alpha)");
  m.def(
      "gat_attention_backward(Tensor rowptr, Tensor col, Tensor eid, Tensor colptr, Tensor row, "
      "Tensor csc2csr, Tensor x, Tensor alpha_src, Tensor? alpha_dst, Tensor? edge_attr, "
      "Tensor? w_edge, Tensor lse, Tensor grad_out, Tensor? grad_alpha, float negative_slope, "
      "float dropout, SymInt seed, SymInt max_in_degree=-1, SymInt max_out_degree=-1) -> "
      "(Tensor grad_x, Tensor grad_alpha_src, "
      "Tensor grad_alpha_dst, Tensor grad_edge_attr, Tensor grad_w_edge)");
  m.def(
      "gatv2_attention(Tensor rowptr, Tensor col, Tensor eid, Tensor colptr, Tensor row, "
      "Tensor csc2csr, Tensor x_src, Tensor x_dst, Tensor att, Tensor? edge_attr, "
      "Tensor? w_edge, float negative_slope, float dropout, SymInt seed, bool return_alpha, "
      "SymInt max_in_degree=-1, SymInt max_out_degree=-1) -> "
      "(Tensor out, Tensor lse, Tensor alpha)");
  m.def(
      "gatv2_attention_backward(Tensor rowptr, Tensor col, Tensor eid, Tensor colptr, "
      "Tensor row, Tensor csc2csr, Tensor x_src, Tensor x_dst, Tensor att, Tensor? edge_attr, "
      "Tensor? w_edge, Tensor lse, Tensor grad_out, Tensor? grad_alpha, float negative_slope, "
      "float dropout, SymInt seed, SymInt max_in_degree=-1, SymInt max_out_degree=-1) -> "
      "(Tensor grad_x_src, Tensor grad_x_dst, Tensor grad_att, "
      "Tensor grad_edge_attr, Tensor grad_w_edge)");
  m.def(
      "transformer_attention(Tensor rowptr, Tensor col, Tensor eid, Tensor colptr, Tensor row, "
      "Tensor csc2csr, Tensor query, Tensor key, Tensor value, Tensor? edge_attr, "
      "Tensor? w_edge, float scale, float dropout, SymInt seed, bool return_alpha, "
      "SymInt max_in_degree=-1, SymInt max_out_degree=-1) -> "
      "(Tensor out, Tensor lse, Tensor alpha)");
  m.def(
      "transformer_attention_backward(Tensor rowptr, Tensor col, Tensor eid, Tensor colptr, "
      "Tensor row, Tensor csc2csr, Tensor query, Tensor key, Tensor value, Tensor? edge_attr, "
      "Tensor? w_edge, Tensor lse, Tensor grad_out, Tensor? grad_alpha, float scale, "
      "float dropout, SymInt seed, SymInt max_in_degree=-1, SymInt max_out_degree=-1) -> "
      "(Tensor grad_query, Tensor grad_key, Tensor grad_value, "
      "Tensor grad_edge_attr, Tensor grad_w_edge)");
}

TORCH_LIBRARY_IMPL(iognn, CPU, m) { attention::register_attention<CpuAttention>(m); }

}  // namespace iognn::torch_ext

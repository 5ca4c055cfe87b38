// The tile path of the attention (Transformer, GAT, GATv2): schemas, the host backend and the Meta
// kernels. Op bodies: binding/attention_tiles_ops.h; contract: kernels/attention_tiles_types.h;
// the CUDA backend: binding/cuda/attention_tiles.cpp; autograd and the choice of path:
// python/iognn/ops/attention_tiles.py.
#include <torch/library.h>

#include "binding/attention_tiles_ops.h"
#include "kernels/cpu/attention_tiles.h"

namespace iognn::torch_ext {
namespace {

// Every variant's arguments (kernels/attention_tiles_types.h) go to their host twin's overload.
struct CpuAttentionTiles {
  using Scope = HostScope;
  template <typename T, typename I, class Args>
  static void forward(const Scope&, const Args& a, const char*) {
    cpu::tiles_forward(a);
  }
  template <typename T, typename I, class Args>
  static void backward(const Scope&, const Args& a, const char*) {
    cpu::tiles_backward(a);
  }
};

}  // namespace

TORCH_LIBRARY_FRAGMENT(iognn, m) {
  m.def(
      "transformer_tiles_forward(Tensor window_ptr, Tensor tile_cols, Tensor? row_order, "
      "Tensor counts, Tensor query, Tensor key, Tensor value, float scale) -> "
      "(Tensor out, Tensor lse)");
  m.def(
      "transformer_tiles_backward(Tensor window_ptr, Tensor tile_cols, Tensor? row_order, "
      "Tensor counts, Tensor window_ptr_t, Tensor tile_cols_t, Tensor? row_order_t, "
      "Tensor counts_t, Tensor query, Tensor key, Tensor value, Tensor out, Tensor lse, "
      "Tensor grad_out, float scale) -> (Tensor grad_query, Tensor grad_key, Tensor grad_value)");
  m.def(
      "gat_tiles_forward(Tensor window_ptr, Tensor tile_cols, Tensor? row_order, Tensor counts, "
      "Tensor x, Tensor alpha_src, Tensor? alpha_dst, SymInt num_dst, float negative_slope) -> "
      "(Tensor out, Tensor lse)");
  m.def(
      "gat_tiles_backward(Tensor window_ptr, Tensor tile_cols, Tensor? row_order, "
      "Tensor counts, Tensor window_ptr_t, Tensor tile_cols_t, Tensor? row_order_t, "
      "Tensor counts_t, Tensor x, Tensor alpha_src, Tensor? alpha_dst, Tensor out, Tensor lse, "
      "Tensor grad_out, float negative_slope) -> (Tensor grad_x, Tensor grad_alpha_src, "
      "Tensor grad_alpha_dst)");
  m.def(
      "gatv2_tiles_forward(Tensor window_ptr, Tensor tile_cols, Tensor? row_order, "
      "Tensor counts, Tensor x_src, Tensor x_dst, Tensor att, float negative_slope) -> "
      "(Tensor out, Tensor lse)");
  m.def(
      "gatv2_tiles_backward(Tensor window_ptr, Tensor tile_cols, Tensor? row_order, "
      "Tensor counts, Tensor window_ptr_t, Tensor tile_cols_t, Tensor? row_order_t, "
      "Tensor counts_t, Tensor x_src, Tensor x_dst, Tensor att, Tensor out, Tensor lse, "
      "Tensor grad_out, float negative_slope) -> (Tensor grad_x_src, Tensor grad_x_dst, "
      "Tensor grad_att)");
}

TORCH_LIBRARY_IMPL(iognn, CPU, m) {
  attention_tiles::register_attention_tiles<CpuAttentionTiles>(m);
}

TORCH_LIBRARY_IMPL(iognn, Meta, m) {
  attention_tiles::register_attention_tiles<MetaBackend>(m);
}

}  // namespace iognn::torch_ext

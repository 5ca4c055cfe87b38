// The tile-path ops of the attention (Transformer, GAT; contract: kernels/attention_tiles_types.h),
// written once for every backend; schemas in binding/attention_tiles.cpp.
//
//   transformer_tiles_forward(window_ptr, tile_cols, row_order?, counts, query, key, value, scale)
//       -> (out [num_dst, H, C], lse [num_dst, H] fp32, fp64 for fp64)
//   transformer_tiles_backward(window_ptr, tile_cols, row_order?, counts,
//                              window_ptr_t, tile_cols_t, row_order_t?, counts_t,
//                              query, key, value, out, lse, grad_out, scale)
//       -> (grad_query, grad_key, grad_value)
//   gat_tiles_forward(window_ptr, tile_cols, row_order?, counts, x, alpha_src, alpha_dst?, num_dst,
//                     negative_slope) -> (out [num_dst, H, C], lse [num_dst, H])
//   gat_tiles_backward(<both layouts as above>, x, alpha_src, alpha_dst?, out, lse, grad_out,
//                      negative_slope) -> (grad_x, grad_alpha_src, grad_alpha_dst ([0, H] without
//                      alpha_dst))
// The first layout is the destination-major one (iognn.graph.tile_layout(graph)), the `_t` one the
// transposed (tile_layout(graph, transposed=True)); counts are the pair multiplicities of each
// layout's slots, in the accumulation dtype. The layouts' contents (offsets, column ids) are
// trusted: tile_layout built them from a validated Graph; their shapes, dtypes and devices are
// checked. A Backend provides, besides its Scope,
//   template <typename T, typename I, class Args> static void forward(const Scope&, const Args&, const char* op);
//   template <typename T, typename I, class Args> static void backward(const Scope&, const Args&, const char* op);
// for the arguments of every variant (TileAttention*, GatTile*), op naming the op in messages.
#pragma once

#include <ATen/ATen.h>
#include <torch/library.h>

#include <tuple>

#include "binding/attention_checks.h"
#include "binding/utils.h"
#include "core/tiles.h"
#include "kernels/attention_tiles_types.h"

namespace iognn::torch_ext::attention_tiles {

using attention::OptTensor;
using attention::Tensor;

// One layout's tensors and the names the messages give them.
struct LayoutArgs {
  const Tensor& window_ptr;
  const Tensor& tile_cols;
  const OptTensor& row_order;
  const Tensor& counts;
  const char* names[4];
};

inline void check_layout(const char* op, const LayoutArgs& L, int64_t num_rows, const Tensor& ref,
                         const char* ref_name = "query") {
  const auto& [window_ptr, tile_cols, row_order, counts, names] = L;
  TORCH_CHECK_TYPE(window_ptr.scalar_type() == at::kLong, op, ": ", names[0],
                   " must be int64, got ", window_ptr.scalar_type());
  check_dim(window_ptr, 1, op, names[0]);
  check_size(window_ptr, 0, num_tile_windows(num_rows) + 1, op, names[0],
             "entries (one per row window, plus one)");
  check_dim(tile_cols, 2, op, names[1]);
  check_size(tile_cols, 1, kTileCols, op, names[1], "columns");
  dispatch_index(tile_cols.scalar_type(), op, [](auto) {});
  TORCH_CHECK_VALUE(tile_cols.is_contiguous(), op, ": ", names[1], " must be contiguous");
  if (row_order) {
    check_index_vector(*row_order, op, names[2], num_rows);
    check_same_index_dtype(tile_cols, *row_order, op, names[2]);
    check_device(*row_order, ref, op, names[2], ref_name);
  }
  check_dim(counts, 1, op, names[3]);
  check_size(counts, 0, tile_cols.size(0) * kTileSlots, op, names[3], "entries (128 per tile)");
  check_dtype(counts, acc_dtype(ref.scalar_type()), op, names[3]);
  TORCH_CHECK_VALUE(counts.is_contiguous(), op, ": ", names[3], " must be contiguous");
  check_device(window_ptr, ref, op, names[0], ref_name);
  check_device(tile_cols, ref, op, names[1], ref_name);
  check_device(counts, ref, op, names[3], ref_name);
}

inline LayoutArgs forward_layout(const Tensor& window_ptr, const Tensor& tile_cols,
                                 const OptTensor& row_order, const Tensor& counts) {
  return {window_ptr, tile_cols, row_order, counts,
          {"window_ptr", "tile_cols", "row_order", "counts"}};
}
inline LayoutArgs transposed_layout(const Tensor& window_ptr, const Tensor& tile_cols,
                                    const OptTensor& row_order, const Tensor& counts) {
  return {window_ptr, tile_cols, row_order, counts,
          {"window_ptr_t", "tile_cols_t", "row_order_t", "counts_t"}};
}

// The backward's layouts and saved tensors: out and grad_out [num_dst, H, C], lse [num_dst, H]
// like the forward's, against the reference features ref.
inline void check_backward(const char* op, const LayoutArgs& L, const LayoutArgs& Lt,
                           int64_t num_dst, int64_t num_src, int64_t H, int64_t C,
                           const Tensor& out, const Tensor& lse, const Tensor& grad_out,
                           const Tensor& ref, const char* ref_name) {
  check_layout(op, L, num_dst, ref, ref_name);
  check_layout(op, Lt, num_src, ref, ref_name);
  check_same_index_dtype(L.tile_cols, Lt.tile_cols, op, "tile_cols_t");
  for (const auto& [t, name] : {std::pair{&out, "out"}, std::pair{&grad_out, "grad_out"}})
    attention::check_float_tensor(op, name, *t, {num_dst, H, C},
                                  {"rows (destination nodes)", "heads", "channels"}, ref,
                                  ref_name);
  check_dim(lse, 2, op, "lse");
  check_size(lse, 0, num_dst, op, "lse", "rows (destination nodes)");
  check_size(lse, 1, H, op, "lse", "heads");
  check_dtype(lse, acc_dtype(ref.scalar_type()), op, "lse");
  check_device(lse, ref, op, "lse", ref_name);
}

// out [num_dst, H, C] like the features ref and lse [num_dst, H] in the accumulation dtype.
inline std::tuple<Tensor, Tensor> forward_outputs(const Tensor& ref, const c10::SymInt& num_dst) {
  return {at::empty_symint({num_dst, ref.sym_size(1), ref.sym_size(2)}, ref.options()),
          at::empty_symint({num_dst, ref.sym_size(1)},
                           ref.options().dtype(acc_dtype(ref.scalar_type())))};
}

// query [num_dst, H, C], key and value [num_src, H, C]: one dtype and device; returns (H, C).
inline std::pair<int64_t, int64_t> check_qkv(const char* op, const Tensor& query,
                                             const Tensor& key, const Tensor& value) {
  const auto [H, C] = attention::heads_channels(op, "query", query);
  check_dim(key, 3, op, "key");
  for (const auto& [t, name] : {std::pair{&key, "key"}, std::pair{&value, "value"}})
    attention::check_float_tensor(op, name, *t, {key.size(0), H, C},
                                  {"rows (source nodes)", "heads", "channels"}, query, "query");
  return {H, C};
}

template <typename acc, typename I>
TileLayoutView<acc, I> layout_view(const LayoutArgs& L, int64_t num_rows) {
  return {cptr<int64_t>(L.window_ptr), cptr<I>(L.tile_cols), optional_cptr<I>(L.row_order),
          cptr<acc>(L.counts), num_rows};
}

template <typename T>
NodeRows<T> rows_of(const Tensor& t) {
  return {cptr<T>(t), t.stride(0)};
}
template <typename T>
NodeRows<T> optional_rows_of(const OptTensor& t) {
  return t ? rows_of<T>(*t) : NodeRows<T>{};
}

inline at::Tensor empty_like_rows(const Tensor& t) {
  return at::empty_symint({t.sym_size(0), t.sym_size(1), t.sym_size(2)}, t.options());
}

// Runs Backend's forward on Args<T, I>, T the dtype of the features ref and I that of the
// layout's column ids: the fields every variant shares (TileForwardArgs) from the layout and the
// outputs, the variant's own set by fill(float_tag, args).
template <class Backend, template <typename, typename> class Args, class Fill>
void run_forward(const typename Backend::Scope& scope, const char* op, const Tensor& ref,
                 const LayoutArgs& L, int64_t num_dst, int64_t H, int64_t C, const Tensor& out,
                 const Tensor& lse, Fill&& fill) {
  dispatch_float_index(ref.scalar_type(), L.tile_cols.scalar_type(), op, [&](auto ft, auto it) {
    using T = typename decltype(ft)::type;
    using I = typename decltype(it)::type;
    Args<T, I> a{};
    static_cast<TileForwardArgs<T, I>&>(a) = {layout_view<acc_t<T>, I>(L, num_dst), H, C,
                                              ptr<T>(out), ptr<acc_t<T>>(lse)};
    fill(ft, a);
    Backend::template forward<T, I>(scope, a, op);
  });
}

// The backward's counterpart: TileBackwardArgs from both layouts, the saved out, lse and grad_out
// (made contiguous) and a delta scratch.
template <class Backend, template <typename, typename> class Args, class Fill>
void run_backward(const typename Backend::Scope& scope, const char* op, const Tensor& ref,
                  const LayoutArgs& L, const LayoutArgs& Lt, int64_t num_dst, int64_t num_src,
                  int64_t H, int64_t C, const Tensor& out_in, const Tensor& lse_in,
                  const Tensor& grad_out_in, Fill&& fill) {
  const Tensor out = out_in.contiguous(), lse = lse_in.contiguous(),
               grad_out = grad_out_in.contiguous();
  Tensor delta = at::empty({num_dst, H}, lse.options());
  dispatch_float_index(ref.scalar_type(), L.tile_cols.scalar_type(), op, [&](auto ft, auto it) {
    using T = typename decltype(ft)::type;
    using I = typename decltype(it)::type;
    using acc = acc_t<T>;
    Args<T, I> a{};
    static_cast<TileBackwardArgs<T, I>&>(a) = {
        layout_view<acc, I>(L, num_dst), layout_view<acc, I>(Lt, num_src), cptr<T>(out),
        cptr<T>(grad_out), cptr<acc>(lse), H, C, ptr<acc>(delta)};
    fill(ft, a);
    Backend::template backward<T, I>(scope, a, op);
  });
}

// The Transformer's inputs and scale, in its forward's or backward's arguments (float tag ft).
template <class FloatTag, class Args>
void set_transformer_inputs(FloatTag, Args& a, const Tensor& query, const Tensor& key,
                            const Tensor& value, double scale) {
  using T = typename FloatTag::type;
  a.query = rows_of<T>(query);
  a.key = rows_of<T>(key);
  a.value = rows_of<T>(value);
  a.scale = scale;
}

template <class Backend>
struct TransformerTileOps {
  static std::tuple<Tensor, Tensor> forward(const Tensor& window_ptr, const Tensor& tile_cols,
                                            const OptTensor& row_order, const Tensor& counts,
                                            const Tensor& query_in, const Tensor& key_in,
                                            const Tensor& value_in, double scale) {
    constexpr const char* op = "iognn::transformer_tiles_forward";
    auto outputs = [&] { return forward_outputs(query_in, query_in.sym_size(0)); };
    if constexpr (is_meta_v<Backend>) {
      return outputs();
    } else {
      const auto hc = check_qkv(op, query_in, key_in, value_in);
      const int64_t H = hc.first, C = hc.second;
      const int64_t num_dst = query_in.size(0);
      const LayoutArgs L = forward_layout(window_ptr, tile_cols, row_order, counts);
      check_layout(op, L, num_dst, query_in);
      Tensor out, lse;
      std::tie(out, lse) = outputs();
      if (num_dst == 0) return {out, lse};
      const typename Backend::Scope scope(query_in);
      const Tensor query = attention::dense_rows(query_in), key = attention::dense_rows(key_in),
                   value = attention::dense_rows(value_in);
      run_forward<Backend, TileAttentionForward>(
          scope, op, query, L, num_dst, H, C, out, lse,
          [&](auto ft, auto& a) { set_transformer_inputs(ft, a, query, key, value, scale); });
      return {out, lse};
    }
  }

  static std::tuple<Tensor, Tensor, Tensor> backward(
      const Tensor& window_ptr, const Tensor& tile_cols, const OptTensor& row_order,
      const Tensor& counts, const Tensor& window_ptr_t, const Tensor& tile_cols_t,
      const OptTensor& row_order_t, const Tensor& counts_t, const Tensor& query_in,
      const Tensor& key_in, const Tensor& value_in, const Tensor& out_in, const Tensor& lse_in,
      const Tensor& grad_out_in, double scale) {
    constexpr const char* op = "iognn::transformer_tiles_backward";
    auto outputs = [&] {
      return std::tuple{empty_like_rows(query_in), empty_like_rows(key_in),
                        empty_like_rows(value_in)};
    };
    if constexpr (is_meta_v<Backend>) {
      return outputs();
    } else {
      const auto hc = check_qkv(op, query_in, key_in, value_in);
      const int64_t H = hc.first, C = hc.second;
      const int64_t num_dst = query_in.size(0), num_src = key_in.size(0);
      const LayoutArgs L = forward_layout(window_ptr, tile_cols, row_order, counts);
      const LayoutArgs Lt = transposed_layout(window_ptr_t, tile_cols_t, row_order_t, counts_t);
      check_backward(op, L, Lt, num_dst, num_src, H, C, out_in, lse_in, grad_out_in, query_in,
                     "query");
      Tensor grad_query, grad_key, grad_value;
      std::tie(grad_query, grad_key, grad_value) = outputs();
      if (num_dst == 0 && num_src == 0) return {grad_query, grad_key, grad_value};
      const typename Backend::Scope scope(query_in);
      const Tensor query = attention::dense_rows(query_in), key = attention::dense_rows(key_in),
                   value = attention::dense_rows(value_in);
      run_backward<Backend, TileAttentionBackward>(
          scope, op, query, L, Lt, num_dst, num_src, H, C, out_in, lse_in, grad_out_in,
          [&](auto ft, auto& a) {
            using T = typename decltype(ft)::type;
            set_transformer_inputs(ft, a, query, key, value, scale);
            a.grad_query = ptr<T>(grad_query);
            a.grad_key = ptr<T>(grad_key);
            a.grad_value = ptr<T>(grad_value);
          });
      return {grad_query, grad_key, grad_value};
    }
  }
};

// x [num_src, H, C], alpha_src [num_src, H], alpha_dst [num_dst, H] or absent: one dtype and
// device; returns (H, C).
inline std::pair<int64_t, int64_t> check_gat_inputs(const char* op, const Tensor& x,
                                                    const Tensor& alpha_src,
                                                    const OptTensor& alpha_dst, int64_t num_dst) {
  const auto [H, C] = attention::heads_channels(op, "x", x);
  attention::check_float_tensor(op, "alpha_src", alpha_src, {x.size(0), H},
                                {"rows (source nodes)", "heads"}, x, "x");
  if (alpha_dst)
    attention::check_float_tensor(op, "alpha_dst", *alpha_dst, {num_dst, H},
                                  {"rows (destination nodes)", "heads"}, x, "x");
  return {H, C};
}

// GAT's inputs and negative slope, in its forward's or backward's arguments.
template <class FloatTag, class Args>
void set_gat_inputs(FloatTag, Args& a, const Tensor& x, const Tensor& alpha_src,
                    const OptTensor& alpha_dst, double negative_slope) {
  using T = typename FloatTag::type;
  a.x = rows_of<T>(x);
  a.a_src = rows_of<T>(alpha_src);
  a.a_dst = optional_rows_of<T>(alpha_dst);
  a.negative_slope = negative_slope;
}

template <class Backend>
struct GatTileOps {
  static std::tuple<Tensor, Tensor> forward(const Tensor& window_ptr, const Tensor& tile_cols,
                                            const OptTensor& row_order, const Tensor& counts,
                                            const Tensor& x_in, const Tensor& alpha_src_in,
                                            const OptTensor& alpha_dst_in,
                                            int64_t num_dst, double negative_slope) {
    constexpr const char* op = "iognn::gat_tiles_forward";
    if constexpr (is_meta_v<Backend>) {
      return forward_outputs(x_in, num_dst);
    } else {
      TORCH_CHECK_VALUE(num_dst >= 0, op, ": num_dst must be >= 0, got ", num_dst);
      const auto hc = check_gat_inputs(op, x_in, alpha_src_in, alpha_dst_in, num_dst);
      const int64_t H = hc.first, C = hc.second;
      const LayoutArgs L = forward_layout(window_ptr, tile_cols, row_order, counts);
      check_layout(op, L, num_dst, x_in, "x");
      Tensor out, lse;
      std::tie(out, lse) = forward_outputs(x_in, num_dst);
      if (num_dst == 0) return {out, lse};
      const typename Backend::Scope scope(x_in);
      const Tensor x = attention::dense_rows(x_in), alpha_src = attention::dense_rows(alpha_src_in);
      const OptTensor alpha_dst = attention::dense_rows(alpha_dst_in);
      run_forward<Backend, GatTileForward>(
          scope, op, x, L, num_dst, H, C, out, lse,
          [&](auto ft, auto& a) {
            set_gat_inputs(ft, a, x, alpha_src, alpha_dst, negative_slope);
          });
      return {out, lse};
    }
  }

  static std::tuple<Tensor, Tensor, Tensor> backward(
      const Tensor& window_ptr, const Tensor& tile_cols, const OptTensor& row_order,
      const Tensor& counts, const Tensor& window_ptr_t, const Tensor& tile_cols_t,
      const OptTensor& row_order_t, const Tensor& counts_t, const Tensor& x_in,
      const Tensor& alpha_src_in, const OptTensor& alpha_dst_in, const Tensor& out_in,
      const Tensor& lse_in, const Tensor& grad_out_in, double negative_slope) {
    constexpr const char* op = "iognn::gat_tiles_backward";
    auto outputs = [&] {
      const c10::SymInt dst_rows = alpha_dst_in ? alpha_dst_in->sym_size(0) : c10::SymInt(0);
      return std::tuple{empty_like_rows(x_in),
                        at::empty_symint({x_in.sym_size(0), x_in.sym_size(1)}, x_in.options()),
                        at::empty_symint({dst_rows, x_in.sym_size(1)}, x_in.options())};
    };
    if constexpr (is_meta_v<Backend>) {
      return outputs();
    } else {
      check_dim(out_in, 3, op, "out");
      const int64_t num_dst = out_in.size(0);
      const auto hc = check_gat_inputs(op, x_in, alpha_src_in, alpha_dst_in, num_dst);
      const int64_t H = hc.first, C = hc.second, num_src = x_in.size(0);
      const LayoutArgs L = forward_layout(window_ptr, tile_cols, row_order, counts);
      const LayoutArgs Lt = transposed_layout(window_ptr_t, tile_cols_t, row_order_t, counts_t);
      check_backward(op, L, Lt, num_dst, num_src, H, C, out_in, lse_in, grad_out_in, x_in, "x");
      Tensor grad_x, grad_alpha_src, grad_alpha_dst;
      std::tie(grad_x, grad_alpha_src, grad_alpha_dst) = outputs();
      if (num_dst == 0 && num_src == 0) return {grad_x, grad_alpha_src, grad_alpha_dst};
      const typename Backend::Scope scope(x_in);
      const Tensor x = attention::dense_rows(x_in), alpha_src = attention::dense_rows(alpha_src_in);
      const OptTensor alpha_dst = attention::dense_rows(alpha_dst_in);
      run_backward<Backend, GatTileBackward>(
          scope, op, x, L, Lt, num_dst, num_src, H, C, out_in, lse_in, grad_out_in,
          [&](auto ft, auto& a) {
            using T = typename decltype(ft)::type;
            set_gat_inputs(ft, a, x, alpha_src, alpha_dst, negative_slope);
            a.grad_x = ptr<T>(grad_x);
            a.grad_a_src = ptr<T>(grad_alpha_src);
            a.grad_a_dst = alpha_dst ? ptr<T>(grad_alpha_dst) : nullptr;
          });
      return {grad_x, grad_alpha_src, grad_alpha_dst};
    }
  }
};

template <class Backend>
void register_attention_tiles(torch::Library& m) {
  m.impl("transformer_tiles_forward", &TransformerTileOps<Backend>::forward);
  m.impl("transformer_tiles_backward", &TransformerTileOps<Backend>::backward);
  m.impl("gat_tiles_forward", &GatTileOps<Backend>::forward);
  m.impl("gat_tiles_backward", &GatTileOps<Backend>::backward);
}

}  // namespace iognn::torch_ext::attention_tiles

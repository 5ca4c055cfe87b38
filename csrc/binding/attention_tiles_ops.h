// The tile-path ops of the attention (Transformer, GAT, GATv2; contract:
// kernels/attention_tiles_types.h), written once for every backend; schemas in
// binding/attention_tiles.cpp.
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
//   gatv2_tiles_forward(window_ptr, tile_cols, row_order?, counts, x_src, x_dst, att [H, C],
//                       negative_slope) -> (out [num_dst, H, C], lse [num_dst, H])
//   gatv2_tiles_backward(<both layouts as above>, x_src, x_dst, att, out, lse, grad_out,
//                        negative_slope) -> (grad_x_src, grad_x_dst, grad_att)
// The first layout is the destination-major one (iognn.graph.tile_layout(graph)), the `_t` one the
// transposed (tile_layout(graph, transposed=True)); counts are the pair multiplicities of each
// layout's slots, in the accumulation dtype. The layouts' contents (offsets, column ids) are
// trusted: tile_layout built them from a validated Graph; their shapes, dtypes and devices are
// checked. A variant's op checks its own inputs and hands them to the shared bodies forward_op /
// backward_op, which fill its arguments (TileForward / TileBackward over its Inputs and Grads
// structs) field by field. A Backend provides, besides its Scope,
//   template <typename T, typename I, class Args> static void forward(const Scope&, const Args&, const char* op);
//   template <typename T, typename I, class Args> static void backward(const Scope&, const Args&, const char* op);
// for the arguments of every variant, op naming the op in messages.
#pragma once

#include <ATen/ATen.h>
#include <torch/library.h>

#include <array>
#include <tuple>
#include <type_traits>

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

// A variant's inputs as its op passes them to the shared bodies below: the feature rows in the
// order of its Inputs struct's fields (kernels/attention_tiles_types.h; absent: nullopt), its
// parameter, and the reference tensor (dtype, device) with its name for the messages.
template <size_t N>
struct VariantInputs {
  std::array<OptTensor, N> rows;
  double param;
  const Tensor& ref;
  const char* ref_name;
};

// The rows made dense as the kernels read them (attention::dense_rows; a row of parameters, like
// GATv2's att, is made contiguous by its op).
template <size_t N>
std::array<OptTensor, N> dense(const std::array<OptTensor, N>& rows) {
  std::array<OptTensor, N> out;
  for (size_t k = 0; k < N; ++k) out[k] = attention::dense_rows(rows[k]);
  return out;
}

// Sets the Inputs part of a variant's arguments a (float tag ft): one field a row, in order, then
// the parameter; and the Grads part: one pointer a gradient (null for an undefined tensor).
template <class FloatTag, template <typename> class Inputs, class Args, size_t N>
void set_inputs(FloatTag, Args& a, const std::array<OptTensor, N>& rows, double param) {
  using T = typename FloatTag::type;
  std::apply([&](const auto&... r) {
    static_cast<Inputs<T>&>(a) = {optional_rows_of<T>(r)..., param};
  }, rows);
}
template <class FloatTag, template <typename> class Grads, class Args, size_t G>
void set_grads(FloatTag, Args& a, const std::array<Tensor, G>& grads) {
  using T = typename FloatTag::type;
  std::apply([&](const auto&... g) {
    static_cast<Grads<T>&>(a) = {(g.defined() ? ptr<T>(g) : nullptr)...};
  }, grads);
}

// Every variant's forward after its own input checks: the layout checked against num_dst rows,
// out and lse, and Backend's kernels on TileForward<Inputs, T, I> (T the dtype of in.ref, I that
// of the layout's column ids).
template <class Backend, template <typename> class Inputs, size_t N>
std::tuple<Tensor, Tensor> forward_op(const char* op, const LayoutArgs& L, int64_t num_dst,
                                      int64_t H, int64_t C, const VariantInputs<N>& in) {
  check_layout(op, L, num_dst, in.ref, in.ref_name);
  Tensor out, lse;
  std::tie(out, lse) = forward_outputs(in.ref, num_dst);
  if (num_dst == 0) return {out, lse};
  const typename Backend::Scope scope(in.ref);
  const auto rows = dense(in.rows);
  dispatch_float_index(in.ref.scalar_type(), L.tile_cols.scalar_type(), op, [&](auto ft, auto it) {
    using T = typename decltype(ft)::type;
    using I = typename decltype(it)::type;
    TileForward<Inputs, T, I> a{};
    static_cast<TileForwardArgs<T, I>&>(a) = {layout_view<acc_t<T>, I>(L, num_dst), H, C,
                                              ptr<T>(out), ptr<acc_t<T>>(lse)};
    set_inputs<decltype(ft), Inputs>(ft, a, rows, in.param);
    Backend::template forward<T, I>(scope, a, op);
  });
  return {out, lse};
}

// Every variant's backward after its own input checks: both layouts and the saved tensors checked
// (check_backward), then Backend's kernels on TileBackward<Inputs, Grads, T, I> with the saved
// out, lse and grad_out (made contiguous), a delta scratch and the gradients `grads` (allocated
// by the variant, in the order of its Grads struct's pointers); extra(ft, a) sets what else the
// variant's arguments hold.
template <class Backend, template <typename> class Inputs, template <typename> class Grads,
          size_t N, size_t G, class Extra>
void backward_op(const char* op, const LayoutArgs& L, const LayoutArgs& Lt, int64_t num_dst,
                 int64_t num_src, int64_t H, int64_t C, const Tensor& out_in, const Tensor& lse_in,
                 const Tensor& grad_out_in, const VariantInputs<N>& in,
                 const std::array<Tensor, G>& grads, Extra&& extra) {
  check_backward(op, L, Lt, num_dst, num_src, H, C, out_in, lse_in, grad_out_in, in.ref,
                 in.ref_name);
  if (num_dst == 0 && num_src == 0) return;
  const typename Backend::Scope scope(in.ref);
  const auto rows = dense(in.rows);
  const Tensor out = out_in.contiguous(), lse = lse_in.contiguous(),
               grad_out = grad_out_in.contiguous();
  Tensor delta = at::empty({num_dst, H}, lse.options());
  dispatch_float_index(in.ref.scalar_type(), L.tile_cols.scalar_type(), op, [&](auto ft, auto it) {
    using T = typename decltype(ft)::type;
    using I = typename decltype(it)::type;
    using acc = acc_t<T>;
    TileBackward<Inputs, Grads, T, I> a{};
    static_cast<TileBackwardArgs<T, I>&>(a) = {
        layout_view<acc, I>(L, num_dst), layout_view<acc, I>(Lt, num_src), cptr<T>(out),
        cptr<T>(grad_out), cptr<acc>(lse), H, C, ptr<acc>(delta)};
    set_inputs<decltype(ft), Inputs>(ft, a, rows, in.param);
    set_grads<decltype(ft), Grads>(ft, a, grads);
    extra(ft, a);
    Backend::template backward<T, I>(scope, a, op);
  });
}

// The backward's two layouts, in the order of the ops' arguments.
inline std::pair<LayoutArgs, LayoutArgs> backward_layouts(
    const Tensor& window_ptr, const Tensor& tile_cols, const OptTensor& row_order,
    const Tensor& counts, const Tensor& window_ptr_t, const Tensor& tile_cols_t,
    const OptTensor& row_order_t, const Tensor& counts_t) {
  return {forward_layout(window_ptr, tile_cols, row_order, counts),
          transposed_layout(window_ptr_t, tile_cols_t, row_order_t, counts_t)};
}

inline constexpr auto no_extra = [](auto, auto&) {};

inline std::tuple<Tensor, Tensor, Tensor> as_tuple(const std::array<Tensor, 3>& grads) {
  return {grads[0], grads[1], grads[2]};
}

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

template <class Backend>
struct GatTileOps {
  static std::tuple<Tensor, Tensor> forward(const Tensor& window_ptr, const Tensor& tile_cols,
                                            const OptTensor& row_order, const Tensor& counts,
                                            const Tensor& x, const Tensor& alpha_src,
                                            const OptTensor& alpha_dst, int64_t num_dst,
                                            double negative_slope) {
    constexpr const char* op = "iognn::gat_tiles_forward";
    if constexpr (is_meta_v<Backend>) {
      return forward_outputs(x, num_dst);
    } else {
      TORCH_CHECK_VALUE(num_dst >= 0, op, ": num_dst must be >= 0, got ", num_dst);
      const auto [H, C] = check_gat_inputs(op, x, alpha_src, alpha_dst, num_dst);
      return forward_op<Backend, GatTileInputs>(
          op, forward_layout(window_ptr, tile_cols, row_order, counts), num_dst, H, C,
          VariantInputs<3>{{x, alpha_src, alpha_dst}, negative_slope, x, "x"});
    }
  }

  static std::tuple<Tensor, Tensor, Tensor> backward(
      const Tensor& window_ptr, const Tensor& tile_cols, const OptTensor& row_order,
      const Tensor& counts, const Tensor& window_ptr_t, const Tensor& tile_cols_t,
      const OptTensor& row_order_t, const Tensor& counts_t, const Tensor& x,
      const Tensor& alpha_src, const OptTensor& alpha_dst, const Tensor& out, const Tensor& lse,
      const Tensor& grad_out, double negative_slope) {
    constexpr const char* op = "iognn::gat_tiles_backward";
    auto outputs = [&] {
      const c10::SymInt dst_rows = alpha_dst ? alpha_dst->sym_size(0) : c10::SymInt(0);
      return std::array{empty_like_rows(x),
                        at::empty_symint({x.sym_size(0), x.sym_size(1)}, x.options()),
                        at::empty_symint({dst_rows, x.sym_size(1)}, x.options())};
    };
    if constexpr (is_meta_v<Backend>) {
      return as_tuple(outputs());
    } else {
      check_dim(out, 3, op, "out");
      const int64_t num_dst = out.size(0);
      const auto [H, C] = check_gat_inputs(op, x, alpha_src, alpha_dst, num_dst);
      const auto grads = outputs();
      const auto [L, Lt] = backward_layouts(window_ptr, tile_cols, row_order, counts,
                                            window_ptr_t, tile_cols_t, row_order_t, counts_t);
      backward_op<Backend, GatTileInputs, GatTileGrads>(
          op, L, Lt, num_dst, x.size(0), H, C, out, lse, grad_out,
          VariantInputs<3>{{x, alpha_src, alpha_dst}, negative_slope, x, "x"},
          std::array{grads[0], grads[1], alpha_dst ? grads[2] : Tensor()}, no_extra);
      return as_tuple(grads);
    }
  }
};

// x_src [num_src, H, C], x_dst [num_dst, H, C], att [H, C]: one dtype and device; returns (H, C).
inline std::pair<int64_t, int64_t> check_gatv2_inputs(const char* op, const Tensor& x_src,
                                                      const Tensor& x_dst, const Tensor& att) {
  const auto [H, C] = attention::heads_channels(op, "x_src", x_src);
  check_dim(x_dst, 3, op, "x_dst");
  attention::check_float_tensor(op, "x_dst", x_dst, {x_dst.size(0), H, C},
                                {"rows (destination nodes)", "heads", "channels"}, x_src, "x_src");
  attention::check_float_tensor(op, "att", att, {H, C}, {"heads", "channels"}, x_src, "x_src");
  return {H, C};
}

// A gradient like its input: node rows [N, H, C] (every row is written), or a parameter, zeros
// where no kernel runs (its gradient sums over every window).
inline Tensor grad_like(const Tensor& t) {
  return t.dim() == 3 ? empty_like_rows(t) : at::zeros_symint(t.sym_sizes(), t.options());
}

// The names of a variant's ops and of its reference input (the first), and which of its three
// inputs hold the destination and the source rows.
struct ThreeInputNames {
  const char *forward, *backward, *ref;
  int dst_input, src_input;
};
inline constexpr ThreeInputNames kTransformerNames{
    "iognn::transformer_tiles_forward", "iognn::transformer_tiles_backward", "query", 0, 1};
inline constexpr ThreeInputNames kGatV2Names{"iognn::gatv2_tiles_forward",
                                             "iognn::gatv2_tiles_backward", "x_src", 1, 0};

// The ops of a variant whose three inputs are all given (the Transformer: query, key, value;
// GATv2: x_src, x_dst, att) with its Inputs and Grads structs, its names and check(op, a, b, c)
// -> (H, C). A parameter input (2-D, like att) goes to the kernels contiguous (they read it as
// one row); GATv2's backward adds the scratch of d att's per-window shares (att_partial).
template <class Backend, template <typename> class Inputs, template <typename> class Grads,
          const ThreeInputNames& kNames, auto check>
struct ThreeInputTileOps {
  static std::array<OptTensor, 3> kernel_rows(const Tensor& a, const Tensor& b, const Tensor& c) {
    return {a, b, c.dim() == 3 ? c : c.contiguous()};
  }

  static std::tuple<Tensor, Tensor> forward(const Tensor& window_ptr, const Tensor& tile_cols,
                                            const OptTensor& row_order, const Tensor& counts,
                                            const Tensor& a, const Tensor& b, const Tensor& c,
                                            double param) {
    const Tensor* inputs[3] = {&a, &b, &c};
    const Tensor& dst = *inputs[kNames.dst_input];
    if constexpr (is_meta_v<Backend>) {
      return forward_outputs(a, dst.sym_size(0));
    } else {
      const auto hc = check(kNames.forward, a, b, c);
      return forward_op<Backend, Inputs>(
          kNames.forward, forward_layout(window_ptr, tile_cols, row_order, counts), dst.size(0),
          hc.first, hc.second, VariantInputs<3>{kernel_rows(a, b, c), param, a, kNames.ref});
    }
  }

  static std::tuple<Tensor, Tensor, Tensor> backward(
      const Tensor& window_ptr, const Tensor& tile_cols, const OptTensor& row_order,
      const Tensor& counts, const Tensor& window_ptr_t, const Tensor& tile_cols_t,
      const OptTensor& row_order_t, const Tensor& counts_t, const Tensor& a, const Tensor& b,
      const Tensor& c, const Tensor& out, const Tensor& lse, const Tensor& grad_out,
      double param) {
    auto outputs = [&] { return std::array{grad_like(a), grad_like(b), grad_like(c)}; };
    if constexpr (is_meta_v<Backend>) {
      return as_tuple(outputs());
    } else {
      const auto hc = check(kNames.backward, a, b, c);
      const int64_t H = hc.first, C = hc.second;
      const Tensor* inputs[3] = {&a, &b, &c};
      const int64_t num_dst = inputs[kNames.dst_input]->size(0);
      const auto grads = outputs();
      const auto [L, Lt] = backward_layouts(window_ptr, tile_cols, row_order, counts,
                                            window_ptr_t, tile_cols_t, row_order_t, counts_t);
      constexpr bool kAttPartial = std::is_same_v<Grads<float>, GatV2TileGrads<float>>;
      Tensor att_partial;
      if constexpr (kAttPartial)
        att_partial = at::empty({num_tile_windows(num_dst), H, C},
                                a.options().dtype(acc_dtype(a.scalar_type())));
      backward_op<Backend, Inputs, Grads>(
          kNames.backward, L, Lt, num_dst, inputs[kNames.src_input]->size(0), H, C, out, lse,
          grad_out, VariantInputs<3>{kernel_rows(a, b, c), param, a, kNames.ref}, grads,
          [&](auto ft, auto& args) {
            if constexpr (kAttPartial)
              args.att_partial = ptr<acc_t<typename decltype(ft)::type>>(att_partial);
          });
      return as_tuple(grads);
    }
  }
};

template <class Backend>
using TransformerTileOps = ThreeInputTileOps<Backend, TransformerTileInputs, TransformerTileGrads,
                                             kTransformerNames, &check_qkv>;
template <class Backend>
using GatV2TileOps = ThreeInputTileOps<Backend, GatV2TileInputs, GatV2TileGrads, kGatV2Names,
                                       &check_gatv2_inputs>;

template <class Backend>
void register_attention_tiles(torch::Library& m) {
  m.impl("transformer_tiles_forward", &TransformerTileOps<Backend>::forward);
  m.impl("transformer_tiles_backward", &TransformerTileOps<Backend>::backward);
  m.impl("gat_tiles_forward", &GatTileOps<Backend>::forward);
  m.impl("gat_tiles_backward", &GatTileOps<Backend>::backward);
  m.impl("gatv2_tiles_forward", &GatV2TileOps<Backend>::forward);
  m.impl("gatv2_tiles_backward", &GatV2TileOps<Backend>::backward);
}

}  // namespace iognn::torch_ext::attention_tiles

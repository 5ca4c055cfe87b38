#include "kernels/cuda/attention_tiles.h"

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "core/cuda_check.h"
#include "core/error.h"
#include "core/tiles.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/tile_mma.cuh"

namespace iognn::cuda {
namespace {

using namespace nvcuda;

constexpr int kWarps = 4;             // warps per block, one (window, head) each
constexpr int kRows = int(kTileRows);  // 16 rows per window
constexpr int kStep = 2 * int(kTileCols);  // 16 columns per step: two tiles
constexpr unsigned kFull = 0xffffffffu;

// One warp's shared memory, carved into 128-byte aligned blocks in a fixed order: the same
// carving sizes the launch (from address 0) and places the blocks (from the warp's base).
struct Carve {
  uintptr_t at;
  template <typename E>
  __host__ __device__ E* take(size_t count) {
    E* p = reinterpret_cast<E*>(at);
    at += (count * sizeof(E) + 127) / 128 * 128;
    return p;
  }
};

// What every kernel stages per step: the 16 x 16 scores (fp32) and weights (operand type), the
// window's row ids and the step's column ids; `end` is where the carving stopped.
template <typename T>
struct StepBlocks {
  using In = typename TileMma<T>::In;
  float* s;
  In* p;
  int64_t *rows, *cols;
  uintptr_t end;
  __host__ __device__ void carve_step(Carve& c) {
    s = c.take<float>(kRows * kStep);
    p = c.take<In>(kRows * kStep);
    rows = c.take<int64_t>(kRows);
    cols = c.take<int64_t>(kStep);
  }
};

// Forward: the window's query rows, the step's key and value rows (gathered together), the output
// rows (fp32), then the step blocks.
template <typename T, int Cp>
struct ForwardStage : StepBlocks<T> {
  using In = typename TileMma<T>::In;
  In *q, *k, *v;
  float* o;
  __host__ __device__ static ForwardStage carve(uintptr_t base) {
    Carve c{base};
    ForwardStage st;
    st.q = c.take<In>(kRows * Cp);
    st.k = c.take<In>(kStep * Cp);
    st.v = c.take<In>(kStep * Cp);
    st.o = c.take<float>(kRows * Cp);
    st.carve_step(c);
    st.end = c.at;
    return st;
  }
};

// Backward over either layout: the window's two row blocks (a, b: query and grad rows for dQ,
// key and value rows for dK / dV), the step's two column blocks (x, y: key and value rows for
// dQ, query and grad rows for dK / dV), which the epilogue reuses as its fp32 output block, the
// step blocks (p: the weights of dV) and a second score block (dp) and weight block (ds), the
// columns' lse and delta (dK / dV).
template <typename T, int Cp>
struct BackwardStage : StepBlocks<T> {
  using In = typename TileMma<T>::In;
  In *a, *b, *x, *y;
  float* dp;
  In* ds;
  float *col_lse, *col_delta;
  float* out;  // [kRows * Cp] over x and y (2 * kStep * Cp elements of at least 2 bytes)
  __host__ __device__ static BackwardStage carve(uintptr_t base) {
    static_assert(2 * kStep * sizeof(In) >= kRows * sizeof(float), "the epilogue fits in x, y");
    Carve c{base};
    BackwardStage st;
    st.a = c.take<In>(kRows * Cp);
    st.b = c.take<In>(kRows * Cp);
    st.x = c.take<In>(2 * kStep * Cp);
    st.y = st.x + kStep * Cp;
    st.out = reinterpret_cast<float*>(st.x);
    st.carve_step(c);
    st.dp = c.take<float>(kRows * kStep);
    st.ds = c.take<In>(kRows * kStep);
    st.col_lse = c.take<float>(kStep);
    st.col_delta = c.take<float>(kStep);
    st.end = c.at;
    return st;
  }
};

// GATv2's backward stage: the shared one and a fp32 block of the window rows' gradient sums.
template <typename T, int Cp>
struct RowGradStage : BackwardStage<T, Cp> {
  float* row_grad;  // [kRows * Cp]
  __host__ __device__ static RowGradStage carve(uintptr_t base) {
    RowGradStage st;
    static_cast<BackwardStage<T, Cp>&>(st) = BackwardStage<T, Cp>::carve(base);
    Carve c{st.end};
    st.row_grad = c.take<float>(kRows * Cp);
    st.end = c.at;
    return st;
  }
};

template <class Stage>
__host__ __device__ size_t stage_bytes() {
  return Stage::carve(0).end;
}

// The warp's stage in the block's dynamic shared memory (kWarps stages).
template <class Stage>
__device__ Stage warp_stage(int warp) {
  extern __shared__ __align__(128) unsigned char smem[];
  return Stage::carve(reinterpret_cast<uintptr_t>(smem) + warp * stage_bytes<Stage>());
}

// rows[r] = the window's r-th row (row_order applied), -1 past the last row.
template <typename I>
__device__ void load_window_rows(int64_t* rows, const I* row_order, int64_t w, int64_t num_rows,
                                 int lane) {
  if (lane < kRows) {
    const int64_t slot = w * kRows + lane;
    rows[lane] = slot < num_rows ? (row_order ? int64_t(row_order[slot]) : slot) : -1;
  }
}

// dst [16][Cp] = head h of the nodes ids[0..15] of src, 0 past C and for the id -1. Rows are
// gathered 16 bytes a lane when every head starts 16-byte aligned (the usual contiguous
// [N, H, C] with C a multiple of 16 / sizeof(T)), else one element a lane.
template <typename T, int Cp>
__device__ void stage_rows(typename TileMma<T>::In* dst, const int64_t* ids, NodeRows<T> src,
                           int64_t h, int64_t C, int lane) {
  using M = TileMma<T>;
  using In = typename M::In;
  constexpr int V = kVec<T>;
  static_assert(Cp % V == 0 && sizeof(In) == sizeof(T), "a row is whole packs of its bits");
  const bool packed = reinterpret_cast<uintptr_t>(src.data) % 16 == 0 &&
                      src.row_stride % V == 0 && C % V == 0;
  if (packed) {
    constexpr int kPerRow = Cp / V, kPacks = kRows * kPerRow;
    static_assert(kPacks % 32 == 0, "whole packs for every lane");
#pragma unroll
    for (int j = 0; j < kPacks / 32; ++j) {
      const int e = lane + 32 * j;
      const int r = e / kPerRow, c = (e % kPerRow) * V;
      const int64_t n = ids[r];
      Pack<T, V> p;
      if (n >= 0 && c < C) {
        p = load_pack<T, V>(src.at(n, h, C) + c);
      } else {
#pragma unroll
        for (int u = 0; u < V; ++u) p.v[u] = T{};
      }
      store_pack<T, V>(reinterpret_cast<T*>(dst) + r * Cp + c, p);  // the operand's bits
    }
    return;
  }
  for (int e = lane; e < kRows * Cp; e += 32) {
    const int r = e / Cp, c = e % Cp;
    const int64_t n = ids[r];
    dst[e] = n >= 0 && c < C ? M::from_storage(src.at(n, h, C)[c]) : M::from_float(0.0f);
  }
}

// A lane's run in a 16 x 16 step block: the 8 entries of row r in tile `half` of the step, moved
// 16 bytes at a time (a run is 16-byte aligned): one access per entry would put the 32 lanes'
// runs, 16 entries apart, in 8-way shared-memory bank conflicts.
__device__ void load_run(float (&v)[kTileCols], const float* block, int r, int half) {
  const float4* p = reinterpret_cast<const float4*>(block + r * kStep + half * int(kTileCols));
  const float4 a = p[0], b = p[1];
  v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w, v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
}

// The lane's run of a fp32 16 x 16 step block written back, 16 bytes at a time.
__device__ void store_run_f32(float* block, int r, int half, const float (&v)[kTileCols]) {
  float4* p = reinterpret_cast<float4*>(block + r * kStep + half * int(kTileCols));
  p[0] = make_float4(v[0], v[1], v[2], v[3]);
  p[1] = make_float4(v[4], v[5], v[6], v[7]);
}

template <typename T>
__device__ void store_run(typename TileMma<T>::In* block, int r, int half,
                          const float (&v)[kTileCols]) {
  using M = TileMma<T>;
  using In = typename M::In;
  constexpr int V = int(16 / sizeof(In));
  In* run = block + r * kStep + half * int(kTileCols);
#pragma unroll
  for (int u = 0; u < int(kTileCols); u += V) {
    Pack<In, V> pk;
#pragma unroll
    for (int c = 0; c < V; ++c) pk.v[c] = M::from_float(v[u + c]);
    store_pack<In, V>(run + u, pk);
  }
}

template <typename T>
using Accum = wmma::fragment<wmma::accumulator, 16, 16, TileMma<T>::K, float>;

// 16 x 16 scores of the row block a [16][Cp] against the column block x [16][Cp] into s.
template <typename T, int Cp>
__device__ void score_block(const typename TileMma<T>::In* a, const typename TileMma<T>::In* x,
                            float* s) {
  Accum<T> acc;
  wmma::fill_fragment(acc, 0.0f);
  mma_block<T, wmma::col_major, Cp>(acc, a, Cp, x, Cp);
  wmma::store_matrix_sync(s, acc, kStep, wmma::mem_row_major);
}

// The (window, head) a warp owns and its lane's place: two lanes per window row r, lane `half`
// owning tile t + half of a step at tile t.
struct WarpTask {
  int lane, warp, r, half;
  int64_t w, h;
  // False for a warp past the last (window, head).
  __device__ bool take(int64_t num_windows, int64_t heads) {
    lane = threadIdx.x & 31;
    warp = threadIdx.x >> 5;
    r = lane >> 1;
    half = lane & 1;
    const int64_t item = int64_t(blockIdx.x) * kWarps + warp;
    w = item / heads;
    h = item % heads;
    return item < num_windows * heads;
  }
};

// What a lane loads for the step at tile t (tiles t, t + 1), one step ahead so that the step
// waits only for its row gathers: `col`, the node of column `lane` of the step (lanes < kStep;
// -1 for padding and for a second tile past the window's last), and `cnt`, the counts of the
// lane's row r in its tile t + half (0 past the window or for a row past the last).
struct StepFetch {
  int64_t col;
  float cnt[kTileCols];
  template <typename I>
  __device__ void load(const I* tile_cols, const float* counts, int64_t t, int64_t te,
                       const WarpTask& task, bool row_ok) {
    const int64_t tile = t + task.lane / int(kTileCols);
    col = task.lane < kStep && tile < te
              ? int64_t(__ldg(tile_cols + tile * kTileCols + task.lane % int(kTileCols)))
              : -1;
    const bool ok = row_ok && t + task.half < te;
    const float* c0 = counts + ((t + task.half) * kTileRows + task.r) * kTileCols;
#pragma unroll
    for (int c = 0; c < int(kTileCols); ++c) cnt[c] = ok ? __ldg(c0 + c) : 0.0f;
  }
  // The step's column ids into cols (the warp synchronises before reading them).
  __device__ void publish(int64_t* cols, int lane) const {
    if (lane < kStep) cols[lane] = col;
  }
};

// A slot's softmax weight in the backward: its pair count times exp(score - lse), 0 for a slot
// without a pair.
__device__ __forceinline__ float slot_weight(float count, float score, float lse) {
  return count != 0.0f ? count * expf(score - lse) : 0.0f;
}

// Runs step(cur) for each step (tiles t, t + 1) of the window's tiles [tb, te), its columns
// published in st.cols and its StepFetch cur loaded one step ahead.
template <typename Layout, class Stage, class Step>
__device__ void for_each_step(const Layout& L, const WarpTask& task, bool row_ok, const Stage& st,
                              int64_t tb, int64_t te, Step&& step) {
  StepFetch next;
  if (tb < te) next.load(L.tile_cols, L.counts, tb, te, task, row_ok);
  for (int64_t t = tb; t < te; t += 2) {
    const StepFetch cur = next;
    if (t + 2 < te) next.load(L.tile_cols, L.counts, t + 2, te, task, row_ok);
    cur.publish(st.cols, task.lane);
    __syncwarp();
    step(cur);
  }
}

// Writes scale * acc[n] (fp32, through st.out) to the window's rows of dst [*, H, C].
template <typename T, int Cp, class Stage>
__device__ void store_rows(const Stage& st, Accum<T> (&acc)[Cp / 16], float scale, T* dst,
                           const WarpTask& task, int64_t H, int64_t C) {
#pragma unroll
  for (int n = 0; n < Cp / 16; ++n)
    wmma::store_matrix_sync(st.out + n * 16, acc[n], Cp, wmma::mem_row_major);
  __syncwarp();
  const int64_t i = st.rows[task.r];
  if (i >= 0)
    for (int64_t c = task.half; c < C; c += 2)
      dst[(i * H + task.h) * C + c] = from_acc<T>(scale * st.out[task.r * Cp + c]);
  __syncwarp();
}

// What a variant adds to the kernels below: its scores and the rows they come from. A variant
// V<T, I, Cp> names its Forward and Backward arguments and its backward's shared-memory stage
// BwdStage (BackwardStage<T, Cp> or one that extends it), and gives, per warp, the objects
//   Fwd(a, h, C): score(s) (the score of st.s's entry s), values() (the value rows, which the
//                 kernel gathers into st.v with the step's columns), begin(st, lane, r) (the
//                 window's rows), step(st, lane, r, half) (st.s for the step, once its columns
//                 are loaded)
//   Bwd<kKeys>(a, h, C): score(s), begin, step (st.s and st.dp = b y^T), add(st, r, half, s, ds)
//                 (the lane's run of st.s entries and their dS: their share of the rows' own
//                 gradient), multiply(st, acc_x, n) (per step and 16 channels n, after the dS and
//                 P blocks), store(st, acc_x, acc_y, task) (the rows' gradients), and
//                 kDeltaFromSteps: whether the destinations' pass takes D = sum_j P dP / sum_j P
//                 from a first walk over the row's steps instead of <dO, out>
// The shared kernels own the counts, the softmax, delta, P, dS and dV = P^T dO.

// The Transformer: S = Q K^T (score scale s), dP = dO V^T; dQ = scale dS K (rows: destinations),
// dK = scale dS^T Q and dV = P^T dO (rows: sources).
template <typename T, typename I, int Cp>
struct TransformerTiles {
  using Forward = TileAttentionForward<T, I>;
  using Backward = TileAttentionBackward<T, I>;
  using BwdStage = BackwardStage<T, Cp>;

  struct Fwd {
    const Forward& a;
    int64_t h, C;
    float scale;
    __device__ Fwd(const Forward& a_, int64_t h_, int64_t C_)
        : a(a_), h(h_), C(C_), scale(float(a_.scale)) {}
    __device__ NodeRows<T> values() const { return a.value; }
    __device__ float score(float s) const { return scale * s; }
    __device__ void begin(const ForwardStage<T, Cp>& st, int lane, int) const {
      stage_rows<T, Cp>(st.q, st.rows, a.query, h, C, lane);
    }
    __device__ void step(const ForwardStage<T, Cp>& st, int lane, int, int) const {
      stage_rows<T, Cp>(st.k, st.cols, a.key, h, C, lane);
      __syncwarp();
      score_block<T, Cp>(st.q, st.k, st.s);
      __syncwarp();
    }
  };

  template <bool kKeys>
  struct Bwd {
    static constexpr bool kDeltaFromSteps = false;
    const Backward& a;
    int64_t h, C;
    float scale;
    NodeRows<T> grad_rows;
    __device__ Bwd(const Backward& a_, int64_t h_, int64_t C_)
        : a(a_), h(h_), C(C_), scale(float(a_.scale)), grad_rows{a_.grad_out, a_.heads * C_} {}
    __device__ float score(float s) const { return scale * s; }
    __device__ void begin(const BackwardStage<T, Cp>& st, int lane, int) const {
      stage_rows<T, Cp>(st.a, st.rows, kKeys ? a.key : a.query, h, C, lane);
      stage_rows<T, Cp>(st.b, st.rows, kKeys ? a.value : grad_rows, h, C, lane);
    }
    __device__ void step(const BackwardStage<T, Cp>& st, int lane, int, int) const {
      stage_rows<T, Cp>(st.x, st.cols, kKeys ? a.query : a.key, h, C, lane);
      stage_rows<T, Cp>(st.y, st.cols, kKeys ? grad_rows : a.value, h, C, lane);
      __syncwarp();
      score_block<T, Cp>(st.a, st.x, st.s);
      score_block<T, Cp>(st.b, st.y, st.dp);
      __syncwarp();
    }
    __device__ void add(const BackwardStage<T, Cp>& st, int r, int half,
                        const float (&)[kTileCols], const float (&ds)[kTileCols]) const {
      store_run<T>(st.ds, r, half, ds);
    }
    __device__ void multiply(const BackwardStage<T, Cp>& st, Accum<T> (&acc_x)[Cp / 16],
                             int n) const {
      mma_block<T, wmma::row_major, kStep>(acc_x[n], st.ds, kStep, st.x + n * 16, Cp);
    }
    __device__ void store(const BackwardStage<T, Cp>& st, Accum<T> (&acc_x)[Cp / 16],
                          Accum<T> (&acc_y)[Cp / 16], const WarpTask& task) const {
      store_rows<T, Cp>(st, acc_x, scale, kKeys ? a.grad_key : a.grad_query, task, a.heads, C);
      if constexpr (kKeys) store_rows<T, Cp>(st, acc_y, 1.0f, a.grad_value, task, a.heads, C);
    }
  };
};

// GAT: st.s holds the logits' sums a_src[j] + a_dst[i] (no score product; score leaky_relu(s)),
// values x, dP = dO X^T; d a_dst = sum_j dS leaky_relu' (rows: destinations), dx = P^T dO and
// d a_src = sum_i dS leaky_relu' (rows: sources). Each lane sums the slots of its row in its
// tiles; the row's two lanes add their sums at the end.
template <typename T, typename I, int Cp>
struct GatTiles {
  using Forward = GatTileForward<T, I>;
  using Backward = GatTileBackward<T, I>;
  using BwdStage = BackwardStage<T, Cp>;

  // The logit of node n in rows (0 for n = -1 or absent rows).
  __device__ static float logit(NodeRows<T> rows, int64_t n, int64_t h) {
    return n >= 0 && rows.data ? to_acc(*rows.at(n, h, 1)) : 0.0f;
  }
  // The entries of st.s in row r and tile `half` of the step: the columns' logits + row_logit.
  __device__ static void sum_logits(float* s, const int64_t* cols, NodeRows<T> col_rows,
                                    float row_logit, int64_t h, int r, int half) {
#pragma unroll
    for (int c = 0; c < int(kTileCols); ++c) {
      const int col = half * int(kTileCols) + c;
      s[r * kStep + col] = logit(col_rows, cols[col], h) + row_logit;
    }
  }

  struct Scores {
    float slope;
    __device__ float score(float s) const { return s > 0.0f ? s : s * slope; }
    __device__ float grad(float s) const { return s > 0.0f ? 1.0f : slope; }
  };

  struct Fwd : Scores {
    const Forward& a;
    int64_t h, C;
    float row_logit = 0.0f;
    __device__ Fwd(const Forward& a_, int64_t h_, int64_t C_)
        : Scores{float(a_.negative_slope)}, a(a_), h(h_), C(C_) {}
    __device__ NodeRows<T> values() const { return a.x; }
    __device__ void begin(const ForwardStage<T, Cp>& st, int, int r) {
      row_logit = logit(a.a_dst, st.rows[r], h);
    }
    __device__ void step(const ForwardStage<T, Cp>& st, int, int r, int half) const {
      sum_logits(st.s, st.cols, a.a_src, row_logit, h, r, half);
      __syncwarp();
    }
  };

  template <bool kKeys>
  struct Bwd : Scores {
    static constexpr bool kDeltaFromSteps = false;
    const Backward& a;
    int64_t h, C;
    NodeRows<T> grad_rows;
    float row_logit = 0.0f, row_sum = 0.0f;  // the row's logit, its lane's sum of dS leaky_relu'
    __device__ Bwd(const Backward& a_, int64_t h_, int64_t C_)
        : Scores{float(a_.negative_slope)}, a(a_), h(h_), C(C_),
          grad_rows{a_.grad_out, a_.heads * C_} {}
    __device__ void begin(const BackwardStage<T, Cp>& st, int lane, int r) {
      stage_rows<T, Cp>(st.b, st.rows, kKeys ? a.x : grad_rows, h, C, lane);
      row_logit = logit(kKeys ? a.a_src : a.a_dst, st.rows[r], h);
    }
    __device__ void step(const BackwardStage<T, Cp>& st, int lane, int r, int half) const {
      stage_rows<T, Cp>(st.y, st.cols, kKeys ? grad_rows : a.x, h, C, lane);
      sum_logits(st.s, st.cols, kKeys ? a.a_dst : a.a_src, row_logit, h, r, half);
      __syncwarp();
      score_block<T, Cp>(st.b, st.y, st.dp);
      __syncwarp();
    }
    __device__ void add(const BackwardStage<T, Cp>&, int, int, const float (&s)[kTileCols],
                        const float (&ds)[kTileCols]) {
#pragma unroll
      for (int c = 0; c < int(kTileCols); ++c) row_sum += ds[c] * this->grad(s[c]);
    }
    __device__ void multiply(const BackwardStage<T, Cp>&, Accum<T> (&)[Cp / 16], int) const {}
    __device__ void store(const BackwardStage<T, Cp>& st, Accum<T> (&)[Cp / 16],
                          Accum<T> (&acc_y)[Cp / 16], const WarpTask& task) const {
      if constexpr (kKeys) store_rows<T, Cp>(st, acc_y, 1.0f, a.grad_x, task, a.heads, C);
      const float total = row_sum + __shfl_xor_sync(kFull, row_sum, 1);
      T* dst = kKeys ? a.grad_a_src : a.grad_a_dst;
      const int64_t n = st.rows[task.r];
      if (dst && n >= 0 && task.half == 0) dst[n * a.heads + h] = from_acc<T>(total);
    }
  };
};

// A staged operand as a float.
__device__ __forceinline__ float operand_float(float v) { return v; }
__device__ __forceinline__ float operand_float(__half v) { return __half2float(v); }
__device__ __forceinline__ float operand_float(__nv_bfloat16 v) { return __bfloat162float(v); }

// GATv2: st.s holds the scores themselves, s = sum_c att[c] leaky_relu(z[c]) with z the sum of the
// window's staged row and the step's staged column (x_dst and x_src rows, either way round),
// computed on the CUDA cores (a per-channel nonlinearity, no block product); values x_src,
// dP = dO X^T on the Tensor Cores. The backward's rows' gradient sums g = sum_col dS att
// leaky_relu'(z) gather in a fp32 block (st.row_grad), one lane per channel: d x_dst (rows:
// destinations, with the window's share of d att into att_partial) is that block; d x_src (rows:
// sources) is dV = P^T dO plus it. Head h's att is staged in a block the variant leaves unused.
template <typename T, typename I, int Cp>
struct GatV2Tiles {
  using Forward = GatV2TileForward<T, I>;
  using Backward = GatV2TileBackward<T, I>;
  using BwdStage = RowGradStage<T, Cp>;
  using M = TileMma<T>;
  using In = typename M::In;
  static constexpr int kLaneChannels = (Cp + 31) / 32;  // channels lane, lane + 32, ...

  // dst[0..Cp) = att[h] (0 past C).
  __device__ static void stage_att(In* dst, NodeRows<T> att, int64_t h, int64_t C, int lane) {
    const T* row = att.at(0, h, C);
    for (int c = lane; c < Cp; c += 32)
      dst[c] = c < C ? M::from_storage(row[c]) : M::from_float(0.0f);
  }

  __device__ static float lrelu(float z, float slope) { return z > 0.0f ? z : z * slope; }

  // The entries of st.s in row r and tile `half` of the step: the scores of row r of the row
  // block and the tile's 8 rows of the column block. Each lane starts its channel loop at its own
  // channel (lane = 2 r + half) so that the lanes read distinct shared-memory banks; the channels
  // past C add 0 (zero rows and att).
  __device__ static void scores(float* s, const In* rows, const In* cols, const In* att,
                                float slope, int r, int half) {
    float sum[kTileCols];
#pragma unroll
    for (int j = 0; j < int(kTileCols); ++j) sum[j] = 0.0f;
    const In* row = rows + r * Cp;
    const In* col = cols + half * int(kTileCols) * Cp;
    const int start = 2 * r + half;
    for (int k = 0; k < Cp; ++k) {
      const int c = (k + start) & (Cp - 1);
      const float w = operand_float(att[c]), x = operand_float(row[c]);
#pragma unroll
      for (int j = 0; j < int(kTileCols); ++j)
        sum[j] += w * lrelu(x + operand_float(col[j * Cp + c]), slope);
    }
    store_run_f32(s, r, half, sum);
  }

  // What the forward's and the backward's per-warp objects hold: the arguments, head h and C.
  template <class Args>
  struct WarpArgs {
    const Args& a;
    int64_t h, C;
    __device__ WarpArgs(const Args& a_, int64_t h_, int64_t C_) : a(a_), h(h_), C(C_) {}
    __device__ float slope() const { return float(a.negative_slope); }
  };

  struct Fwd : WarpArgs<Forward> {
    using WarpArgs<Forward>::WarpArgs;
    __device__ float score(float s) const { return s; }  // st.s holds the scores
    __device__ NodeRows<T> values() const { return this->a.x_src; }
    // The window's x_dst rows in st.q, att in st.k (the Transformer's key block).
    __device__ void begin(const ForwardStage<T, Cp>& st, int lane, int) const {
      stage_rows<T, Cp>(st.q, st.rows, this->a.x_dst, this->h, this->C, lane);
      stage_att(st.k, this->a.att, this->h, this->C, lane);
    }
    // The step's x_src rows are its value rows (st.v).
    __device__ void step(const ForwardStage<T, Cp>& st, int, int r, int half) const {
      __syncwarp();
      scores(st.s, st.q, st.v, st.k, this->slope(), r, half);
      __syncwarp();
    }
  };

  // Blocks: rows of destinations (kKeys false): a = x_dst rows, b = grad rows, y = x_src columns,
  // x = att; rows of sources: b = x_src rows (scores and dP), x = x_dst columns, y = grad
  // columns, a = att.
  template <bool kKeys>
  struct Bwd : WarpArgs<Backward> {
    // d x_dst sums dS per channel over slots whose slopes mostly agree: an almost cancelling
    // sum (exactly 0 for a row of one edge), so D must be the sum_j P dP of these very P and dP
    // (not <dO, out> of the stored, rounded output), at the cost of a first walk over the row's
    // steps.
    static constexpr bool kDeltaFromSteps = true;
    using WarpArgs<Backward>::a, WarpArgs<Backward>::h, WarpArgs<Backward>::C;
    NodeRows<T> grad_rows;
    float att_share[kLaneChannels] = {};  // rows of destinations: the lane's channels of d att
    __device__ Bwd(const Backward& a_, int64_t h_, int64_t C_)
        : WarpArgs<Backward>(a_, h_, C_), grad_rows{a_.grad_out, a_.heads * C_} {}
    __device__ float score(float s) const { return s; }  // st.s holds the scores
    __device__ static In* row_block(const BwdStage& st) { return kKeys ? st.b : st.a; }
    __device__ static In* col_block(const BwdStage& st) { return kKeys ? st.x : st.y; }
    __device__ static In* att_block(const BwdStage& st) { return kKeys ? st.a : st.x; }

    __device__ void begin(const BwdStage& st, int lane, int) const {
      stage_rows<T, Cp>(row_block(st), st.rows, kKeys ? a.x_src : a.x_dst, h, C, lane);
      if constexpr (!kKeys) stage_rows<T, Cp>(st.b, st.rows, grad_rows, h, C, lane);
      stage_att(att_block(st), a.att, h, C, lane);
      for (int e = lane; e < kRows * Cp; e += 32) st.row_grad[e] = 0.0f;
    }
    __device__ void step(const BwdStage& st, int lane, int r, int half) const {
      stage_rows<T, Cp>(col_block(st), st.cols, kKeys ? a.x_dst : a.x_src, h, C, lane);
      if constexpr (kKeys) stage_rows<T, Cp>(st.y, st.cols, grad_rows, h, C, lane);
      __syncwarp();
      score_block<T, Cp>(st.b, st.y, st.dp);
      scores(st.s, row_block(st), col_block(st), att_block(st), this->slope(), r, half);
      __syncwarp();
    }
    // The lane's run of dS replaces its (read) run of dP; then each lane adds, for its channels
    // c, sum_col dS att[c] leaky_relu'(z) to every row's gradient sum (and, rows of destinations,
    // sum dS leaky_relu(z) to its share of d att).
    __device__ void add(const BwdStage& st, int r, int half, const float (&)[kTileCols],
                        const float (&ds)[kTileCols]) {
      store_run_f32(st.dp, r, half, ds);
      __syncwarp();
      const int lane = threadIdx.x & 31;
      const float slope = this->slope();
      const In *rows = row_block(st), *cols = col_block(st), *att = att_block(st);
#pragma unroll
      for (int k = 0; k < kLaneChannels; ++k) {
        const int c = lane + 32 * k;
        if (c >= C) continue;
        float col[kStep];
#pragma unroll
        for (int j = 0; j < kStep; ++j) col[j] = operand_float(cols[j * Cp + c]);
        const float w = operand_float(att[c]);
        float share = 0.0f;
        for (int row = 0; row < kRows; ++row) {
          const float x = operand_float(rows[row * Cp + c]);
          const float* d = st.dp + row * kStep;
          float g = 0.0f;
#pragma unroll
          for (int j = 0; j < kStep; ++j) {
            const float z = x + col[j];
            g += d[j] * (z > 0.0f ? 1.0f : slope);
            if constexpr (!kKeys) share += d[j] * lrelu(z, slope);
          }
          st.row_grad[row * Cp + c] += w * g;
        }
        att_share[k] += share;
      }
    }
    __device__ void multiply(const BwdStage&, Accum<T> (&)[Cp / 16], int) const {}
    __device__ void store(const BwdStage& st, Accum<T> (&)[Cp / 16], Accum<T> (&acc_y)[Cp / 16],
                          const WarpTask& task) const {
      __syncwarp();  // row_grad complete (a window without tiles ran no step)
      if constexpr (kKeys) {
#pragma unroll
        for (int n = 0; n < Cp / 16; ++n) {
          Accum<T> g;
          wmma::load_matrix_sync(g, st.row_grad + n * 16, Cp, wmma::mem_row_major);
#pragma unroll
          for (int e = 0; e < g.num_elements; ++e) acc_y[n].x[e] += g.x[e];
        }
        store_rows<T, Cp>(st, acc_y, 1.0f, a.grad_x_src, task, a.heads, C);
      } else {
        const int64_t H = a.heads;
        for (int row = 0; row < kRows; ++row) {
          const int64_t i = st.rows[row];
          if (i < 0) continue;
          for (int c = task.lane; c < C; c += 32)
            a.grad_x_dst[(i * H + h) * C + c] = from_acc<T>(st.row_grad[row * Cp + c]);
        }
#pragma unroll
        for (int k = 0; k < kLaneChannels; ++k) {
          const int c = task.lane + 32 * k;
          if (c < C) a.att_partial[(task.w * H + h) * C + c] = att_share[k];
        }
      }
    }
  };
};

// grad_att[k] (k < K = H * C) = sum over the windows w, in window order within each of 16 strided
// slices and then over the slices in order, of att_partial[w, k]: 32 entries a block, no atomics.
template <typename T>
__global__ void __launch_bounds__(512)
    sum_windows_kernel(const float* partial, int64_t windows, int64_t K, T* out) {
  constexpr int kSlices = 16;
  __shared__ float sums[kSlices][33];
  const int tx = threadIdx.x & 31, ty = threadIdx.x >> 5;
  const int64_t k = int64_t(blockIdx.x) * 32 + tx;
  float s = 0.0f;
  if (k < K)
    for (int64_t w = ty; w < windows; w += kSlices) s += partial[w * K + k];
  sums[ty][tx] = s;
  __syncthreads();
  if (ty != 0 || k >= K) return;
  float total = 0.0f;
  for (int y = 0; y < kSlices; ++y) total += sums[y][tx];
  out[k] = from_acc<T>(total);
}

template <template <typename, typename, int> class V, typename T, typename I, int Cp>
__global__ void __launch_bounds__(kWarps * 32)
    forward_kernel(const typename V<T, I, Cp>::Forward a, int64_t num_windows) {
  using M = TileMma<T>;
  constexpr int NF = Cp / 16;
  WarpTask task;
  if (!task.take(num_windows, a.heads)) return;  // warps never synchronise with each other
  const auto st = warp_stage<ForwardStage<T, Cp>>(task.warp);
  const int lane = task.lane, r = task.r, half = task.half;
  const int64_t H = a.heads, C = a.channels, h = task.h;
  const auto& L = a.layout;
  typename V<T, I, Cp>::Fwd scores(a, h, C);

  load_window_rows(st.rows, L.row_order, task.w, L.num_rows, lane);
  __syncwarp();
  scores.begin(st, lane, r);
  for (int e = lane; e < kRows * Cp; e += 32) st.o[e] = 0.0f;
  const bool row_ok = st.rows[r] >= 0;
  float m = -INFINITY, l = 0.0f;  // the row's running max and sum (the same in both lanes)
  const int64_t tb = L.window_ptr[task.w], te = L.window_ptr[task.w + 1];
  for_each_step(L, task, row_ok, st, tb, te, [&](const StepFetch& cur) {
    stage_rows<T, Cp>(st.v, st.cols, scores.values(), h, C, lane);
    scores.step(st, lane, r, half);
    const float(&cnt)[kTileCols] = cur.cnt;
    float sv[kTileCols];
    load_run(sv, st.s, r, half);
    float tmax = -INFINITY;
#pragma unroll
    for (int c = 0; c < int(kTileCols); ++c) {
      sv[c] = scores.score(sv[c]);
      if (cnt[c] != 0.0f) tmax = fmaxf(tmax, sv[c]);
    }
    tmax = fmaxf(tmax, __shfl_xor_sync(kFull, tmax, 1));
    float f = 1.0f;        // the factor of the row's sum and output so far
    bool rescale = false;  // not while m is -inf: the sum and output are still 0
    if (tmax > m) {
      rescale = m != -INFINITY;
      f = rescale ? expf(m - tmax) : 0.0f;
      m = tmax;
    }
    float psum = 0.0f;
#pragma unroll
    for (int c = 0; c < int(kTileCols); ++c) {
      sv[c] = cnt[c] != 0.0f ? cnt[c] * expf(sv[c] - m) : 0.0f;
      psum += sv[c];
    }
    store_run<T>(st.p, r, half, sv);
    l = l * f + (psum + __shfl_xor_sync(kFull, psum, 1));
    if (rescale) {
      float4* orow = reinterpret_cast<float4*>(st.o + r * Cp + half * (Cp / 2));
#pragma unroll
      for (int c = 0; c < Cp / 8; ++c) {
        float4 o = orow[c];
        o.x *= f, o.y *= f, o.z *= f, o.w *= f;
        orow[c] = o;
      }
    }
    __syncwarp();
#pragma unroll
    for (int n = 0; n < NF; ++n) {
      Accum<T> o;
      wmma::load_matrix_sync(o, st.o + n * 16, Cp, wmma::mem_row_major);
      mma_block<T, wmma::row_major, kStep>(o, st.p, kStep, st.v + n * 16, Cp);
      wmma::store_matrix_sync(st.o + n * 16, o, Cp, wmma::mem_row_major);
    }
    __syncwarp();
  });
  __syncwarp();
  if (!row_ok) return;
  const int64_t i = st.rows[r];
  T* out = a.out + (i * H + h) * C;
  for (int64_t c = half; c < C; c += 2)
    out[c] = from_acc<T>(l > 0.0f ? st.o[r * Cp + c] / l : 0.0f);
  if (half == 0) a.lse[i * H + h] = l > 0.0f ? m + logf(l) : -INFINITY;
}

// The backward over one layout. kKeys false: over the forward layout, rows are destinations,
// columns sources; this pass writes delta. kKeys true: over the transposed layout, rows are
// sources, columns destinations (block y: their grad rows), and dV = P^T dO. Either way the
// variant stages st.s and dP, dS = P (dP - D) and the variant takes each slot's dS.
template <template <typename, typename, int> class V, typename T, typename I, int Cp, bool kKeys>
__global__ void __launch_bounds__(kWarps * 32)
    backward_kernel(const typename V<T, I, Cp>::Backward a, int64_t num_windows) {
  using M = TileMma<T>;
  constexpr int NF = Cp / 16;
  WarpTask task;
  if (!task.take(num_windows, a.heads)) return;
  const auto st = warp_stage<typename V<T, I, Cp>::BwdStage>(task.warp);
  const int lane = task.lane, r = task.r, half = task.half;
  const int64_t H = a.heads, C = a.channels, h = task.h;
  const auto& L = kKeys ? a.transposed : a.layout;
  typename V<T, I, Cp>::template Bwd<kKeys> scores(a, h, C);

  load_window_rows(st.rows, L.row_order, task.w, L.num_rows, lane);
  __syncwarp();
  scores.begin(st, lane, r);
  const int64_t row = st.rows[r];
  // The destinations' pass forms D: from a first walk over the steps, or as <dO, out>.
  constexpr bool kDeltaFromSteps = !kKeys && V<T, I, Cp>::template Bwd<kKeys>::kDeltaFromSteps;
  const int64_t tb = L.window_ptr[task.w], te = L.window_ptr[task.w + 1];
  float row_delta = 0.0f, row_lse = 0.0f;  // rows of destinations: the row's D and lse
  if constexpr (!kKeys) {
    if (row >= 0) row_lse = a.lse[row * H + h];
    if constexpr (kDeltaFromSteps) {
      // D = sum_j P dP / sum_j P from the P and dP the pass below uses (see kDeltaFromSteps).
      float p_sum = 0.0f, pdp_sum = 0.0f;
      for_each_step(L, task, row >= 0, st, tb, te, [&](const StepFetch& cur) {
        scores.step(st, lane, r, half);
        float sv[kTileCols], dv[kTileCols];
        load_run(sv, st.s, r, half);
        load_run(dv, st.dp, r, half);
#pragma unroll
        for (int c = 0; c < int(kTileCols); ++c) {
          const float p = slot_weight(cur.cnt[c], scores.score(sv[c]), row_lse);
          p_sum += p;
          pdp_sum += p * dv[c];
        }
        __syncwarp();
      });
      p_sum += __shfl_xor_sync(kFull, p_sum, 1);
      pdp_sum += __shfl_xor_sync(kFull, pdp_sum, 1);
      row_delta = p_sum > 0.0f ? pdp_sum / p_sum : 0.0f;
    } else {
      if (row >= 0) {
        const T *g = a.grad_out + (row * H + h) * C, *o = a.out + (row * H + h) * C;
        for (int64_t c = half; c < C; c += 2) row_delta += to_acc(g[c]) * to_acc(o[c]);
      }
      row_delta += __shfl_xor_sync(kFull, row_delta, 1);
    }
    if (row >= 0 && half == 0) a.delta[row * H + h] = row_delta;
  }

  Accum<T> acc_x[NF], acc_y[NF];  // the variant's (multiply), dV (kKeys)
#pragma unroll
  for (int n = 0; n < NF; ++n) {
    wmma::fill_fragment(acc_x[n], 0.0f);
    wmma::fill_fragment(acc_y[n], 0.0f);
  }
  for_each_step(L, task, row >= 0, st, tb, te, [&](const StepFetch& cur) {
    if constexpr (kKeys) {
      if (lane < kStep) {
        const int64_t i = cur.col;
        st.col_lse[lane] = i >= 0 ? a.lse[i * H + h] : 0.0f;
        st.col_delta[lane] = i >= 0 ? a.delta[i * H + h] : 0.0f;
      }
    }
    scores.step(st, lane, r, half);
    const float(&cnt)[kTileCols] = cur.cnt;
    float sv[kTileCols], pv[kTileCols], dv[kTileCols];  // the run's entries of st.s, P, dP -> dS
    load_run(sv, st.s, r, half);
    load_run(dv, st.dp, r, half);
#pragma unroll
    for (int c = 0; c < int(kTileCols); ++c) {
      const int col = half * int(kTileCols) + c;
      const float lse = kKeys ? st.col_lse[col] : row_lse;
      const float delta = kKeys ? st.col_delta[col] : row_delta;
      pv[c] = slot_weight(cnt[c], scores.score(sv[c]), lse);
      dv[c] = pv[c] * (dv[c] - delta);
    }
    if constexpr (kKeys) store_run<T>(st.p, r, half, pv);
    scores.add(st, r, half, sv, dv);
    __syncwarp();
#pragma unroll
    for (int n = 0; n < NF; ++n) {
      scores.multiply(st, acc_x, n);
      if constexpr (kKeys)
        mma_block<T, wmma::row_major, kStep>(acc_y[n], st.p, kStep, st.y + n * 16, Cp);
    }
    __syncwarp();
  });
  scores.store(st, acc_x, acc_y, task);
}

// Calls fn(std::integral_constant<int, Cp>) with C rounded up to the staged width Cp.
template <typename Fn>
void with_staged_width(int64_t C, Fn&& fn) {
  if (C > kTileAttentionMaxChannels)
    throw ValueError(detail::concat("tile attention: heads of at most ",
                                    kTileAttentionMaxChannels, " channels, got ", C));
  if (C <= 16) return fn(std::integral_constant<int, 16>{});
  if (C <= 32) return fn(std::integral_constant<int, 32>{});
  if (C <= 64) return fn(std::integral_constant<int, 64>{});
  fn(std::integral_constant<int, 128>{});
}

// One warp per (window, head) of a layout of num_rows rows; the kernel's shared memory is
// kWarps stages of its Stage.
template <class Stage, typename Kernel, typename Args>
void launch(Kernel kernel, const Args& args, int64_t num_rows, int64_t heads, cudaStream_t stream,
            const char* name) {
  const int64_t windows = num_tile_windows(num_rows), items = windows * heads;
  if (items == 0) return;
  const size_t bytes = kWarps * stage_bytes<Stage>();
  if (bytes > 48 * 1024)
    IOGNN_CUDA_CHECK(
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes)));
  const int64_t blocks = (items + kWarps - 1) / kWarps;
  kernel<<<unsigned(blocks), kWarps * 32, bytes, stream>>>(args, windows);
  IOGNN_CUDA_CHECK_LAUNCH(name);
}

// The forward, then the two backward kernels of variant V.
template <template <typename, typename, int> class V, typename T, typename I>
void run_forward(const typename V<T, I, 16>::Forward& a, cudaStream_t stream, const char* name) {
  with_staged_width(a.channels, [&](auto width) {
    constexpr int Cp = decltype(width)::value;
    launch<ForwardStage<T, Cp>>(forward_kernel<V, T, I, Cp>, a, a.layout.num_rows, a.heads, stream,
                                name);
  });
}

template <template <typename, typename, int> class V, typename T, typename I>
void run_backward(const typename V<T, I, 16>::Backward& a, cudaStream_t stream,
                  const char* row_name, const char* key_name) {
  with_staged_width(a.channels, [&](auto width) {
    constexpr int Cp = decltype(width)::value;
    using Stage = typename V<T, I, Cp>::BwdStage;
    // delta comes from the rows' kernel: the keys' kernel runs after it on the stream.
    launch<Stage>(backward_kernel<V, T, I, Cp, false>, a, a.layout.num_rows, a.heads, stream,
                  row_name);
    launch<Stage>(backward_kernel<V, T, I, Cp, true>, a, a.transposed.num_rows, a.heads, stream,
                  key_name);
  });
}

// d att of GATv2: the rows' kernel wrote each window's share; summed in a fixed order after it.
template <typename T, typename I>
void sum_att_partial(const GatV2TileBackward<T, I>& a, cudaStream_t stream) {
  const int64_t K = a.heads * a.channels;
  sum_windows_kernel<T><<<unsigned((K + 31) / 32), 512, 0, stream>>>(
      a.att_partial, num_tile_windows(a.layout.num_rows), K, a.grad_att);
  IOGNN_CUDA_CHECK_LAUNCH("gatv2_tiles_att_grad");
}

}  // namespace

// Each variant's kernels, chosen by its Inputs struct, and the names their launches report.
template <template <typename> class Inputs, typename T, typename I>
void tiles_forward(const TileForward<Inputs, T, I>& a, cudaStream_t stream) {
  if constexpr (std::is_same_v<Inputs<T>, TransformerTileInputs<T>>)
    run_forward<TransformerTiles, T, I>(a, stream, "transformer_tiles_forward");
  else if constexpr (std::is_same_v<Inputs<T>, GatTileInputs<T>>)
    run_forward<GatTiles, T, I>(a, stream, "gat_tiles_forward");
  else
    run_forward<GatV2Tiles, T, I>(a, stream, "gatv2_tiles_forward");
}

template <template <typename> class Inputs, template <typename> class Grads, typename T,
          typename I>
void tiles_backward(const TileBackward<Inputs, Grads, T, I>& a, cudaStream_t stream) {
  if constexpr (std::is_same_v<Inputs<T>, TransformerTileInputs<T>>) {
    run_backward<TransformerTiles, T, I>(a, stream, "transformer_tiles_query_grad",
                                         "transformer_tiles_key_value_grad");
  } else if constexpr (std::is_same_v<Inputs<T>, GatTileInputs<T>>) {
    run_backward<GatTiles, T, I>(a, stream, "gat_tiles_dst_grad", "gat_tiles_src_grad");
  } else {
    run_backward<GatV2Tiles, T, I>(a, stream, "gatv2_tiles_dst_grad", "gatv2_tiles_src_grad");
    sum_att_partial(a, stream);
  }
}

#define IOGNN_CUDA_ATTENTION_TILES(T, I)                                                         \
  template void tiles_forward(const TileAttentionForward<T, I>&, cudaStream_t);                    \
  template void tiles_backward(const TileAttentionBackward<T, I>&, cudaStream_t);                  \
  template void tiles_forward(const GatTileForward<T, I>&, cudaStream_t);                          \
  template void tiles_backward(const GatTileBackward<T, I>&, cudaStream_t);                        \
  template void tiles_forward(const GatV2TileForward<T, I>&, cudaStream_t);                        \
  template void tiles_backward(const GatV2TileBackward<T, I>&, cudaStream_t);
IOGNN_CUDA_ATTENTION_TILES(float, int32_t)
IOGNN_CUDA_ATTENTION_TILES(float, int64_t)
IOGNN_CUDA_ATTENTION_TILES(half_t, int32_t)
IOGNN_CUDA_ATTENTION_TILES(half_t, int64_t)
IOGNN_CUDA_ATTENTION_TILES(bf16_t, int32_t)
IOGNN_CUDA_ATTENTION_TILES(bf16_t, int64_t)

}  // namespace iognn::cuda

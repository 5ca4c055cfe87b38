#include "kernels/cuda/propagate_tiles.h"

#include "core/cuda_check.h"
#include "core/tiles.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/tile_mma.cuh"

namespace iognn::cuda {
namespace {

using namespace nvcuda;

constexpr int kWarps = 4;                // warps per block, one row window each
constexpr int kRows = int(kTileRows);    // 16
constexpr int kCols = int(kTileCols);    // 8

// One warp's staging area: the A block, then the B rows, which the epilogue reuses for C.
template <typename T, int kFeatures>
struct alignas(32) WarpStage {
  using In = typename TileMma<T>::In;
  static constexpr int K = TileMma<T>::K;
  In a[kRows * K];
  union alignas(32) {
    In b[K * kFeatures];
    float c[kRows * kFeatures];
  } bc;
};

// What a lane fetches for one step, a step ahead: the source of B row `lane` (lanes < K) and its
// share of the A values.
template <int K>
struct StepFetch {
  static constexpr int kA = kRows * K / 32;  // A values per lane
  int64_t src;
  float a[kA];

  template <typename index_t>
  __device__ void load(const index_t* tile_cols, const float* vals, int64_t t, int64_t te,
                       int lane) {
    const int64_t tile = t + lane / kCols;
    src = lane < K && tile < te ? int64_t(__ldg(tile_cols + tile * kCols + lane % kCols)) : -1;
#pragma unroll
    for (int j = 0; j < kA; ++j) {
      const int e = lane + 32 * j, r = e / K, k = e % K;
      const int64_t at = t + k / kCols;
      a[j] = at < te ? __ldg(vals + (at * kRows + r) * kCols + k % kCols) : 0.0f;
    }
  }
};

// One warp per (row window, kFeatures output features). V elements of x per load (V > 1 only
// when the host checked alignment and F % V == 0); the epilogue stores one element a lane, the
// lanes of a row side by side (measured faster than V-wide stores, whose reads of the staged sums
// conflict in shared memory or cost registers). Each step's column ids and A
// values are loaded a step ahead, so the gathers of x are the only loads a step waits for.
template <typename T, typename index_t, int V, int kFeatures>
__global__ void __launch_bounds__(kWarps * 32)
    tile_spmm_kernel(const int64_t* __restrict__ window_ptr, const index_t* __restrict__ tile_cols,
                     const index_t* __restrict__ row_order, const float* __restrict__ vals,
                     const T* __restrict__ x, int64_t x_stride, int64_t num_rows,
                     int64_t num_windows, int64_t F, const T* __restrict__ bias,
                     T* __restrict__ out) {
  using M = TileMma<T>;
  using In = typename M::In;
  constexpr int K = M::K;
  constexpr int kFrags = kFeatures / 16;
  constexpr int kPerRow = kFeatures / V;
  static_assert(sizeof(In) == sizeof(T), "B rows are copied bit for bit");
  __shared__ WarpStage<T, kFeatures> stages[kWarps];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t w = int64_t(blockIdx.x) * kWarps + warp;
  if (w >= num_windows) return;  // warps never synchronise with each other
  WarpStage<T, kFeatures>& st = stages[warp];
  const int64_t f0 = int64_t(blockIdx.y) * kFeatures;

  wmma::fragment<wmma::accumulator, 16, 16, K, float> acc[kFrags];
#pragma unroll
  for (int n = 0; n < kFrags; ++n) wmma::fill_fragment(acc[n], 0.0f);

  const int64_t tb = window_ptr[w], te = window_ptr[w + 1];
  constexpr int kStep = K / kCols;  // tiles per step
  StepFetch<K> next;
  if (tb < te) next.load(tile_cols, vals, tb, te, lane);
  for (int64_t t = tb; t < te; t += kStep) {
    const StepFetch<K> cur = next;
    if (t + kStep < te) next.load(tile_cols, vals, t + kStep, te, lane);
#pragma unroll
    for (int j = 0; j < StepFetch<K>::kA; ++j) st.a[lane + 32 * j] = M::from_float(cur.a[j]);
    // B: the K source rows' features [f0, f0 + kFeatures), zeros for padding and past F.
#pragma unroll
    for (int e = lane; e < K * kPerRow; e += 32) {
      const int k = e / kPerRow, f = (e % kPerRow) * V;
      const int64_t src = __shfl_sync(0xffffffffu, cur.src, k);
      Pack<T, V> p;
      if (src >= 0 && f0 + f < F) {
        p = load_pack<T, V>(x + src * x_stride + f0 + f);
      } else {
#pragma unroll
        for (int u = 0; u < V; ++u) p.v[u] = T{};
      }
      store_pack<T, V>(reinterpret_cast<T*>(st.bc.b) + k * kFeatures + f, p);
    }
    __syncwarp();
    // One A fragment serves every 16-feature block of the step.
    wmma::fragment<wmma::matrix_a, 16, 16, K, typename M::Prec, wmma::row_major> a;
    wmma::load_matrix_sync(a, st.a, K);
    M::round(a);
#pragma unroll
    for (int n = 0; n < kFrags; ++n) {
      wmma::fragment<wmma::matrix_b, 16, 16, K, typename M::Prec, wmma::row_major> b;
      wmma::load_matrix_sync(b, st.bc.b + n * 16, kFeatures);
      M::round(b);
      wmma::mma_sync(acc[n], a, b, acc[n]);
    }
    __syncwarp();  // the next step overwrites the stage
  }

  // Epilogue: C through shared memory to the window's rows (+ bias), one rounding.
#pragma unroll
  for (int n = 0; n < kFrags; ++n)
    wmma::store_matrix_sync(st.bc.c + n * 16, acc[n], kFeatures, wmma::mem_row_major);
  __syncwarp();
  for (int e = lane; e < kRows * kFeatures; e += 32) {
    const int r = e / kFeatures;
    const int64_t f = f0 + e % kFeatures, slot = w * kRows + r;
    if (slot >= num_rows || f >= F) continue;
    const int64_t i = row_order ? int64_t(row_order[slot]) : slot;
    out[i * F + f] = from_acc<T>(st.bc.c[e] + (bias ? to_acc(bias[f]) : 0.0f));
  }
}

template <typename acc, typename index_t>
__global__ void tile_values_kernel(const index_t* __restrict__ ptr,
                                   const int64_t* __restrict__ edge_slot,
                                   const acc* __restrict__ weight, const index_t* __restrict__ perm,
                                   const index_t* __restrict__ target,
                                   const index_t* __restrict__ deg_ptr, int64_t num_rows,
                                   acc* __restrict__ vals) {
  const int64_t r = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (r >= num_rows) return;
  // The row's positions all lie in its own tile rows: no other thread writes these slots.
  for (int64_t p = ptr[r]; p < ptr[r + 1]; ++p) {
    acc v = weight ? weight[perm ? int64_t(perm[p]) : p] : acc(1);
    if (deg_ptr) {
      const int64_t i = target ? int64_t(target[p]) : r;
      v /= acc(deg_ptr[i + 1] - deg_ptr[i]);
    }
    vals[edge_slot[p]] += v;
  }
}

}  // namespace

template <typename acc, typename index_t>
void tile_values(const index_t* ptr, const int64_t* edge_slot, const acc* weight,
                 const index_t* perm, const index_t* target, const index_t* deg_ptr,
                 int64_t num_rows, acc* vals, cudaStream_t stream) {
  if (num_rows == 0) return;
  constexpr int kThreads = 256;
  const int64_t blocks = (num_rows + kThreads - 1) / kThreads;
  tile_values_kernel<acc, index_t><<<unsigned(blocks), kThreads, 0, stream>>>(
      ptr, edge_slot, weight, perm, target, deg_ptr, num_rows, vals);
  IOGNN_CUDA_CHECK_LAUNCH("tile_values");
}

template <typename T, typename index_t, int kFeatures>
void launch_tile_spmm(const int64_t* window_ptr, const index_t* tile_cols,
                      const index_t* row_order, const float* vals, const T* x, int64_t x_stride,
                      int64_t num_rows, int64_t F, const T* bias, T* out, cudaStream_t stream) {
  const int64_t windows = num_tile_windows(num_rows);
  const dim3 grid(unsigned((windows + kWarps - 1) / kWarps),
                  unsigned((F + kFeatures - 1) / kFeatures));
  constexpr int V = kVec<T>;
  if (is_aligned16(x) && x_stride % V == 0 && F % V == 0)
    tile_spmm_kernel<T, index_t, V, kFeatures><<<grid, kWarps * 32, 0, stream>>>(
        window_ptr, tile_cols, row_order, vals, x, x_stride, num_rows, windows, F, bias, out);
  else
    tile_spmm_kernel<T, index_t, 1, kFeatures><<<grid, kWarps * 32, 0, stream>>>(
        window_ptr, tile_cols, row_order, vals, x, x_stride, num_rows, windows, F, bias, out);
  IOGNN_CUDA_CHECK_LAUNCH("tile_spmm");
}

template <typename T, typename index_t>
void tile_spmm(const int64_t* window_ptr, const index_t* tile_cols, const index_t* row_order,
               const float* vals, const T* x, int64_t x_stride, int64_t num_rows, int64_t F,
               const T* bias, T* out, cudaStream_t stream) {
  if (num_rows == 0 || F == 0) return;
  // Rows wider than 64 features take 128 a warp: one read of each tile's values and column ids
  // serves both halves (measured faster on an H200 than two warps of 64 despite the registers:
  // 140 against 80).
  if (F > 64)
    launch_tile_spmm<T, index_t, 128>(window_ptr, tile_cols, row_order, vals, x, x_stride,
                                      num_rows, F, bias, out, stream);
  else
    launch_tile_spmm<T, index_t, 64>(window_ptr, tile_cols, row_order, vals, x, x_stride,
                                     num_rows, F, bias, out, stream);
}

#define IOGNN_CUDA_TILE_SPMM(T, I)                                                               \
  template void tile_spmm<T, I>(const int64_t*, const I*, const I*, const float*, const T*,      \
                                int64_t, int64_t, int64_t, const T*, T*, cudaStream_t);
#define IOGNN_CUDA_TILE_VALUES(acc, I)                                                           \
  template void tile_values<acc, I>(const I*, const int64_t*, const acc*, const I*, const I*,    \
                                    const I*, int64_t, acc*, cudaStream_t);
IOGNN_CUDA_TILE_SPMM(float, int32_t)
IOGNN_CUDA_TILE_SPMM(float, int64_t)
IOGNN_CUDA_TILE_SPMM(half_t, int32_t)
IOGNN_CUDA_TILE_SPMM(half_t, int64_t)
IOGNN_CUDA_TILE_SPMM(bf16_t, int32_t)
IOGNN_CUDA_TILE_SPMM(bf16_t, int64_t)
IOGNN_CUDA_TILE_VALUES(float, int32_t)
IOGNN_CUDA_TILE_VALUES(float, int64_t)
IOGNN_CUDA_TILE_VALUES(double, int32_t)
IOGNN_CUDA_TILE_VALUES(double, int64_t)

}  // namespace iognn::cuda

// Device build of the tile layout (kernels/cuda/tile_layout.h for the method, core/tiles.h for the
// layout).
#include "kernels/cuda/tile_layout.h"

#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_reduce.cuh>
#include <cub/device/device_scan.cuh>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/transform_iterator.h>

#include <algorithm>
#include <vector>

#include "core/cuda_check.h"
#include "core/error.h"
#include "core/tiles.h"

namespace iognn::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 4096;  // grid-stride loops cover larger inputs
constexpr int kRowBits = 4;           // a row within its window: kTileRows = 16 = 2^4

using key_t = unsigned long long;

int grid_for(int64_t items) {
  return int(std::max<int64_t>(1, std::min(kMaxBlocks, (items + kThreads - 1) / kThreads)));
}

int bits_for(int64_t n) {  // bits that represent every value in [0, n): 0 for n <= 1
  int b = 0;
  while (b < 63 && (int64_t(1) << b) < n) ++b;
  return b;
}

// A pair's sort key: (window << col_bits | source) << 4 | row in window. Sorting by it orders the
// pairs by window, then source (the condensed columns), then row.
struct KeyFormat {
  int col_bits;
  __host__ __device__ key_t make(int64_t position, key_t source) const {
    const key_t window = key_t(position / kTileRows), row = key_t(position % kTileRows);
    return (((window << col_bits) | (source & column_mask())) << kRowBits) | row;
  }
  __host__ __device__ key_t column_mask() const { return (key_t(1) << col_bits) - 1; }
  __host__ __device__ int64_t window(key_t key) const { return int64_t(key >> (col_bits + kRowBits)); }
  __host__ __device__ int64_t source(key_t key) const {
    return int64_t((key >> kRowBits) & column_mask());
  }
  __host__ __device__ int64_t row(key_t key) const { return int64_t(key & (kTileRows - 1)); }
};

// 1 where sorted key k opens a new (window, source) run: a condensed column.
struct NewColumn {
  const key_t* keys;
  __host__ __device__ long long operator()(int64_t k) const {
    return k == 0 || (keys[k] >> kRowBits) != (keys[k - 1] >> kRowBits);
  }
};
// 1 where sorted key k opens a new run of equal keys: a distinct (destination, source) pair.
struct NewPair {
  const key_t* keys;
  __host__ __device__ long long operator()(int64_t k) const {
    return k == 0 || keys[k] != keys[k - 1];
  }
};
// The tiles of a window of n condensed columns.
struct TilesOf {
  const long long* window_columns;
  __host__ __device__ long long operator()(int64_t w) const {
    return (window_columns[w] + kTileCols - 1) / kTileCols;
  }
};

// What the host reads back after the build's one synchronisation.
struct Report {
  long long num_tiles;
  long long num_pairs;
  unsigned int bad_input;  // nonzero when the CSR or row_order is invalid
};

// Sets report->bad_input for a bad CSR or row_order (core/tiles.h's conditions), and writes
// row_position[row_order[k]] = k (row_position and row_hits zeroed before: a bad row_order still
// leaves every position in [0, num_dst)).
template <typename index_t>
__global__ void check_kernel(const index_t* rowptr, const index_t* col, const index_t* row_order,
                             int64_t num_dst, int64_t num_src, int64_t num_edges,
                             index_t* row_position, unsigned int* row_hits, Report* report) {
  const int64_t n = max(max(num_dst, num_edges), int64_t(1));
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    bool bad = i == 0 && (rowptr[0] != 0 || int64_t(rowptr[num_dst]) != num_edges);
    if (i < num_dst) bad |= rowptr[i + 1] < rowptr[i];
    if (i < num_edges) bad |= col[i] < 0 || int64_t(col[i]) >= num_src;
    if (row_order && i < num_dst) {
      const int64_t row = row_order[i];
      if (row < 0 || row >= num_dst) {
        bad = true;
      } else {
        bad |= atomicAdd(row_hits + row, 1u) != 0;
        row_position[row] = index_t(i);
      }
    }
    if (bad) atomicOr(&report->bad_input, 1u);
  }
}

// keys[p], positions[p] = p for every CSR position p. Its row is the last one whose offset is
// <= p (a binary search, clamped so that a bad rowptr still names a row in range).
template <typename index_t>
__global__ void key_kernel(const index_t* rowptr, const index_t* col, const index_t* row_position,
                           int64_t num_dst, int64_t num_edges, KeyFormat format, key_t* keys,
                           index_t* positions) {
  for (int64_t p = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; p < num_edges;
       p += int64_t(gridDim.x) * blockDim.x) {
    int64_t lo = 0, hi = num_dst;  // the first row in [0, num_dst) whose offset is > p
    while (lo < hi) {
      const int64_t mid = (lo + hi) / 2;
      if (int64_t(rowptr[mid]) <= p) lo = mid + 1;
      else hi = mid;
    }
    const int64_t row = max(lo - 1, int64_t(0));
    const int64_t position = row_position ? int64_t(row_position[row]) : row;
    keys[p] = format.make(position, key_t(col[p]));
    positions[p] = index_t(p);
  }
}

// window_columns[w] += 1 for every condensed column of window w (integer adds: order-free).
__global__ void count_columns_kernel(const key_t* keys, int64_t num_edges, KeyFormat format,
                                     unsigned long long* window_columns) {
  const NewColumn new_column{keys};
  for (int64_t k = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; k < num_edges;
       k += int64_t(gridDim.x) * blockDim.x)
    if (new_column(k)) atomicAdd(window_columns + format.window(keys[k]), 1ull);
}

// The outputs from the sorted keys: columns_through[k] is the number of condensed columns (over all
// windows) up to and including key k's, window_column_start[w] the number before window w's first,
// so key k's column is number columns_through[k] - 1 - window_column_start[w] of its window.
template <typename index_t>
__global__ void fill_kernel(const key_t* keys, const index_t* positions,
                            const long long* columns_through, const long long* window_column_start,
                            const int64_t* window_ptr, int64_t num_edges, KeyFormat format,
                            index_t* tile_cols, uint32_t* tile_bitmap, int64_t* edge_slot) {
  const NewColumn new_column{keys};
  const NewPair new_pair{keys};
  for (int64_t k = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; k < num_edges;
       k += int64_t(gridDim.x) * blockDim.x) {
    const key_t key = keys[k];
    const int64_t w = format.window(key);
    const int64_t slot = columns_through[k] - 1 - window_column_start[w];
    const int64_t tile = window_ptr[w] + slot / kTileCols;
    const int64_t bit = format.row(key) * kTileCols + slot % kTileCols;
    edge_slot[positions[k]] = tile * kTileSlots + bit;
    if (new_column(k)) tile_cols[tile * kTileCols + slot % kTileCols] = index_t(format.source(key));
    if (new_pair(k)) atomicOr(tile_bitmap + tile * kTileWords + bit / 32, 1u << (bit % 32));
  }
}

// Blocks of the arena for one build; scratch is released at the end, the outputs stay.
class Blocks {
 public:
  explicit Blocks(DeviceArena& arena) : arena_(arena) {}
  ~Blocks() {
    for (void* block : scratch_) arena_.release(block);
  }
  template <typename T>
  T* output(int64_t count) {
    return count > 0 ? static_cast<T*>(arena_.allocate(size_t(count) * sizeof(T))) : nullptr;
  }
  template <typename T>
  T* scratch(int64_t count) {
    T* block = output<T>(count);
    if (block) scratch_.push_back(block);
    return block;
  }

 private:
  DeviceArena& arena_;
  std::vector<void*> scratch_;
};

// Runs a CUB device algorithm `call(temp, bytes)` with its temporary storage from the arena.
template <typename Call>
void run_cub(Blocks& blocks, const Call& call) {
  size_t bytes = 0;
  IOGNN_CUDA_CHECK(call(nullptr, bytes));
  IOGNN_CUDA_CHECK(call(blocks.scratch<char>(std::max<int64_t>(int64_t(bytes), 1)), bytes));
}

// Names the fault the device check found, with the host check on host copies (the error path).
template <typename index_t>
[[noreturn]] void raise_bad_input(const index_t* rowptr, const index_t* col,
                                  const index_t* row_order, int64_t num_dst, int64_t num_src,
                                  int64_t num_edges, cudaStream_t stream) {
  const auto host = [stream](const index_t* device, int64_t count) {
    std::vector<index_t> copy(static_cast<size_t>(count));
    if (count > 0) {
      IOGNN_CUDA_CHECK(cudaMemcpyAsync(copy.data(), device, size_t(count) * sizeof(index_t),
                                       cudaMemcpyDeviceToHost, stream));
      IOGNN_CUDA_CHECK(cudaStreamSynchronize(stream));
    }
    return copy;
  };
  const std::vector<index_t> h_rowptr = host(rowptr, num_dst + 1), h_col = host(col, num_edges);
  const std::vector<index_t> h_order = host(row_order, row_order ? num_dst : 0);
  check_tile_input<index_t>(h_rowptr.data(), h_col.data(), num_dst, num_src, num_edges,
                            row_order ? h_order.data() : nullptr);
  throw DeviceError("tile_layout: the device check rejected an input that the host check accepts");
}

}  // namespace

template <typename index_t>
DeviceTileLayout<index_t> build_tile_layout_cuda(const index_t* rowptr, const index_t* col,
                                                 const index_t* row_order, int64_t num_dst,
                                                 int64_t num_src, int64_t num_edges,
                                                 DeviceArena& arena, cudaStream_t stream) {
  IOGNN_CHECK(num_dst >= 0 && num_src >= 0, ValueError,
              "num_dst and num_src must be >= 0, got ", num_dst, " and ", num_src);
  // Without rows a CSR has no edges: check_kernel could not look for the row of one.
  if (num_dst == 0 && num_edges > 0)
    raise_bad_input(rowptr, col, row_order, num_dst, num_src, num_edges, stream);
  const int64_t num_windows = num_tile_windows(num_dst);
  const KeyFormat format{bits_for(num_src)};
  const int key_bits = bits_for(num_windows) + format.col_bits + kRowBits;
  IOGNN_CHECK(key_bits <= 64, ValueError, "tile_layout: ", num_windows, " windows of ", num_src,
              " sources need a ", key_bits, "-bit sort key, more than 64");

  Blocks blocks(arena);
  DeviceTileLayout<index_t> out;
  out.window_ptr = blocks.output<int64_t>(num_windows + 1);
  out.edge_slot = blocks.output<int64_t>(num_edges);
  Report* report = blocks.scratch<Report>(1);
  IOGNN_CUDA_CHECK(cudaMemsetAsync(report, 0, sizeof(Report), stream));

  index_t* row_position = nullptr;
  unsigned int* row_hits = nullptr;
  if (row_order && num_dst > 0) {
    row_position = blocks.scratch<index_t>(num_dst);
    row_hits = blocks.scratch<unsigned int>(num_dst);
    IOGNN_CUDA_CHECK(cudaMemsetAsync(row_position, 0, size_t(num_dst) * sizeof(index_t), stream));
    IOGNN_CUDA_CHECK(cudaMemsetAsync(row_hits, 0, size_t(num_dst) * sizeof(unsigned int), stream));
  }
  check_kernel<<<grid_for(std::max(num_dst, num_edges)), kThreads, 0, stream>>>(
      rowptr, col, row_order, num_dst, num_src, num_edges, row_position, row_hits, report);
  IOGNN_CUDA_CHECK_LAUNCH("tile_layout check_kernel");

  // Sorted keys and their CSR positions (DoubleBuffer: the sort picks the buffer it ends in).
  cub::DoubleBuffer<key_t> keys(blocks.scratch<key_t>(num_edges), blocks.scratch<key_t>(num_edges));
  cub::DoubleBuffer<index_t> positions(blocks.scratch<index_t>(num_edges),
                                       blocks.scratch<index_t>(num_edges));
  long long* columns_through = blocks.scratch<long long>(num_edges);
  auto* window_columns = blocks.scratch<unsigned long long>(num_windows);
  long long* window_column_start = blocks.scratch<long long>(num_windows);
  if (num_windows > 0)
    IOGNN_CUDA_CHECK(cudaMemsetAsync(window_columns, 0, size_t(num_windows) * 8, stream));
  if (num_edges > 0) {
    key_kernel<<<grid_for(num_edges), kThreads, 0, stream>>>(
        rowptr, col, row_position, num_dst, num_edges, format, keys.Current(),
        positions.Current());
    IOGNN_CUDA_CHECK_LAUNCH("tile_layout key_kernel");
    run_cub(blocks, [&](void* temp, size_t& bytes) {
      return cub::DeviceRadixSort::SortPairs(temp, bytes, keys, positions, num_edges, 0, key_bits,
                                             stream);
    });
    count_columns_kernel<<<grid_for(num_edges), kThreads, 0, stream>>>(
        keys.Current(), num_edges, format, window_columns);
    IOGNN_CUDA_CHECK_LAUNCH("tile_layout count_columns_kernel");
    const auto first = thrust::counting_iterator<int64_t>(0);
    run_cub(blocks, [&](void* temp, size_t& bytes) {
      return cub::DeviceScan::InclusiveSum(
          temp, bytes, thrust::make_transform_iterator(first, NewColumn{keys.Current()}),
          columns_through, num_edges, stream);
    });
    run_cub(blocks, [&](void* temp, size_t& bytes) {
      return cub::DeviceReduce::Sum(
          temp, bytes, thrust::make_transform_iterator(first, NewPair{keys.Current()}),
          &report->num_pairs, num_edges, stream);
    });
  }
  IOGNN_CUDA_CHECK(cudaMemsetAsync(out.window_ptr, 0, sizeof(int64_t), stream));
  if (num_windows > 0) {
    const auto* columns = reinterpret_cast<const long long*>(window_columns);
    run_cub(blocks, [&](void* temp, size_t& bytes) {
      return cub::DeviceScan::ExclusiveSum(temp, bytes, columns, window_column_start,
                                           num_windows, stream);
    });
    run_cub(blocks, [&](void* temp, size_t& bytes) {
      return cub::DeviceScan::InclusiveSum(
          temp, bytes,
          thrust::make_transform_iterator(thrust::counting_iterator<int64_t>(0), TilesOf{columns}),
          reinterpret_cast<long long*>(out.window_ptr + 1), num_windows, stream);
    });
  }
  IOGNN_CUDA_CHECK(cudaMemcpyAsync(&report->num_tiles, out.window_ptr + num_windows,
                                   sizeof(int64_t), cudaMemcpyDeviceToDevice, stream));
  Report host{};
  IOGNN_CUDA_CHECK(
      cudaMemcpyAsync(&host, report, sizeof(Report), cudaMemcpyDeviceToHost, stream));
  IOGNN_CUDA_CHECK(cudaStreamSynchronize(stream));  // the build's one wait
  if (host.bad_input) raise_bad_input(rowptr, col, row_order, num_dst, num_src, num_edges, stream);

  out.num_tiles = host.num_tiles;
  out.num_pairs = host.num_pairs;
  out.tile_cols = blocks.output<index_t>(out.num_tiles * kTileCols);
  out.tile_bitmap = blocks.output<uint32_t>(out.num_tiles * kTileWords);
  if (num_edges > 0) {
    // -1 padding (all bits set in either index type) and empty bitmaps, then the edges' bits.
    IOGNN_CUDA_CHECK(cudaMemsetAsync(out.tile_cols, 0xff,
                                     size_t(out.num_tiles * kTileCols) * sizeof(index_t), stream));
    IOGNN_CUDA_CHECK(cudaMemsetAsync(out.tile_bitmap, 0,
                                     size_t(out.num_tiles * kTileWords) * sizeof(uint32_t), stream));
    fill_kernel<<<grid_for(num_edges), kThreads, 0, stream>>>(
        keys.Current(), positions.Current(), columns_through, window_column_start, out.window_ptr,
        num_edges, format, out.tile_cols, out.tile_bitmap, out.edge_slot);
    IOGNN_CUDA_CHECK_LAUNCH("tile_layout fill_kernel");
  }
  return out;
}

template DeviceTileLayout<int32_t> build_tile_layout_cuda<int32_t>(
    const int32_t*, const int32_t*, const int32_t*, int64_t, int64_t, int64_t, DeviceArena&,
    cudaStream_t);
template DeviceTileLayout<int64_t> build_tile_layout_cuda<int64_t>(
    const int64_t*, const int64_t*, const int64_t*, int64_t, int64_t, int64_t, DeviceArena&,
    cudaStream_t);

}  // namespace iognn::cuda

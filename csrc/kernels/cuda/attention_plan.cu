// Chunk plan of the heavy rows (attention_plan.cuh): an exclusive sum over per-row chunk counts
// read straight from the offsets, so no count array is materialised.
#include <cub/device/device_scan.cuh>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/transform_iterator.h>

#include "core/cuda_check.h"
#include "kernels/cuda/attention_plan.cuh"

namespace iognn::cuda::attention_detail {
namespace {

template <typename index_t>
struct ChunkCount {
  const index_t* offsets;
  int64_t rows;
  int64_t chunk_edges;
  __host__ __device__ int64_t operator()(int64_t r) const {
    if (r >= rows) return 0;
    const int64_t degree = int64_t(offsets[r + 1]) - int64_t(offsets[r]);
    return degree > chunk_edges ? (degree + chunk_edges - 1) / chunk_edges : 0;
  }
};

template <typename index_t>
auto chunk_counts(const index_t* offsets, int64_t rows, int64_t chunk_edges) {
  return thrust::make_transform_iterator(thrust::counting_iterator<int64_t>(0),
                                         ChunkCount<index_t>{offsets, rows, chunk_edges});
}

}  // namespace

template <typename index_t>
size_t chunk_plan_temp_bytes(int64_t rows) {
  size_t bytes = 0;
  IOGNN_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(nullptr, bytes,
                                                 chunk_counts<index_t>(nullptr, rows, 1),
                                                 static_cast<int64_t*>(nullptr), rows + 1));
  return bytes;
}

template <typename index_t>
void build_chunk_plan(const index_t* offsets, int64_t rows, int64_t chunk_edges,
                      int64_t* chunk_ptr, void* temp, size_t temp_bytes, cudaStream_t stream) {
  IOGNN_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(temp, temp_bytes,
                                                 chunk_counts(offsets, rows, chunk_edges),
                                                 chunk_ptr, rows + 1, stream));
}

template size_t chunk_plan_temp_bytes<int32_t>(int64_t);
template size_t chunk_plan_temp_bytes<int64_t>(int64_t);
template void build_chunk_plan<int32_t>(const int32_t*, int64_t, int64_t, int64_t*, void*,
                                        size_t, cudaStream_t);
template void build_chunk_plan<int64_t>(const int64_t*, int64_t, int64_t, int64_t*, void*,
                                        size_t, cudaStream_t);

}  // namespace iognn::cuda::attention_detail

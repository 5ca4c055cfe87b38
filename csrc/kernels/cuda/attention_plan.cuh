// Chunk plan of the heavy rows of a CSR offset array (see ChunkPlan in attention_common.cuh):
// chunk_ptr[r] = sum over rows r' < r of ceil(deg(r') / chunk_edges) for the rows with
// deg > chunk_edges (0 chunks for the others), r in [0, rows]; one CUB scan on `stream`.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace iognn::cuda::attention_detail {

// Scratch bytes of build_chunk_plan for `rows` rows (host only, launches nothing).
template <typename index_t>
size_t chunk_plan_temp_bytes(int64_t rows);

template <typename index_t>
void build_chunk_plan(const index_t* offsets, int64_t rows, int64_t chunk_edges,
                      int64_t* chunk_ptr, void* temp, size_t temp_bytes, cudaStream_t stream);

}  // namespace iognn::cuda::attention_detail

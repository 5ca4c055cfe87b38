// Forward segment-reduction kernels for fp16 storage (one storage type per file keeps builds short).
#include "kernels/cuda/segment_reduce_forward.cuh"

IOGNN_SEGMENT_REDUCE_FORWARD_CUDA(::iognn::half_t)

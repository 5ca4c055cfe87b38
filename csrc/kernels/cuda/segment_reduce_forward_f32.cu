// Forward segment-reduction kernels for float storage (one storage type per file keeps builds short).
#include "kernels/cuda/segment_reduce_forward.cuh"

IOGNN_SEGMENT_REDUCE_FORWARD_CUDA(float)

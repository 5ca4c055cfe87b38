// Backward segment-reduction kernels for float storage (one storage type per file keeps builds short).
#include "kernels/cuda/segment_reduce_backward.cuh"

IOGNN_SEGMENT_REDUCE_BACKWARD_CUDA(float)

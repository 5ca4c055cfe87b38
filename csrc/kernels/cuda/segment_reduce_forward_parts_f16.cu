// Forward segment-reduction kernels of the common sets of reductions (sum / mean, var / std, min,
// max, min + max, and all four statistics together) for fp16 storage;
// the general ones are in segment_reduce_forward_f16.cu.
#include "kernels/cuda/segment_reduce_forward.cuh"

IOGNN_SEGMENT_REDUCE_FORWARD_PARTS(, ::iognn::half_t)

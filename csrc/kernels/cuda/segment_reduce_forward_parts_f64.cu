// Forward segment-reduction kernels of the common single-purpose reductions (sum / mean, var / std,
// min, max, min + max) for double storage; the general ones are in segment_reduce_forward_f64.cu.
#include "kernels/cuda/segment_reduce_forward.cuh"

IOGNN_SEGMENT_REDUCE_FORWARD_PARTS(, double)

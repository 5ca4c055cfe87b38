// CUDA propagate kernels instantiated for ::iognn::half_t features (one file per dtype keeps builds parallel).
#include "kernels/cuda/propagate_kernels.cuh"

IOGNN_CUDA_PROPAGATE_INSTANTIATE(::iognn::half_t)

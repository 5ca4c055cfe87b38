// CUDA propagate kernels instantiated for ::iognn::bf16_t features (one file per dtype keeps builds parallel).
#include "kernels/cuda/propagate_kernels.cuh"

IOGNN_CUDA_PROPAGATE_INSTANTIATE(::iognn::bf16_t)

// CUDA propagate kernels instantiated for double features (one file per dtype keeps builds parallel).
#include "kernels/cuda/propagate_kernels.cuh"

IOGNN_CUDA_PROPAGATE_INSTANTIATE(double)

// GATv2 attention backward on CUDA for bf16 features; int32 and int64 graphs.
#include "kernels/cuda/attention_launch.cuh"

namespace iognn::cuda {
IOGNN_INSTANTIATE_ATTENTION_BACKWARD(gatv2, GatV2Inputs, GatV2Grads, ::iognn::bf16_t)
}  // namespace iognn::cuda

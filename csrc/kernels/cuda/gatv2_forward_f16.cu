// GATv2 attention forward on CUDA for fp16 features; int32 and int64 graphs.
#include "kernels/cuda/attention_launch.cuh"

namespace iognn::cuda {
IOGNN_INSTANTIATE_ATTENTION_FORWARD(gatv2, GatV2Inputs, ::iognn::half_t)
}  // namespace iognn::cuda

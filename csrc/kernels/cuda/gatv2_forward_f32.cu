// GATv2 attention forward on CUDA for fp32 features; int32 and int64 graphs.
#include "kernels/cuda/attention_launch.cuh"

namespace iognn::cuda {
IOGNN_INSTANTIATE_ATTENTION_FORWARD(gatv2, GatV2Inputs, float)
}  // namespace iognn::cuda

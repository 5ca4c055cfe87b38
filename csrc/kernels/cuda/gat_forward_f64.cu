// GAT attention forward on CUDA for fp64 features; int32 and int64 graphs.
#include "kernels/cuda/attention_launch.cuh"

namespace iognn::cuda {
IOGNN_INSTANTIATE_ATTENTION_FORWARD(gat, GatInputs, double)
}  // namespace iognn::cuda

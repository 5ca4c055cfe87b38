// Graph Transformer attention backward on CUDA for bf16 features; int32 and int64 graphs.
#include "kernels/cuda/attention_launch.cuh"

namespace iognn::cuda {
IOGNN_INSTANTIATE_ATTENTION_BACKWARD(transformer, TransformerInputs, TransformerGrads,
                                     ::iognn::bf16_t)
}  // namespace iognn::cuda

// cuSPARSE CSR SpMM behind iognn::propagate, the alternative to the own gather kernels
// (kernels/cuda/propagate.h) that the planner may pick. Torch-free.
//
// Product: C[rows, F] = A B, A the CSR (offsets, indices, values) of shape rows x cols, B [cols, F]
// and C [rows, F] dense row-major with leading dimension F. The op's weights and the 1/deg of mean
// are folded into A's values (edge_values() below, or values cached by the caller).
//
// Algorithm. CUSPARSE_SPMM_CSR_ALG3, the CSR algorithm cuSPARSE documents as deterministic, always
// with opA = NON_TRANSPOSE (the only one it supports): the backward pass multiplies by the
// transposed CSR arrays (colptr, row) instead of asking for A^T. Measured on CUDA 13 (H100, H200,
// tests/python/test_cusparse_probe_cuda.py), it holds only for short rows: with one row of 256
// entries or more among short ones it either faults (illegal address) or gives other bits run to
// run, and CSR_ALG2 changes bits from 128 entries on. So the caller gives this wrapper only
// matrices whose rows have at most kSpmmLongestRow entries; graphs with hubs stay on the own
// kernels.
//
// Contract of cusparseSpMM_preprocess (cuSPARSE docs): preprocessing makes the workspace the
// matrix descriptor's active buffer; later SpMM calls with that descriptor and buffer must pass the
// same parameters, except alpha, beta, B, C and A's values, and the buffer must stay unmodified;
// one active buffer per descriptor. CsrSpmm therefore binds A once - offsets, indices and values
// pointers never change after construction (no cusparseCsrSetPointers) - and takes B and C per
// call through fresh dense descriptors. A caller that preprocesses gives each CsrSpmm its own
// workspace and never hands that workspace to anything else; an un-preprocessed CsrSpmm may run
// with any workspace of workspace_size() bytes.
//
// Data types (SpmmTypes): float32 and float64 products are uniform (A, B, C and compute alike).
// float16 and bfloat16 features use cuSPARSE's mixed precision: A's values and B in the 16-bit
// type, C in float32, compute in float32; the caller converts C (finish_rows()). A's values are
// then 16-bit, so the caller uses this only when they are exact in 16 bits (all ones).
//
// Scalars alpha = 1, beta = 0 are passed in host pointer mode (the mode PyTorch's handle is used
// in), which the calls set explicitly. Every method throws iognn::DeviceError naming the failing
// cuSPARSE call and its status.
#pragma once

#include <cuda_runtime.h>
#include <cusparse.h>

#include <cstddef>
#include <cstdint>

#include "core/numeric.h"

namespace iognn::cuda {

// The longest row a CsrSpmm may be given (see Algorithm above).
inline constexpr int64_t kSpmmLongestRow = 128;

struct CsrShape {
  int64_t rows = 0, cols = 0, nnz = 0;
  bool index64 = false;  // offsets and indices are int64 (else int32)
};

// The cuSPARSE data types of a product over features of one type.
struct SpmmTypes {
  cudaDataType values;   // A's values and B
  cudaDataType output;   // C
  cudaDataType compute;  // alpha, beta and the accumulation
};

// features: CUDA_R_32F, CUDA_R_64F, CUDA_R_16F or CUDA_R_16BF (else ValueError).
SpmmTypes spmm_types(cudaDataType features);

// One SpMM with a fixed sparse operand A (see the preprocess contract above). Not thread-safe:
// the caller serialises all uses of one object (preprocess writes the descriptor's state).
class CsrSpmm {
 public:
  CsrSpmm(const CsrShape& shape, SpmmTypes types, int64_t F, const void* offsets,
          const void* indices, const void* values);
  ~CsrSpmm();
  CsrSpmm(const CsrSpmm&) = delete;
  CsrSpmm& operator=(const CsrSpmm&) = delete;

  // Bytes of workspace that preprocess() and run() need (B and C are only described, not read).
  size_t workspace_size(cusparseHandle_t handle, const void* B, void* C) const;
  // Analyses A's sparsity pattern into `workspace`, which becomes A's active buffer.
  void preprocess(cusparseHandle_t handle, const void* B, void* C, void* workspace);
  // C = A B on the handle's stream, asynchronously.
  void run(cusparseHandle_t handle, const void* B, void* C, void* workspace);

 private:
  CsrShape shape_;
  SpmmTypes types_;
  int64_t F_;
  cusparseConstSpMatDescr_t a_ = nullptr;
};

// values[e] = (weight ? weight[perm ? perm[e] : e] : 1) * (scale ? scale[e] : 1) for e < n: the
// per-call edge values of A (perm = csc2csr for the transposed CSR, scale = cached 1/deg per edge).
template <typename acc, typename index_t>
void edge_values(int64_t n, const acc* weight, const index_t* perm, const acc* scale, acc* values,
                 cudaStream_t stream);

// out[i, f] = T(C[i, f] * s_i) for i < rows, f < F, with s_i = 1 / (offsets[i + 1] - offsets[i])
// when mean_offsets is given and the row has entries, else 1 (the own kernels' row scale): the
// conversion of a mixed-precision product's float32 C into the features' 16-bit type.
template <typename T, typename index_t>
void finish_rows(int64_t rows, int64_t F, const float* C, const index_t* mean_offsets, T* out,
                 cudaStream_t stream);

}  // namespace iognn::cuda

// cuSPARSE CSR SpMM behind iognn::propagate, the alternative to the own gather kernels
// (kernels/cuda/propagate.h) that the planner may pick for fp32 and fp64 features. Torch-free.
//
// Product: C[rows, F] = A B, A the CSR (offsets, indices, values) of shape rows x cols, B [cols, F]
// and C [rows, F] dense row-major with leading dimension F. The op's weights and the 1/deg of mean
// are folded into A's values by edge_values() (the values array is per call; offsets and indices
// are the graph's).
//
// Determinism. cuSPARSE documents bit-wise reproducible SpMM results only for some algorithms: for
// CSR, CUSPARSE_SPMM_CSR_ALG3; CSR_ALG1 and CSR_ALG2 (and ALG_DEFAULT, which may select either) "may
// produce slightly different results during different runs", and so may any transposed op(A). We
// therefore only ever run NON_TRANSPOSE products with CSR_ALG3: the backward pass multiplies by
// the transposed CSR arrays (colptr, row) rather than asking cuSPARSE for op(A) = A^T. ALG3 is also
// the algorithm cusparseSpMM_preprocess speeds up; its analysis lives in the workspace, which must
// therefore stay the same buffer, used by one stream at a time, for every run of one CsrSpmm.
// Only fp32 and fp64 are offered: cuSPARSE's fp16/bf16 SpMM wants A's values in the 16-bit type,
// which would round the fp32 weights and 1/deg that the op contract keeps in fp32.
#pragma once

#include <cuda_runtime.h>
#include <cusparse.h>

#include <cstddef>
#include <cstdint>

namespace iognn::cuda {

struct CsrShape {
  int64_t rows = 0, cols = 0, nnz = 0;
  bool index64 = false;  // offsets and indices are int64 (else int32)
};

// Descriptors of one CSR SpMM (one graph direction, one F, one dtype), created once and reused.
// Every method throws iognn::DeviceError naming the failing cuSPARSE call and its status.
class CsrSpmm {
 public:
  // dtype: CUDA_R_32F or CUDA_R_64F (values, B and C alike; compute in the same type). The pointers
  // given here only seed the descriptors: run() sets the current ones.
  CsrSpmm(const CsrShape& shape, cudaDataType dtype, int64_t F, const void* offsets,
          const void* indices, const void* values, const void* B, void* C);
  ~CsrSpmm();
  CsrSpmm(const CsrSpmm&) = delete;
  CsrSpmm& operator=(const CsrSpmm&) = delete;

  // Bytes of workspace that preprocess() and run() need.
  size_t workspace_size(cusparseHandle_t handle) const;
  // Analyses A's sparsity pattern into `workspace` (once; the values may change afterwards).
  void preprocess(cusparseHandle_t handle, void* workspace);
  // C = A B on the handle's stream.
  void run(cusparseHandle_t handle, const void* offsets, const void* indices, const void* values,
           const void* B, void* C, void* workspace);

 private:
  void release() noexcept;

  cudaDataType dtype_;
  cusparseSpMatDescr_t a_ = nullptr;
  cusparseDnMatDescr_t b_ = nullptr, c_ = nullptr;
};

// values[e] = (weight ? weight[perm ? perm[e] : e] : 1) * (scale ? scale[e] : 1) for e < n: the
// per-call edge values of A (perm = csc2csr for the transposed CSR, scale = cached 1/deg per edge).
template <typename acc, typename index_t>
void edge_values(int64_t n, const acc* weight, const index_t* perm, const acc* scale, acc* values,
                 cudaStream_t stream);

}  // namespace iognn::cuda

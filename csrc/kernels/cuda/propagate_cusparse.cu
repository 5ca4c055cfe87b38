#include "kernels/cuda/propagate_cusparse.h"

#include "kernels/cuda/common.cuh"

namespace iognn::cuda {
namespace {

// The one algorithm used (see the header: the deterministic CSR algorithm, non-transposed only).
constexpr cusparseSpMMAlg_t kAlgorithm = CUSPARSE_SPMM_CSR_ALG3;
constexpr cusparseOperation_t kNoTranspose = CUSPARSE_OPERATION_NON_TRANSPOSE;

void check(cusparseStatus_t status, const char* call) {
  if (status != CUSPARSE_STATUS_SUCCESS)
    throw DeviceError(detail::concat("propagate (cuSPARSE): ", call, " failed: ",
                                     cusparseGetErrorString(status), " (status ", int(status),
                                     ")"));
}

// alpha = 1, beta = 0 in the compute type (host pointer mode).
struct Scalars {
  float f32[2] = {1.0f, 0.0f};
  double f64[2] = {1.0, 0.0};
  const void* alpha(cudaDataType t) const { return t == CUDA_R_64F ? (const void*)&f64[0] : &f32[0]; }
  const void* beta(cudaDataType t) const { return t == CUDA_R_64F ? (const void*)&f64[1] : &f32[1]; }
};

}  // namespace

CsrSpmm::CsrSpmm(const CsrShape& shape, cudaDataType dtype, int64_t F, const void* offsets,
                 const void* indices, const void* values, const void* B, void* C)
    : dtype_(dtype) {
  IOGNN_CHECK(dtype == CUDA_R_32F || dtype == CUDA_R_64F, ValueError,
              "propagate (cuSPARSE): only float32 and float64 are supported");
  const cusparseIndexType_t index = shape.index64 ? CUSPARSE_INDEX_64I : CUSPARSE_INDEX_32I;
  try {
    check(cusparseCreateCsr(&a_, shape.rows, shape.cols, shape.nnz, const_cast<void*>(offsets),
                            const_cast<void*>(indices), const_cast<void*>(values), index, index,
                            CUSPARSE_INDEX_BASE_ZERO, dtype),
          "cusparseCreateCsr");
    check(cusparseCreateDnMat(&b_, shape.cols, F, F, const_cast<void*>(B), dtype,
                              CUSPARSE_ORDER_ROW),
          "cusparseCreateDnMat(B)");
    check(cusparseCreateDnMat(&c_, shape.rows, F, F, C, dtype, CUSPARSE_ORDER_ROW),
          "cusparseCreateDnMat(C)");
  } catch (...) {
    release();
    throw;
  }
}

CsrSpmm::~CsrSpmm() { release(); }

void CsrSpmm::release() noexcept {
  // Releases host-side descriptor state only; a failing destroy leaves nothing to recover.
  if (a_) cusparseDestroySpMat(a_);
  if (b_) cusparseDestroyDnMat(b_);
  if (c_) cusparseDestroyDnMat(c_);
  a_ = nullptr;
  b_ = c_ = nullptr;
}

size_t CsrSpmm::workspace_size(cusparseHandle_t handle) const {
  const Scalars s;
  size_t bytes = 0;
  check(cusparseSpMM_bufferSize(handle, kNoTranspose, kNoTranspose, s.alpha(dtype_), a_, b_,
                                s.beta(dtype_), c_, dtype_, kAlgorithm, &bytes),
        "cusparseSpMM_bufferSize");
  return bytes;
}

void CsrSpmm::preprocess(cusparseHandle_t handle, void* workspace) {
  const Scalars s;
  check(cusparseSetPointerMode(handle, CUSPARSE_POINTER_MODE_HOST), "cusparseSetPointerMode");
  check(cusparseSpMM_preprocess(handle, kNoTranspose, kNoTranspose, s.alpha(dtype_), a_, b_,
                                s.beta(dtype_), c_, dtype_, kAlgorithm, workspace),
        "cusparseSpMM_preprocess");
}

void CsrSpmm::run(cusparseHandle_t handle, const void* offsets, const void* indices,
                  const void* values, const void* B, void* C, void* workspace) {
  const Scalars s;
  check(cusparseCsrSetPointers(a_, const_cast<void*>(offsets), const_cast<void*>(indices),
                               const_cast<void*>(values)),
        "cusparseCsrSetPointers");
  check(cusparseDnMatSetValues(b_, const_cast<void*>(B)), "cusparseDnMatSetValues(B)");
  check(cusparseDnMatSetValues(c_, C), "cusparseDnMatSetValues(C)");
  check(cusparseSetPointerMode(handle, CUSPARSE_POINTER_MODE_HOST), "cusparseSetPointerMode");
  check(cusparseSpMM(handle, kNoTranspose, kNoTranspose, s.alpha(dtype_), a_, b_, s.beta(dtype_),
                     c_, dtype_, kAlgorithm, workspace),
        "cusparseSpMM");
}

// ---- edge values ----------------------------------------------------------------------------
namespace {
template <typename acc, typename index_t>
__global__ void edge_values_kernel(int64_t n, const acc* __restrict__ weight,
                                   const index_t* __restrict__ perm, const acc* __restrict__ scale,
                                   acc* __restrict__ values) {
  const int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e >= n) return;
  acc v = weight ? weight[perm ? int64_t(perm[e]) : e] : acc(1);
  if (scale) v *= scale[e];
  values[e] = v;
}
}  // namespace

template <typename acc, typename index_t>
void edge_values(int64_t n, const acc* weight, const index_t* perm, const acc* scale, acc* values,
                 cudaStream_t stream) {
  constexpr int kThreads = 256;
  const int64_t blocks = (n + kThreads - 1) / kThreads;
  IOGNN_CHECK(blocks <= INT32_MAX, ValueError, "propagate (cuSPARSE): ", n, " edges exceed one launch");
  if (blocks == 0) return;
  edge_values_kernel<acc, index_t>
      <<<unsigned(blocks), kThreads, 0, stream>>>(n, weight, perm, scale, values);
  IOGNN_CUDA_CHECK_LAUNCH();
}

template void edge_values<float, int32_t>(int64_t, const float*, const int32_t*, const float*,
                                          float*, cudaStream_t);
template void edge_values<float, int64_t>(int64_t, const float*, const int64_t*, const float*,
                                          float*, cudaStream_t);
template void edge_values<double, int32_t>(int64_t, const double*, const int32_t*, const double*,
                                           double*, cudaStream_t);
template void edge_values<double, int64_t>(int64_t, const double*, const int64_t*, const double*,
                                           double*, cudaStream_t);

}  // namespace iognn::cuda

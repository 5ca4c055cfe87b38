#include "kernels/cuda/propagate_cusparse.h"

#include "kernels/cuda/common.cuh"

namespace iognn::cuda {
namespace {

// The one algorithm used, always on a non-transposed A with rows of at most kSpmmLongestRow
// entries (see the header).
constexpr cusparseSpMMAlg_t kAlgorithm = CUSPARSE_SPMM_CSR_ALG3;
constexpr cusparseOperation_t kNoTranspose = CUSPARSE_OPERATION_NON_TRANSPOSE;

void check(cusparseStatus_t status, const char* call) {
  if (status != CUSPARSE_STATUS_SUCCESS)
    throw DeviceError(detail::concat("propagate (cuSPARSE): ", call, " failed: ",
                                     cusparseGetErrorString(status), " (status ", int(status),
                                     ")"));
}

// alpha = 1, beta = 0 in the compute type, read by cuSPARSE on the host during the call.
struct Scalars {
  float f32[2] = {1.0f, 0.0f};
  double f64[2] = {1.0, 0.0};
  const void* alpha(cudaDataType t) const { return t == CUDA_R_64F ? (const void*)&f64[0] : &f32[0]; }
  const void* beta(cudaDataType t) const { return t == CUDA_R_64F ? (const void*)&f64[1] : &f32[1]; }
};

// The dense operands of one call: B [cols, F] and C [rows, F], row-major with leading dimension F.
// Created per call (host-side objects only): the preprocess contract lets B and C change.
class DenseOperands {
 public:
  DenseOperands(const CsrShape& shape, SpmmTypes types, int64_t F, const void* B, void* C) {
    try {
      check(cusparseCreateConstDnMat(&b_, shape.cols, F, F, B, types.values, CUSPARSE_ORDER_ROW),
            "cusparseCreateConstDnMat(B)");
      check(cusparseCreateDnMat(&c_, shape.rows, F, F, C, types.output, CUSPARSE_ORDER_ROW),
            "cusparseCreateDnMat(C)");
    } catch (...) {
      release();
      throw;
    }
  }
  ~DenseOperands() { release(); }
  DenseOperands(const DenseOperands&) = delete;
  DenseOperands& operator=(const DenseOperands&) = delete;

  cusparseConstDnMatDescr_t b() const { return b_; }
  cusparseDnMatDescr_t c() const { return c_; }

 private:
  // Host-side state only; a failing destroy leaves nothing to recover.
  void release() noexcept {
    if (b_) cusparseDestroyDnMat(b_);
    if (c_) cusparseDestroyDnMat(c_);
    b_ = nullptr;
    c_ = nullptr;
  }
  cusparseConstDnMatDescr_t b_ = nullptr;
  cusparseDnMatDescr_t c_ = nullptr;
};

void use_host_scalars(cusparseHandle_t handle) {
  check(cusparseSetPointerMode(handle, CUSPARSE_POINTER_MODE_HOST), "cusparseSetPointerMode");
}

}  // namespace

SpmmTypes spmm_types(cudaDataType features) {
  switch (features) {
    case CUDA_R_32F: return {CUDA_R_32F, CUDA_R_32F, CUDA_R_32F};
    case CUDA_R_64F: return {CUDA_R_64F, CUDA_R_64F, CUDA_R_64F};
    case CUDA_R_16F: return {CUDA_R_16F, CUDA_R_32F, CUDA_R_32F};
    case CUDA_R_16BF: return {CUDA_R_16BF, CUDA_R_32F, CUDA_R_32F};
    default:
      throw ValueError("propagate (cuSPARSE): features must be float32, float64, float16 or bfloat16");
  }
}

CsrSpmm::CsrSpmm(const CsrShape& shape, SpmmTypes types, int64_t F, const void* offsets,
                 const void* indices, const void* values)
    : shape_(shape), types_(types), F_(F) {
  const cusparseIndexType_t index = shape.index64 ? CUSPARSE_INDEX_64I : CUSPARSE_INDEX_32I;
  check(cusparseCreateConstCsr(&a_, shape.rows, shape.cols, shape.nnz, offsets, indices, values,
                               index, index, CUSPARSE_INDEX_BASE_ZERO, types.values),
        "cusparseCreateConstCsr");
}

CsrSpmm::~CsrSpmm() {
  if (a_) cusparseDestroySpMat(a_);  // host-side state only
}

size_t CsrSpmm::workspace_size(cusparseHandle_t handle, const void* B, void* C) const {
  const Scalars s;
  const DenseOperands dense(shape_, types_, F_, B, C);
  use_host_scalars(handle);
  size_t bytes = 0;
  check(cusparseSpMM_bufferSize(handle, kNoTranspose, kNoTranspose, s.alpha(types_.compute), a_,
                                dense.b(), s.beta(types_.compute), dense.c(), types_.compute,
                                kAlgorithm, &bytes),
        "cusparseSpMM_bufferSize");
  return bytes;
}

void CsrSpmm::preprocess(cusparseHandle_t handle, const void* B, void* C, void* workspace) {
  const Scalars s;
  const DenseOperands dense(shape_, types_, F_, B, C);
  use_host_scalars(handle);
  check(cusparseSpMM_preprocess(handle, kNoTranspose, kNoTranspose, s.alpha(types_.compute), a_,
                                dense.b(), s.beta(types_.compute), dense.c(), types_.compute,
                                kAlgorithm, workspace),
        "cusparseSpMM_preprocess");
}

void CsrSpmm::run(cusparseHandle_t handle, const void* B, void* C, void* workspace) {
  const Scalars s;
  const DenseOperands dense(shape_, types_, F_, B, C);
  use_host_scalars(handle);
  check(cusparseSpMM(handle, kNoTranspose, kNoTranspose, s.alpha(types_.compute), a_, dense.b(),
                     s.beta(types_.compute), dense.c(), types_.compute, kAlgorithm, workspace),
        "cusparseSpMM");
}

// ---- edge values and the mixed-precision epilogue -------------------------------------------
namespace {
constexpr int kThreads = 256;

unsigned blocks_for(int64_t n, const char* what) {
  const int64_t blocks = (n + kThreads - 1) / kThreads;
  IOGNN_CHECK(blocks <= INT32_MAX, ValueError, "propagate (cuSPARSE): ", n, " ", what,
              " exceed one launch");
  return unsigned(blocks);
}

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

template <typename T, typename index_t>
__global__ void finish_rows_kernel(int64_t n, int64_t F, const float* __restrict__ C,
                                   const index_t* __restrict__ mean_offsets, T* __restrict__ out) {
  const int64_t k = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (k >= n) return;
  float s = 1.0f;
  if (mean_offsets) {
    const int64_t i = k / F;
    const int64_t deg = int64_t(mean_offsets[i + 1]) - int64_t(mean_offsets[i]);
    if (deg > 0) s = 1.0f / float(deg);
  }
  out[k] = from_acc<T>(C[k] * s);
}
}  // namespace

template <typename acc, typename index_t>
void edge_values(int64_t n, const acc* weight, const index_t* perm, const acc* scale, acc* values,
                 cudaStream_t stream) {
  if (n == 0) return;
  edge_values_kernel<acc, index_t>
      <<<blocks_for(n, "edges"), kThreads, 0, stream>>>(n, weight, perm, scale, values);
  IOGNN_CUDA_CHECK_LAUNCH("edge_values_kernel");
}

template <typename T, typename index_t>
void finish_rows(int64_t rows, int64_t F, const float* C, const index_t* mean_offsets, T* out,
                 cudaStream_t stream) {
  const int64_t n = rows * F;
  if (n == 0) return;
  finish_rows_kernel<T, index_t>
      <<<blocks_for(n, "outputs"), kThreads, 0, stream>>>(n, F, C, mean_offsets, out);
  IOGNN_CUDA_CHECK_LAUNCH("finish_rows_kernel");
}

#define IOGNN_EDGE_VALUES(acc, index_t)                                                       \
  template void edge_values<acc, index_t>(int64_t, const acc*, const index_t*, const acc*, acc*, \
                                          cudaStream_t);
IOGNN_EDGE_VALUES(float, int32_t)
IOGNN_EDGE_VALUES(float, int64_t)
IOGNN_EDGE_VALUES(double, int32_t)
IOGNN_EDGE_VALUES(double, int64_t)
#undef IOGNN_EDGE_VALUES

#define IOGNN_FINISH_ROWS(T, index_t)                                                         \
  template void finish_rows<T, index_t>(int64_t, int64_t, const float*, const index_t*, T*, \
                                        cudaStream_t);
IOGNN_FINISH_ROWS(half_t, int32_t)
IOGNN_FINISH_ROWS(half_t, int64_t)
IOGNN_FINISH_ROWS(bf16_t, int32_t)
IOGNN_FINISH_ROWS(bf16_t, int64_t)
#undef IOGNN_FINISH_ROWS

}  // namespace iognn::cuda

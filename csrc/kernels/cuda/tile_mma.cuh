// The Tensor Core operand of each storage type, for the kernels that multiply 16 x 16 blocks
// staged in shared memory with nvcuda::wmma (fp32 accumulators): TF32 for float (k-steps of 8,
// the operands rounded to TF32 after loading), fp16 and bf16 as they are stored (k-steps of 16).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <mma.h>

#include <cstring>
#include <type_traits>

#include "core/numeric.h"
#include "kernels/cuda/common.cuh"

namespace iognn::cuda {

template <typename T>
struct TileMma;

template <>
struct TileMma<float> {
  using In = float;  // the staged element
  using Prec = nvcuda::wmma::precision::tf32;
  static constexpr int K = 8;
  __device__ static In from_float(float v) { return v; }
  __device__ static In from_storage(float v) { return v; }
  template <class Frag>
  __device__ static void round(Frag& f) {
#pragma unroll
    for (int i = 0; i < f.num_elements; ++i) f.x[i] = nvcuda::wmma::__float_to_tf32(f.x[i]);
  }
};

// fp16 and bf16: the stored bits are the operand's.
template <typename Storage, typename Operand>
struct TileMma16 {
  using In = Operand;
  using Prec = Operand;
  static constexpr int K = 16;
  __device__ static In from_storage(Storage v) {
    static_assert(sizeof(Storage) == sizeof(In), "a 16-bit storage type is its operand's bits");
    In x;
    std::memcpy(&x, &v, sizeof x);
    return x;
  }
  __device__ static In from_float(float v) { return from_storage(from_acc<Storage>(v)); }
  template <class Frag>
  __device__ static void round(Frag&) {}
};
template <>
struct TileMma<half_t> : TileMma16<half_t, __half> {};
template <>
struct TileMma<bf16_t> : TileMma16<bf16_t, __nv_bfloat16> {};

// acc (+)= A B for one 16 x 16 output block: A [16 x depth] row-major (lda), B [depth x 16] with
// layout LayoutB (ldb), depth a multiple of K; the operands are read from shared memory.
template <typename T, typename LayoutB, int depth, class Acc>
__device__ __forceinline__ void mma_block(Acc& acc, const typename TileMma<T>::In* a, int lda,
                                          const typename TileMma<T>::In* b, int ldb) {
  using M = TileMma<T>;
  namespace wmma = nvcuda::wmma;
  constexpr bool b_row_major = std::is_same_v<LayoutB, wmma::row_major>;
#pragma unroll
  for (int k = 0; k < depth; k += M::K) {
    wmma::fragment<wmma::matrix_a, 16, 16, M::K, typename M::Prec, wmma::row_major> fa;
    wmma::fragment<wmma::matrix_b, 16, 16, M::K, typename M::Prec, LayoutB> fb;
    wmma::load_matrix_sync(fa, a + k, lda);
    // B's k-th row block: rows k.. of a row-major B, or columns k.. of a column-major one.
    wmma::load_matrix_sync(fb, b_row_major ? b + k * ldb : b + k, ldb);
    M::round(fa);
    M::round(fb);
    wmma::mma_sync(acc, fa, fb, acc);
  }
}

}  // namespace iognn::cuda

/// @file cpu_gemm.h
/// @brief The CPU GEMM of chapter 04's given code: ch04.6's packed, cache-blocked algorithm with
/// a hand-written SIMD micro-kernel (explicit fused multiply-adds), threaded, and the same bits
/// for every thread count, block size and instruction set that has FMA.
///
/// Every element is one chain of fused multiply-adds in k order,
/// \f[ c_{ij} \leftarrow \mathrm{fma}(a_{i,K-1}, b_{K-1,j}, \dots
///     \mathrm{fma}(a_{i1}, b_{1j}, \mathrm{fma}(a_{i0}, b_{0j}, c^{(0)}_{ij}))) \f]
/// with \f$ c^{(0)} = 0 \f$, or the old value of c when accumulating. A K block continues the
/// chain from the partial sums it stored (it does not add a separate block sum), so the blocking,
/// the split of the work between threads and the SIMD width (AVX-512, AVX2 or the portable
/// lanes) never change a result: `std::fma` in a triple loop gives the same bits.
#pragma once

#include <cstdint>
#include <vector>

#include "tt/tensor.h"

namespace tt::cpu {

/// Where the matrices of a batched matmul live (the MatmulKernel layout contract of ops_matmul.h).
/// Element (i, k) of matrix p of a is at a.data_ptr() + a_off[p] + i * a_rs + k * a_cs; likewise
/// for b; out is contiguous, so element (i, j) of matrix p is at p*M*N + i*N + j.
struct MatmulGeometry {
  int64_t batch = 1;           ///< number of matrices (the product of out's batch dims)
  int64_t M = 0;               ///< rows of each matrix of out and a
  int64_t N = 0;               ///< columns of each matrix of out and b
  int64_t K = 0;               ///< columns of a, rows of b (the summed dimension)
  int64_t a_rs = 0;            ///< row stride of a's matrices
  int64_t a_cs = 0;            ///< column stride of a's matrices
  int64_t b_rs = 0;            ///< row stride of b's matrices
  int64_t b_cs = 0;            ///< column stride of b's matrices
  std::vector<int64_t> a_off;  ///< offset of matrix p in a
  std::vector<int64_t> b_off;  ///< offset of matrix p in b

  /// The geometry of out = a @ b under the MatmulKernel contract (batch dims already expanded).
  MatmulGeometry(const Tensor& out, const Tensor& a, const Tensor& b);
};

/// A matrix operand in memory: element (i, k) is at data[i * rs + k * cs].
template <typename T>
struct StridedMatrix {
  const T* data;  ///< element (0, 0)
  int64_t rs;     ///< distance between rows, in elements
  int64_t cs;     ///< distance between columns, in elements
};

/// The instruction set of gemm_fma's micro-kernel in this build: "avx512", "avx2" (with FMA) or
/// "portable" (lanes of std::fma, for builds without FMA instructions: correct, much slower).
const char* gemm_fma_isa();

/// True when gemm_fma runs on the CPU's FMA instructions (AVX2 + FMA or AVX-512), i.e. when it
/// is the fastest CPU GEMM of the project; false for the portable lanes.
bool gemm_fma_is_native();

/// c[i * ldc + j] = c0 + sum over k of a(i, k) * b(k, j) for i < M, j < N, as one fused
/// multiply-add chain per element in k order (see the file comment), with c0 = the old c when
/// `accumulate`, else 0 (then c is never read). M, N, K >= 0 (K = 0: c = c0); ldc >= N. Threaded
/// with up to tt::num_threads() tasks along the longer side of c (fewer for small products; one
/// inside a parallel region), and the same bits for any thread count. float and double.
template <typename T>
void gemm_fma(int64_t M, int64_t N, int64_t K, StridedMatrix<T> a, StridedMatrix<T> b, T* c,
              int64_t ldc, bool accumulate);

/// CPU kernel "matmul_fma" (MatmulKernel; given code): out[p] = a[p] @ b[p] by gemm_fma. It is
/// also the default "matmul" where gemm_fma_is_native(); elsewhere "matmul" is matmul_eigen.
void matmul_fma(const Tensor& out, const Tensor& a, const Tensor& b);

}  // namespace tt::cpu

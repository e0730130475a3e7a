// Helpers of chapter 07's tests: chapter 06's CUDA fixture and seeded inputs, plus an
// independent cuBLAS reference for the hand-written SGEMMs.
#pragma once

#include <cmath>
#include <string>

#include "../../06_cuda_basics/tests/ch06_test_util.h"
#include "tt/cuda_matmul.h"
#include "tt/testing.h"

#if TT_WITH_CUDA
#include "tt/cuda_blas.h"
#include "tt/cuda_device.h"
#endif

namespace tt::test07 {

using test06::CudaTest;
using test06::random_tensor;
using test06::strided_view;

/// Fixture of every CUDA test of this chapter: chapter 06's (skips without a GPU, caching
/// allocator off) with TF32 off, so that float32 results are plain fp32 arithmetic.
class CudaMatmulTest : public CudaTest {
 protected:
  void SetUp() override {
    CudaTest::SetUp();
    if (IsSkipped()) return;
    was_tf32_ = cuda::allow_tf32();
    cuda::set_allow_tf32(false);
  }
  void TearDown() override {
    if (!IsSkipped()) cuda::set_allow_tf32(was_tf32_);
    CudaTest::TearDown();
  }

 private:
  bool was_tf32_ = false;
};

/// Tolerance of a float32 product with inner dimension K of N(0, 1) inputs, two different
/// summation orders: each output is a sum of K terms of size ~1, so rounding differences grow
/// like K * 2^-24 * sqrt(K) at worst; 4e-6 * K (+1e-5) is far above that (3e-5 at K = 513
/// typically) and far below any indexing mistake (which is O(1)).
inline double fp32_gemm_atol(int64_t K) {
  return 4e-6 * static_cast<double>(K) + 1e-5;
}

#if TT_WITH_CUDA
/// out = a @ b for contiguous float32 CUDA matrices a [M, K], b [K, N] with a direct
/// cublasSgemm call (the row-major trick written out by hand, TF32 off): the reference of the
/// hand-written kernels, independent of exercise ch07.1.
inline Tensor cublas_reference(const Tensor& a, const Tensor& b) {
  const int M = static_cast<int>(a.size(0)), K = static_cast<int>(a.size(1));
  const int N = static_cast<int>(b.size(1));
  Tensor out = zeros({M, N}, {DType::kFloat32, a.device()});
  if (M == 0 || N == 0 || K == 0) return out;
  cuda::DeviceGuard guard(a.device().index);
  cublasHandle_t h = cuda::cublas_handle(a.device().index);
  TT_CUBLAS_CHECK(TT_CUBLAS(cublasSetMathMode)(h, CUBLAS_DEFAULT_MATH));
  const float one = 1.0f, zero = 0.0f;
  // C^T (N x M, ld N) = B^T (N x K, ld N) * A^T (K x M, ld K)
  TT_CUBLAS_CHECK(TT_CUBLAS(cublasSgemm)(h, CUBLAS_OP_N, CUBLAS_OP_N, N, M, K, &one,
                                         b.data<float>(), N, a.data<float>(), K, &zero,
                                         out.data<float>(), N));
  return out;
}
#endif

}  // namespace tt::test07

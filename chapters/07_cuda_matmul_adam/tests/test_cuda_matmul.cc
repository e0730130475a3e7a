// The CUDA "matmul" (cuBLAS through the plan of exercise ch07.1) against chapter 04's CPU
// matmul: float64 to 1e-12, float32 (TF32 off) to the fp32 GEMM tolerance, for odd and square
// sizes, transposed views, broadcast batches, and through autograd (the backward multiplies
// transposed views, which must reach cuBLAS as op flags, not copies).
#include <string>
#include <vector>

#include "ch07_test_util.h"
#if TT_WITH_CUDA
#include <cublasLt.h>
#endif
#include "tt/autograd.h"
#include "tt/dispatcher.h"
#include "tt/ops_matmul.h"

namespace tt {
namespace {

using test07::CudaMatmulTest;
using test07::fp32_gemm_atol;
using test07::random_tensor;

using Ch07_1_CudaCublasMatmul = CudaMatmulTest;

// tt::matmul of CPU tensors `a`, `b` on the GPU and on the CPU (float64 reference), compared.
void check_matmul(const Tensor& a, const Tensor& b, const std::string& what) {
  SCOPED_TRACE(what + ": " + a.describe() + " @ " + b.describe());
  const Tensor expected = matmul(a.to(DType::kFloat64), b.to(DType::kFloat64));
  const Tensor got = matmul(a.to(Device::cuda()), b.to(Device::cuda()));
  ASSERT_EQ(got.device(), Device::cuda());
  ASSERT_EQ(got.shape(), expected.shape());
  const double atol = a.dtype() == DType::kFloat64 ? 1e-12 : fp32_gemm_atol(a.size(-1));
  EXPECT_TENSOR_NEAR(got.to(Device::cpu()).to(DType::kFloat64), expected, atol, 1e-5);
}

TEST_F(Ch07_1_CudaCublasMatmul, OddAndSquareSizesMatchCpu) {
  const int64_t sizes[][3] = {{1, 1, 1},     {127, 129, 255}, {129, 127, 513}, {255, 513, 1},
                              {513, 1, 255}, {1, 513, 127},   {256, 256, 256}, {512, 512, 512}};
  for (DType dt : {DType::kFloat32, DType::kFloat64}) {
    for (const auto& s : sizes) {
      const Tensor a = random_tensor({s[0], s[2]}, dt, 1), b = random_tensor({s[2], s[1]}, dt, 2);
      check_matmul(a, b,
                   std::string(dtype_name(dt)) + " M=" + std::to_string(s[0]) +
                       " N=" + std::to_string(s[1]) + " K=" + std::to_string(s[2]));
    }
  }
}

TEST_F(Ch07_1_CudaCublasMatmul, TransposedViewsAreReadInPlace) {
  // a^T and b^T views reach the kernel as column-major operands (ch04's gemm_operand keeps them):
  // the plan must use op T instead of a copy.
  for (DType dt : {DType::kFloat32, DType::kFloat64}) {
    const Tensor at = random_tensor({65, 33}, dt, 3), bt = random_tensor({17, 65}, dt, 4);
    const Tensor a = random_tensor({33, 65}, dt, 5), b = random_tensor({65, 17}, dt, 6);
    check_matmul(at.transpose(0, 1), b, "a^T @ b");
    check_matmul(a, bt.transpose(0, 1), "a @ b^T");
    check_matmul(at.transpose(0, 1), bt.transpose(0, 1), "a^T @ b^T");
    // a padded row-major operand: a column slice of a wider matrix.
    const Tensor wide = random_tensor({33, 80}, dt, 7);
    check_matmul(wide.narrow(1, 3, 65), b, "a sliced from [33, 80]");
  }
}

TEST_F(Ch07_1_CudaCublasMatmul, BatchedAndBroadcastBatches) {
  for (DType dt : {DType::kFloat32, DType::kFloat64}) {
    check_matmul(random_tensor({4, 31, 20}, dt, 8), random_tensor({4, 20, 9}, dt, 9),
                 "plain batch");
    check_matmul(random_tensor({4, 31, 20}, dt, 8), random_tensor({1, 20, 9}, dt, 9),
                 "b broadcast along the batch (stride 0)");
    check_matmul(random_tensor({2, 1, 7, 5}, dt, 10), random_tensor({3, 5, 6}, dt, 11),
                 "[2, 1] x [3]: two batch groups");
    check_matmul(random_tensor({3, 4, 7, 5}, dt, 12).transpose(-1, -2),
                 random_tensor({3, 4, 7, 6}, dt, 13), "batched a^T");
    check_matmul(random_tensor({5, 8}, dt, 14), random_tensor({8}, dt, 15), "matrix @ vector");
  }
}

TEST_F(Ch07_1_CudaCublasMatmul, BackwardMatchesCpu) {
  for (DType dt : {DType::kFloat32, DType::kFloat64}) {
    SCOPED_TRACE(dtype_name(dt));
    const Tensor a0 = random_tensor({2, 1, 37, 19}, dt, 20),
                 b0 = random_tensor({3, 19, 23}, dt, 21);
    const Tensor g0 = random_tensor({2, 3, 37, 23}, dt, 22);
    std::vector<Tensor> grads;
    for (Device dev : {Device::cuda(), Device::cpu()}) {
      const Tensor a = a0.to(dev).set_requires_grad(), b = b0.to(dev).set_requires_grad();
      autograd::backward(matmul(a, b), g0.to(dev));
      ASSERT_TRUE(a.grad().defined() && b.grad().defined()) << dev.str();
      EXPECT_EQ(a.grad().device(), dev);
      grads.push_back(a.grad().to(Device::cpu()));
      grads.push_back(b.grad().to(Device::cpu()));
    }
    const double atol = dt == DType::kFloat64 ? 1e-11 : fp32_gemm_atol(3 * 23);
    EXPECT_TENSOR_NEAR(grads[0], grads[2], atol, 1e-5) << "dL/da";
    EXPECT_TENSOR_NEAR(grads[1], grads[3], atol, 1e-5) << "dL/db";
  }
}

TEST_F(Ch07_1_CudaCublasMatmul, EmptyAndZeroKProblems) {
  const Tensor a = zeros({3, 0}, {DType::kFloat32, Device::cuda()});
  const Tensor b = zeros({0, 4}, {DType::kFloat32, Device::cuda()});
  const Tensor out = matmul(a, b);  // K = 0: an empty sum, all zeros
  EXPECT_TENSOR_NEAR(out.to(Device::cpu()), zeros({3, 4}), 0.0, 0.0);
  const Tensor e = matmul(zeros({0, 5}, {DType::kFloat32, Device::cuda()}),
                          zeros({5, 2}, {DType::kFloat32, Device::cuda()}));
  EXPECT_EQ(e.shape(), (Shape{0, 2}));
}

TEST_F(Ch07_1_CudaCublasMatmul, Tf32IsOptInAndClose) {
  EXPECT_FALSE(cuda::allow_tf32()) << "the fixture turns TF32 off";
  const Tensor a = random_tensor({256, 1024}, DType::kFloat32, 30);
  const Tensor b = random_tensor({1024, 128}, DType::kFloat32, 31);
  const Tensor expected = matmul(a.to(DType::kFloat64), b.to(DType::kFloat64));
  Tensor tf32;
  {
    cuda::AllowTf32Guard guard(true);
    tf32 = matmul(a.to(Device::cuda()), b.to(Device::cuda())).to(Device::cpu());
  }
  EXPECT_FALSE(cuda::allow_tf32()) << "AllowTf32Guard must restore the setting";
  // TF32 inputs carry 10 mantissa bits: each product is off by up to ~2^-10 relative, so a
  // K = 1024 dot product of N(0,1) values (size ~32) is typically off by ~3e-2, at most a few
  // times that over 32768 outputs; 0.5 still rejects anything but a TF32 rounding effect.
  EXPECT_TENSOR_NEAR(tf32.to(DType::kFloat64), expected, 0.5, 0.0);
}

TEST_F(Ch07_1_CudaCublasMatmul, HandleIsCachedPerDevice) {
#if TT_WITH_CUDA
  cuda::DeviceGuard guard(0);
  EXPECT_EQ(cuda::cublas_handle(0), cuda::cublas_handle(0));
#endif
}

TEST_F(Ch07_1_CudaCublasMatmul, RejectsMixedDtypes) {
  const Tensor out = empty({2, 2}, {DType::kFloat32, Device::cuda()});
  const Tensor a = zeros({2, 3}, {DType::kFloat64, Device::cuda()});
  const Tensor b = zeros({3, 2}, {DType::kFloat32, Device::cuda()});
  EXPECT_TT_ERROR(call_kernel<MatmulKernel>("matmul", Device::cuda(), out, a, b), "cuBLAS",
                  "float64");
}

#if TT_WITH_CUDA
// cuBLAS and cuBLASLt are opened with dlopen on first use, not linked (tt/cuda_blas.h): this
// needs the libraries, not a GPU, so it runs on CPU-only machines too.
TEST(Ch07_CublasLibrary, OpenedOnFirstUseNamingWhatIsMissing) {
  const auto status_name = TT_CUBLAS(cublasGetStatusName);
  ASSERT_NE(status_name, nullptr);
  EXPECT_STREQ(status_name(CUBLAS_STATUS_NOT_SUPPORTED), "CUBLAS_STATUS_NOT_SUPPORTED");
  EXPECT_EQ(reinterpret_cast<void*>(status_name),
            cuda::blas_symbol(cuda::BlasLibrary::kCublas, "cublasGetStatusName"));
  EXPECT_GT(TT_CUBLASLT(cublasLtGetVersion)(), 0u);
  EXPECT_TT_ERROR(cuda::blas_symbol(cuda::BlasLibrary::kCublas, "cublasNoSuchFunction"),
                  "libcublas.so", "has no function cublasNoSuchFunction");
  EXPECT_TT_ERROR(cuda::blas_symbol(cuda::BlasLibrary::kCublasLt, "cublasLtNoSuchFunction"),
                  "libcublasLt.so", "has no function cublasLtNoSuchFunction");
  EXPECT_EQ(cuda::cublas_error_message(CUBLAS_STATUS_INVALID_VALUE, "f(x)", "a.cu", 7)
                .rfind("cuBLAS error CUBLAS_STATUS_INVALID_VALUE (", 0),
            0u);
}
#endif

}  // namespace
}  // namespace tt

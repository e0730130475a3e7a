// Given code of chapter 06: CUDA error checks, devices and the guard, the backend's transfers
// and fill. The error-message and registration tests need a CUDA build but no GPU.
#include <string>
#include <vector>

#include "ch06_test_util.h"
#include "tt/dispatcher.h"
#include "tt/ops.h"
#include "tt/ops_reduce.h"

namespace tt {
namespace {

using test06::CudaTest;
using test06::random_tensor;
using test06::same_values;
using test06::strided_view;

#if TT_WITH_CUDA
cudaError_t pretend_out_of_memory(void** p, std::size_t n) {
  (void)p;
  (void)n;
  return cudaErrorMemoryAllocation;
}
#endif

TEST(Ch06_CudaErrorCheck, NamesErrorCallFileAndLine) {
#if TT_WITH_CUDA
  void* p = nullptr;
  const std::size_t n = 64;
  const int line = __LINE__ + 1;
  EXPECT_TT_ERROR(([&] { TT_CUDA_CHECK(pretend_out_of_memory(&p, n)); }()),
                  "CUDA error cudaErrorMemoryAllocation (out of memory) in "
                  "pretend_out_of_memory(&p, n) at ",
                  "test_cuda_device.cc:" + std::to_string(line));
#else
  GTEST_SKIP() << "built without CUDA";
#endif
}

TEST(Ch06_CudaErrorCheck, SuccessDoesNotThrow) {
#if TT_WITH_CUDA
  EXPECT_NO_THROW(TT_CUDA_CHECK(cudaSuccess));
  EXPECT_EQ(cuda::error_message(cudaErrorInvalidValue, "f(x)", "a.cu", 7),
            "CUDA error cudaErrorInvalidValue (invalid argument) in f(x) at a.cu:7");
#else
  GTEST_SKIP() << "built without CUDA";
#endif
}

TEST(Ch06_Registration, CudaKernelsAndBackendAreRegistered) {
  if (!built_with_cuda()) GTEST_SKIP() << "built without CUDA";
  EXPECT_TRUE(has_backend(DeviceType::kCUDA));
  for (const char* op : kBinaryOps) {
    EXPECT_TRUE(KernelRegistry::instance().has(op, DeviceType::kCUDA)) << op;
    EXPECT_NO_THROW((KernelRegistry::instance().find<BinaryKernel>(op, DeviceType::kCUDA))) << op;
  }
  EXPECT_NO_THROW((KernelRegistry::instance().find<ReduceKernel>("sum", DeviceType::kCUDA)));
}

TEST(Ch06_Registration, WithoutCudaTheErrorSaysSo) {
  if (built_with_cuda()) GTEST_SKIP() << "built with CUDA";
  EXPECT_TT_ERROR(empty({2}, {DType::kFloat32, Device::cuda(0)}), "no backend", "cuda");
}

// ----- devices -----------------------------------------------------------------------------

using Ch06_CudaDevice = CudaTest;

TEST_F(Ch06_CudaDevice, BadIndexIsATtError) {
  const int n = cuda_device_count();
  EXPECT_TT_ERROR(empty({2}, {DType::kFloat32, Device::cuda(n)}),
                  "cuda:" + std::to_string(n) + " is not available");
}

TEST_F(Ch06_CudaDevice, GuardSetsAndRestoresTheDevice) {
#if TT_WITH_CUDA
  TT_CUDA_CHECK(cudaSetDevice(0));
  const int last = cuda::device_count() - 1;
  {
    cuda::DeviceGuard guard(last);
    int now = -1;
    TT_CUDA_CHECK(cudaGetDevice(&now));
    EXPECT_EQ(now, last);
  }
  int after = -1;
  TT_CUDA_CHECK(cudaGetDevice(&after));
  EXPECT_EQ(after, 0);
  EXPECT_TT_ERROR(cuda::DeviceGuard(-1), "DeviceGuard", "cuda:-1");
  EXPECT_GT(cuda::multiprocessor_count(0), 0);
  EXPECT_EQ(cuda::grid_size(1, 256, 0), 1u);
  EXPECT_EQ(cuda::grid_size(1 << 30, 256, 0),
            static_cast<unsigned>(cuda::multiprocessor_count(0) * 8))
      << "a grid-stride launch fills the GPU once and no more";
#endif
}

TEST_F(Ch06_CudaDevice, LaunchCheckNamesTheKernel) {
#if TT_WITH_CUDA
  // A launch of no kernel at all fails like a bad launch configuration would.
  (void)cudaLaunchKernel(nullptr, dim3(1), dim3(1), nullptr, 0, cuda::stream(0));
  EXPECT_TT_ERROR(([] { TT_CUDA_CHECK_LAUNCH("my_kernel"); }()), "CUDA error",
                  "launch of my_kernel");
  EXPECT_NO_THROW(TT_CUDA_CHECK(cudaGetLastError())) << "the check must clear the error";
#endif
}

TEST_F(Ch06_CudaDevice, SharedMemoryBeyondTheDevicesLimitIsDeclined) {
#if TT_WITH_CUDA
  // (What it allows, it opts in: chapters 10, 11 and 15's tiled kernels launch with more than
  // 48 KiB through it, and their CUDA tests run them.)
  const int limit = cuda::max_shared_memory_optin(0);
  EXPECT_GE(limit, 48 * 1024) << "every GPU since Volta allows more than 48 KiB after opting in";
  EXPECT_FALSE(cuda::allow_dynamic_shared_memory(nullptr, static_cast<std::size_t>(limit) + 1, 0))
      << "more than the device has: declined before any driver call";
  EXPECT_TT_ERROR(cuda::max_shared_memory_optin(cuda::device_count()), "max_shared_memory_optin");
#endif
}

TEST_F(Ch06_CudaDevice, SecondDeviceWorksLikeTheFirst) {
  if (cuda_device_count() < 2) GTEST_SKIP() << "needs two GPUs";
  const Tensor x = random_tensor({3, 129}, DType::kFloat32, 3);
  const Tensor on1 = x.to(Device::cuda(1));
  EXPECT_EQ(on1.device(), Device::cuda(1));
  EXPECT_TRUE(same_values(on1, x));
  EXPECT_TRUE(same_values(on1.to(Device::cuda(0)), x)) << "cuda:1 -> cuda:0 goes through the host";
  const Tensor out = empty({3, 129}, {DType::kFloat32, Device::cuda(1)});
  call_kernel<BinaryKernel>("add", out.device(), out, on1, on1);
  const Tensor expected = empty({3, 129});
  call_kernel<BinaryKernel>("add", Device::cpu(), expected, x, x);
  EXPECT_TRUE(same_values(out, expected));
}

// ----- transfers (given: cudaMemcpyAsync on the device's stream) ---------------------------

using Ch06_CudaTransfer = CudaTest;

TEST_F(Ch06_CudaTransfer, RoundTripEveryDtypeAndSize) {
  for (DType dt : {DType::kFloat32, DType::kFloat64, DType::kInt64}) {
    for (int64_t n : test06::kOddSizes) {
      const Tensor x = random_tensor({n}, dt, static_cast<uint64_t>(n));
      const Tensor d = x.to(Device::cuda());
      ASSERT_EQ(d.device(), Device::cuda(0));
      ASSERT_EQ(d.dtype(), dt);
      EXPECT_TRUE(same_values(d.to(Device::cpu()), x)) << dtype_name(dt) << " n=" << n;
    }
  }
}

TEST_F(Ch06_CudaTransfer, EmptyAndScalarTensors) {
  const Tensor e = zeros({0, 3});
  const Tensor de = e.to(Device::cuda());
  EXPECT_EQ(de.shape(), (Shape{0, 3}));
  EXPECT_EQ(de.to(Device::cpu()).numel(), 0);
  const Tensor s = scalar_tensor(2.5);
  EXPECT_EQ(s.to(Device::cuda()).item(), 2.5);
  EXPECT_EQ(s.to(Device::cuda()).to_vector<float>(), std::vector<float>{2.5f});
}

TEST_F(Ch06_CudaTransfer, NonContiguousHostSourceIsPackedFirst) {
  // A transposed CPU tensor goes up contiguous (chapter 01 packs it on the host).
  const Tensor base = random_tensor({5, 7}, DType::kFloat32, 11);
  const Tensor t = strided_view(base, {7, 5}, {1, 7});
  const Tensor d = t.to(Device::cuda());
  EXPECT_TRUE(d.is_contiguous());
  EXPECT_TRUE(same_values(d, t));
}

// ----- fill (given) ------------------------------------------------------------------------

using Ch06_CudaFill = CudaTest;

TEST_F(Ch06_CudaFill, ContiguousValuesZeroAndNegativeZero) {
  for (DType dt : {DType::kFloat32, DType::kFloat64, DType::kInt64}) {
    for (int64_t n : test06::kOddSizes) {
      const Tensor d = empty({n}, {dt, Device::cuda()});
      d.fill_(-3.0);
      EXPECT_TRUE(same_values(d, full({n}, -3.0, {dt}))) << dtype_name(dt) << " n=" << n;
      d.fill_(0.0);
      EXPECT_TRUE(same_values(d, zeros({n}, {dt}))) << dtype_name(dt) << " n=" << n;
    }
  }
  const Tensor d = empty({129}, {DType::kFloat32, Device::cuda()});
  d.fill_(-0.0);  // not all-zero bytes: must not take the memset path
  const std::vector<float> v = d.to_vector<float>();
  EXPECT_TRUE(std::signbit(v[0]) && std::signbit(v[128])) << "fill_(-0.0) lost the sign";
}

TEST_F(Ch06_CudaFill, NonContiguousViewLeavesTheRestAlone) {
  // Fill every other column of rows 1..3 of a [5, 129] tensor.
  const Tensor host = random_tensor({5, 129}, DType::kFloat32, 5);
  const Tensor dev = host.to(Device::cuda());
  strided_view(dev, {3, 65}, {129, 2}, 129).fill_(7.0);
  strided_view(host, {3, 65}, {129, 2}, 129).fill_(7.0);  // the CPU backend as reference
  EXPECT_TRUE(same_values(dev, host));
}

TEST_F(Ch06_CudaFill, TransposedAndBroadcastViews) {
  const Tensor host = zeros({33, 17}, {DType::kInt64});
  const Tensor dev = host.to(Device::cuda());
  strided_view(dev, {17, 33}, {1, 17}).fill_(4.0);  // transposed: the whole tensor
  EXPECT_TRUE(same_values(dev, full({33, 17}, 4.0, {DType::kInt64})));
  strided_view(dev, {100, 17}, {0, 1}, 17 * 5).fill_(9.0);  // row 5 seen 100 times
  strided_view(host, {33, 17}, {17, 1}).fill_(4.0);
  strided_view(host, {1, 17}, {17, 1}, 17 * 5).fill_(9.0);
  EXPECT_TRUE(same_values(dev, host));
}

}  // namespace
}  // namespace tt

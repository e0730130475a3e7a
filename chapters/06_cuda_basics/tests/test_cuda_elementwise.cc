// Exercise ch06.2: the CUDA binary kernels against the CPU kernels of chapter 02 on the same
// seeded inputs. Tolerance: none — IEEE add, sub, mul and div are correctly rounded on both
// sides (nvcc's default -prec-div=true), and int64 is exact, so results must be bitwise equal.
#include <string>
#include <vector>

#include "ch06_test_util.h"
#include "tt/dispatcher.h"
#include "tt/ops.h"

namespace tt {
namespace {

using test06::CudaTest;
using test06::Layout;
using test06::random_tensor;
using test06::same_values;
using test06::strided_view;

using Ch06_2_CudaBinary = CudaTest;

// Runs `op` on CUDA (first, so a starter fails with its own TODO) and on the CPU with operands
// made by the same layouts from the same seeded bases, and compares bitwise.
void check_binary(const std::string& op, DType dtype, const Shape& out_shape, const Layout& la,
                  const Layout& lb) {
  SCOPED_TRACE(op + " " + dtype_name(dtype) + " out " + shape_str(out_shape) + ", a: " + la.name +
               ", b: " + lb.name);
  const Tensor base_a = random_tensor(la.base_shape, dtype, 101);
  const Tensor base_b = random_tensor(lb.base_shape, dtype, 202, /*nonzero=*/op == "div");
  const Device gpu = Device::cuda();
  const Tensor a_gpu = la.view(base_a.to(gpu)), b_gpu = lb.view(base_b.to(gpu));
  const Tensor out_gpu = empty(out_shape, {dtype, gpu});
  call_kernel<BinaryKernel>(op, gpu, out_gpu, a_gpu, b_gpu);
  const Tensor a_cpu = la.view(base_a), b_cpu = lb.view(base_b);
  const Tensor out_cpu = empty(out_shape, {dtype});
  call_kernel<BinaryKernel>(op, Device::cpu(), out_cpu, a_cpu, b_cpu);
  EXPECT_TRUE(same_values(out_gpu, out_cpu));
}

Layout contiguous(const Shape& shape) {
  return {"contiguous " + shape_str(shape), shape, [](const Tensor& t) { return t; }};
}

TEST_F(Ch06_2_CudaBinary, ContiguousOddSizesAllOpsAllDtypes) {
  // The vectorized path (16-byte loads) plus its tail of n % (16 / sizeof(T)) elements.
  for (const char* op : kBinaryOps) {
    for (DType dt : {DType::kFloat32, DType::kFloat64, DType::kInt64}) {
      for (int64_t n : test06::kOddSizes)
        check_binary(op, dt, {n}, contiguous({n}), contiguous({n}));
    }
  }
}

TEST_F(Ch06_2_CudaBinary, ContiguousGpt2Activation) {
  const Shape s = {8, 1024, 768};
  check_binary("add", DType::kFloat32, s, contiguous(s), contiguous(s));
}

TEST_F(Ch06_2_CudaBinary, MisalignedContiguousTakesTheScalarPath) {
  // Views starting one element into their storage: contiguous but not 16-byte aligned.
  for (DType dt : {DType::kFloat32, DType::kFloat64}) {
    for (int64_t n : {int64_t{1}, int64_t{129}, int64_t{4097}}) {
      const Layout shifted{
          "offset 1", {n + 1}, [n](const Tensor& t) { return strided_view(t, {n}, {1}, 1); }};
      check_binary("mul", dt, {n}, shifted, contiguous({n}));
      check_binary("sub", dt, {n}, contiguous({n}), shifted);
    }
  }
}

TEST_F(Ch06_2_CudaBinary, TransposedOperands) {
  for (int64_t n : {int64_t{1}, int64_t{127}, int64_t{129}}) {
    const Layout transposed{"transposed", {n, 33}, [n](const Tensor& t) {
                              return strided_view(t, {33, n}, {1, 33});
                            }};
    for (const char* op : kBinaryOps) {
      check_binary(op, DType::kFloat32, {33, n}, transposed, contiguous({33, n}));
      check_binary(op, DType::kInt64, {33, n}, contiguous({33, n}), transposed);
    }
  }
}

TEST_F(Ch06_2_CudaBinary, BroadcastBiasOverGpt2Rows) {
  // x [B, T, C] + b [C]: b has stride 0 on the first two dims.
  const Shape s = {4, 129, 768};
  const Layout bias{"bias [768] expanded", {768}, [s](const Tensor& t) {
                      return strided_view(t, s, {0, 0, 1});
                    }};
  check_binary("add", DType::kFloat32, s, contiguous(s), bias);
  check_binary("div", DType::kFloat64, s, contiguous(s), bias);
}

TEST_F(Ch06_2_CudaBinary, BroadcastBothSides) {
  // [4, 1, 5] (op) [1, 3, 1] -> [4, 3, 5]: each operand repeats along the other's dims.
  const Shape s = {4, 3, 5};
  const Layout col{"[4,1,5] expanded", {4, 1, 5}, [s](const Tensor& t) {
                     return strided_view(t, s, {5, 0, 1});
                   }};
  const Layout row{"[1,3,1] expanded", {1, 3, 1}, [s](const Tensor& t) {
                     return strided_view(t, s, {0, 1, 0});
                   }};
  for (const char* op : kBinaryOps) {
    for (DType dt : {DType::kFloat32, DType::kInt64}) check_binary(op, dt, s, col, row);
  }
}

TEST_F(Ch06_2_CudaBinary, ScalarBroadcastAndSteppedSlice) {
  for (int64_t n : test06::kOddSizes) {
    const Layout scalar{
        "0-d scalar expanded", {}, [n](const Tensor& t) { return strided_view(t, {n}, {0}); }};
    const Layout every_third{
        "every third element", {3 * n}, [n](const Tensor& t) { return strided_view(t, {n}, {3}); }};
    check_binary("mul", DType::kFloat32, {n}, every_third, scalar);
    check_binary("div", DType::kInt64, {n}, scalar, every_third);
  }
}

TEST_F(Ch06_2_CudaBinary, HighRankPermutedOperand) {
  // A 6-d permutation that cannot merge: the indexer walks 6 dims with 64-bit divisions.
  const Shape s = {2, 3, 2, 3, 2, 5};
  const Layout permuted{"reversed dims", {5, 2, 3, 2, 3, 2}, [s](const Tensor& t) {
                          return strided_view(t, s, {1, 2, 6, 12, 36, 72});
                        }};
  check_binary("sub", DType::kFloat64, s, permuted, contiguous(s));
}

TEST_F(Ch06_2_CudaBinary, EmptyTensorLaunchesNothing) {
  const Tensor a = empty({0, 5}, {DType::kFloat32, Device::cuda()});
  const Tensor out = empty({0, 5}, {DType::kFloat32, Device::cuda()});
  EXPECT_NO_THROW(call_kernel<BinaryKernel>("add", out.device(), out, a, a));
}

TEST_F(Ch06_2_CudaBinary, FrontEndRunsOnTheGpu) {
  // Chapter 02's binary_op dispatches on a's device: nothing CUDA-specific in the caller.
  const Tensor a = random_tensor({3, 129}, DType::kFloat32, 1);
  const Tensor b = random_tensor({3, 129}, DType::kFloat32, 2);
  const Tensor out = binary_op("add", a.to(Device::cuda()), b.to(Device::cuda()));
  EXPECT_EQ(out.device(), Device::cuda(0));
  EXPECT_TRUE(same_values(out, binary_op("add", a, b)));
}

TEST_F(Ch06_2_CudaBinary, MismatchedOperandsAreRejected) {
  const Tensor a = empty({4}, {DType::kFloat32, Device::cuda()});
  const Tensor d = empty({4}, {DType::kFloat64, Device::cuda()});
  const Tensor h = empty({4});
  const Tensor out = empty({4}, {DType::kFloat32, Device::cuda()});
  EXPECT_TT_ERROR(call_kernel<BinaryKernel>("add", out.device(), out, a, d), "cuda::add",
                  "float64");
  EXPECT_TT_ERROR(call_kernel<BinaryKernel>("mul", out.device(), out, a, h), "cuda::mul", "cpu");
  const Tensor wide = empty({4, 2}, {DType::kFloat32, Device::cuda()});
  EXPECT_TT_ERROR(
      call_kernel<BinaryKernel>("sub", out.device(), strided_view(wide, {4}, {2}), a, a),
      "cuda::sub", "out must be contiguous");
}

TEST_F(Ch06_2_CudaBinary, Int64DivisionByZeroGivesZero) {
  const Tensor a = from_vector<int64_t>({7, -7, 0}).to(Device::cuda());
  const Tensor z = zeros({3}, {DType::kInt64}).to(Device::cuda());
  const Tensor out = empty({3}, {DType::kInt64, Device::cuda()});
  call_kernel<BinaryKernel>("div", out.device(), out, a, z);
  EXPECT_EQ(out.to_vector<int64_t>(), (std::vector<int64_t>{0, 0, 0}));
}

}  // namespace
}  // namespace tt

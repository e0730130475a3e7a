// Exercise ch06.3: the CUDA "sum" against chapter 04's CPU sum on the same seeded inputs.
//
// Tolerance: the GPU accumulates in the input dtype (float for float32) along a fixed tree of
// depth about log2(n_red) + 16 (per-thread runs, warp and block trees); its rounding error is at
// most depth * eps * sum|x|. The CPU reference accumulates in double, sequentially within blocks
// of kReduceBlock: its own error is at most (min(n_red, kReduceBlock) + n_red / kReduceBlock) *
// 2^-53 * sum|x| (it matters for float64: 1000 equal values summed in a row). Every float output
// j is checked against the sum of both bounds, with sum|x| over output j's elements. int64 sums
// must be exact. Repeated GPU runs must be bitwise identical.
#include <cmath>
#include <string>
#include <vector>

#include "ch06_test_util.h"
#include "tt/dispatcher.h"
#include "tt/ops_reduce.h"

namespace tt {
namespace {

using test06::CudaTest;
using test06::Layout;
using test06::random_tensor;
using test06::same_values;
using test06::strided_view;

using Ch06_3_CudaSum = CudaTest;

// out's keepdim shape for `in_shape` reduced over `dims`.
Shape keepdim_shape(const Shape& in_shape, const std::vector<int64_t>& dims) {
  Shape s = in_shape;
  for (int64_t d : dims) s[static_cast<std::size_t>(d)] = 1;
  return s;
}

// Sums `layout.view(base)` over `dims` on the GPU (first) and the CPU; checks the tolerance
// above, and that a second GPU run gives the same bits.
void check_sum(DType dtype, const Layout& layout, const std::vector<int64_t>& dims) {
  const Tensor base = random_tensor(layout.base_shape, dtype, 77);
  const Device gpu = Device::cuda();
  const Tensor in_gpu = layout.view(base.to(gpu));
  const Shape out_shape = keepdim_shape(in_gpu.shape(), dims);
  SCOPED_TRACE(std::string("sum ") + dtype_name(dtype) + " of " + layout.name + " " +
               shape_str(in_gpu.shape()) + " -> " + shape_str(out_shape));
  const Tensor out_gpu = empty(out_shape, {dtype, gpu});
  call_kernel<ReduceKernel>("sum", gpu, out_gpu, in_gpu);
  const Tensor again = empty(out_shape, {dtype, gpu});
  call_kernel<ReduceKernel>("sum", gpu, again, in_gpu);

  const Tensor in_cpu = layout.view(base);
  const Tensor out_cpu = empty(out_shape, {dtype});
  call_kernel<ReduceKernel>("sum", Device::cpu(), out_cpu, in_cpu);
  EXPECT_TRUE(same_values(again, out_gpu)) << "two runs of the CUDA sum differ: not deterministic";
  if (dtype == DType::kInt64) {
    EXPECT_TRUE(same_values(out_gpu, out_cpu));
    return;
  }
  // sum |x| per output, on the CPU.
  const Tensor abs_in = in_cpu.to(DType::kFloat64).contiguous();
  double* p = abs_in.data<double>();
  for (int64_t i = 0; i < abs_in.numel(); ++i) p[i] = std::abs(p[i]);
  const Tensor abs_sum = empty(out_shape, {DType::kFloat64});
  call_kernel<ReduceKernel>("sum", Device::cpu(), abs_sum, abs_in);
  const double eps = dtype == DType::kFloat32 ? std::ldexp(1.0, -24) : std::ldexp(1.0, -53);
  const int64_t n_red =
      out_shape.empty() ? 1 : in_gpu.numel() / std::max<int64_t>(1, shape_numel(out_shape));
  const double gpu_bound = (std::log2(static_cast<double>(std::max<int64_t>(n_red, 1))) + 16) * eps;
  const double cpu_bound =
      static_cast<double>(std::min(n_red, kReduceBlock) + n_red / kReduceBlock) *
      std::ldexp(1.0, -53);
  const auto g = test06::cpu(out_gpu).to(DType::kFloat64).to_vector<double>();
  const auto c = out_cpu.to(DType::kFloat64).to_vector<double>();
  const auto a = abs_sum.to_vector<double>();
  for (std::size_t j = 0; j < g.size(); ++j) {
    const double bound = (gpu_bound + cpu_bound) * a[j];
    if (!(std::abs(g[j] - c[j]) <= bound)) {
      ADD_FAILURE() << "output " << j << " of " << g.size() << ": cuda " << g[j] << " vs cpu "
                    << c[j] << ", error " << std::abs(g[j] - c[j]) << " > bound " << bound
                    << " = (gpu " << gpu_bound << " + cpu " << cpu_bound << ") * sum|x| (" << a[j]
                    << "), n_red = " << n_red;
      return;
    }
  }
}

Layout contiguous(const Shape& shape) {
  return {"contiguous", shape, [](const Tensor& t) { return t; }};
}

TEST_F(Ch06_3_CudaSum, FullSumOddSizes) {
  // One chunk (n <= 2048), several chunks (4097: 3), and 513 chunks (more than a block's
  // threads in the second kernel).
  for (DType dt : {DType::kFloat32, DType::kFloat64, DType::kInt64}) {
    for (int64_t n : test06::kOddSizes) check_sum(dt, contiguous({n}), {0});
    for (int64_t n : {int64_t{2048}, int64_t{2049}}) check_sum(dt, contiguous({n}), {0});
  }
}

TEST_F(Ch06_3_CudaSum, FullSumGpt2Activation) {
  check_sum(DType::kFloat32, contiguous({8 * 1024 * 768}), {0});
  check_sum(DType::kFloat32, contiguous({8, 1024, 768}), {0, 1, 2});
}

TEST_F(Ch06_3_CudaSum, LastDimOf2d) {
  for (DType dt : {DType::kFloat32, DType::kFloat64, DType::kInt64}) {
    for (int64_t c :
         {int64_t{1}, int64_t{127}, int64_t{128}, int64_t{129}, int64_t{768}, int64_t{4097}}) {
      check_sum(dt, contiguous({33, c}), {1});
    }
  }
  check_sum(DType::kFloat32, contiguous({8 * 1024, 768}), {1});
}

TEST_F(Ch06_3_CudaSum, FirstDimIsAStridedReduction) {
  // Summing columns: the reduced dim has stride C, the kept one stride 1.
  check_sum(DType::kFloat32, contiguous({4097, 3}), {0});
  check_sum(DType::kFloat64, contiguous({129, 768}), {0});
  // Bias gradients of GPT-2: [B, T, N] over B and T (the two reduced dims merge into one).
  check_sum(DType::kFloat32, contiguous({8, 1024, 768}), {0, 1});
  check_sum(DType::kFloat32, contiguous({8, 1024, 2304}), {0, 1});
  // 70001 rows: three passes of column sums (274 chunks of 256, then 2, then 1); odd widths.
  for (DType dt : {DType::kFloat32, DType::kFloat64, DType::kInt64}) {
    check_sum(dt, contiguous({70001, 33}), {0});
  }
  check_sum(DType::kFloat32, contiguous({5, 7, 65}), {0});  // kept [7, 65] merges to 455
  // A batch of one row: the "sum" over the size-1 dim adds nothing (a copy, not one block per
  // element: chapter 14's one-row micro-batches).
  check_sum(DType::kFloat32, contiguous({1, 1024, 1280}), {0});
}

TEST_F(Ch06_3_CudaSum, SeveralDimsAndNonContiguousInputs) {
  check_sum(DType::kFloat32, contiguous({4, 5, 6}), {0, 2});  // reduced dims do not merge
  const Layout transposed{"transposed", {129, 65}, [](const Tensor& t) {
                            return strided_view(t, {65, 129}, {1, 65});
                          }};
  check_sum(DType::kFloat32, transposed, {1});
  check_sum(DType::kFloat32, transposed, {0, 1});
  const Layout broadcast{"[5,1] expanded to [5,1000]", {5, 1}, [](const Tensor& t) {
                           return strided_view(t, {5, 1000}, {1, 0});
                         }};
  check_sum(DType::kFloat64, broadcast, {1});
  check_sum(DType::kInt64, broadcast, {0, 1});
  const Layout stepped{"every other row", {20, 33}, [](const Tensor& t) {
                         return strided_view(t, {10, 33}, {66, 1});
                       }};
  check_sum(DType::kFloat32, stepped, {0});
}

TEST_F(Ch06_3_CudaSum, EmptyInputGivesZeros) {
  const Tensor in = empty({3, 0}, {DType::kFloat32, Device::cuda()});
  const Tensor out = empty({3, 1}, {DType::kFloat32, Device::cuda()});
  out.fill_(5.0);
  call_kernel<ReduceKernel>("sum", out.device(), out, in);
  EXPECT_TRUE(same_values(out, zeros({3, 1})));
}

TEST_F(Ch06_3_CudaSum, Chapter04FrontEndRunsOnTheGpu) {
  // tt::sum of chapter 04 calls the kernel registered for the input's device (tt::mean also
  // needs "mul_scalar", which has no CUDA kernel yet).
  const Tensor x = random_tensor({16, 768}, DType::kFloat64, 9);
  const Tensor xd = x.to(Device::cuda());
  EXPECT_TENSOR_NEAR(test06::cpu(sum(xd, {1})), sum(x, {1}), 1e-12, 1e-12);
  EXPECT_NEAR(sum(xd).item(), sum(x).item(), 1e-10);
}

}  // namespace
}  // namespace tt

// The bfloat16 linear layers on the CPU (the cuBLASLt emulation), against float64 on the
// bfloat16-rounded values; the tolerances are derived in linear_bf16_test_util.h.
#include "accum_fusion_test_util.h"
#include "linear_bf16_test_util.h"
#include "tt/mixed_precision.h"

namespace tt {
namespace {

using test11::check_dgrad_kernel;
using test11::check_linear_case;
using test11::linear_cases;

TEST(Ch11_2_DgradGemm, BFloat16AndFloat32Outputs) {
  check_dgrad_kernel(Device::cpu(), 16, 24, 32, 2100);
  check_dgrad_kernel(Device::cpu(), 5, 7, 3, 2110);  // not multiples of 8
}

TEST(Ch11_2_DgradGemm, DescriptorIsColumnMajorTransposeOfRowMajor) {
  const Tensor dx = empty({6, 4}, {DType::kBFloat16});
  const Tensor dy = empty({6, 10}, {DType::kBFloat16});
  const Tensor w = empty({10, 4}, {DType::kBFloat16});
  const LtGemm g = lt_linear_dgrad_gemm(dx, dy, w);
  // D = dx^T (4 x 6, ld 4) = W^T (4 x 10, W as stored) dy^T (10 x 6, dy as stored).
  EXPECT_EQ(g.m, 4);
  EXPECT_EQ(g.n, 6);
  EXPECT_EQ(g.k, 10);
  EXPECT_EQ(g.ldd, 4);
  EXPECT_EQ(g.d, dx.data_ptr());
  EXPECT_EQ(g.ab_type, DType::kBFloat16);
  EXPECT_EQ(g.d_type, DType::kBFloat16);
  EXPECT_EQ(g.epilogue, LtEpilogue::kDefault);
  EXPECT_EQ(g.beta, 0.0f);
}

TEST(Ch11_2_DgradGemm, ChecksOperands) {
  const Tensor dx = empty({6, 4}, {DType::kBFloat16});
  const Tensor dy = empty({6, 10}, {DType::kBFloat16});
  EXPECT_THROW(call_kernel<MatmulLtDgradKernel>("matmul_lt_dgrad", Device::cpu(), dx, dy,
                                                empty({9, 4}, {DType::kBFloat16})),
               Error);  // W [9, 4]: N differs
  EXPECT_THROW(call_kernel<MatmulLtDgradKernel>("matmul_lt_dgrad", Device::cpu(), dx, dy,
                                                empty({10, 4}, {DType::kFloat32})),
               Error);  // dy and W of two dtypes
  EXPECT_THROW(call_kernel<MatmulLtDgradKernel>("matmul_lt_dgrad", Device::cpu(), dx, dy,
                                                empty({10, 4}, {DType::kFloat64})),
               Error);  // float64
}

TEST(Ch11_LinearBf16, ValuesAndGradientsMatchFloat64OnRoundedInputs) {
  uint64_t seed = 2200;
  for (const auto& c : linear_cases()) check_linear_case(c, Device::cpu(), seed += 10);
}

TEST(Ch11_LinearBf16, EmulatedGemmRoundsToBFloat16AndKeepsFloat32Sums) {
  // 1 + 2^-8 is a tie between two bfloat16 (1 and 1 + 2^-7): it rounds to the even one, 1. A
  // float32 D keeps it.
  const Tensor x = from_vector(std::vector<float>{1.0f, 1.0f}, {1, 2}).to(DType::kBFloat16);
  const Tensor w = from_vector(std::vector<float>{1.0f, 0.00390625f}, {1, 2}).to(DType::kBFloat16);
  Tensor y = empty({1, 1}, {DType::kBFloat16});
  ASSERT_TRUE(call_kernel<MatmulLtForwardKernel>("matmul_lt_forward", Device::cpu(), y, x, w,
                                                 Tensor(), Tensor()));
  EXPECT_EQ(y.to(DType::kFloat32).item(), 1.0f);
  Tensor y32 = empty({1, 1});
  ASSERT_TRUE(call_kernel<MatmulLtForwardKernel>("matmul_lt_forward", Device::cpu(), y32, x, w,
                                                 Tensor(), Tensor()));
  EXPECT_EQ(y32.item(), 1.00390625f);
}

TEST(Ch11_LinearBf16, GeluEpilogueNeedsOutMultipleOf8LikeCublasLt) {
  const Tensor x = ones({2, 4}, {DType::kBFloat16}), w = ones({6, 4}, {DType::kBFloat16});
  const Tensor b = zeros({6}, {DType::kBFloat16});
  Tensor y = empty({2, 6}, {DType::kBFloat16}), pre = empty({2, 6}, {DType::kBFloat16});
  EXPECT_FALSE(
      call_kernel<MatmulLtForwardKernel>("matmul_lt_forward", Device::cpu(), y, x, w, b, pre));
  EXPECT_TRUE(
      call_kernel<MatmulLtForwardKernel>("matmul_lt_forward", Device::cpu(), y, x, w, b, Tensor()));
}

TEST(Ch11_LinearBf16, GeluBackwardKernelMatchesFloat64) {
  test11::check_gelu_backward_kernel(Device::cpu(), 1003, 0, 2600);
  const Tensor a = empty({4}, {.dtype = DType::kBFloat16}), f = empty({4});
  EXPECT_TT_ERROR(call_kernel<GeluBackwardBf16Kernel>("gelu_backward_bf16", Device::cpu(), a, a, f),
                  "gelu_backward_bf16", "bfloat16", "float32");
}

TEST(Ch11_LinearBf16, RejectsBadInputs) {
  Generator gen(7);
  nn::Linear layer(4, 8, true, gen);
  EXPECT_THROW(linear_bf16(zeros({2, 5}), layer), Error);                     // in_features
  EXPECT_THROW(linear_bf16(zeros({2, 4}, {DType::kFloat64}), layer), Error);  // float64
  nn::Linear no_bias(4, 8, false, gen);
  EXPECT_THROW(linear_gelu_bf16(zeros({2, 4}), no_bias), Error);  // GELU needs b
  nn::Linear f64(4, 8, true, gen, {DType::kFloat64});
  EXPECT_THROW(linear_bf16(zeros({2, 4}), f64), Error);  // master weights must be float32
}

TEST(Ch11_LinearBf16, NoRowsGivesEmptyOutputAndZeroGradients) {
  Generator gen(8);
  nn::Linear layer(4, 8, true, gen);
  const Tensor x = zeros({0, 4}, {DType::kBFloat16}).set_requires_grad(true);
  const Tensor y = linear_bf16(x, layer);
  EXPECT_EQ(y.shape(), (Shape{0, 8}));
  autograd::backward(y, zeros({0, 8}, {DType::kBFloat16}));
  EXPECT_EQ(sum(layer.weight.grad().to(DType::kFloat64).reshape({-1})).item(), 0.0);
}

// Gradient-accumulation fusion on the CPU: the emulated GEMM implements beta (acc + beta D in
// float32, one rounding), so the fused accumulation equals the engine's add bit for bit.
TEST(Ch11_LinearBf16, GradientAccumulationFusionIsBitExact) {
  for (const bool gelu : {false, true}) {
    const test11::LinearForward fwd = [gelu](const Tensor& x, nn::Linear& layer) {
      return gelu ? linear_gelu_bf16(x, layer) : linear_bf16(x, layer);
    };
    test11::check_accumulation_fusion(fwd, Device::cpu(), 37, 24, 40, 2700);
  }
}

// LinearHooks: dgrad sees dx before the dW GEMM; pack decides what the layer keeps of its input
// (here a float32 copy, counted) and unpack gives it back for dW; the values and gradients are
// those without hooks, bit for bit; pack without unpack is refused.
TEST(Ch11_LinearBf16, HooksSeeDxAndPackTheSavedInput) {
  for (const bool gelu : {false, true}) {
    SCOPED_TRACE(gelu ? "linear_gelu_bf16" : "linear_bf16");
    auto run = [gelu](bool hooked, int* calls) {
      Generator gen(21);
      nn::Linear layer(16, 24, true, gen);
      Tensor x = randn({5, 16}, gen).set_requires_grad(true);
      Tensor y;
      {
        LinearHooks hooks;
        if (hooked) {
          hooks.dgrad = [calls](const Tensor& dx) {
            EXPECT_EQ(dx.shape(), (Shape{5, 16}));
            ++calls[0];
          };
          hooks.pack = [calls](const Tensor& xb) {
            EXPECT_EQ(xb.dtype(), DType::kBFloat16);
            ++calls[1];
            return xb.to(DType::kFloat32);  // what the layer keeps: a different tensor
          };
          hooks.unpack = [calls](const Tensor& packed) {
            EXPECT_EQ(packed.dtype(), DType::kFloat32) << "unpack gets what pack returned";
            ++calls[2];
            return packed.to(DType::kBFloat16);
          };
        }
        ScopedLinearHooks scope(hooks);
        y = gelu ? linear_gelu_bf16(x, layer) : linear_bf16(x, layer);
      }
      EXPECT_FALSE(ScopedLinearHooks::current().pack) << "the scope restores the hooks";
      if (hooked) {
        EXPECT_EQ(calls[1], 1) << "pack runs in forward";
      }
      EXPECT_EQ(calls[2], 0) << "unpack waits for backward";
      autograd::backward(sum(to_dtype(y, DType::kFloat32)));
      std::vector<std::vector<float>> out = {
          y.to(DType::kFloat32).to_vector<float>(), x.grad().to_vector<float>(),
          layer.weight.grad().to_vector<float>(), layer.bias.grad().to_vector<float>()};
      return out;
    };
    int calls[3] = {0, 0, 0}, none[3] = {0, 0, 0};
    const auto want = run(false, none);
    const auto got = run(true, calls);
    EXPECT_EQ(calls[0], 1);
    EXPECT_EQ(calls[2], 1);
    for (std::size_t i = 0; i < want.size(); ++i) EXPECT_EQ(got[i], want[i]) << i;
  }
  EXPECT_THROW(ScopedLinearHooks({.pack = [](const Tensor& x) { return x; }}), Error);
}

}  // namespace
}  // namespace tt

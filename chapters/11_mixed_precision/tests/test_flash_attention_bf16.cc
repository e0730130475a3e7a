// Chapter 11 on the CPU: the emulated bf16 FlashAttention kernels (bf16 in and out, fp32
// compute) through chapter 10's front-ends, against the float64 reference on the same bf16
// values, with the bf16 tolerances of flash_bf16_test_util.h.
#include <string>
#include <vector>

#include "flash_bf16_test_util.h"

namespace tt {
namespace {

using test11::expect_close;

TEST(Ch11_FlashBf16, CpuEmulationMatchesReference) {
  uint64_t seed = 1500;
  for (const Shape& shape : std::vector<Shape>{{1, 1, 1, 64}, {2, 3, 70, 32}, {1, 2, 130, 48}}) {
    const std::string name = test10::shape_name(shape);
    const test11::Bf16Inputs in = test11::bf16_inputs(shape, seed += 4);
    const test10::AttentionReference ref = test10::reference_attention(in.f32);
    Tensor q = in.bf16.q.clone(), k = in.bf16.k.clone(), v = in.bf16.v.clone();
    for (Tensor* t : {&q, &k, &v}) t->set_requires_grad();
    const Tensor y = flash_attention(q, k, v);
    ASSERT_EQ(y.dtype(), DType::kBFloat16) << name;
    autograd::backward(y, in.bf16.dout);
    expect_close(y.detach(), ref.out, test11::kOut, name + " out");
    expect_close(q.grad(), ref.dq, test11::kGrad, name + " dq");
    expect_close(k.grad(), ref.dk, test11::kGrad, name + " dk");
    expect_close(v.grad(), ref.dv, test11::kGrad, name + " dv");
  }
}

// The full (rectangular, non-causal) mode's CPU emulation: m < n, m > n, neither a multiple of
// the 64-row tile, B * NH > 1.
TEST(Ch11_FlashBf16, FullModeCpuEmulationMatchesReference) {
  uint64_t seed = 1600;
  for (const test11::FullCase& c : std::vector<test11::FullCase>{
           {1, 1, 128, 64, 64}, {1, 2, 64, 128, 32}, {2, 3, 100, 37, 48}, {1, 1, 1, 1, 16}}) {
    test11::check_full_mode(c, seed += 200, Device::cpu());
  }
}

// Misuse (expect_full_mode_misuse_errors), on the CPU kernels.
TEST(Ch11_FlashBf16, FullModeRejectsMisuse) {
  test11::expect_full_mode_misuse_errors(Device::cpu());
}

TEST(Ch11_FlashBf16, RejectsABf16Lse) {
  const Tensor q = zeros({1, 2, 8, 64}, {DType::kBFloat16});
  EXPECT_TT_ERROR(
      call_kernel<FlashAttentionForwardKernel>("flash_attention_bf16_forward", Device::cpu(), q,
                                               zeros({1, 2, 8}, {DType::kBFloat16}), q, q, q),
      "flash_attention_bf16_forward", "lse", "float32");
}

}  // namespace
}  // namespace tt

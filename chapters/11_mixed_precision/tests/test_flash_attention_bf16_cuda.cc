// Chapter 11 on a GPU: the bf16 tensor-core FlashAttention kernels against the float64
// reference of chapter 10's tests on the same bf16 values (tolerances derived from the format in
// flash_bf16_test_util.h), through chapter 10's front-ends (flash_attention,
// flash_attention_qkv on GPT-2's packed qkv), determinism, and the errors of what the kernels do
// not take (given code: no exercise). The inputs are rounded to bf16 on the GPU, so these tests do
// not depend on exercise ch11.1. All tests skip without a CUDA device.
#include <cstring>
#include <string>
#include <vector>

#include "flash_bf16_test_util.h"
#include "tt/gpt2.h"

namespace tt {
namespace {

using test11::expect_close;

struct Case {
  int64_t B, NH, T, hs;
};

// T not a multiple of the 64-row tile (1, 17, 100, 257, 300) and around it (63, 64, 65, 128),
// B * NH > 1, the three head sizes, and a longer sequence (1024: 16 key tiles per row).
const std::vector<Case> kCases = {
    {1, 1, 1, 64},    {2, 3, 17, 64}, {2, 3, 100, 64},  {1, 2, 257, 64},  {1, 2, 63, 32},
    {2, 1, 64, 32},   {1, 2, 65, 64}, {1, 1, 128, 64},  {1, 3, 200, 32},  {1, 2, 300, 64},
    {1, 1, 1024, 64}, {1, 1, 1, 128}, {2, 2, 100, 128}, {1, 2, 257, 128}, {1, 1, 1024, 128}};

std::string name_of(const Case& c) {
  return test10::shape_name({c.B, c.NH, c.T, c.hs});
}

// On a Hopper GPU every test of the kernels runs twice: the sm_90a (wgmma) kernels and the
// portable ones.
TEST(Ch11_FlashBf16Cuda, ForwardMatchesReference) {
  TT_SKIP_IF_NO_CUDA();
  const Device gpu = Device::cuda(0);
  for (const bool hopper : test11::hopper_settings_of(gpu)) {
    const test11::HopperSetting setting(hopper);
    uint64_t seed = 1100;
    for (const Case& c : kCases) {
      const Shape shape{c.B, c.NH, c.T, c.hs};
      const std::string name = name_of(c) + test11::kernel_set_name(hopper);
      // Rounded on the GPU (the same values as the CPU's rounding).
      const test11::Bf16Inputs in = test11::bf16_inputs(shape, seed += 4, gpu);
      const test10::AttentionReference ref = test10::reference_attention(in.f32);
      // Poisoned outputs: every element must be written.
      Tensor out = full(shape, NAN, {DType::kBFloat16, gpu});
      Tensor lse = full({c.B, c.NH, c.T}, NAN, {DType::kFloat32, gpu});
      call_kernel<FlashAttentionForwardKernel>("flash_attention_bf16_forward", gpu, out, lse,
                                               in.bf16.q.to(gpu), in.bf16.k.to(gpu),
                                               in.bf16.v.to(gpu));
      expect_close(out, ref.out, test11::kOut, name + " out");
      expect_close(lse, ref.lse, test11::kLse, name + " lse");
    }
  }
}

TEST(Ch11_FlashBf16Cuda, BackwardMatchesReference) {
  TT_SKIP_IF_NO_CUDA();
  const Device gpu = Device::cuda(0);
  for (const bool hopper : test11::hopper_settings_of(gpu)) {
    const test11::HopperSetting setting(hopper);
    uint64_t seed = 1200;
    for (const Case& c : kCases) {
      const Shape shape{c.B, c.NH, c.T, c.hs};
      const std::string name = name_of(c) + test11::kernel_set_name(hopper);
      const test11::Bf16Inputs in = test11::bf16_inputs(shape, seed += 4);
      const test10::AttentionReference ref = test10::reference_attention(in.f32);
      const TensorOptions opts{DType::kBFloat16, gpu};
      Tensor dq = full(shape, NAN, opts), dk = full(shape, NAN, opts), dv = full(shape, NAN, opts);
      // The forward results come from the reference (O rounded to bf16, as the forward stores
      // it), so this test does not depend on the forward kernel.
      call_kernel<FlashAttentionBackwardKernel>(
          "flash_attention_bf16_backward", gpu, dq, dk, dv, in.bf16.dout.to(gpu), in.bf16.q.to(gpu),
          in.bf16.k.to(gpu), in.bf16.v.to(gpu),
          ref.out.to(DType::kFloat32).to(DType::kBFloat16).to(gpu),
          ref.lse.to(DType::kFloat32).to(gpu));
      expect_close(dq, ref.dq, test11::kGrad, name + " dq");
      expect_close(dk, ref.dk, test11::kGrad, name + " dk");
      expect_close(dv, ref.dv, test11::kGrad, name + " dv");
    }
  }
}

// The op through autograd (chapter 10's flash_attention routes bfloat16 to these kernels), and
// the backward twice: no atomics, so the gradients are bitwise equal.
TEST(Ch11_FlashBf16Cuda, AutogradIsDeterministic) {
  TT_SKIP_IF_NO_CUDA();
  const Shape shape{2, 3, 333, 64};
  const Device gpu = Device::cuda(0);
  const test11::Bf16Inputs in = test11::bf16_inputs(shape, 1300);
  const test10::AttentionReference ref = test10::reference_attention(in.f32);
  for (const bool hopper : test11::hopper_settings_of(gpu)) {
    SCOPED_TRACE(test11::kernel_set_name(hopper));
    const test11::HopperSetting setting(hopper);
    std::vector<Tensor> grads;
    for (int run = 0; run < 2; ++run) {
      Tensor q = in.bf16.q.to(gpu), k = in.bf16.k.to(gpu), v = in.bf16.v.to(gpu);
      for (Tensor* t : {&q, &k, &v}) t->set_requires_grad();
      const Tensor y = flash_attention(q, k, v);
      ASSERT_EQ(y.dtype(), DType::kBFloat16);
      autograd::backward(y, in.bf16.dout.to(gpu));
      if (run == 0) {
        expect_close(y.detach(), ref.out, test11::kOut, "autograd out");
        expect_close(q.grad(), ref.dq, test11::kGrad, "autograd dq");
        expect_close(k.grad(), ref.dk, test11::kGrad, "autograd dk");
        expect_close(v.grad(), ref.dv, test11::kGrad, "autograd dv");
      }
      for (const Tensor* t : {&q, &k, &v}) grads.push_back(t->grad().to(Device::cpu()));
    }
    for (int i = 0; i < 3; ++i) {
      const Tensor &a = grads[i], &b = grads[i + 3];
      EXPECT_EQ(std::memcmp(a.data_ptr(), b.data_ptr(), a.numel() * 2), 0) << "gradient " << i;
    }
  }
}

// GPT-2's packed layout: q, k, v read from the bf16 qkv [B, T, 3C], y written into [B, T, C],
// dqkv written directly, against chapter 09's composition in float64 on the same values.
TEST(Ch11_FlashBf16Cuda, QkvMatchesCausalSelfAttention) {
  TT_SKIP_IF_NO_CUDA();
  struct QkvCase {
    int64_t B, T, NH, hs;
  };
  const std::vector<QkvCase> cases = {{1, 1, 1, 64},    {2, 17, 3, 64},    {2, 100, 2, 32},
                                      {2, 130, 12, 64}, {1, 1024, 12, 64}, {2, 130, 4, 128}};
  const Device gpu = Device::cuda(0);
  for (const bool hopper : test11::hopper_settings_of(gpu)) {
    SCOPED_TRACE(test11::kernel_set_name(hopper));
    const test11::HopperSetting setting(hopper);
    uint64_t seed = 1400;
    for (const QkvCase& c : cases) {
      const int64_t C = c.NH * c.hs;
      const std::string name = "qkv B=" + std::to_string(c.B) + " T=" + std::to_string(c.T) +
                               " NH=" + std::to_string(c.NH) + " hs=" + std::to_string(c.hs);
      const Tensor qkv =
          test10::randn_t({c.B, c.T, 3 * C}, seed += 2, DType::kFloat32).to(DType::kBFloat16);
      const Tensor dy =
          test10::randn_t({c.B, c.T, C}, seed + 1, DType::kFloat32).to(DType::kBFloat16);
      Tensor x64 = qkv.to(DType::kFloat32).to(DType::kFloat64);
      x64.set_requires_grad();
      const Tensor y64 = gpt2::causal_self_attention(x64, c.NH);
      autograd::backward(y64, dy.to(DType::kFloat32).to(DType::kFloat64));
      Tensor xg = qkv.to(gpu);
      xg.set_requires_grad();
      const Tensor yg = flash_attention_qkv(xg, c.NH);
      ASSERT_TRUE(yg.device().is_cuda() && yg.dtype() == DType::kBFloat16) << name;
      autograd::backward(yg, dy.to(gpu));
      expect_close(yg.detach(), y64.detach(), test11::kOut, name + " y");
      expect_close(xg.grad(), x64.grad(), test11::kGrad, name + " dqkv");
    }
  }
}

// The full (rectangular, non-causal) mode: m > n, m < n, neither a multiple of the 64-row tile
// (key rows past n masked in the last key tile, query rows past m not written), one row or key,
// B * NH > 1, the three head sizes, and a long block (many key tiles, many query tiles).
TEST(Ch11_FlashBf16Cuda, FullModeMatchesReference) {
  TT_SKIP_IF_NO_CUDA();
  uint64_t seed = 1700;
  const std::vector<test11::FullCase> cases = {
      {1, 1, 128, 64, 64},  {1, 1, 64, 128, 64},  {1, 2, 100, 37, 64},   {1, 1, 128, 64, 128},
      {1, 1, 64, 128, 128}, {2, 2, 100, 37, 128}, {2, 3, 37, 100, 32},   {1, 1, 1, 1, 64},
      {1, 2, 1, 200, 64},   {1, 2, 200, 1, 128},  {1, 2, 1024, 512, 64}, {1, 1, 300, 1000, 128}};
  for (const bool hopper : test11::hopper_settings_of(Device::cuda(0))) {
    SCOPED_TRACE(test11::kernel_set_name(hopper));
    const test11::HopperSetting setting(hopper);
    for (const test11::FullCase& c : cases)
      test11::check_full_mode(c, seed += 200, Device::cuda(0));
  }
}

// The full mode's errors on CUDA (expect_full_mode_misuse_errors).
TEST(Ch11_FlashBf16Cuda, FullModeRejectsMisuse) {
  TT_SKIP_IF_NO_CUDA();
  test11::expect_full_mode_misuse_errors(Device::cuda(0));
}

TEST(Ch11_FlashBf16Cuda, RejectsWhatItCannotRun) {
  TT_SKIP_IF_NO_CUDA();
  const Device gpu = Device::cuda(0);
  const TensorOptions bf{DType::kBFloat16, gpu};
  const Tensor h96 = zeros({1, 2, 8, 96}, bf);
  const Tensor q = zeros({1, 2, 8, 64}, bf);
  // Data 8 bytes past a 16-byte boundary (rows stay 72 bf16 apart): no cp.async of 16 bytes.
  const Tensor shifted = zeros({1, 2, 8, 72}, bf).slice(3, 4, 68);
  const Tensor lse_bf16 = zeros({1, 2, 8}, bf);
  testing::expect_errors({
      {"hs 96",
       [&] { flash_attention(h96, h96, h96); },
       {"flash_attention_bf16_forward", "hs = 96"}},
      {"unaligned",
       [&] {
         call_kernel<FlashAttentionForwardKernel>("flash_attention_bf16_forward", gpu, shifted,
                                                  zeros({1, 2, 8}, {DType::kFloat32, gpu}), shifted,
                                                  shifted, shifted);
       },
       {"flash_attention_bf16_forward", "16-byte aligned"}},
      {"bf16 lse",
       [&] {
         call_kernel<FlashAttentionForwardKernel>("flash_attention_bf16_forward", gpu, q, lse_bf16,
                                                  q, q, q);
       },
       {"flash_attention_bf16_forward", "lse", "float32"}},
  });
}

}  // namespace
}  // namespace tt

// Chapter 10 on the CPU: FlashAttention on GPT-2's packed layout (flash_attention_qkv) against
// chapter 09's causal_self_attention (values and gradients of qkv [B, T, 3C]), the kernels on
// strided views (no copy of q, k, v or the output), and the errors of the front-end.
#include <string>
#include <vector>

#include "ch10_test_util.h"
#include "tt/backend.h"
#include "tt/gpt2.h"

namespace tt {
namespace {

using test10::randn_t;

struct QkvCase {
  int64_t B, T, NH, hs;
};

// T odd and not a multiple of the 32-row CPU tiles (1, 17, 33, 100), B > 1, several heads, hs 64
// (GPT-2) and odd head sizes (a row stride 3C that is no multiple of anything).
const std::vector<QkvCase> kQkvCases = {
    {1, 1, 1, 64}, {2, 17, 3, 16}, {2, 33, 2, 64}, {1, 100, 4, 8}, {2, 45, 3, 7}};

std::string case_name(const QkvCase& c) {
  return "B=" + std::to_string(c.B) + " T=" + std::to_string(c.T) + " NH=" + std::to_string(c.NH) +
         " hs=" + std::to_string(c.hs);
}

// y and dqkv = d sum(y * dy) / dqkv of `attention` at qkv (a copy is the leaf).
template <typename F>
std::pair<Tensor, Tensor> value_and_grad(F attention, const Tensor& qkv, int64_t n_head,
                                         const Tensor& dy) {
  const Tensor x = qkv.clone();
  x.set_requires_grad();
  const Tensor y = attention(x, n_head);
  autograd::backward(y, dy);
  return {y.detach(), x.grad()};
}

// Values and gradients against the naive composition, with absolute and relative tolerance
// `tol`: float64 agrees to rounding (1e-12), float32 to a few ulps of O(1) values (1e-5).
void check_against_reference(DType dtype, double tol) {
  uint64_t seed = 900;
  for (const QkvCase& c : kQkvCases) {
    const int64_t C = c.NH * c.hs;
    const Tensor qkv = randn_t({c.B, c.T, 3 * C}, seed += 2, dtype);
    const Tensor dy = randn_t({c.B, c.T, C}, seed + 1, dtype);
    const auto [y, dqkv] = value_and_grad(flash_attention_qkv, qkv, c.NH, dy);
    const auto [y_ref, dqkv_ref] = value_and_grad(gpt2::causal_self_attention, qkv, c.NH, dy);
    EXPECT_EQ(y.shape(), (Shape{c.B, c.T, C})) << case_name(c);
    EXPECT_TENSOR_NEAR(y, y_ref, tol, tol) << case_name(c) << " " << dtype_name(dtype);
    EXPECT_TENSOR_NEAR(dqkv, dqkv_ref, tol, tol) << case_name(c) << " " << dtype_name(dtype);
  }
}

TEST(Ch10_FlashAttentionQkv, MatchesCausalSelfAttentionFloat64) {
  check_against_reference(DType::kFloat64, 1e-12);
}

TEST(Ch10_FlashAttentionQkv, MatchesCausalSelfAttentionFloat32) {
  check_against_reference(DType::kFloat32, 1e-5);
}

TEST(Ch10_FlashAttentionQkv, EqualsTheHeadLayoutOp) {
  // The same kernels with other strides: [B, NH, T, hs] copies of the heads through
  // flash_attention() give bit-identical results (same arithmetic in the same order).
  const int64_t B = 2, T = 37, NH = 3, hs = 16, C = NH * hs;
  const Tensor qkv = randn_t({B, T, 3 * C}, 40, DType::kFloat32);
  auto heads = [&](int64_t which) {
    return slice(qkv, 2, which * C, (which + 1) * C)
        .view({B, T, NH, hs})
        .permute({0, 2, 1, 3})
        .contiguous();
  };
  const Tensor y = flash_attention(heads(0), heads(1), heads(2));  // [B, NH, T, hs]
  EXPECT_TENSOR_NEAR(flash_attention_qkv(qkv, NH),
                     y.permute({0, 2, 1, 3}).contiguous().view({B, T, C}), 0.0, 0.0);
}

TEST(Ch10_FlashAttentionQkv, ForwardAllocatesOnlyItsOutputs) {
  // No permute or contiguous copy: the forward allocates y [B, T, C] and lse [B, NH, T] only.
  const int64_t B = 2, T = 24, NH = 2, hs = 8, C = NH * hs;
  const Tensor qkv = randn_t({B, T, 3 * C}, 41, DType::kFloat32);
  Allocator& cpu = backend_for(DeviceType::kCPU).allocator(0);
  autograd::NoGradGuard no_grad;
  const std::size_t before = cpu.stats().num_allocs;
  const Tensor y = flash_attention_qkv(qkv, NH);
  EXPECT_EQ(cpu.stats().num_allocs - before, 2u) << "allocations of flash_attention_qkv";
  // The naive composition, for scale, copies heads and materializes [B, NH, T, T] scores.
  const std::size_t mid = cpu.stats().num_allocs;
  gpt2::causal_self_attention(qkv, NH);
  EXPECT_GT(cpu.stats().num_allocs - mid, 4u);
}

TEST(Ch10_FlashAttentionQkv, RejectsBadInputs) {
  testing::expect_errors({
      {"2-D",
       [] {
         flash_attention_qkv(zeros({4, 24}), 2);
       },
       {"flash_attention_qkv", "[4, 24]"}},
      {"3C not divisible",
       [] {
         flash_attention_qkv(zeros({1, 4, 20}), 3);
       },
       {"flash_attention_qkv", "n_head = 3", "[1, 4, 20]"}},
      {"int64",
       [] {
         flash_attention_qkv(zeros({1, 4, 24}, {DType::kInt64}), 2);
       },
       {"flash_attention_qkv", "int64"}},
      {"no heads",
       [] {
         flash_attention_qkv(zeros({1, 4, 24}), 0);
       },
       {"n_head = 0"}},
  });
}

TEST(Ch10_FlashAttentionQkv, KernelsRejectMixedStrides) {
  // q, k, v must share strides: a contiguous q with a permuted k is an error, not a wrong result.
  const Tensor q = zeros({1, 2, 4, 8}), lse = zeros({1, 2, 4});
  const Tensor k = zeros({1, 4, 2, 8}).permute({0, 2, 1, 3});
  EXPECT_TT_ERROR(call_kernel<FlashAttentionForwardKernel>("flash_attention_forward", Device::cpu(),
                                                           zeros({1, 2, 4, 8}), lse, q, k, q),
                  "flash_attention_forward", "share one set of strides");
}

}  // namespace
}  // namespace tt

// The bfloat16 linear layers on CUDA (cuBLASLt: bfloat16 A/B, float32 accumulation), with the
// same cases and tolerances as the CPU tests (linear_bf16_test_util.h). Skip without a GPU.
#include "accum_fusion_test_util.h"
#include "linear_bf16_test_util.h"

namespace tt {
namespace {

using test11::check_dgrad_kernel;
using test11::check_linear_case;
using test11::linear_cases;

TEST(Ch11_2_DgradGemmCuda, BFloat16AndFloat32Outputs) {
  TT_SKIP_IF_NO_CUDA();
  check_dgrad_kernel(Device::cuda(), 256, 768, 3072, 2300);  // a GPT-2 MLP shape (M rows)
  check_dgrad_kernel(Device::cuda(), 16, 24, 32, 2310);
  check_dgrad_kernel(Device::cuda(), 5, 7, 3, 2320);  // not multiples of 8
}

TEST(Ch11_LinearBf16Cuda, ValuesAndGradientsMatchFloat64OnRoundedInputs) {
  TT_SKIP_IF_NO_CUDA();
  uint64_t seed = 2400;
  for (const auto& c : linear_cases()) check_linear_case(c, Device::cuda(), seed += 10);
  // GPT-2's c_fc shape on 128 rows: the GELU epilogue of cuBLASLt.
  check_linear_case({{2, 64, 768}, 3072, true, true, DType::kBFloat16}, Device::cuda(), 2499);
}

TEST(Ch11_LinearBf16Cuda, GeluBackwardKernelMatchesFloat64) {
  TT_SKIP_IF_NO_CUDA();
  test11::check_gelu_backward_kernel(Device::cuda(), 8 * 4099 + 5, 0, 2610);  // vector + tail
  test11::check_gelu_backward_kernel(Device::cuda(), 1003, 1, 2620);          // misaligned
  test11::check_gelu_backward_kernel(Device::cuda(), 8192 * 3072, 0, 2630);   // GPT-2's MLP
}

// Gradient-accumulation fusion on cuBLASLt (bfloat16 x and dy, float32 W.grad): bit for bit the
// engine's accumulation, at small shapes and at the 1.3B pipeline's per-micro-batch shapes (one
// 1024-token row, C = 2048).
TEST(Ch11_LinearBf16Cuda, GradientAccumulationFusionIsBitExact) {
  TT_SKIP_IF_NO_CUDA();
  for (const bool gelu : {false, true}) {
    const test11::LinearForward fwd = [gelu](const Tensor& x, nn::Linear& layer) {
      return gelu ? linear_gelu_bf16(x, layer) : linear_bf16(x, layer);
    };
    test11::check_accumulation_fusion(fwd, Device::cuda(), 37, 24, 40, 2800);
    // Large k (= M) may make cuBLASLt split k: then the GEMM declines and the engine adds.
    test11::check_accumulation_fusion(fwd, Device::cuda(), 1024, 2048, 8192, 2810, false);
    test11::check_accumulation_fusion(fwd, Device::cuda(), 8192, 8192, 2048, 2820, false, 2);
  }
}

}  // namespace
}  // namespace tt

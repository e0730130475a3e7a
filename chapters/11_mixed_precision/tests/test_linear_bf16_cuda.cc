// The bfloat16 linear layers on CUDA (cuBLASLt: bfloat16 A/B, float32 accumulation), with the
// same cases and tolerances as the CPU tests (linear_bf16_test_util.h). Skip without a GPU.
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

}  // namespace
}  // namespace tt

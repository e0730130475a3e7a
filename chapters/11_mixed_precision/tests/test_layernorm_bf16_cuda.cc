// residual_layernorm_bf16 on CUDA (one fused kernel) against chapter 10's float32 CUDA op on the
// same values (layernorm_bf16_test_util.h: the tolerances and why). Skips without a GPU.
#include <string>

#include "layernorm_bf16_test_util.h"

namespace tt {
namespace {

using test11::bf16_rounded;
using test11::run_residual_ln;

TEST(Ch11_ResidualLayerNormBf16Cuda, MatchesTheFloat32OpWithinOneBf16Rounding) {
  TT_SKIP_IF_NO_CUDA();
  const Device cuda = Device::cuda(0);
  uint64_t seed = 1300;
  for (const Shape& s : std::vector<Shape>{{1, 1}, {3, 7}, {2, 5, 33}, {3, 67, 20}, {8, 64, 768}}) {
    const std::string what = shape_str(s);
    const auto got = run_residual_ln(true, s, DType::kBFloat16, cuda, seed);
    const auto ref = run_residual_ln(false, s, DType::kBFloat16, cuda, seed);
    EXPECT_TENSOR_NEAR(got.r, ref.r, 0, 0) << what << " r";
    EXPECT_TENSOR_NEAR(got.y, ref.y, 1e-6, 1.0 / 256) << what << " y";
    EXPECT_TENSOR_NEAR(got.d_residual, ref.d_residual, 0, 0) << what << " d residual";
    EXPECT_TENSOR_NEAR(got.d_delta, bf16_rounded(ref.d_delta), 0, 0) << what << " d delta";
    EXPECT_TENSOR_NEAR(got.dw, ref.dw, 0, 0) << what << " d weight";
    EXPECT_TENSOR_NEAR(got.db, ref.db, 0, 0) << what << " d bias";
    seed += 10;
  }
}

TEST(Ch11_ResidualLayerNormBf16Cuda, AgreesWithTheCpuEmulation) {
  TT_SKIP_IF_NO_CUDA();
  const Shape s{4, 33, 768};
  const auto gpu = run_residual_ln(true, s, DType::kBFloat16, Device::cuda(0), 1400);
  const auto cpu = run_residual_ln(true, s, DType::kBFloat16, Device::cpu(), 1400);
  // float32 sums in another order (warp reductions vs a sequential row): a few float32 ulps,
  // amplified by rstd; y then differs by at most one bf16 ulp where the rounding flips.
  EXPECT_TENSOR_NEAR(gpu.r, cpu.r, 0, 0);
  EXPECT_TENSOR_NEAR(gpu.y, cpu.y, 1e-5, 1.0 / 128);
  EXPECT_TENSOR_NEAR(gpu.d_residual, cpu.d_residual, 1e-4, 1e-4);
  EXPECT_TENSOR_NEAR(gpu.dw, cpu.dw, 1e-3, 1e-4);
  EXPECT_TENSOR_NEAR(gpu.db, cpu.db, 1e-3, 1e-4);
}

}  // namespace
}  // namespace tt

// residual_layernorm_bf16 on the CPU (the emulated path): bit for bit chapter 10's float32 op on
// the same values with the bf16 outputs rounded once (layernorm_bf16_test_util.h says why).
#include <string>

#include "layernorm_bf16_test_util.h"

namespace tt {
namespace {

using test11::bf16_rounded;
using test11::ResidualLnRun;
using test11::run_residual_ln;

// One element per row, fewer rows than a chunk, several chunks of 64 rows, GPT-2's width.
const std::vector<Shape> kShapes = {{1, 1}, {3, 7}, {2, 5, 33}, {3, 67, 20}, {4, 768}};

void expect_bf16_of_fp32(const ResidualLnRun& got, const ResidualLnRun& ref,
                         const std::string& what) {
  EXPECT_TENSOR_NEAR(got.r, ref.r, 0, 0) << what << " r";
  EXPECT_TENSOR_NEAR(got.y, bf16_rounded(ref.y), 0, 0) << what << " y = bf16(y_f32)";
  EXPECT_TENSOR_NEAR(got.d_residual, ref.d_residual, 0, 0) << what << " d residual";
  EXPECT_TENSOR_NEAR(got.d_delta, bf16_rounded(ref.d_delta), 0, 0) << what << " d delta";
  EXPECT_TENSOR_NEAR(got.dw, ref.dw, 0, 0) << what << " d weight";
  EXPECT_TENSOR_NEAR(got.db, ref.db, 0, 0) << what << " d bias";
}

TEST(Ch11_ResidualLayerNormBf16, BF16DeltaIsTheFloat32OpRoundedOnce) {
  uint64_t seed = 1100;
  for (const Shape& s : kShapes) {
    const auto got = run_residual_ln(true, s, DType::kBFloat16, Device::cpu(), seed);
    const auto ref = run_residual_ln(false, s, DType::kBFloat16, Device::cpu(), seed);
    expect_bf16_of_fp32(got, ref, "bf16 delta " + shape_str(s));
    seed += 10;
  }
}

TEST(Ch11_ResidualLayerNormBf16, Float32DeltaGivesAFloat32GradientAndBf16Output) {
  const Shape s{2, 9, 40};
  const ResidualLnRun got = run_residual_ln(true, s, DType::kFloat32, Device::cpu(), 1200);
  const ResidualLnRun ref = run_residual_ln(false, s, DType::kFloat32, Device::cpu(), 1200);
  EXPECT_TENSOR_NEAR(got.y, bf16_rounded(ref.y), 0, 0);
  EXPECT_TENSOR_NEAR(got.d_delta, ref.d_delta, 0, 0);  // float32 delta: no rounding
  EXPECT_TENSOR_NEAR(got.d_residual, ref.d_residual, 0, 0);
}

TEST(Ch11_ResidualLayerNormBf16, RejectsInputsOutsideThePolicy) {
  nn::LayerNorm ln(8);
  const Tensor a = zeros({2, 8});
  // A bf16 residual stream, a float64 delta, mismatched shapes.
  EXPECT_THROW(residual_layernorm_bf16(a.to(DType::kBFloat16), a.to(DType::kBFloat16), ln), Error);
  EXPECT_THROW(residual_layernorm_bf16(a, zeros({2, 8}, {DType::kFloat64}), ln), Error);
  EXPECT_THROW(residual_layernorm_bf16(a, zeros({2, 7}).to(DType::kBFloat16), ln), Error);
  try {
    residual_layernorm_bf16(a.to(DType::kBFloat16), a, ln);
    ADD_FAILURE() << "no throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("float32"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tt

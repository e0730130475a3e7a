// residual_layernorm_bf16 on CUDA (one fused kernel) against chapter 10's float32 CUDA op on the
// same values (layernorm_bf16_test_util.h: the tolerances and why). Skips without a GPU.
#include <optional>
#include <string>
#include <vector>

#include "layernorm_bf16_test_util.h"
#include "tt/profiler.h"

namespace tt {
namespace {

using test11::bf16_rounded;
using test11::run_residual_ln;

TEST(Ch11_ResidualLayerNormBf16Cuda, MatchesTheFloat32OpWithinOneBf16Rounding) {
  TT_SKIP_IF_NO_CUDA();
  const Device cuda = Device::cuda(0);
  uint64_t seed = 1300;
  // {8, 64, 768}, {3, 37, 1024} and {2, 9, 128}: chapter 10's register-row backward kernel
  // (C = 128 k, k <= 8; rows not a multiple of its 16 per block); the others its fallback.
  for (const Shape& s : std::vector<Shape>{
           {1, 1}, {3, 7}, {2, 5, 33}, {3, 67, 20}, {8, 64, 768}, {3, 37, 1024}, {2, 9, 128}}) {
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

// The backward kernel reads the bf16 gradient of y and writes the bf16 gradient of delta itself:
// one kernel, no cast around it (chapter 10's register-row kernel; there were two casts, 40% of
// its time in a GPT-2 step). Its float32 results equal those from dy widened first, bit for bit.
TEST(Ch11_ResidualLayerNormBf16Cuda, BackwardKernelCastsNothing) {
  TT_SKIP_IF_NO_CUDA();
  const Device cuda = Device::cuda(0);
  for (const Shape& s : std::vector<Shape>{{4, 33, 768}, {37, 1024}, {5, 128}}) {
    const int64_t C = s.back();
    const Shape stats(s.begin(), s.end() - 1);
    const auto f32 = [&](uint64_t seed, const Shape& shape) {
      return test10::randn_t(shape, seed, DType::kFloat32).to(cuda);
    };
    const Tensor r = f32(1500, s), w = f32(1501, {C}), dr_in = f32(1502, s);
    const Tensor dy = f32(1503, s).to(DType::kBFloat16);
    const Tensor mean = f32(1504, stats), rstd = full(stats, 1.3, {DType::kFloat32, cuda});
    const TensorOptions o{DType::kFloat32, cuda};
    const auto run = [&](const Tensor& g, bool with_dd, prof::Profiler* profiler) {
      std::vector<Tensor> out = {empty(s, o),
                                 with_dd ? empty(s, {DType::kBFloat16, cuda}) : Tensor(),
                                 empty({C}, o), empty({C}, o)};
      std::optional<prof::ProfileScope> scope;
      if (profiler != nullptr) scope.emplace(*profiler);
      call_kernel<ResidualLayerNormBackwardKernel>("residual_layernorm_backward", cuda, out[0],
                                                   out[1], out[2], out[3], dr_in, g, r, w, mean,
                                                   rstd);
      return out;
    };
    prof::Profiler profiler(cuda);
    const std::vector<Tensor> got = run(dy, true, &profiler);
    std::vector<std::string> ops;
    for (const auto& rec : profiler.records()) ops.push_back(rec.op);
    EXPECT_EQ(ops, std::vector<std::string>{"residual_layernorm_backward"}) << shape_str(s);
    const std::vector<Tensor> ref = run(dy.to(DType::kFloat32), false, nullptr);
    EXPECT_TENSOR_NEAR(test11::cpu32(got[0]), test11::cpu32(ref[0]), 0, 0) << shape_str(s) << " dr";
    EXPECT_TENSOR_NEAR(test11::cpu32(got[1]), test11::bf16_rounded(test11::cpu32(ref[0])), 0, 0)
        << shape_str(s) << " dd";
    EXPECT_TENSOR_NEAR(test11::cpu32(got[2]), test11::cpu32(ref[2]), 0, 0) << shape_str(s) << " dw";
    EXPECT_TENSOR_NEAR(test11::cpu32(got[3]), test11::cpu32(ref[3]), 0, 0) << shape_str(s) << " db";
  }
}

}  // namespace
}  // namespace tt

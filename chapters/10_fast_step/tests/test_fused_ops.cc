// Chapter 10's fused ops (tt/fused_ops.h) against their unfused compositions: residual +
// LayerNorm (exercise ch10.8, CPU and CUDA) and the cuBLASLt linear layers (CUDA; the CPU runs
// the composition itself).
//
// Tolerances. CPU float64: both sides compute the same formulas in a different order (the fused
// op sums r's elements as it forms them), so they agree to a few ulps: 1e-12. CPU float32: the
// same, with float32 ulps and LayerNorm's 1/sigma amplification: 1e-5 abs + 1e-5 rel. CUDA vs the
// float64 CPU reference: float32 rounding of row sums of up to C = 1000 terms and of GEMMs with
// K <= 200: 1e-4 abs + 1e-4 rel with TF32 off. With TF32 on, each GEMM operand loses 13 mantissa
// bits (relative 2^-11 = 4.9e-4 per product, random signs): 3e-2 abs + 1e-2 rel for K <= 200.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "ch10_test_util.h"
#include "tt/cuda_matmul.h"
#include "tt/fused_ops.h"
#include "tt/layers.h"

namespace tt {
namespace {

using test10::randn_t;

// A float64 CPU leaf holding t's values.
Tensor leaf64(const Tensor& t) {
  Tensor c = t.detach().to(Device::cpu()).to(DType::kFloat64).contiguous().clone();
  c.set_requires_grad();
  return c;
}

Tensor cpu64(const Tensor& t) {
  return t.to(Device::cpu()).to(DType::kFloat64);
}

// ----- residual + LayerNorm ------------------------------------------------------------------

struct ResidualLnResult {
  Tensor r, y, d_residual, d_delta, dw, db;
};

// residual_layernorm (fused) or add + LayerNorm (the composition) on `device` in `dtype`, with
// the loss sum(r * gr) + sum(y * gy): all values and gradients, returned as float64 CPU tensors.
ResidualLnResult run_residual_ln(bool fused, const Shape& shape, DType dtype, Device device,
                                 uint64_t seed) {
  const int64_t C = shape.back();
  nn::LayerNorm ln(C, 1e-5, {dtype});
  ln.weight.detach().copy_(randn_t({C}, seed, dtype));  // not the trivial gamma = 1, beta = 0
  ln.bias.detach().copy_(randn_t({C}, seed + 1, dtype));
  ln.to(device);
  const Tensor a = randn_t(shape, seed + 2, dtype).to(device).set_requires_grad();
  const Tensor d = randn_t(shape, seed + 3, dtype).to(device).set_requires_grad();
  const Tensor gr = randn_t(shape, seed + 4, dtype).to(device);
  const Tensor gy = randn_t(shape, seed + 5, dtype).to(device);
  Tensor r, y;
  if (fused) {
    std::tie(r, y) = residual_layernorm(a, d, ln);
  } else {
    r = add(a, d);
    y = ln.forward(r);
  }
  autograd::backward(add(sum(mul(r, gr)), sum(mul(y, gy))));
  return {cpu64(r),
          cpu64(y),
          cpu64(a.grad()),
          cpu64(d.grad()),
          cpu64(ln.weight.grad()),
          cpu64(ln.bias.grad())};
}

void expect_same(const ResidualLnResult& got, const ResidualLnResult& ref, double atol, double rtol,
                 const std::string& what) {
  EXPECT_TENSOR_NEAR(got.r, ref.r, atol, rtol) << what << " r";
  EXPECT_TENSOR_NEAR(got.y, ref.y, atol, rtol) << what << " y";
  EXPECT_TENSOR_NEAR(got.d_residual, ref.d_residual, atol, rtol) << what << " d residual";
  EXPECT_TENSOR_NEAR(got.d_delta, ref.d_delta, atol, rtol) << what << " d delta";
  EXPECT_TENSOR_NEAR(got.dw, ref.dw, atol, rtol) << what << " d weight";
  EXPECT_TENSOR_NEAR(got.db, ref.db, atol, rtol) << what << " d bias";
}

// Odd sizes: one element per row, fewer rows than a chunk, several chunks of 64 rows
// (3 * 67 = 201), and a GPT-2 row width.
const std::vector<Shape> kLnShapes = {{1, 1}, {3, 7}, {2, 5, 33}, {3, 67, 20}, {4, 768}};

TEST(Ch10_8_ResidualLayerNorm, MatchesCompositionFloat64) {
  uint64_t seed = 900;
  for (const Shape& s : kLnShapes) {
    const ResidualLnResult got = run_residual_ln(true, s, DType::kFloat64, Device::cpu(), seed);
    const ResidualLnResult ref = run_residual_ln(false, s, DType::kFloat64, Device::cpu(), seed);
    expect_same(got, ref, 1e-12, 1e-12, "float64 " + shape_str(s));
    seed += 10;
  }
}

TEST(Ch10_8_ResidualLayerNorm, MatchesCompositionFloat32) {
  uint64_t seed = 950;
  for (const Shape& s : kLnShapes) {
    const ResidualLnResult got = run_residual_ln(true, s, DType::kFloat32, Device::cpu(), seed);
    const ResidualLnResult ref = run_residual_ln(false, s, DType::kFloat64, Device::cpu(), seed);
    expect_same(got, ref, 1e-5, 1e-5, "float32 " + shape_str(s));
    seed += 10;
  }
}

TEST(Ch10_8_ResidualLayerNorm, RejectsMismatchedInputs) {
  nn::LayerNorm ln(8);
  const Tensor a = zeros({2, 8}), d = zeros({2, 7});
  EXPECT_THROW(residual_layernorm(a, d, ln), Error);
  EXPECT_THROW(residual_layernorm(zeros({2, 7}), zeros({2, 7}), ln), Error);
  EXPECT_THROW(residual_layernorm(a, zeros({2, 8}, {DType::kFloat64}), ln), Error);
}

TEST(Ch10_8_ResidualLayerNormCuda, MatchesCpuReference) {
  TT_SKIP_IF_NO_CUDA();
  uint64_t seed = 1000;
  std::vector<Shape> shapes = kLnShapes;
  shapes.push_back({8, 129, 1000});  // several blocks, fewer warps, misaligned rows
  // The register-row backward kernel (C = 128 k, k <= 8) with 1, 3 and 8 packs a lane, rows not
  // a multiple of its 16 per block.
  for (const Shape& s : std::vector<Shape>{{37, 128}, {3, 11, 384}, {5, 7, 1024}})
    shapes.push_back(s);
  for (const Shape& s : shapes) {
    for (DType dt : {DType::kFloat32, DType::kFloat64}) {
      const ResidualLnResult got = run_residual_ln(true, s, dt, Device::cuda(), seed);
      const ResidualLnResult ref = run_residual_ln(false, s, DType::kFloat64, Device::cpu(), seed);
      const double tol = dt == DType::kFloat32 ? 1e-4 : 1e-11;
      expect_same(got, ref, tol, tol, std::string(dtype_name(dt)) + " " + shape_str(s));
      // Deterministic: a second run gives the same bits.
      const ResidualLnResult again = run_residual_ln(true, s, dt, Device::cuda(), seed);
      expect_same(again, got, 0, 0, "repeat " + shape_str(s));
      seed += 10;
    }
  }
}

// ----- linear layers with epilogues ----------------------------------------------------------

struct LinearResult {
  Tensor y, dx, dw, db;
};

// linear_lt / linear_gelu_lt (fused) or the float64 CPU composition (matmul, add, gelu) of a
// seeded layer on x [..., in]; loss sum(y * gy).
LinearResult run_linear(bool fused, bool gelu, const Shape& x_shape, int64_t out, bool bias,
                        Device device, uint64_t seed) {
  const int64_t in = x_shape.back();
  Generator gen(seed);
  nn::Linear layer(in, out, bias, gen);
  Shape y_shape = x_shape;
  y_shape.back() = out;
  const Tensor x0 = randn_t(x_shape, seed + 1, DType::kFloat32);
  const Tensor gy0 = randn_t(y_shape, seed + 2, DType::kFloat32);
  if (!fused) {
    const Tensor x = leaf64(x0), w = leaf64(layer.weight);
    const Tensor b = bias ? leaf64(layer.bias) : Tensor();
    Tensor y = matmul(x, transpose(w, 0, 1));
    if (bias) y = add(y, b);
    if (gelu) y = tt::gelu(y);
    autograd::backward(sum(mul(y, cpu64(gy0))));
    return {y.detach(), x.grad(), w.grad(), bias ? b.grad() : Tensor()};
  }
  layer.to(device);
  const Tensor x = x0.to(device).set_requires_grad();
  const Tensor y = gelu ? linear_gelu_lt(x, layer) : linear_lt(x, layer);
  autograd::backward(sum(mul(y, gy0.to(device))));
  return {cpu64(y), cpu64(x.grad()), cpu64(layer.weight.grad()),
          bias ? cpu64(layer.bias.grad()) : Tensor()};
}

void expect_linear(const LinearResult& got, const LinearResult& ref, double atol, double rtol,
                   const std::string& what) {
  EXPECT_TENSOR_NEAR(got.y, ref.y, atol, rtol) << what << " y";
  EXPECT_TENSOR_NEAR(got.dx, ref.dx, atol, rtol) << what << " dx";
  EXPECT_TENSOR_NEAR(got.dw, ref.dw, atol, rtol) << what << " dW";
  EXPECT_EQ(got.db.defined(), ref.db.defined()) << what;
  if (ref.db.defined()) {
    EXPECT_TENSOR_NEAR(got.db, ref.db, atol, rtol) << what << " db";
  }
}

struct LinearCase {
  Shape x;
  int64_t out;
  bool bias;
};

// Odd M, K and N; N a multiple of 8 (the GELU epilogue's pre-activation) and not (the GELU
// layer then falls back to the composition); a layer without bias; GPT-2's MLP width.
const std::vector<LinearCase> kLinearCases = {{{1, 1}, 1, true},        {{37, 19}, 24, true},
                                              {{2, 17, 33}, 13, true},  {{5, 64}, 40, false},
                                              {{3, 41, 200}, 96, true}, {{2, 64, 96}, 384, true}};

// Every case of kLinearCases on `device` against the float64 CPU composition: the plain layer
// and, with a bias, the GELU layer (`gelu_only_with_bias`: only the GELU layer with a bias, only
// the plain one without).
void expect_cases_match(Device device, double atol, double rtol, uint64_t seed,
                        bool gelu_only_with_bias = false) {
  for (const LinearCase& c : kLinearCases) {
    for (bool gelu : {false, true}) {
      if (gelu && !c.bias) continue;
      if (gelu_only_with_bias && gelu != c.bias) continue;
      const LinearResult got = run_linear(true, gelu, c.x, c.out, c.bias, device, seed);
      const LinearResult ref = run_linear(false, gelu, c.x, c.out, c.bias, Device::cpu(), seed);
      expect_linear(got, ref, atol, rtol, shape_str(c.x) + (gelu ? " gelu" : ""));
      seed += 10;
    }
  }
}

TEST(Ch10_FusedLinear, CpuRunsTheComposition) {
  expect_cases_match(Device::cpu(), 1e-5, 1e-5, 1100);
}

TEST(Ch10_FusedLinear, RejectsBadInputs) {
  nn::Linear layer(4, 3, true);
  EXPECT_THROW(linear_lt(zeros({2, 5}), layer), Error);
  EXPECT_THROW(linear_lt(zeros({2, 4}, {DType::kFloat64}), layer), Error);
  nn::Linear no_bias(4, 3, false);
  EXPECT_THROW(linear_gelu_lt(zeros({2, 4}), no_bias), Error);
}

TEST(Ch10_FusedLinearCuda, MatchesCompositionExact) {
  TT_SKIP_IF_NO_CUDA();
  cuda::AllowTf32Guard exact(false);
  expect_cases_match(Device::cuda(), 1e-4, 1e-4, 1200);
}

TEST(Ch10_FusedLinearCuda, MatchesCompositionTf32) {
  TT_SKIP_IF_NO_CUDA();
  cuda::AllowTf32Guard tf32(true);
  expect_cases_match(Device::cuda(), 3e-2, 1e-2, 1300, /*gelu_only_with_bias=*/true);
}

// The cuBLASLt kernels themselves (no fallback allowed) at a GPT-2-like shape: the forward with
// the BIAS and GELU_AUX_BIAS epilogues, the weight gradient with BGRADB, against chapter 07's
// matmul and chapter 04's ops on the same device (TF32 off, K = 768: 1e-4).
TEST(Ch10_FusedLinearCuda, EpiloguesRunAtGpt2Shapes) {
  TT_SKIP_IF_NO_CUDA();
  cuda::AllowTf32Guard exact(false);
  const Device gpu = Device::cuda();
  const int64_t M = 256, K = 768, N = 3072;
  const Tensor x = randn_t({M, K}, 1400, DType::kFloat32).to(gpu);
  const Tensor w = mul(randn_t({N, K}, 1401, DType::kFloat32), 0.03).to(gpu);
  const Tensor b = randn_t({N}, 1402, DType::kFloat32).to(gpu);
  const Tensor dy = randn_t({M, N}, 1403, DType::kFloat32).to(gpu);
  const Tensor h = add(matmul(x, w.transpose(0, 1)), b);
  const TensorOptions opts{DType::kFloat32, gpu};

  Tensor y = full({M, N}, NAN, opts);
  ASSERT_TRUE(call_kernel<MatmulLtForwardKernel>("matmul_lt_forward", gpu, y, x, w, b, Tensor()));
  EXPECT_TENSOR_NEAR(cpu64(y), cpu64(h), 1e-4, 1e-4) << "BIAS";

  Tensor pre = full({M, N}, NAN, opts);
  y = full({M, N}, NAN, opts);
  ASSERT_TRUE(call_kernel<MatmulLtForwardKernel>("matmul_lt_forward", gpu, y, x, w, b, pre));
  EXPECT_TENSOR_NEAR(cpu64(pre), cpu64(h), 1e-4, 1e-4) << "GELU_AUX_BIAS pre-activation";
  EXPECT_TENSOR_NEAR(cpu64(y), cpu64(gelu(h)), 1e-4, 1e-4) << "GELU_AUX_BIAS output";

  Tensor dw = full({N, K}, NAN, opts), db = full({N}, NAN, opts);
  ASSERT_TRUE(call_kernel<MatmulLtWgradKernel>("matmul_lt_wgrad", gpu, dw, dy, x, db, 0.0));
  EXPECT_TENSOR_NEAR(cpu64(dw), cpu64(matmul(dy.transpose(0, 1), x)), 1e-3, 1e-4) << "dW";
  EXPECT_TENSOR_NEAR(cpu64(db), cpu64(sum(dy, {0})), 1e-3, 1e-4) << "BGRADB";
}

// cuBLASLt's GELU epilogue must be GPT-2's tanh approximation, not the exact erf GELU: on
// pre-activations spread over [-6, 6] the two differ by up to 4.7e-4, far above the 1e-5 this
// test allows between the epilogue and chapter 04's gelu of the same pre-activation. (The
// epilogue evaluates tanh with a fast approximation: measured on an H100, up to 4.9e-6 absolute
// from chapter 04's float32 gelu, in the tail near x = -3.6 where gelu is about -4.5e-4.)
TEST(Ch10_FusedLinearCuda, GeluEpilogueIsTheTanhApproximation) {
  TT_SKIP_IF_NO_CUDA();
  cuda::AllowTf32Guard exact(false);
  const Device gpu = Device::cuda();
  // W = I and b = 0: the pre-activation is x itself, 1200 values from -6 to 6.
  const int64_t n = 8;
  const Tensor x = mul(arange(-600, 600, 1, {DType::kFloat32}), 0.01).reshape({1200 / n, n});
  Tensor eye = zeros({n, n});
  for (int64_t i = 0; i < n; ++i) eye.data<float>()[i * n + i] = 1;
  const TensorOptions opts{DType::kFloat32, gpu};
  const Tensor y = empty({1200 / n, n}, opts), pre = empty({1200 / n, n}, opts);
  ASSERT_TRUE(call_kernel<MatmulLtForwardKernel>("matmul_lt_forward", gpu, y, x.to(gpu),
                                                 eye.to(gpu), zeros({n}, opts), pre));
  const Tensor tanh_gelu = cpu64(gelu(x));
  EXPECT_TENSOR_NEAR(cpu64(y), tanh_gelu, 1e-5, 0);
  // The erf GELU of the same values, to show that the test tells the two apart.
  const Tensor x64 = cpu64(x).contiguous();
  double max_diff = 0;
  for (int64_t i = 0; i < x64.numel(); ++i) {
    const double v = x64.data<double>()[i];
    const double erf_gelu = 0.5 * v * (1 + std::erf(v / std::sqrt(2.0)));
    max_diff = std::max(max_diff, std::abs(erf_gelu - tanh_gelu.data<double>()[i]));
  }
  EXPECT_GT(max_diff, 1e-4);
}

// "matmul_lt_wgrad" with beta = 1 (chapter 11's gradient-accumulation fusion): dw = dy^T x + dw.
// When it runs, it must equal the unfused path bit for bit: the beta = 0 GEMM (same algorithm)
// followed by the "add" kernel; otherwise it declines and writes nothing (an algorithm that
// splits k, LtGemm::one_pass_only). float32 only, TF32 off and on: this chapter has no bfloat16
// cast (chapter 11 tests the bfloat16 GEMMs). The small problem (k = 37) runs in one pass in
// float32; with TF32 on an H100 the heuristic picked a split-k algorithm for it, so that case may
// decline, and then must leave dw unchanged.
TEST(Ch10_FusedLinearCuda, WgradWithBetaOneEqualsTheGemmThenAdd) {
  TT_SKIP_IF_NO_CUDA();
  const Device gpu = Device::cuda();
  struct Case {
    int64_t M, K, N;
    bool tf32, must_run;
  };
  for (const Case& c : {Case{37, 24, 40, false, true}, Case{37, 24, 40, true, false}}) {
    SCOPED_TRACE(::testing::Message()
                 << "M " << c.M << " K " << c.K << " N " << c.N << (c.tf32 ? " TF32" : " float32"));
    cuda::AllowTf32Guard guard(c.tf32);
    const TensorOptions f32{DType::kFloat32, gpu};
    const Tensor x = randn_t({c.M, c.K}, 3200, DType::kFloat32).to(gpu);
    const Tensor dy = randn_t({c.M, c.N}, 3201, DType::kFloat32).to(gpu);
    const Tensor acc = mul(randn_t({c.N, c.K}, 3202, DType::kFloat32), 30.0).to(gpu);
    Tensor dw = empty({c.N, c.K}, f32), db = empty({c.N}, f32);
    ASSERT_TRUE(call_kernel<MatmulLtWgradKernel>("matmul_lt_wgrad", gpu, dw, dy, x, db, 0.0));
    Tensor unfused = acc.clone();
    call_kernel<BinaryKernel>("add", gpu, unfused, unfused, dw);
    Tensor fused = acc.clone(), db1 = empty({c.N}, f32);
    const bool ran =
        call_kernel<MatmulLtWgradKernel>("matmul_lt_wgrad", gpu, fused, dy, x, db1, 1.0);
    std::printf("[ beta=1 ] M %lld K %lld N %lld%s: %s\n", static_cast<long long>(c.M),
                static_cast<long long>(c.K), static_cast<long long>(c.N),
                c.tf32 ? " TF32" : " float32", ran ? "one pass, ran" : "declined (split k)");
    if (c.must_run) {
      EXPECT_TRUE(ran);
    }
    const Tensor expected = ran ? unfused : acc;
    const std::vector<float> got = fused.to(Device::cpu()).to_vector<float>();
    const std::vector<float> want = expected.to(Device::cpu()).to_vector<float>();
    int64_t differ = 0;
    for (std::size_t i = 0; i < got.size(); ++i) differ += got[i] != want[i] ? 1 : 0;
    EXPECT_EQ(differ, 0) << "elements of dw = dy^T x + dw differing from the GEMM then add";
    if (ran) {
      EXPECT_TENSOR_NEAR(db1, db, 0, 0) << "db is overwritten, not accumulated";
    }
  }
}

}  // namespace
}  // namespace tt

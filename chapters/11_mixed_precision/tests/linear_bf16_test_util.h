// Shared by the CPU and CUDA tests of the bfloat16 linear layers: seeded inputs, the float64
// reference (chapter 04's matmul, add and gelu with autograd) on the bfloat16-rounded inputs,
// weights and output gradient, and the element-wise tolerances derived from bfloat16's 8-bit
// significand.
//
// Tolerances. A bfloat16 keeps 8 significant bits, so rounding a value v to bfloat16 changes it
// by at most u |v| with u = 2^-8, the unit roundoff (half a unit in the last place, relative).
// With S = the sum of the absolute values of the products a dot product adds (the usual GEMM
// error bound; computed here from |x|, |W|, |b|, |dy|), every check below is
// |got - ref| <= c * S element-wise:
// - y = x W^T + b (bfloat16): one rounding of the float32 sum, u |y| <= u S: c = 2^-8.
// - gelu: the stored pre-activation h is rounded (u S), gelu is 1.13-Lipschitz, then y is
//   rounded (u |y|, far below u S for these random inputs): c = 2^-7.
// - dx = dy W (bfloat16) without GELU: one rounding: c = 2^-8 with S = |dy| |W|. With GELU, dh =
//   dy gelu'(h~) is off by |dy| u (1.13 + 0.8 |h|) (gelu'' <= 0.8, then dh's rounding), so S
//   uses |dy| (1.13 + 0.8 Hs) with Hs = |x| |W|^T + |b| and c = 2^-8 (dx's own rounding, u |dx|,
//   fits in the slack of S: |dx| is far below it).
// - dW, db (float32) without GELU: exact bfloat16 products summed in float32, never rounded to
//   bfloat16: c = 2^-14 (a bfloat16 rounding would be caught: up to 2^-8). With GELU they
//   inherit dh's error: c = 2^-8 with S as for dx.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <numbers>
#include <sstream>
#include <string>
#include <vector>

#include "tt/autograd.h"
#include "tt/functional.h"
#include "tt/fused_ops.h"
#include "tt/layers.h"
#include "tt/linear_bf16.h"
#include "tt/testing.h"

namespace tt::test11 {

/// Seeded N(0, 1) float32 values of `shape` (CPU).
inline Tensor randn_f32(const Shape& shape, uint64_t seed) {
  Generator gen(seed);
  return randn(shape, gen);
}

/// t rounded to bfloat16 and widened to float64, on the CPU.
inline Tensor bf16_rounded64(const Tensor& t) {
  return t.to(DType::kBFloat16).to(Device::cpu()).to(DType::kFloat64);
}

/// Element-wise |a| of a float64 CPU tensor.
inline Tensor abs64(const Tensor& t) {
  std::vector<double> v = t.contiguous().to_vector<double>();
  for (double& e : v) e = std::fabs(e);
  return from_vector(v, t.shape());
}

/// Checks |got - ref| <= c * bound element-wise (got any float dtype and device; ref and bound
/// float64 CPU tensors of got's shape); reports the first violation and the largest ratio.
inline ::testing::AssertionResult within_bound(const Tensor& got, const Tensor& ref,
                                               const Tensor& bound, double c) {
  if (got.shape() != ref.shape()) {
    return ::testing::AssertionFailure() << "shape " << got.describe() << " vs " << ref.describe();
  }
  const std::vector<double> g = got.to(Device::cpu()).to(DType::kFloat64).to_vector<double>();
  const std::vector<double> r = ref.contiguous().to_vector<double>();
  const std::vector<double> b = bound.contiguous().to_vector<double>();
  double worst = 0;
  int64_t bad = -1, n_bad = 0;
  for (std::size_t i = 0; i < g.size(); ++i) {
    const double err = std::fabs(g[i] - r[i]), tol = c * b[i] + 1e-30;
    worst = std::max(worst, err / tol);
    if (!(err <= tol)) {
      if (bad < 0) bad = static_cast<int64_t>(i);
      ++n_bad;
    }
  }
  if (n_bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << n_bad << " of " << g.size() << " elements of " << got.describe()
         << " outside c * bound with c = " << c << "; first at flat index " << bad << ": got "
         << g[bad] << ", expected " << r[bad] << ", bound " << c * b[bad] << "; worst ratio "
         << worst;
}

/// One case: x [rows..., K] -> y [rows..., N] through a Linear(K, N, bias).
struct LinearCase {
  Shape x_shape;
  int64_t out;
  bool bias;
  bool gelu;
  DType x_dtype;  ///< float32 (cast by the op) or bfloat16
};

inline std::string describe(const LinearCase& c) {
  std::ostringstream os;
  os << "x " << c.x_shape << " " << dtype_name(c.x_dtype) << ", out " << c.out
     << (c.bias ? ", bias" : ", no bias") << (c.gelu ? ", gelu" : "");
  return os.str();
}

/// Runs linear_bf16 / linear_gelu_bf16 on `device` forward and backward, and checks y, dx, dW
/// and db against the float64 reference on the bfloat16-rounded x, W, b and dy, with the
/// tolerances of the file comment.
inline void check_linear_case(const LinearCase& c, Device device, uint64_t seed) {
  SCOPED_TRACE(describe(c) + " on " + device.str());
  const int64_t K = c.x_shape.back(), N = c.out;
  Generator gen(seed);
  nn::Linear layer(K, N, c.bias, gen);
  // Larger weights than PyTorch's default, so that the pre-activations span GELU's curve.
  {
    autograd::NoGradGuard no_grad;
    layer.weight.copy_(mul(layer.weight, 3.0));
  }
  layer.to(device);
  const Tensor x_host = randn_f32(c.x_shape, seed + 1);
  Shape y_shape = c.x_shape;
  y_shape.back() = N;
  const Tensor dy = randn_f32(y_shape, seed + 2).to(DType::kBFloat16);
  const Tensor x = x_host.to(c.x_dtype).to(device).set_requires_grad(true);

  const Tensor y = c.gelu ? linear_gelu_bf16(x, layer) : linear_bf16(x, layer);
  ASSERT_EQ(y.dtype(), DType::kBFloat16);
  ASSERT_EQ(y.shape(), y_shape);
  autograd::backward(y, dy.to(device));

  // The reference: float64 on the rounded values, [M, K] x [N, K]^T.
  const int64_t M = x_host.numel() / K;
  const Tensor xr = bf16_rounded64(x_host).reshape({M, K}).set_requires_grad(true);
  const Tensor wr = bf16_rounded64(layer.weight).set_requires_grad(true);
  const Tensor br = c.bias ? bf16_rounded64(layer.bias).set_requires_grad(true) : Tensor();
  const Tensor dyr = bf16_rounded64(dy).reshape({M, N});
  Tensor h = matmul(xr, transpose(wr, 0, 1));
  if (c.bias) h = add(h, br);
  const Tensor yr = c.gelu ? gelu(h) : h;
  autograd::backward(yr, dyr);

  // The bounds S of the file comment.
  const Tensor wa = abs64(wr.detach()), xa = abs64(xr.detach());
  Tensor hs = matmul(xa, transpose(wa, 0, 1));
  if (c.bias) hs = add(hs, abs64(br.detach()));
  Tensor dya = abs64(dyr);
  if (c.gelu) dya = mul(dya, add(mul(hs, 0.8), 1.13));
  const Tensor dx_bound = matmul(dya, wa);
  const Tensor dw_bound = matmul(transpose(dya, 0, 1), xa);
  const Tensor db_bound = sum(dya, {0});
  const double c_grad = c.gelu ? std::ldexp(1.0, -8) : std::ldexp(1.0, -14);

  EXPECT_TRUE(within_bound(y.reshape({M, N}), yr.detach(), hs,
                           c.gelu ? std::ldexp(1.0, -7) : std::ldexp(1.0, -8)))
      << "y";
  ASSERT_TRUE(x.grad().defined());
  EXPECT_EQ(x.grad().dtype(), c.x_dtype);
  EXPECT_TRUE(within_bound(x.grad().reshape({M, K}), xr.grad(), dx_bound, std::ldexp(1.0, -8)))
      << "dx";
  ASSERT_TRUE(layer.weight.grad().defined());
  EXPECT_EQ(layer.weight.grad().dtype(), DType::kFloat32);
  EXPECT_TRUE(within_bound(layer.weight.grad(), wr.grad(), dw_bound, c_grad)) << "dW";
  if (c.bias) {
    ASSERT_TRUE(layer.bias.grad().defined());
    EXPECT_EQ(layer.bias.grad().dtype(), DType::kFloat32);
    EXPECT_TRUE(within_bound(layer.bias.grad(), br.grad(), db_bound, c_grad)) << "db";
  }
}

/// The cases both devices run: GPT-2-like multiples of 8, odd sizes (GELU then runs outside
/// the epilogue), 3-D inputs, float32 and bfloat16 inputs, with and without bias.
inline std::vector<LinearCase> linear_cases() {
  return {{{16, 32}, 48, true, false, DType::kBFloat16},
          {{2, 5, 24}, 40, true, true, DType::kBFloat16},
          {{7, 5}, 3, true, false, DType::kFloat32},
          {{3, 9, 13}, 7, true, true, DType::kFloat32},
          {{33, 64}, 16, false, false, DType::kBFloat16},
          {{4, 8, 72}, 96, true, true, DType::kFloat32}};
}

/// Checks kernel "matmul_lt_dgrad" (exercise ch11.2) on `device`: dx = dy W for bfloat16 dy and
/// W into a bfloat16 and a float32 dx, against float64 on the same values.
inline void check_dgrad_kernel(Device device, int64_t M, int64_t N, int64_t K, uint64_t seed) {
  SCOPED_TRACE("M " + std::to_string(M) + ", N " + std::to_string(N) + ", K " + std::to_string(K) +
               " on " + device.str());
  const Tensor dy = randn_f32({M, N}, seed).to(DType::kBFloat16).to(device);
  const Tensor w = randn_f32({N, K}, seed + 1).to(DType::kBFloat16).to(device);
  const Tensor dy64 = bf16_rounded64(dy), w64 = bf16_rounded64(w);
  const Tensor ref = matmul(dy64, w64), bound = matmul(abs64(dy64), abs64(w64));
  for (DType dt : {DType::kBFloat16, DType::kFloat32}) {
    Tensor dx = full({M, K}, NAN, {dt, device});
    ASSERT_TRUE(call_kernel<MatmulLtDgradKernel>("matmul_lt_dgrad", device, dx, dy, w));
    // bfloat16: one rounding (c = 2^-8); float32: float32 sums only (c = 2^-14).
    EXPECT_TRUE(within_bound(dx, ref, bound,
                             dt == DType::kBFloat16 ? std::ldexp(1.0, -8) : std::ldexp(1.0, -14)))
        << dtype_name(dt) << " dx";
  }
}

/// Checks kernel "gelu_backward_bf16" on `device` for n elements (`offset` elements into a larger
/// buffer: 1 makes every pointer misaligned, the kernel's scalar path): dx = dy gelu'(x) against
/// float64 on the same bfloat16 values, within one rounding of the result (2^-8 |dx|) and the
/// float32 arithmetic (2^-22 of the terms' size).
inline void check_gelu_backward_kernel(Device device, int64_t n, int64_t offset, uint64_t seed) {
  SCOPED_TRACE("n " + std::to_string(n) + ", offset " + std::to_string(offset) + " on " +
               device.str());
  const TensorOptions bf{DType::kBFloat16, device};
  const Tensor dy = empty({n + offset}, bf).narrow(0, offset, n);
  const Tensor x = empty({n + offset}, bf).narrow(0, offset, n);
  const Tensor dx = empty({n + offset}, bf).narrow(0, offset, n);
  dy.copy_(randn_f32({n}, seed).to(device));
  x.copy_(mul(randn_f32({n}, seed + 1), 3.0).to(device));  // GELU's curved part and both tails
  ASSERT_NO_THROW(call_kernel<GeluBackwardBf16Kernel>("gelu_backward_bf16", device, dx, dy, x));
  const std::vector<double> d = bf16_rounded64(dy).to_vector<double>();
  const std::vector<double> v = bf16_rounded64(x).to_vector<double>();
  const std::vector<double> got = bf16_rounded64(dx).to_vector<double>();
  const double beta = std::sqrt(2.0 / std::numbers::pi), kappa = 0.044715;
  for (int64_t i = 0; i < n; ++i) {
    const double t = std::tanh(beta * (v[i] + kappa * v[i] * v[i] * v[i]));
    const double ref =
        d[i] * (0.5 * (1 + t) + 0.5 * v[i] * (1 - t * t) * beta * (1 + 3 * kappa * v[i] * v[i]));
    // float32 evaluation: 1 + t cancels where t ~ -1, an absolute error of a few float32 ulps
    // of the terms (~ |dy| (1 + |x| du)); the result's rounding: half a bfloat16 ulp.
    const double du = beta * (1 + 3 * kappa * v[i] * v[i]);
    const double terms = std::fabs(d[i]) * (1 + std::fabs(v[i]) * du);
    ASSERT_NEAR(got[i], ref, std::ldexp(std::fabs(ref), -8) + std::ldexp(terms, -22))
        << "element " << i << ": dy " << d[i] << ", x " << v[i];
  }
}

}  // namespace tt::test11

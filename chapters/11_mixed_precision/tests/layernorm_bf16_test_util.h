// Helpers of the residual_layernorm_bf16 tests (CPU and CUDA): one run of the bf16 op and of
// chapter 10's float32 op on the same values, with the loss sum(r * gr) + sum(y * gy).
//
// The inputs are chosen so that both ops see identical float32 values: delta is bf16 (its
// float32 copy is exact), gy is bf16-exact (the bf16 y's gradient arrives as bf16 and is widened
// exactly). Then r, the statistics and every float32 gradient come from the same float32
// arithmetic, and the bf16 outputs are the float32 ones rounded once:
//   y_bf16 = bf16(y_f32), d delta_bf16 = bf16(d r_f32).
// On the CPU (the emulation runs chapter 10's row cores on float32 copies) all of this holds bit
// for bit. On CUDA the bf16 kernel is another instantiation of the same template, so the
// compiler may contract a multiply-add differently: y is then within one bf16 rounding of the
// float32 op's y (|err| <= 2^-8 |ref| plus a small absolute term: one bf16 rounding, at most
// u = 2^-8 relative, of a float32 value that may differ from the reference's in its last
// bits), and r and the gradients (the same backward kernel on the same inputs) stay bit for bit
// equal.
#pragma once

#include <tuple>

#include "../../10_fast_step/tests/ch10_test_util.h"
#include "tt/fused_ops.h"
#include "tt/layernorm_bf16.h"
#include "tt/mixed_precision.h"
#include "tt/testing.h"

namespace tt::test11 {

/// Values and gradients of one run, as float32 CPU tensors (bf16 ones widened exactly).
struct ResidualLnRun {
  Tensor r, y, d_residual, d_delta, dw, db;
};

inline Tensor cpu32(const Tensor& t) {
  return t.to(Device::cpu()).to(DType::kFloat32);
}

/// residual_layernorm_bf16 (bf16 = true, delta in `delta_dtype`) or chapter 10's float32
/// residual_layernorm (bf16 = false, delta widened) on `device`, with seeded inputs.
inline ResidualLnRun run_residual_ln(bool bf16, const Shape& shape, DType delta_dtype,
                                     Device device, uint64_t seed) {
  const int64_t C = shape.back();
  nn::LayerNorm ln(C);
  ln.weight.detach().copy_(test10::randn_t({C}, seed, DType::kFloat32));
  ln.bias.detach().copy_(test10::randn_t({C}, seed + 1, DType::kFloat32));
  ln.to(device);
  const Tensor a = test10::randn_t(shape, seed + 2, DType::kFloat32).to(device);
  Tensor d = test10::randn_t(shape, seed + 3, DType::kFloat32);
  if (delta_dtype == DType::kBFloat16) d = d.to(DType::kBFloat16).to(DType::kFloat32);
  d = d.to(delta_dtype).to(device);
  if (!bf16) d = d.to(DType::kFloat32);
  const Tensor gr = test10::randn_t(shape, seed + 4, DType::kFloat32).to(device);
  const Tensor gy =
      test10::randn_t(shape, seed + 5, DType::kFloat32).to(DType::kBFloat16).to(DType::kFloat32);
  a.set_requires_grad();
  d.set_requires_grad();
  Tensor r, y;
  std::tie(r, y) = bf16 ? residual_layernorm_bf16(a, d, ln) : residual_layernorm(a, d, ln);
  if (bf16) {
    EXPECT_EQ(r.dtype(), DType::kFloat32);
    EXPECT_EQ(y.dtype(), DType::kBFloat16);
  }
  autograd::backward(add(sum(mul(r, gr)), sum(mul(to_dtype(y, DType::kFloat32), gy.to(device)))));
  EXPECT_EQ(d.grad().dtype(), d.dtype());
  return {cpu32(r),
          cpu32(y),
          cpu32(a.grad()),
          cpu32(d.grad()),
          cpu32(ln.weight.grad()),
          cpu32(ln.bias.grad())};
}

/// t rounded to bf16 and widened back (float32 CPU).
inline Tensor bf16_rounded(const Tensor& t) {
  return t.to(DType::kBFloat16).to(DType::kFloat32);
}

}  // namespace tt::test11

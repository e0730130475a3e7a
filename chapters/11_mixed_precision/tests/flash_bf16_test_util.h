// Helpers shared by the bf16 FlashAttention tests: bf16 inputs (N(0, 1) rounded to bf16), the
// float64 reference of chapter 10's tests on exactly those values, and the bf16 tolerances.
//
// Tolerances, derived from the format. bf16 keeps 8 significant bits: rounding to nearest has a
// relative error of at most u = 2^-8 = 3.9e-3, the unit roundoff (RMS over random values about
// u / 2.3 = 1.7e-3). The inputs are
// bf16 already, so the reference sees the same values; products of two bf16 are exact in fp32
// and the kernels accumulate in fp32, so S, lse and D carry only fp32 rounding (lse: 1e-5).
//  - out: P is rounded to bf16 as the operand of P V (up to u per weight, averaging over the
//    keys) and O once at the store (up to u): RMS ~1.5e-3 of the RMS of O. Required:
//    ||err|| / ||ref|| <= u (3.9e-3, test10::relative_error) and every element within
//    2u |ref| + 2u (the second term: the P rounding, of size u times the |v| ~ 1 it weights).
//  - dq, dk, dv: dS (or P) rounded as an mma operand (u), the store (u), and D = rowsum(dO o O)
//    computed from the bf16 O (u relative to the terms of the sum), which enters dS = P (dP - D)
//    for every key: RMS ~3e-3. Required: ||err|| / ||ref|| <= 2u (7.8e-3) and every element
//    within 4u |ref| + 8u (3.1e-2).
// Measured on an H100 (2026-11-24), largest over the CUDA cases: out 9.2e-4, gradients 1.2e-3,
// lse 6.8e-8 (relative norm errors): the bounds keep a margin of 4-6x for other seeds and GPUs.
#pragma once

#include <cmath>
#include <string>

#include "../../10_fast_step/tests/ch10_test_util.h"
#include "tt/flash_attention_bf16.h"

namespace tt::test11 {

/// Unit roundoff of bf16, u = 2^-8 (round to nearest, 8 significant bits).
inline constexpr double kBf16U = 1.0 / 256;

/// Tolerance: ||err|| / max(||ref||, sqrt(numel)) <= rel_norm, |err| <= atol + rtol |ref|.
struct Tolerance {
  double rel_norm, atol, rtol;
};
inline constexpr Tolerance kOut{kBf16U, 2 * kBf16U, 2 * kBf16U};
inline constexpr Tolerance kGrad{2 * kBf16U, 8 * kBf16U, 4 * kBf16U};
inline constexpr Tolerance kLse{1e-5, 1e-5, 1e-5};

/// Seeded bf16 attention inputs (on the device they were rounded on) and the same values in
/// float32 on the CPU (exact copies).
struct Bf16Inputs {
  test10::AttentionInputs bf16, f32;
};

/// N(0, 1) inputs of `shape` from seeds seed .. seed + 3, rounded to bf16 by the cast kernel of
/// `device`. On a GPU that is the given CUDA cast, bit for bit the CPU's float_to_bfloat16_rne
/// (Ch11_1_CastCuda), so the values are the same and a GPU test does not depend on exercise
/// ch11.1 being done.
inline Bf16Inputs bf16_inputs(const Shape& shape, uint64_t seed, Device device = Device::cpu()) {
  const test10::AttentionInputs x = test10::random_inputs(shape, seed);
  const auto round = [&](const Tensor& t) { return t.to(device).to(DType::kBFloat16); };
  const auto widen = [](const Tensor& t) { return t.to(DType::kFloat32).to(Device::cpu()); };
  Bf16Inputs r;
  r.bf16 = {round(x.q), round(x.k), round(x.v), round(x.dout)};
  r.f32 = {widen(r.bf16.q), widen(r.bf16.k), widen(r.bf16.v), widen(r.bf16.dout)};
  return r;
}

/// EXPECTs `actual` (any dtype and device) within `tol` of the float64 `expected`; prints the
/// measured relative norm error so that the margin to the tolerance is visible in the log.
inline void expect_close(const Tensor& actual, const Tensor& expected, const Tolerance& tol,
                         const std::string& what) {
  const Tensor a = actual.to(Device::cpu()).to(DType::kFloat32).to(DType::kFloat64);
  const double rel = test10::relative_error(a, expected);
  EXPECT_LE(rel, tol.rel_norm) << what << ": ||err|| / ||ref|| = " << rel;
  EXPECT_TENSOR_NEAR(a, expected, tol.atol, tol.rtol) << what;
  std::printf("[ bf16 err ] %-40s ||err||/||ref|| = %.2e (tolerance %.2e)\n", what.c_str(), rel,
              tol.rel_norm);
}

}  // namespace tt::test11

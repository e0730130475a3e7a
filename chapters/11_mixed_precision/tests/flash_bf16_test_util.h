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

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "../../10_fast_step/tests/ch10_test_util.h"
#include "tt/cuda_probe.h"
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

/// Inputs of the full (rectangular, non-causal) mode: q, dout [B, NH, m, hs], k, v
/// [B, NH, n, hs], N(0, 1) rounded to bf16 on `device` (as bf16_inputs), and their float32 copies.
inline Bf16Inputs bf16_full_inputs(int64_t B, int64_t NH, int64_t m, int64_t n, int64_t hs,
                                   uint64_t seed, Device device = Device::cpu()) {
  const Bf16Inputs a = bf16_inputs({B, NH, m, hs}, seed, device);
  const Bf16Inputs b = bf16_inputs({B, NH, n, hs}, seed + 100, device);
  return {{a.bf16.q, b.bf16.k, b.bf16.v, a.bf16.dout}, {a.f32.q, b.f32.k, b.f32.v, a.f32.dout}};
}

/// The float64 reference of the full mode on `in` (float32 values on the CPU): out and the
/// gradients through autograd of softmax(q k^T / sqrt(hs)) v (chapter 04's ops), lse summed
/// directly over every key.
inline test10::AttentionReference reference_full_attention(const test10::AttentionInputs& in) {
  auto leaf = [](const Tensor& t) {
    Tensor c = t.to(DType::kFloat64).contiguous().clone();
    c.set_requires_grad();
    return c;
  };
  const Tensor q = leaf(in.q), k = leaf(in.k), v = leaf(in.v);
  const int64_t heads = q.size(0) * q.size(1), m = q.size(2), n = k.size(2), hs = q.size(3);
  const double scale = 1.0 / std::sqrt(static_cast<double>(hs));
  test10::AttentionReference r;
  r.out = matmul(softmax(mul(matmul(q, transpose(k, 2, 3)), scale), -1), v);
  autograd::backward(r.out, in.dout.to(DType::kFloat64).contiguous());
  r.out = r.out.detach();
  r.dq = q.grad();
  r.dk = k.grad();
  r.dv = v.grad();
  r.lse = empty({q.size(0), q.size(1), m}, {DType::kFloat64});
  const double *pq = q.data<double>(), *pk = k.data<double>();
  for (int64_t h = 0; h < heads; ++h) {
    for (int64_t i = 0; i < m; ++i) {
      std::vector<double> s(static_cast<std::size_t>(n));
      double mx = -INFINITY, sum = 0;
      for (int64_t j = 0; j < n; ++j) {
        double d = 0;
        for (int64_t c = 0; c < hs; ++c) d += pq[(h * m + i) * hs + c] * pk[(h * n + j) * hs + c];
        s[j] = d * scale;
        mx = std::max(mx, s[j]);
      }
      for (int64_t j = 0; j < n; ++j) sum += std::exp(s[j] - mx);
      r.lse.data<double>()[h * m + i] = mx + std::log(sum);
    }
  }
  return r;
}

/// A full-mode case: batch, heads, query rows m, key rows n, head size.
struct FullCase {
  int64_t B, NH, m, n, hs;
};

/// "B=.. NH=.. m=.. n=.. hs=..", for the messages.
inline std::string full_case_name(const FullCase& c) {
  return "B=" + std::to_string(c.B) + " NH=" + std::to_string(c.NH) + " m=" + std::to_string(c.m) +
         " n=" + std::to_string(c.n) + " hs=" + std::to_string(c.hs);
}

/// Runs the full-mode kernels ("flash_attention_bf16_full_forward" / "_backward") on `device`
/// for `c` and EXPECTs out, lse and (from the reference's out and lse, so that the backward does
/// not depend on the forward) dq, dk, dv within the bf16 tolerances above. Outputs start as NaN:
/// every element must be written.
/// set_flash_attention_bf16_hopper(on) for its lifetime; the previous setting restored after.
class HopperSetting {
 public:
  explicit HopperSetting(bool on) : previous_(flash_attention_bf16_hopper_enabled()) {
    set_flash_attention_bf16_hopper(on);
  }
  ~HopperSetting() { set_flash_attention_bf16_hopper(previous_); }
  HopperSetting(const HopperSetting&) = delete;
  HopperSetting& operator=(const HopperSetting&) = delete;

 private:
  bool previous_;
};

/// The settings of set_flash_attention_bf16_hopper a CUDA test runs under on `device`: {true,
/// false} (the Hopper kernels, then the portable ones) on a device of compute capability 9.0,
/// else {false}; kernel_set_name labels them in messages.
inline std::vector<bool> hopper_settings_of(Device device) {
  if (device.is_cuda() && cuda_compute_capability(device.index) == 90) return {true, false};
  return {false};
}
inline std::string kernel_set_name(bool hopper) {
  return hopper ? " [sm_90a kernels]" : " [portable kernels]";
}

inline void check_full_mode(const FullCase& c, uint64_t seed, Device device) {
  const Bf16Inputs in = bf16_full_inputs(c.B, c.NH, c.m, c.n, c.hs, seed, device);
  const test10::AttentionReference ref = reference_full_attention(in.f32);
  const TensorOptions bf{DType::kBFloat16, device};
  const Tensor q = in.bf16.q.to(device), k = in.bf16.k.to(device), v = in.bf16.v.to(device);
  const Tensor out = full({c.B, c.NH, c.m, c.hs}, NAN, bf);
  const Tensor lse = full({c.B, c.NH, c.m}, NAN, {DType::kFloat32, device});
  const FlashKernels kernels = flash_attention_bf16_full_kernels();
  call_kernel<FlashAttentionForwardKernel>(kernels.forward, device, out, lse, q, k, v);
  const std::string name = full_case_name(c);
  expect_close(out, ref.out, kOut, name + " out");
  expect_close(lse, ref.lse, kLse, name + " lse");
  const Tensor dq = full(q.shape(), NAN, bf), dk = full(k.shape(), NAN, bf);
  const Tensor dv = full(v.shape(), NAN, bf);
  call_kernel<FlashAttentionBackwardKernel>(
      kernels.backward, device, dq, dk, dv, in.bf16.dout.to(device), q, k, v,
      ref.out.to(DType::kFloat32).to(DType::kBFloat16).to(device),
      ref.lse.to(DType::kFloat32).to(device));
  expect_close(dq, ref.dq, kGrad, name + " dq");
  expect_close(dk, ref.dk, kGrad, name + " dk");
  expect_close(dv, ref.dv, kGrad, name + " dv");
}

/// EXPECTs the errors of misused kernels on `device`, each naming the op and the cause: the
/// causal kernel given a rectangle (m != n), the full mode given no keys, grouped k, v, or dk of
/// q's shape.
inline void expect_full_mode_misuse_errors(Device device) {
  const TensorOptions bf{DType::kBFloat16, device};
  const Tensor q = zeros({1, 2, 8, 64}, bf), k = zeros({1, 2, 4, 64}, bf);
  const Tensor lse = zeros({1, 2, 8}, {DType::kFloat32, device});
  const Tensor none = zeros({1, 2, 0, 64}, bf), k1 = zeros({1, 1, 4, 64}, bf);
  const FlashKernels full = flash_attention_bf16_full_kernels();
  testing::expect_errors({
      {"causal m != n",
       [&] {
         call_kernel<FlashAttentionForwardKernel>("flash_attention_bf16_forward", device, q, lse, q,
                                                  k, k);
       },
       {"flash_attention_bf16_forward", "[1, 2, 4, 64]"}},
      {"no keys",
       [&] {
         call_kernel<FlashAttentionForwardKernel>(full.forward, device, q, lse, q, none, none);
       },
       {"flash_attention_bf16_full_forward", "Tk >= 1"}},
      {"grouped k",
       [&] { call_kernel<FlashAttentionForwardKernel>(full.forward, device, q, lse, q, k1, k1); },
       {"flash_attention_bf16_full_forward", "k, v"}},
      {"dk of q's shape",
       [&] {
         call_kernel<FlashAttentionBackwardKernel>(full.backward, device, q, q, k, q, q, k, k, q,
                                                   lse);
       },
       {"flash_attention_bf16_full_backward", "k, v (and dk, dv)"}},
  });
}

}  // namespace tt::test11

// Shared by the CPU and CUDA tests of the bfloat16 classifier: the float64 reference (chapter
// 10's classifier_loss_unfused: matmul + cross_entropy, with autograd) on the bfloat16-rounded x
// and wte, and bounds derived from bfloat16's 8-bit significand.
//
// Tolerances. A logit z computed in float32 and rounded to bfloat16 moves by at most u |z| (u =
// 2^-8, bf16's unit roundoff: half an ulp, relative), and |z[n, v]| <= Z[n, v] = sum_c |x[n, c]|
// |w[v, c]|; with d_n = u max_v Z[n, v]:
// - loss_n = lse(z_n) - z_{n, t}: each term moves by at most d_n, so |mean loss error| <=
//   mean_n 2 d_n.
// - the softmax p moves by at most p (e^{2 d_n} - 1) ~ 2 d_n p, and the gradient (p - onehot)/N
//   is rounded to bfloat16: |error of dz[n, v]| <= E[n, v] = (2 d_n p + u |p - onehot|) / N.
// - dx = dz W (rounded to bfloat16 once more) and dW = dz^T x (float32): |error| <= E |W| +
//   u |dz| |W| and E^T |x| element-wise.
// The checks use these bounds as they are: the float32 sums' own errors are far below them, and
// Z overestimates |z| by far for random inputs.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "../../10_fast_step/tests/classifier_test_util.h"
#include "linear_bf16_test_util.h"
#include "tt/classifier_bf16.h"
#include "tt/fused_classifier.h"

namespace tt::test11 {

/// Runs classifier_loss_bf16 (or, with chunk_rows > 0, fused_classifier_loss with that many
/// rows per chunk) on `device` for x [B, T, C] and wte [Vp, C], and checks the loss, dx and
/// dwte against the float64 reference with the bounds of the file comment.
inline void check_classifier_case(int64_t B, int64_t T, int64_t C, int64_t V, int64_t Vp,
                                  int64_t chunk_rows, Device device, uint64_t seed) {
  SCOPED_TRACE("B " + std::to_string(B) + ", T " + std::to_string(T) + ", C " + std::to_string(C) +
               ", V " + std::to_string(V) + ", Vp " + std::to_string(Vp) + ", chunk_rows " +
               std::to_string(chunk_rows) + " on " + device.str());
  const int64_t N = B * T;
  const Tensor x_host = randn_f32({B, T, C}, seed);
  Tensor w_host = randn_f32({Vp, C}, seed + 1);
  std::vector<int64_t> t(static_cast<std::size_t>(N));
  for (int64_t i = 0; i < N; ++i) t[i] = (i * 7 + static_cast<int64_t>(seed)) % V;
  const Tensor targets = from_vector(t, {B, T});

  const Tensor x = x_host.to(DType::kBFloat16).to(device).set_requires_grad(true);
  const Tensor wte = w_host.to(device).set_requires_grad(true);
  FusedClassifierOptions options;
  options.chunk_rows = chunk_rows;
  const Tensor loss = chunk_rows > 0 ? fused_classifier_loss(x, wte, V, targets.to(device), options)
                                     : classifier_loss_bf16(x, wte, V, targets.to(device));
  ASSERT_EQ(loss.dtype(), DType::kFloat32);
  autograd::backward(loss);

  const Tensor xr = bf16_rounded64(x_host).set_requires_grad(true);
  const Tensor wr = bf16_rounded64(w_host).set_requires_grad(true);
  const Tensor ref = classifier_loss_unfused(xr, wr, V, targets);
  autograd::backward(ref);

  // The bounds.
  const Tensor x2 = abs64(xr.detach().reshape({N, C}));
  const Tensor wv = abs64(slice(wr.detach(), 0, 0, V));
  const std::vector<double> z = matmul(x2, transpose(wv, 0, 1)).to_vector<double>();  // Z [N, V]
  const Tensor logits =
      matmul(xr.detach().reshape({N, C}), transpose(slice(wr.detach(), 0, 0, V), 0, 1));
  const std::vector<double> p = softmax(logits, -1).contiguous().to_vector<double>();
  std::vector<double> e(static_cast<std::size_t>(N * V)), dz(e.size());
  double loss_bound = 0;
  for (int64_t n = 0; n < N; ++n) {
    const double d = std::ldexp(*std::max_element(z.begin() + n * V, z.begin() + (n + 1) * V), -8);
    loss_bound += 2 * d / static_cast<double>(N);
    for (int64_t v = 0; v < V; ++v) {
      const std::size_t i = static_cast<std::size_t>(n * V + v);
      const double g = p[i] - (v == t[n] ? 1.0 : 0.0);
      e[i] = (2 * d * p[i] + std::ldexp(std::fabs(g), -8)) / static_cast<double>(N);
      dz[i] = std::fabs(g) / static_cast<double>(N);
    }
  }
  const Tensor E = from_vector(e, {N, V}), Dz = from_vector(dz, {N, V});
  const Tensor dx_bound = add(matmul(E, wv), mul(matmul(Dz, wv), std::ldexp(1.0, -8)));
  Tensor dw_bound = zeros({Vp, C}, {DType::kFloat64});
  dw_bound.narrow(0, 0, V).copy_(matmul(transpose(E, 0, 1), x2));

  EXPECT_TRUE(within_bound(loss.reshape({1}), ref.detach().reshape({1}),
                           from_vector(std::vector<double>{loss_bound}, {1}), 1.0))
      << "loss";
  ASSERT_TRUE(x.grad().defined() && wte.grad().defined());
  EXPECT_EQ(x.grad().dtype(), DType::kBFloat16);
  EXPECT_EQ(wte.grad().dtype(), DType::kFloat32);
  EXPECT_TRUE(within_bound(x.grad(), xr.grad(), dx_bound.reshape({B, T, C}), 1.0)) << "dx";
  // The padding rows [V, Vp) get an exactly zero gradient (bound 0).
  EXPECT_TRUE(within_bound(wte.grad(), wr.grad(), dw_bound, 1.0)) << "dwte";
}

/// Chapter 10's split vocabulary (ClassifierVocabPart, chapter 13's vocab-parallel head) under
/// the bfloat16 policy on `device`: V = 50 of Vp = 80 in parts of 16 rows (part 3 holds 2 tokens,
/// part 4 only padding), chunks of 5 rows, against the unsplit bf16 classifier. Both round the
/// same logits to bfloat16 and compute in float32, so the part statistics match the float64
/// definition to 1e-5 and the loss the unsplit one to 1e-5; the gradients differ by the
/// bfloat16 rounding of each part's dx (1e-2 norm-relative).
inline void check_split_vocabulary(Device device, uint64_t seed) {
  const test10::ClassifierCase c{2, 7, 16, 50, 80};
  const test10::ClassifierInputs in = test10::classifier_inputs(c, seed, DType::kFloat32);
  const test10::ClassifierGrads ref =
      test10::classifier_grads(true, in, c.V, DType::kBFloat16, device);
  const test10::ClassifierGrads got =
      test10::split_classifier_grads(in, c.V, 16, DType::kBFloat16, device, 1e-5, 5);
  EXPECT_NEAR(got.loss.item(), ref.loss.item(), 1e-5 * std::abs(ref.loss.item()));
  EXPECT_LE(test10::rel_norm_error(got.dx, ref.dx), 1e-2);
  EXPECT_LE(test10::rel_norm_error(got.dwte, ref.dwte), 1e-2);
}

}  // namespace tt::test11

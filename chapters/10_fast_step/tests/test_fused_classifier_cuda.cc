// Chapter 10 on a GPU: the fused classifier (CUDA row kernel + chapter 07's "gemm" on cuBLAS)
// against the float64 CPU reference of the unfused composition. All tests skip without a GPU.
//
// Tolerances:
//  - float64 on CUDA: same arithmetic in another order, ||err|| / ||ref|| <= 1e-12.
//  - float32, TF32 off: as the CPU float32 test (2e-6 relative on the loss, 2e-5 on dx and dW).
//  - float32, TF32 on: each GEMM operand is rounded to 10 mantissa bits (relative 2^-11 = 4.9e-4),
//    so a logit of size |z| ~ 3 moves by ~1e-3 and the loss (a mean of lse - z_t) by a few 1e-4;
//    the gradients go through two more TF32 GEMMs. We require 2e-3 relative on the loss and
//    ||err|| / ||ref|| <= 5e-3 on dx and dW (measured values are printed on failure).
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "classifier_test_util.h"
#include "tt/cuda_matmul.h"

namespace tt::test10 {
namespace {

const Device kCpu = Device::cpu();

struct Tol {
  double loss_rel, grad_rel;
};

void expect_close(const ClassifierGrads& got, const ClassifierGrads& ref, const Tol& tol) {
  EXPECT_NEAR(got.loss.item(), ref.loss.item(), tol.loss_rel * std::abs(ref.loss.item()));
  EXPECT_LE(rel_norm_error(got.dx, ref.dx), tol.grad_rel);
  EXPECT_LE(rel_norm_error(got.dwte, ref.dwte), tol.grad_rel);
}

// Odd V with Vp > V, V == Vp, chunkings that do not divide N, and the default.
const std::vector<ClassifierCase> kCases = {
    {2, 7, 5, 37, 40}, {3, 11, 16, 101, 128}, {2, 33, 64, 1000, 1000}, {1, 50, 96, 3001, 3008}};

TEST(Ch10_7_FusedClassifierCuda, MatchesReferenceFloat64) {
  TT_SKIP_IF_NO_CUDA();
  uint64_t seed = 100;
  for (const ClassifierCase& c : kCases) {
    const test10::ClassifierInputs in = classifier_inputs(c, ++seed, DType::kFloat64);
    const ClassifierGrads ref = classifier_grads(false, in, c.V, DType::kFloat64, kCpu);
    for (const int64_t rows : {1, 3, 8, 0}) {
      SCOPED_TRACE(case_name(c) + " chunk_rows " + std::to_string(rows));
      const ClassifierGrads got =
          classifier_grads(true, in, c.V, DType::kFloat64, Device::cuda(), {.chunk_rows = rows});
      expect_close(got, ref, {1e-12, 1e-12});
      const Tensor pad = got.dwte.narrow(0, c.V, c.Vp - c.V).to(kCpu);
      EXPECT_TENSOR_NEAR(pad, zeros(pad.shape(), {DType::kFloat64}), 0.0, 0.0);
    }
  }
}

TEST(Ch10_7_FusedClassifierCuda, MatchesReferenceFloat32) {
  TT_SKIP_IF_NO_CUDA();
  uint64_t seed = 200;
  for (const bool tf32 : {false, true}) {
    cuda::AllowTf32Guard mode(tf32);
    const Tol tol = tf32 ? Tol{2e-3, 5e-3} : Tol{2e-6, 2e-5};
    for (const ClassifierCase& c : kCases) {
      const test10::ClassifierInputs in = classifier_inputs(c, ++seed, DType::kFloat32);
      const ClassifierGrads ref = classifier_grads(false, in, c.V, DType::kFloat64, kCpu);
      const ClassifierGrads unfused =
          classifier_grads(false, in, c.V, DType::kFloat32, Device::cuda());
      for (const int64_t rows : {5, 0}) {
        SCOPED_TRACE(case_name(c) + (tf32 ? " tf32" : " exact") + " chunk_rows " +
                     std::to_string(rows));
        const ClassifierGrads got =
            classifier_grads(true, in, c.V, DType::kFloat32, Device::cuda(), {.chunk_rows = rows});
        expect_close(got, ref, tol);
        expect_close(unfused, ref, tol);  // the bound is one the unfused path meets too
      }
    }
  }
}

// GPT-2's vocabulary (V = 50257 padded to Vp = 50304) and width, N = 300 rows in chunks of 128
// (the last one 44): fused against unfused on the GPU, TF32 off, and the logits of a chunk never
// larger than the chunk.
TEST(Ch10_7_FusedClassifierCuda, Gpt2Vocabulary) {
  TT_SKIP_IF_NO_CUDA();
  cuda::AllowTf32Guard exact(false);
  const ClassifierCase c{3, 100, 768, 50257, 50304};
  const test10::ClassifierInputs in = classifier_inputs(c, 7, DType::kFloat32, 0.05);
  int64_t fused_rows = 0, unfused_rows = 0;
  ClassifierGrads ref, got;
  {
    test10::MemoryObserver observer(Device::cuda());
    ref = classifier_grads(false, in, c.V, DType::kFloat32, Device::cuda());
    unfused_rows = observer.max_rows_with_cols(c.V, c.C);
  }
  {
    test10::MemoryObserver observer(Device::cuda());
    got = classifier_grads(true, in, c.V, DType::kFloat32, Device::cuda(), {.chunk_rows = 128});
    fused_rows = observer.max_rows_with_cols(c.V, c.C);
  }
  // dx sums V = 50257 products per element: fp32 rounding of such a sum in two different orders
  // differs by ~sqrt(V) * 6e-8 relative to the terms, hence the looser 1e-4.
  expect_close(got, ref, {1e-5, 1e-4});
  EXPECT_EQ(fused_rows, 128) << "a kernel saw more logits rows than one chunk";
  EXPECT_EQ(unfused_rows, 300) << "the unfused path materializes all 300 rows";
}

TEST(Ch10_7_FusedClassifierCuda, DeterministicTf32) {
  TT_SKIP_IF_NO_CUDA();
  cuda::AllowTf32Guard tf32(true);
  const ClassifierCase c{2, 40, 64, 2001, 2048};
  const test10::ClassifierInputs in = classifier_inputs(c, 17, DType::kFloat32);
  const ClassifierGrads a =
      classifier_grads(true, in, c.V, DType::kFloat32, Device::cuda(), {.chunk_rows = 30});
  const ClassifierGrads b =
      classifier_grads(true, in, c.V, DType::kFloat32, Device::cuda(), {.chunk_rows = 30});
  EXPECT_TENSOR_NEAR(a.loss.to(kCpu), b.loss.to(kCpu), 0.0, 0.0);
  EXPECT_TENSOR_NEAR(a.dx.to(kCpu), b.dx.to(kCpu), 0.0, 0.0);
  EXPECT_TENSOR_NEAR(a.dwte.to(kCpu), b.dwte.to(kCpu), 0.0, 0.0);
}

// Logits around +-1e3 (exp overflows float32 beyond 88) stay finite and match float64.
TEST(Ch10_7_FusedClassifierCuda, LargeLogits) {
  TT_SKIP_IF_NO_CUDA();
  cuda::AllowTf32Guard exact(false);
  const ClassifierCase c{1, 20, 8, 300, 320};
  test10::ClassifierInputs in = classifier_inputs(c, 19, DType::kFloat32, 100.0);
  const ClassifierGrads ref = classifier_grads(false, in, c.V, DType::kFloat64, kCpu);
  const ClassifierGrads got =
      classifier_grads(true, in, c.V, DType::kFloat32, Device::cuda(), {.chunk_rows = 7});
  EXPECT_TRUE(std::isfinite(got.loss.item()));
  expect_close(got, ref, {1e-5, 1e-4});
}

TEST(Ch10_7_FusedClassifierCuda, Errors) {
  TT_SKIP_IF_NO_CUDA();
  const ClassifierCase c{2, 3, 4, 10, 12};
  const test10::ClassifierInputs in = classifier_inputs(c, 1, DType::kFloat32);
  Tensor bad = in.targets.clone();
  bad.data<int64_t>()[5] = c.V;  // a row of wte, but not a class
  const Tensor x = in.x.to(Device::cuda()), wte = in.wte.to(Device::cuda());
  EXPECT_TT_ERROR(fused_classifier_loss(x, wte, c.V, bad.to(Device::cuda())),
                  "fused_classifier_loss", "targets[5] = 10", "out of range");
  EXPECT_TT_ERROR(fused_classifier_loss(x, wte, c.V, in.targets), "fused_classifier_loss",
                  "one device");
  // Unchecked, the kernel never reads out of bounds and reports the row as NaN.
  const Tensor loss =
      fused_classifier_loss(x, wte, c.V, bad.to(Device::cuda()), {.check_targets = false});
  EXPECT_TRUE(std::isnan(loss.item()));
}

// The split vocabulary's row kernels on the GPU (ClassifierVocabPart, chapter 13's vocab-parallel
// head): V = 1000 of Vp = 1280 in parts of 320 rows (the last one 40 tokens and 280 pads), in
// chunks of 24 rows, float64 against the unsplit float64 reference (1e-12). Chapter 11 tests
// bfloat16.
TEST(Ch10_FusedClassifierVocabPartCuda, PartsMakeUpTheWholeVocabulary) {
  TT_SKIP_IF_NO_CUDA();
  const ClassifierCase c{2, 33, 64, 1000, 1280};
  const ClassifierInputs in = classifier_inputs(c, 41, DType::kFloat64);
  const ClassifierGrads ref = classifier_grads(false, in, c.V, DType::kFloat64, kCpu);
  const ClassifierGrads got =
      split_classifier_grads(in, c.V, 320, DType::kFloat64, Device::cuda(), 1e-12, 24);
  expect_close(got, ref, {1e-12, 1e-12});
}

}  // namespace
}  // namespace tt::test10

// Chapter 10, exercise ch10.7: the fused classifier on the CPU against the unfused composition
// matmul + cross_entropy, in loss and in the gradients of x and wte.
//
// Tolerances:
//  - float64: both paths do the same arithmetic in a different order (chunked GEMMs, dW summed
//    chunk by chunk), so they agree to rounding: ||err|| / ||ref|| <= 1e-12 (measured ~1e-16).
//  - float32 against the float64 reference: the logits are K = C dot products with relative
//    rounding error ~ sqrt(C) * 6e-8; softmax, loss and the gradient GEMMs add a few ulps more.
//    We require 2e-6 relative on the loss and ||err|| / ||ref|| <= 2e-5 on dx and dW (the unfused
//    float32 path meets the same bounds; the test checks it too, so a bound that only one path
//    meets would show).
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "classifier_test_util.h"

namespace tt::test10 {
namespace {

const Device kCpu = Device::cpu();

// Row losses and gradients computed directly from the definition, in long double.
TEST(Ch10_7_FusedClassifier, RowXentMatchesDefinition) {
  Generator gen(71);
  for (const int64_t V : {1, 2, 7, 64, 1000}) {
    for (const int64_t target : {int64_t{0}, V / 2, V - 1}) {
      const Tensor z0 = mul(randn({V}, gen, {DType::kFloat64}), 3.0);
      std::vector<double> row = z0.to_vector<double>();
      const double scale = 0.25;
      const double loss = cpu::classifier_row_xent<double>(row.data(), V, target, scale);
      long double m = -INFINITY, s = 0;
      for (int64_t v = 0; v < V; ++v) m = std::max<long double>(m, z0.data<double>()[v]);
      for (int64_t v = 0; v < V; ++v) s += std::exp(z0.data<double>()[v] - m);
      const long double lse = m + std::log(s);
      EXPECT_NEAR(loss, static_cast<double>(lse - z0.data<double>()[target]), 1e-12)
          << "V=" << V << " target=" << target;
      for (int64_t v = 0; v < V; ++v) {
        const long double p = std::exp(z0.data<double>()[v] - lse);
        const double expected = static_cast<double>(scale * (p - (v == target ? 1 : 0)));
        ASSERT_NEAR(row[static_cast<std::size_t>(v)], expected, 1e-14)
            << "V=" << V << " target=" << target << " v=" << v;
      }
    }
  }
}

// Logits of magnitude 1e4 (exp would overflow without the max shift) give finite, exact results.
TEST(Ch10_7_FusedClassifier, RowXentIsStableForLargeLogits) {
  for (const double offset : {1e4, -1e4, 80.0, 100.0}) {
    std::vector<float> row = {static_cast<float>(offset), static_cast<float>(offset + 2.0),
                              static_cast<float>(offset - 3.0), static_cast<float>(offset + 1.0)};
    const float loss = cpu::classifier_row_xent<float>(row.data(), 4, 2, 1.0f);
    // log(e^0 + e^2 + e^-3 + e^1) - (-3), relative to the offset.
    const double lse = std::log(1.0 + std::exp(2.0) + std::exp(-3.0) + std::exp(1.0));
    EXPECT_NEAR(loss, lse + 3.0, 1e-5) << "offset " << offset;
    double sum = 0;
    for (const float g : row) {
      EXPECT_TRUE(std::isfinite(g)) << "offset " << offset;
      sum += g;
    }
    EXPECT_NEAR(sum, 0.0, 1e-6) << "gradient rows of softmax - onehot sum to 0";
    EXPECT_NEAR(row[1], std::exp(2.0 - lse), 1e-6) << "offset " << offset;
  }
}

// Loss and gradients of the fused classifier against the unfused one in float64, for several
// chunkings.
void matches_unfused_float64(const ClassifierCase& c) {
  const test10::ClassifierInputs in = classifier_inputs(c, 11, DType::kFloat64);
  const ClassifierGrads ref = classifier_grads(false, in, c.V, DType::kFloat64, kCpu);
  std::vector<FusedClassifierOptions> chunkings;
  for (const int64_t rows : {1, 3, 5, 14, 100}) chunkings.push_back({.chunk_rows = rows});
  chunkings.push_back({.max_chunk_bytes = 3 * classifier_padded_stride(c.V) * 8});
  chunkings.push_back({});
  for (const FusedClassifierOptions& opt : chunkings) {
    SCOPED_TRACE(case_name(c) + " chunk_rows " + std::to_string(opt.chunk_rows) + " max bytes " +
                 std::to_string(opt.max_chunk_bytes));
    const ClassifierGrads got = classifier_grads(true, in, c.V, DType::kFloat64, kCpu, opt);
    EXPECT_NEAR(got.loss.item(), ref.loss.item(), 1e-12 * std::abs(ref.loss.item()));
    EXPECT_LE(rel_norm_error(got.dx, ref.dx), 1e-12);
    EXPECT_LE(rel_norm_error(got.dwte, ref.dwte), 1e-12);
    EXPECT_TENSOR_NEAR(got.dx, ref.dx, 1e-14, 1e-10);
    EXPECT_TENSOR_NEAR(got.dwte, ref.dwte, 1e-14, 1e-10);
    // The padding rows of wte are never predicted: exactly zero gradient.
    const Tensor pad = got.dwte.narrow(0, c.V, c.Vp - c.V);
    EXPECT_TENSOR_NEAR(pad, zeros(pad.shape(), {DType::kFloat64}), 0.0, 0.0);
  }
}

// float64, several chunkings (1 row, a size that does not divide N, N itself, more than N, a
// byte bound of 3 rows, the default), V not a multiple of anything and Vp > V.
TEST(Ch10_7_FusedClassifier, MatchesUnfusedFloat64) {
  // N = 14; Vp = 40 < 64: the GEMMs use all 40 rows of wte; Vp = 100 > 64: they use 64 of them.
  for (const ClassifierCase& c :
       {ClassifierCase{2, 7, 5, 37, 40}, ClassifierCase{2, 7, 5, 10, 100}}) {
    matches_unfused_float64(c);
  }
}

TEST(Ch10_7_FusedClassifier, MatchesUnfusedFloat32) {
  for (const ClassifierCase& c :
       {ClassifierCase{3, 11, 16, 101, 128}, ClassifierCase{1, 1, 3, 1, 1},
        ClassifierCase{2, 33, 24, 257, 257}}) {
    const test10::ClassifierInputs in = classifier_inputs(c, 23, DType::kFloat32);
    const ClassifierGrads ref = classifier_grads(false, in, c.V, DType::kFloat64, kCpu);
    const ClassifierGrads unfused = classifier_grads(false, in, c.V, DType::kFloat32, kCpu);
    for (const int64_t rows : {4, 7, 0}) {
      SCOPED_TRACE(case_name(c) + " chunk_rows " + std::to_string(rows));
      const ClassifierGrads got =
          classifier_grads(true, in, c.V, DType::kFloat32, kCpu, {.chunk_rows = rows});
      for (const ClassifierGrads* g : {&got, &unfused}) {
        EXPECT_NEAR(g->loss.item(), ref.loss.item(), 2e-6 * std::abs(ref.loss.item()) + 1e-7);
        if (c.V > 1) {  // with one class the loss is 0 and every gradient is exactly 0
          EXPECT_LE(rel_norm_error(g->dx, ref.dx), 2e-5);
          EXPECT_LE(rel_norm_error(g->dwte, ref.dwte), 2e-5);
        }
        EXPECT_TENSOR_NEAR(g->dx, ref.dx, 1e-6, 1e-3);
        EXPECT_TENSOR_NEAR(g->dwte, ref.dwte, 1e-6, 1e-3);
      }
    }
  }
}

// backward multiplies by the incoming gradient, and wte's gradient adds to its other uses (the
// tied embedding of GPT-2): h = embedding(wte, tokens) * 0.5 + x feeds the classifier.
TEST(Ch10_7_FusedClassifier, TiedEmbeddingAndUpstreamGradient) {
  const ClassifierCase c{2, 5, 8, 29, 32};
  const test10::ClassifierInputs in = classifier_inputs(c, 5, DType::kFloat64);
  const Tensor tokens = in.targets.clone();  // any valid rows of wte
  auto run = [&](bool fused) {
    Tensor x = in.x.clone(), wte = in.wte.clone();
    x.set_requires_grad();
    wte.set_requires_grad();
    const Tensor h = add(mul(embedding(wte, tokens), 0.5), x);
    const Tensor loss = fused ? fused_classifier_loss(h, wte, c.V, in.targets, {.chunk_rows = 3})
                              : classifier_loss_unfused(h, wte, c.V, in.targets);
    autograd::backward(mul(loss, -3.0));
    return ClassifierGrads{loss.detach(), x.grad(), wte.grad()};
  };
  const ClassifierGrads ref = run(false), got = run(true);
  EXPECT_NEAR(got.loss.item(), ref.loss.item(), 1e-12 * std::abs(ref.loss.item()));
  EXPECT_LE(rel_norm_error(got.dx, ref.dx), 1e-12);
  EXPECT_LE(rel_norm_error(got.dwte, ref.dwte), 1e-12);
}

// Without a gradient to compute, only the logits GEMM runs (one per chunk), the loss is the same
// bits, and nothing is recorded.
TEST(Ch10_7_FusedClassifier, NoGradComputesOnlyTheLoss) {
  const ClassifierCase c{2, 6, 4, 19, 24};
  const test10::ClassifierInputs in = classifier_inputs(c, 3, DType::kFloat32);
  Tensor x = in.x.clone(), wte = in.wte.clone();
  x.set_requires_grad();
  wte.set_requires_grad();
  const FusedClassifierOptions opt{.chunk_rows = 5};  // N = 12: chunks of 5, 5, 2
  const Tensor with_grad = fused_classifier_loss(x, wte, c.V, in.targets, opt);
  EXPECT_FALSE(with_grad.is_leaf());
  Tensor loss;
  int64_t gemms = 0;
  {
    autograd::NoGradGuard no_grad;
    test10::MemoryObserver observer(kCpu);
    loss = fused_classifier_loss(x, wte, c.V, in.targets, opt);
    gemms = observer.count("gemm");
  }
  EXPECT_EQ(gemms, 3);
  EXPECT_TRUE(loss.is_leaf());
  EXPECT_EQ(loss.item(), with_grad.item());
}

// The point of the fusion: no kernel ever sees the [N, V] logits, and the memory allocated while
// the loss and gradients are computed stays below their size. The unfused path, measured the
// same way, exceeds both bounds (so the measurement can fail).
TEST(Ch10_7_FusedClassifier, LogitsNeverExistWhole) {
  const ClassifierCase c{4, 64, 8, 1000, 1024};  // N = 256; [N, V] float32 = 1 MB
  const test10::ClassifierInputs in = classifier_inputs(c, 9, DType::kFloat32);
  const std::size_t logits_bytes = 256 * 1000 * 4;
  auto measure = [&](bool fused, std::size_t* largest, std::size_t* peak, int64_t* rows) {
    Tensor x = in.x.clone(), wte = in.wte.clone();
    x.set_requires_grad();
    wte.set_requires_grad();
    test10::MemoryObserver observer(kCpu);
    const Tensor loss = fused ? fused_classifier_loss(x, wte, c.V, in.targets, {.chunk_rows = 32})
                              : classifier_loss_unfused(x, wte, c.V, in.targets);
    autograd::backward(loss);
    *largest = observer.largest_tensor();
    *peak = observer.peak_increase();
    *rows = observer.max_rows_with_cols(c.V, c.C);
  };
  std::size_t largest = 0, peak = 0;
  int64_t rows = 0;
  measure(true, &largest, &peak, &rows);
  EXPECT_EQ(rows, 32) << "a kernel saw more logits rows than one chunk";
  EXPECT_LE(largest, 32 * 1024 * 4u) << "a kernel saw a tensor larger than one chunk of logits";
  EXPECT_LT(peak, logits_bytes / 2) << "fused classifier allocated " << peak << " bytes";
  measure(false, &largest, &peak, &rows);
  EXPECT_EQ(rows, 256);
  EXPECT_GE(largest, logits_bytes);
  EXPECT_GE(peak, logits_bytes);
}

TEST(Ch10_7_FusedClassifier, DeterministicAndChunkIndependentLoss) {
  const ClassifierCase c{2, 9, 6, 53, 64};
  const test10::ClassifierInputs in = classifier_inputs(c, 13, DType::kFloat32);
  const ClassifierGrads a =
      classifier_grads(true, in, c.V, DType::kFloat32, kCpu, {.chunk_rows = 4});
  const ClassifierGrads b =
      classifier_grads(true, in, c.V, DType::kFloat32, kCpu, {.chunk_rows = 4});
  EXPECT_TENSOR_NEAR(a.loss, b.loss, 0.0, 0.0);
  EXPECT_TENSOR_NEAR(a.dx, b.dx, 0.0, 0.0);
  EXPECT_TENSOR_NEAR(a.dwte, b.dwte, 0.0, 0.0);
  // Row losses do not depend on the chunking, and they are summed in one fixed order.
  const ClassifierGrads d =
      classifier_grads(true, in, c.V, DType::kFloat32, kCpu, {.chunk_rows = 7});
  EXPECT_EQ(a.loss.item(), d.loss.item());
}

TEST(Ch10_7_FusedClassifier, ChunkRows) {
  EXPECT_EQ(classifier_padded_stride(50257), 50304);
  EXPECT_EQ(classifier_padded_stride(64), 64);
  EXPECT_EQ(classifier_padded_stride(1), 64);
  const int64_t N = 8192, V = 50257, stride = classifier_padded_stride(V);
  for (const DType dt : {DType::kFloat32, DType::kFloat64}) {
    const int64_t elem = static_cast<int64_t>(dtype_size(dt));
    const int64_t rows = classifier_chunk_rows(N, V, dt, {});
    EXPECT_LE(rows * stride * elem, kClassifierChunkBytes);
    const int64_t chunks = (N + rows - 1) / rows;
    // Balanced: as few chunks as the bound allows, the last one nearly full.
    EXPECT_EQ(chunks, (N * stride * elem + kClassifierChunkBytes - 1) / kClassifierChunkBytes);
    EXPECT_GT(N - (chunks - 1) * rows, rows - chunks);
  }
  EXPECT_EQ(classifier_chunk_rows(N, V, DType::kFloat32, {.max_chunk_bytes = 1}), 1);
  EXPECT_EQ(classifier_chunk_rows(N, V, DType::kFloat32, {.chunk_rows = 100}), 100);
  EXPECT_EQ(classifier_chunk_rows(10, V, DType::kFloat32, {.chunk_rows = 100}), 10);
  EXPECT_EQ(classifier_chunk_rows(10, V, DType::kFloat32, {}), 10);
  EXPECT_EQ(classifier_chunk_rows(0, V, DType::kFloat32, {}), 1);
}

TEST(Ch10_7_FusedClassifier, Errors) {
  const ClassifierCase c{2, 3, 4, 10, 12};
  const test10::ClassifierInputs in = classifier_inputs(c, 1, DType::kFloat32);
  auto with_target = [&](int64_t value) {
    Tensor t = in.targets.clone();
    t.data<int64_t>()[4] = value;
    return t;
  };
  // V and -1 are outside [0, V) even though wte has rows V..Vp-1.
  EXPECT_TT_ERROR(fused_classifier_loss(in.x, in.wte, c.V, with_target(c.V)),
                  "fused_classifier_loss", "targets[4] = 10", "out of range [0, 10)");
  EXPECT_TT_ERROR(fused_classifier_loss(in.x, in.wte, c.V, with_target(-1)),
                  "fused_classifier_loss", "targets[4] = -1");
  EXPECT_TT_ERROR(fused_classifier_loss(in.x, in.wte, c.Vp + 1, in.targets),
                  "fused_classifier_loss", "vocab_size 13");
  EXPECT_TT_ERROR(fused_classifier_loss(in.x, in.wte, 0, in.targets), "fused_classifier_loss");
  EXPECT_TT_ERROR(fused_classifier_loss(in.x, in.wte.narrow(1, 0, 3), c.V, in.targets),
                  "fused_classifier_loss", "[12, 3]");
  EXPECT_TT_ERROR(fused_classifier_loss(in.x, in.wte.to(DType::kFloat64), c.V, in.targets),
                  "fused_classifier_loss", "float64");
  EXPECT_TT_ERROR(fused_classifier_loss(in.x, in.wte, c.V, in.targets.reshape({6})),
                  "fused_classifier_loss", "targets");
  EXPECT_TT_ERROR(fused_classifier_loss(in.x, in.wte, c.V, in.targets.to(DType::kFloat32)),
                  "fused_classifier_loss", "int64");
}

// N = 0 rows: the mean of nothing is NaN (as cross_entropy), and nothing is computed.
TEST(Ch10_7_FusedClassifier, NoRows) {
  const Tensor x = zeros({0, 4, 3}), wte = ones({5, 3});
  const Tensor targets = zeros({0, 4}, {DType::kInt64});
  EXPECT_TRUE(std::isnan(fused_classifier_loss(x, wte, 5, targets).item()));
  EXPECT_TRUE(std::isnan(classifier_loss_unfused(x, wte, 5, targets).item()));
}

// A vocabulary split in parts (ClassifierVocabPart: chapter 13's vocab-parallel head, here in one
// process): V = 29 of Vp = 48 in parts of 12 rows, so that part 2 holds 5 tokens and 7 pads and
// part 3 only padding. Each part's statistics match the definition, every part returns the
// whole loss, and the parts' dx add up to, their dwte rows make up, the unsplit gradients
// (float64: the same arithmetic in another order, 1e-12). Chunks of 4 rows (N = 10).
TEST(Ch10_FusedClassifierVocabPart, PartsMakeUpTheWholeVocabularyFloat64) {
  const ClassifierCase c{2, 5, 6, 29, 48};
  const ClassifierInputs in = classifier_inputs(c, 31, DType::kFloat64);
  const ClassifierGrads ref = classifier_grads(false, in, c.V, DType::kFloat64, kCpu);
  for (const int64_t chunk : {4, 0}) {
    SCOPED_TRACE("chunk_rows " + std::to_string(chunk));
    const ClassifierGrads got =
        split_classifier_grads(in, c.V, 12, DType::kFloat64, kCpu, 1e-12, chunk);
    EXPECT_NEAR(got.loss.item(), ref.loss.item(), 1e-12 * std::abs(ref.loss.item()));
    EXPECT_LE(rel_norm_error(got.dx, ref.dx), 1e-12);
    EXPECT_LE(rel_norm_error(got.dwte, ref.dwte), 1e-12);
    const Tensor pad = got.dwte.narrow(0, c.V, c.Vp - c.V);
    EXPECT_TENSOR_NEAR(pad, zeros(pad.shape(), {DType::kFloat64}), 0.0, 0.0);
  }
}

TEST(Ch10_FusedClassifierVocabPart, Errors) {
  const ClassifierCase c{2, 3, 4, 10, 12};
  const ClassifierInputs in = classifier_inputs(c, 1, DType::kFloat32);
  FusedClassifierOptions opt;
  opt.part.first = 8;
  opt.part.whole_vocab_size = 20;
  opt.part.combine = [](const Tensor&) {};
  // A part [8, 16) of a vocabulary of 20: fine as shapes go; the targets are whole ids.
  Tensor t = in.targets.clone();
  t.data<int64_t>()[2] = 20;
  EXPECT_TT_ERROR(fused_classifier_loss(in.x, in.wte, 8, t, opt), "fused_classifier_loss",
                  "targets[2] = 20", "out of range [0, 20)");
  opt.part.first = 15;
  EXPECT_TT_ERROR(fused_classifier_loss(in.x, in.wte, 8, in.targets, opt), "fused_classifier_loss",
                  "[15, 23)", "20 tokens");
  EXPECT_TT_ERROR(fused_classifier_loss(in.x, in.wte, -1, in.targets, opt), "fused_classifier_loss",
                  "vocab_size -1");
}

}  // namespace
}  // namespace tt::test10

// Tests of the LLaMA ops (tt/llama_ops.h) on the CPU: each against a composition of chapter
// 04's ops or a direct loop in double, gradchecked in float64, and their errors.
#include <cmath>
#include <vector>

#include "ch15_test_util.h"
#include "tt/flash_attention.h"
#include "tt/functional.h"
#include "tt/llama_ops.h"

namespace tt {
namespace {

using ch15::leaf;

/// x / sqrt(mean(x^2) + eps) * w from chapter 04's ops.
Tensor rms_norm_naive(const Tensor& x, const Tensor& w, double eps) {
  const Tensor ms = mean(mul(x, x), {-1}, true);
  return mul(div(x, sqrt(add(ms, eps))), w);
}

TEST(Ch15_1_RmsNorm, ForwardMatchesTheComposition) {
  for (const Shape& shape : {Shape{3, 16}, Shape{2, 5, 33}, Shape{1, 1}}) {
    const Tensor x = leaf(shape, 1, 2.0);
    const Tensor w = leaf({shape.back()}, 2);
    EXPECT_TENSOR_NEAR(rms_norm(x, w, 1e-6), rms_norm_naive(x, w, 1e-6), 1e-12, 1e-12);
    const Tensor xf = x.detach().to(DType::kFloat32), wf = w.detach().to(DType::kFloat32);
    EXPECT_TENSOR_NEAR(rms_norm(xf, wf, 1e-5),
                       rms_norm_naive(x, w, 1e-5).detach().to(DType::kFloat32), 1e-5, 1e-5);
  }
}

TEST(Ch15_1_RmsNorm, GradcheckInXAndWeight) {
  const Tensor x = leaf({4, 9}, 3, 1.5);
  const Tensor w = leaf({9}, 4);
  EXPECT_GRADCHECK([](const std::vector<Tensor>& in) { return rms_norm(in[0], in[1], 1e-5); },
                   {x, w});
}

TEST(Ch15_1_RmsNorm, BackwardMatchesTheCompositionInFloat32) {
  const Tensor x = leaf({6, 20}, 5, 1.0, DType::kFloat32);
  const Tensor w = leaf({20}, 6, 1.0, DType::kFloat32);
  const Tensor x2 = x.detach().set_requires_grad(true), w2 = w.detach().set_requires_grad(true);
  const Tensor g = leaf({6, 20}, 7, 1.0, DType::kFloat32, false);
  autograd::backward(sum(mul(rms_norm(x, w, 1e-6), g)));
  autograd::backward(sum(mul(rms_norm_naive(x2, w2, 1e-6), g)));
  EXPECT_TENSOR_NEAR(x.grad(), x2.grad(), 1e-5, 1e-4);
  EXPECT_TENSOR_NEAR(w.grad(), w2.grad(), 1e-5, 1e-4);
}

TEST(Ch15_1_RmsNorm, ErrorsNameTheShapes) {
  EXPECT_TT_ERROR(rms_norm(ones({2, 3}), ones({4}), 1e-6), "rms_norm", "[2, 3]", "[4]");
  EXPECT_TT_ERROR(rms_norm(ones({2, 3}), ones({3}, {DType::kFloat64}), 1e-6), "rms_norm",
                  "float64");
  EXPECT_TT_ERROR(rms_norm(ones({2, 3}), ones({3}), -1.0), "rms_norm", "eps");
}

/// The rotate-half RoPE of x [B, H, T, hs] at positions [B, T], in double, by the definition.
Tensor rope_reference(const Tensor& x, const std::vector<int64_t>& pos, double theta) {
  const int64_t B = x.size(0), H = x.size(1), T = x.size(2), hs = x.size(3), half = hs / 2;
  const Tensor xc = x.detach().to(DType::kFloat64).contiguous();
  std::vector<double> in = xc.to_vector<double>(), out(in.size());
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t h = 0; h < H; ++h) {
      for (int64_t t = 0; t < T; ++t) {
        const double p = static_cast<double>(pos[b * T + t]);
        const int64_t o = ((b * H + h) * T + t) * hs;
        for (int64_t i = 0; i < half; ++i) {
          const double a =
              p * std::pow(theta, -2.0 * static_cast<double>(i) / static_cast<double>(hs));
          out[o + i] = in[o + i] * std::cos(a) - in[o + i + half] * std::sin(a);
          out[o + i + half] = in[o + i + half] * std::cos(a) + in[o + i] * std::sin(a);
        }
      }
    }
  }
  return from_vector(out, x.shape());
}

TEST(Ch15_2_Rope, MatchesTheDefinitionAtPerRowPositions) {
  const Tensor x = leaf({2, 3, 5, 8}, 10, 1.0, DType::kFloat64, false);
  const std::vector<int64_t> pos = {0, 1, 2, 3, 4, 7, 8, 9, 10, 11};
  const RopeTables tables = rope_tables(16, 8, 10000.0, {}, {DType::kFloat64});
  EXPECT_TENSOR_NEAR(rope(x, tables, from_vector(pos, {2, 5})), rope_reference(x, pos, 10000.0),
                     1e-12, 0);
  const RopeTables tables32 = rope_tables(16, 8, 500000.0, {});
  EXPECT_TENSOR_NEAR(rope(x.to(DType::kFloat32), tables32, from_vector(pos, {2, 5})),
                     rope_reference(x, pos, 500000.0).to(DType::kFloat32), 1e-5, 0);
}

TEST(Ch15_2_Rope, ReadsATransposedViewInPlace) {
  // [B, T, H, hs] transposed to [B, H, T, hs]: the layout the model hands to rope.
  const Tensor y = leaf({2, 5, 3, 8}, 11, 1.0, DType::kFloat64, false);
  const Tensor x = transpose(y, 1, 2);
  ASSERT_FALSE(x.is_contiguous());
  const std::vector<int64_t> pos = {0, 1, 2, 3, 4, 0, 1, 2, 3, 4};
  const RopeTables tables = rope_tables(8, 8, 10000.0, {}, {DType::kFloat64});
  EXPECT_TENSOR_NEAR(rope(x, tables, from_vector(pos, {2, 5})), rope_reference(x, pos, 10000.0),
                     1e-12, 0);
}

TEST(Ch15_2_Rope, ScoresDependOnlyOnTheRelativePosition) {
  const Tensor q = leaf({1, 1, 1, 16}, 12, 1.0, DType::kFloat64, false);
  const Tensor k = leaf({1, 1, 1, 16}, 13, 1.0, DType::kFloat64, false);
  const RopeTables tables = rope_tables(64, 16, 10000.0, {}, {DType::kFloat64});
  auto score = [&](int64_t pq, int64_t pk) {
    return sum(mul(rope(q, tables, tensor_i64({pq}).view({1, 1})),
                   rope(k, tables, tensor_i64({pk}).view({1, 1}))))
        .item();
  };
  EXPECT_NEAR(score(5, 2), score(40, 37), 1e-12);
  EXPECT_NEAR(score(9, 9), score(0, 0), 1e-12);
}

TEST(Ch15_2_Rope, GradcheckAndInverse) {
  const Tensor x = leaf({2, 2, 3, 6}, 14);
  const Tensor pos = from_vector<int64_t>({3, 1, 4, 1, 5, 9}, {2, 3});
  const RopeTables tables = rope_tables(10, 6, 100.0, {}, {DType::kFloat64});
  EXPECT_GRADCHECK([&](const std::vector<Tensor>& in) { return rope(in[0], tables, pos); }, {x});
}

TEST(Ch15_2_Rope, ErrorsNameTheProblem) {
  const RopeTables tables = rope_tables(4, 8, 10000.0, {});
  EXPECT_TT_ERROR(rope(ones({1, 1, 2, 8}), tables, from_vector<int64_t>({0, 4}, {1, 2})), "rope",
                  "position 4");
  EXPECT_TT_ERROR(rope(ones({1, 1, 2, 6}), tables, from_vector<int64_t>({0, 1}, {1, 2})), "rope",
                  "[4, 4]");
  EXPECT_TT_ERROR(rope(ones({1, 1, 2, 8}), tables, tensor_i64({0, 1})), "rope", "positions");
  EXPECT_TT_ERROR(rope_tables(4, 7, 10000.0, {}), "even");
}

TEST(Ch15_Rope, Llama3ScalingKeepsHighAndDividesLowFrequencies) {
  RopeScaling s;
  s.type = "llama3";
  s.factor = 8;
  s.low_freq_factor = 1;
  s.high_freq_factor = 4;
  s.original_max_position_embeddings = 8192;
  const std::vector<double> base = rope_inv_freq(128, 500000.0, {});
  const std::vector<double> scaled = rope_inv_freq(128, 500000.0, s);
  EXPECT_EQ(scaled.front(), base.front());             // wavelength 2 pi: unchanged
  EXPECT_DOUBLE_EQ(scaled.back(), base.back() / 8.0);  // longest wavelength: divided by factor
  RopeScaling lin;
  lin.type = "linear";
  lin.factor = 2;
  EXPECT_DOUBLE_EQ(rope_inv_freq(8, 10000.0, lin)[1], rope_inv_freq(8, 10000.0, {})[1] / 2);
  RopeScaling bad;
  bad.type = "yarn";
  EXPECT_TT_ERROR(rope_inv_freq(8, 10000.0, bad), "yarn");
}

TEST(Ch15_Swiglu, MatchesTheCompositionAndGradchecks) {
  const Tensor a = leaf({3, 7}, 20, 2.0), b = leaf({3, 7}, 21);
  const Tensor silu = div(a, add(exp(neg(a)), 1.0));
  EXPECT_TENSOR_NEAR(swiglu(a, b), mul(silu, b), 1e-12, 1e-12);
  EXPECT_GRADCHECK([](const std::vector<Tensor>& in) { return swiglu(in[0], in[1]); }, {a, b});
  EXPECT_TT_ERROR(swiglu(ones({2}), ones({3})), "swiglu", "[2]", "[3]");
}

TEST(Ch15_3_Gqa, ForwardMatchesRepeatedKeysAndValues) {
  for (int64_t nkv : {1, 2, 4}) {
    const Tensor q = leaf({2, 4, 13, 8}, 30, 1.0, DType::kFloat64, false);
    const Tensor k = leaf({2, nkv, 13, 8}, 31, 1.0, DType::kFloat64, false);
    const Tensor v = leaf({2, nkv, 13, 8}, 32, 1.0, DType::kFloat64, false);
    EXPECT_TENSOR_NEAR(gqa_attention(q, k, v), gqa_attention_naive(q, k, v), 1e-12, 1e-12)
        << "NKV = " << nkv;
  }
}

TEST(Ch15_3_Gqa, GradcheckSumsTheGroupIntoDkAndDv) {
  const Tensor q = leaf({1, 6, 5, 4}, 33);
  const Tensor k = leaf({1, 2, 5, 4}, 34);
  const Tensor v = leaf({1, 2, 5, 4}, 35);
  EXPECT_GRADCHECK([](const std::vector<Tensor>& in) { return gqa_attention(in[0], in[1], in[2]); },
                   {q, k, v});
}

TEST(Ch15_3_Gqa, BackwardMatchesTheCompositionInFloat32) {
  const Tensor q = leaf({2, 8, 70, 16}, 36, 1.0, DType::kFloat32);  // T > one 64-row tile
  const Tensor k = leaf({2, 2, 70, 16}, 37, 1.0, DType::kFloat32);
  const Tensor v = leaf({2, 2, 70, 16}, 38, 1.0, DType::kFloat32);
  const Tensor g = leaf({2, 8, 70, 16}, 39, 1.0, DType::kFloat32, false);
  const Tensor q2 = q.detach().set_requires_grad(true), k2 = k.detach().set_requires_grad(true),
               v2 = v.detach().set_requires_grad(true);
  autograd::backward(sum(mul(gqa_attention(q, k, v), g)));
  autograd::backward(sum(mul(gqa_attention_naive(q2, k2, v2), g)));
  EXPECT_TENSOR_NEAR(q.grad(), q2.grad(), 1e-4, 1e-4);
  EXPECT_TENSOR_NEAR(k.grad(), k2.grad(), 1e-4, 1e-4);
  EXPECT_TENSOR_NEAR(v.grad(), v2.grad(), 1e-4, 1e-4);
}

TEST(Ch15_3_Gqa, HeadMappingAndErrors) {
  EXPECT_EQ(kv_head_of(0, 8, 2), 0);
  EXPECT_EQ(kv_head_of(3, 8, 2), 0);
  EXPECT_EQ(kv_head_of(4, 8, 2), 1);
  EXPECT_EQ(kv_head_of(7, 8, 1), 0);
  EXPECT_EQ(kv_head_of(5, 8, 8), 5);
  EXPECT_TT_ERROR(gqa_attention(ones({1, 4, 3, 8}), ones({1, 3, 3, 8}), ones({1, 3, 3, 8})),
                  "gqa_attention", "[1, 4, 3, 8]", "[1, 3, 3, 8]");
}

}  // namespace
}  // namespace tt

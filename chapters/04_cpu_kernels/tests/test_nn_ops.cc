// Tests of the NN front-ends (tt/ops_nn.h): gradcheck in float64 of every op through autograd,
// and the errors of bad inputs. Gradchecks run forward and backward, so each is filed under the
// backward's exercise.
#include <cmath>
#include <limits>

#include "tt/autograd.h"
#include "tt/ops_nn.h"
#include "tt/testing.h"

namespace tt {
namespace {

using autograd::gradcheck;

/// A float64 leaf that requires grad, N(0, scale^2) from a seeded generator.
Tensor leaf(const Shape& shape, uint64_t seed, double scale = 1.0) {
  Generator gen(seed);
  std::vector<double> v = randn(shape, gen, {.dtype = DType::kFloat64}).to_vector<double>();
  for (auto& x : v) x *= scale;
  Tensor t = from_vector<double>(v, shape);
  t.set_requires_grad(true);
  return t;
}

#define EXPECT_GRADCHECK(fn, ...)                                               \
  do {                                                                          \
    const auto r = gradcheck(fn, __VA_ARGS__);                                  \
    EXPECT_TRUE(r.ok) << r.message << " (max abs err " << r.max_abs_err << ")"; \
  } while (0)

TEST(Ch04_11_SoftmaxBackward, GradcheckSoftmaxAndLogSoftmaxEveryDim) {
  Tensor x = leaf({2, 3, 4}, 1, 2.0);
  for (int64_t dim : {0, 1, 2, -1}) {
    EXPECT_GRADCHECK([dim](const std::vector<Tensor>& in) { return softmax(in[0], dim); }, {x});
    EXPECT_GRADCHECK([dim](const std::vector<Tensor>& in) { return log_softmax(in[0], dim); }, {x});
  }
}

TEST(Ch04_11_SoftmaxBackward, NonContiguousInputAndAutogradGrad) {
  // A transposed input: the front-end makes it contiguous (views get autograd in ch04's
  // elementwise part, so only the values are compared here).
  Tensor base = from_vector<float>({1, 4, 2, 5, 3, 6}, {3, 2});
  EXPECT_TENSOR_NEAR(softmax(base.transpose(0, 1)),
                     softmax(from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3})), 0, 0);
  Tensor x = from_vector<float>({1, 2, 3}, {1, 3});
  x.set_requires_grad(true);
  Tensor y = softmax(x);
  autograd::backward(y, from_vector<float>({1, 0, 0}, {1, 3}));
  const auto p = y.to_vector<float>();
  EXPECT_NEAR(x.grad().to_vector<float>()[0], p[0] * (1 - p[0]), 1e-7);
  EXPECT_NEAR(x.grad().to_vector<float>()[1], -p[0] * p[1], 1e-7);
}

TEST(Ch04_13_LayerNormBackward, GradcheckXWeightBias) {
  Tensor x = leaf({2, 3, 5}, 3, 2.0), w = leaf({5}, 4), b = leaf({5}, 5);
  EXPECT_GRADCHECK([](const std::vector<Tensor>& in) { return layernorm(in[0], in[1], in[2]); },
                   {x, w, b});
}

TEST(Ch04_14_Gelu, Gradcheck) {
  Tensor x = leaf({4, 7}, 6, 2.0);
  EXPECT_GRADCHECK([](const std::vector<Tensor>& in) { return gelu(in[0]); }, {x});
}

TEST(Ch04_15_EmbeddingBackward, Gradcheck) {
  Tensor w = leaf({5, 3}, 7);
  Tensor idx = from_vector<int64_t>({4, 0, 4, 2, 4, 1}, {2, 3});
  EXPECT_GRADCHECK([](const std::vector<Tensor>& in) { return embedding(in[0], in[1]); }, {w, idx});
}

TEST(Ch04_16_CrossEntropy, GradcheckWithAndWithoutIgnoredRows) {
  Tensor x = leaf({5, 7}, 8, 2.0);
  Tensor t = from_vector<int64_t>({6, 0, 3, 3, 1}, {5});
  Tensor ti = from_vector<int64_t>({6, kIgnoreIndex, 3, kIgnoreIndex, 1}, {5});
  EXPECT_GRADCHECK([](const std::vector<Tensor>& in) { return cross_entropy(in[0], in[1]); },
                   {x, t});
  EXPECT_GRADCHECK([](const std::vector<Tensor>& in) { return cross_entropy(in[0], in[1]); },
                   {x, ti});
}

TEST(Ch04_16_CrossEntropy, EqualsNllOfLogSoftmax) {
  Tensor x = leaf({3, 4}, 9);
  Tensor t = from_vector<int64_t>({3, 0, 2}, {3});
  const auto lp = log_softmax(x).to_vector<double>();
  EXPECT_NEAR(cross_entropy(x, t).item(), -(lp[3] + lp[4] + lp[10]) / 3, 1e-14);
}

TEST(Ch04_NnOps, GradcheckMaskedFillCausalAttention) {
  // softmax(masked_fill(scores, causal, -inf)): masked probabilities are 0 and get no gradient.
  Tensor s = leaf({2, 4, 4}, 10);
  auto attn = [](const std::vector<Tensor>& in) {
    return softmax(masked_fill(in[0], causal_mask(4), -std::numeric_limits<double>::infinity()));
  };
  EXPECT_GRADCHECK(attn, {s});
  const auto p = attn({s}).to_vector<double>();
  for (int64_t row = 0; row < 8; ++row) {
    const int64_t i = row % 4;  // query position
    double sum = 0;
    for (int64_t j = 0; j < 4; ++j) {
      sum += p[row * 4 + j];
      if (j > i) {
        EXPECT_EQ(p[row * 4 + j], 0.0) << "row " << row << " key " << j;
      }
    }
    EXPECT_NEAR(sum, 1.0, 1e-15);
  }
}

TEST(Ch04_NnOps, CausalMaskIsStrictUpperTriangle) {
  EXPECT_EQ(causal_mask(3).to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 1, 0, 0, 1, 0, 0, 0}));
  EXPECT_EQ(causal_mask(3).dtype(), DType::kInt64);
}

TEST(Ch04_NnOps, BadInputsNameOpShapeAndDtype) {
  Tensor f = zeros({2, 3}), i = zeros({2, 3}, {.dtype = DType::kInt64});
  EXPECT_TT_ERROR(softmax(i), "softmax", "[2, 3]", "int64");
  EXPECT_TT_ERROR(softmax(f, 2), "softmax");
  EXPECT_TT_ERROR(log_softmax(i, 0), "log_softmax", "int64");
  EXPECT_TT_ERROR(gelu(i), "gelu", "int64");
  EXPECT_TT_ERROR(layernorm(f, zeros({4}), zeros({3})), "layernorm", "[3]", "[4]");
  EXPECT_TT_ERROR(layernorm(f, zeros({3}, {.dtype = DType::kFloat64}), zeros({3})), "layernorm",
                  "float64");
  EXPECT_TT_ERROR(embedding(f, f), "embedding", "indices", "int64", "float32");
  EXPECT_TT_ERROR(embedding(zeros({2}), i), "embedding", "weight", "[2]");
  EXPECT_TT_ERROR(embedding(f, from_vector<int64_t>({0, 2}, {2})), "embedding", "indices[1] = 2",
                  "[0, 2)");
  EXPECT_TT_ERROR(cross_entropy(f, from_vector<int64_t>({0}, {1})), "cross_entropy", "[2, 3]",
                  "[1]");
  EXPECT_TT_ERROR(cross_entropy(f, zeros({2})), "cross_entropy", "targets", "float32");
  EXPECT_TT_ERROR(masked_fill(f, zeros({2, 3}), 0), "masked_fill", "mask", "float32");
  EXPECT_TT_ERROR(masked_fill(f, causal_mask(2), 0), "masked_fill", "[2, 2]", "[2, 3]");
}

TEST(Ch04_16_CrossEntropy, FrontEndRejectsOutOfRangeTarget) {
  EXPECT_TT_ERROR(cross_entropy(zeros({2, 3}), from_vector<int64_t>({1, 7}, {2})), "cross_entropy",
                  "targets[1] = 7", "[0, 3)", "int64");
}

}  // namespace
}  // namespace tt

// Tests of the element-wise ops (given code built on ch04.1/ch04.2 and chapter 02's kernels):
// broadcasting forward, gradients (gradcheck in float64), errors, scalar and unary ops.
#include <atomic>
#include <cmath>
#include <stdexcept>
#include <string>

#include "ch04_test_util.h"
#include "tt/functional.h"
#include "tt/parallel.h"

namespace tt {
namespace {

using test04::f32;
using test04::f64;
using test04::gradcheck_ok;
using test04::leaf64;

TEST(Ch04_Elementwise, BroadcastingForward) {
  Tensor a = f32({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor row = f32({10, 20, 30}, {3});
  Tensor col = f32({100, 200}, {2, 1});
  EXPECT_TENSOR_NEAR(a + row, f32({11, 22, 33, 14, 25, 36}, {2, 3}), 0, 0);
  EXPECT_TENSOR_NEAR(a - col, f32({-99, -98, -97, -196, -195, -194}, {2, 3}), 0, 0);
  EXPECT_TENSOR_NEAR(row * col, f32({1000, 2000, 3000, 2000, 4000, 6000}, {2, 3}), 0, 0);
  EXPECT_TENSOR_NEAR(a / f32({2}, {}), f32({0.5, 1, 1.5, 2, 2.5, 3}, {2, 3}), 0, 0);
}

TEST(Ch04_Elementwise, NonContiguousInputs) {
  Tensor a = f32({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor at = a.transpose(0, 1);  // [3, 2], strides [1, 3]
  EXPECT_TENSOR_NEAR(at * f32({1, -1}, {2}), f32({1, -4, 2, -5, 3, -6}, {3, 2}), 0, 0);
  EXPECT_TENSOR_NEAR(exp(at.slice(0, 1, 3)),
                     f32({std::exp(2.f), std::exp(5.f), std::exp(3.f), std::exp(6.f)}, {2, 2}),
                     1e-6, 1e-6);
}

TEST(Ch04_Elementwise, ScalarAndUnaryValues) {
  Tensor x = f64({0.5, 1, 2, 4}, {4});
  EXPECT_TENSOR_NEAR(x + 1.0, f64({1.5, 2, 3, 5}, {4}), 0, 0);
  EXPECT_TENSOR_NEAR(1.0 - x, f64({0.5, 0, -1, -3}, {4}), 0, 0);
  EXPECT_TENSOR_NEAR(x * 3.0, f64({1.5, 3, 6, 12}, {4}), 0, 0);
  EXPECT_TENSOR_NEAR(x / 2.0, f64({0.25, 0.5, 1, 2}, {4}), 0, 0);
  EXPECT_TENSOR_NEAR(pow(x, 2.0), f64({0.25, 1, 4, 16}, {4}), 0, 0);
  EXPECT_TENSOR_NEAR(pow(x, -0.5), f64({std::sqrt(2.0), 1, 1 / std::sqrt(2.0), 0.5}, {4}), 1e-15,
                     1e-15);
  EXPECT_TENSOR_NEAR(sqrt(x), f64({std::sqrt(0.5), 1, std::sqrt(2.0), 2}, {4}), 0, 1e-15);
  EXPECT_TENSOR_NEAR(log(x), f64({std::log(0.5), 0, std::log(2.0), std::log(4.0)}, {4}), 0, 1e-15);
  EXPECT_TENSOR_NEAR(tanh(x),
                     f64({std::tanh(0.5), std::tanh(1.0), std::tanh(2.0), std::tanh(4.0)}, {4}), 0,
                     1e-15);
  EXPECT_TENSOR_NEAR(-x, f64({-0.5, -1, -2, -4}, {4}), 0, 0);
  EXPECT_EQ(neg(tensor_i64({1, -2})).to_vector<int64_t>(), (std::vector<int64_t>{-1, 2}));
}

TEST(Ch04_Elementwise, LargeTensorsUseEveryChunk) {
  // More elements than one parallel chunk, non-contiguous: every element must be written.
  const int64_t n = 300000;
  Tensor x =
      arange(0, static_cast<double>(n), 1, {DType::kFloat64}).view({n / 2, 2}).transpose(0, 1);
  Tensor y = mul(x, 2.0);
  const std::vector<double> v = y.to_vector<double>();
  EXPECT_EQ(v[0], 0.0);
  EXPECT_EQ(v[1], 4.0);
  EXPECT_EQ(v[n / 2], 2.0);
  EXPECT_EQ(v[n - 1], 2.0 * (n - 1));
}

TEST(Ch04_Elementwise, LargeBroadcastBinaryOpsMatchElementByElement) {
  // Enough elements for the parallel slabs of dim 0 and rows long enough for the row path of
  // chapter 02's loops: a bias row, a column, and a transposed (strided) operand.
  const int64_t R = 300, C = 700;
  const Tensor a = test04::randn_t({R, C}, 21, DType::kFloat32);
  const Tensor bias = test04::randn_t({C}, 22, DType::kFloat32);
  const Tensor col = test04::randn_t({R, 1}, 23, DType::kFloat32);
  const Tensor at = test04::randn_t({C, R}, 24, DType::kFloat32).transpose(0, 1);
  const std::vector<float> va = a.to_vector<float>(), vb = bias.to_vector<float>(),
                           vc = col.to_vector<float>(), vt = at.contiguous().to_vector<float>();
  const std::vector<float> sum = (a + bias).to_vector<float>();
  const std::vector<float> prod = (a * col).to_vector<float>();
  const std::vector<float> diff = (a - at).to_vector<float>();
  const std::vector<float> quot = (bias / a).to_vector<float>();
  for (int64_t r = 0; r < R; ++r) {
    for (int64_t c = 0; c < C; ++c) {
      const int64_t i = r * C + c;
      ASSERT_EQ(sum[i], va[i] + vb[c]) << r << "," << c;
      ASSERT_EQ(prod[i], va[i] * vc[r]) << r << "," << c;
      ASSERT_EQ(diff[i], va[i] - vt[i]) << r << "," << c;
      ASSERT_EQ(quot[i], vb[c] / va[i]) << r << "," << c;
    }
  }
}

TEST(Ch04_Elementwise, ErrorsNameOpShapesAndDtypes) {
  Tensor a = f32({1, 2, 3, 4, 5, 6}, {2, 3});
  EXPECT_TT_ERROR(a + f32({1, 2}, {2}), "add", "[2, 3]", "[2]");
  EXPECT_TT_ERROR(a * f64({1, 2, 3}, {3}), "mul", "float32", "float64");
  EXPECT_TT_ERROR(exp(tensor_i64({1})), "exp", "int64");
  EXPECT_TT_ERROR(pow(tensor_i64({1}), 2.0), "pow", "int64");
}

TEST(Ch04_Elementwise, BinaryGradcheckWithBroadcasting) {
  Tensor a = leaf64({2, 1, 3}, 1), b = leaf64({4, 1}, 2);
  EXPECT_TRUE(gradcheck_ok([](const auto& in) { return add(in[0], in[1]); }, {a, b}));
  EXPECT_TRUE(gradcheck_ok([](const auto& in) { return sub(in[0], in[1]); }, {a, b}));
  EXPECT_TRUE(gradcheck_ok([](const auto& in) { return mul(in[0], in[1]); }, {a, b}));
  Tensor d = add(mul(test04::randn_t({4, 1}, 3), 0.1), 2.0).detach();  // away from 0
  d.set_requires_grad();
  EXPECT_TRUE(gradcheck_ok([](const auto& in) { return div(in[0], in[1]); }, {a, d}));
}

TEST(Ch04_Elementwise, UnaryGradcheck) {
  Tensor x = leaf64({3, 4}, 4);
  Tensor pos = add(exp(test04::randn_t({3, 4}, 5)), 0.5).detach();  // positive inputs
  pos.set_requires_grad();
  EXPECT_TRUE(gradcheck_ok([](const auto& in) { return neg(in[0]); }, {x}));
  EXPECT_TRUE(gradcheck_ok([](const auto& in) { return exp(in[0]); }, {x}));
  EXPECT_TRUE(gradcheck_ok([](const auto& in) { return tanh(in[0]); }, {x}));
  EXPECT_TRUE(gradcheck_ok([](const auto& in) { return log(in[0]); }, {pos}));
  EXPECT_TRUE(gradcheck_ok([](const auto& in) { return sqrt(in[0]); }, {pos}));
  EXPECT_TRUE(gradcheck_ok([](const auto& in) { return pow(in[0], 3.0); }, {x}));
  EXPECT_TRUE(gradcheck_ok([](const auto& in) { return pow(in[0], -1.5); }, {pos}));
  EXPECT_TRUE(gradcheck_ok([](const auto& in) { return (in[0] * 2.0 - 1.0) / 4.0; }, {x}));
}

TEST(Ch04_Elementwise, GradientOfABroadcastInputIsSummed) {
  Tensor bias = f64({0, 0, 0}, {3});
  bias.set_requires_grad();
  Tensor x = f64({1, 2, 3, 4, 5, 6}, {2, 3});
  autograd::backward(sum(mul(x + bias, x)));  // d/dbias = sum over rows of x
  EXPECT_TENSOR_NEAR(bias.grad(), f64({5, 7, 9}, {3}), 0, 0);
}

TEST(Ch04_Parallel, ExceptionOfTheLowestChunkIsRethrownAfterEveryChunkRan) {
  const ScopedNumThreads two(2);
  std::atomic<int> ran{0};
  try {
    parallel_for(0, 100, 1, [&](int64_t b, int64_t) {
      ++ran;
      if (b == 37 || b == 80) throw std::runtime_error("chunk " + std::to_string(b));
    });
    ADD_FAILURE() << "parallel_for swallowed the exception";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()), "chunk 37");
  }
  EXPECT_EQ(ran.load(), 100);
}

}  // namespace
}  // namespace tt

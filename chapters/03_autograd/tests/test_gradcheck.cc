// Tests of chapter 03's finite differences (ch03.5) and gradcheck.
#include <cmath>

#include "ch03_test_util.h"

namespace tt::autograd {
namespace {

using test03::f64;

// f(x0, x1) = x0^2 * x1 elementwise, computed on raw data (no Function, no graph).
Tensor raw_fn(const std::vector<Tensor>& in) {
  return test03::zip_f64(in[0], in[1], [](double a, double b) { return a * a * b; });
}

// ----- ch03.5 numerical_vjp --------------------------------------------------------------------

TEST(Ch03_5_FiniteDifferences, MatchesTheClosedForm) {
  Tensor x0 = f64({1, -2, 0.5}), x1 = f64({3, 0.25, -1});
  x0.set_requires_grad();
  x1.set_requires_grad();
  const Tensor w = f64({1, -1, 2});
  const std::vector<Tensor> vjp = numerical_vjp(raw_fn, {x0, x1}, w);
  ASSERT_EQ(vjp.size(), 2u);
  // d/dx0 = w * 2 x0 x1, d/dx1 = w * x0^2
  EXPECT_TENSOR_NEAR(vjp[0], f64({6, 1, -2}), 1e-8, 1e-8);
  EXPECT_TENSOR_NEAR(vjp[1], f64({1, -4, 0.5}), 1e-8, 1e-8);
  EXPECT_TENSOR_NEAR(x0, f64({1, -2, 0.5}), 0, 0) << "the inputs must be left unchanged";
}

TEST(Ch03_5_FiniteDifferences, SkipsInputsWithoutGrad) {
  Tensor x0 = f64({1, 2}), x1 = f64({3, 4});
  x1.set_requires_grad();
  const std::vector<Tensor> vjp = numerical_vjp(raw_fn, {x0, x1}, f64({1, 1}));
  EXPECT_FALSE(vjp[0].defined());
  EXPECT_TENSOR_NEAR(vjp[1], f64({1, 4}), 1e-8, 1e-8);
}

TEST(Ch03_5_FiniteDifferences, MatrixShapedInputsAndOutputs) {
  Tensor x = f64({1, 2, 3, 4, 5, 6}, {2, 3});
  x.set_requires_grad();
  auto cube = [](const std::vector<Tensor>& in) {
    return test03::map_f64(in[0], [](double v) { return v * v * v; });
  };
  const Tensor w = full({2, 3}, 0.5, {DType::kFloat64});
  EXPECT_TENSOR_NEAR(numerical_vjp(cube, {x}, w)[0], f64({1.5, 6, 13.5, 24, 37.5, 54}, {2, 3}),
                     1e-7, 1e-8);
}

TEST(Ch03_5_Gradcheck, AcceptsCorrectBackwards) {
  Generator gen(7);
  Tensor a = randn({5}, gen, {DType::kFloat64}), b = randn({5}, gen, {DType::kFloat64});
  a.set_requires_grad();
  b.set_requires_grad();
  auto square = [](const std::vector<Tensor>& in) {
    return Function::apply<test03::SquareFn>({in[0]})[0];
  };
  auto mul = [](const std::vector<Tensor>& in) {
    return Function::apply<test03::MulFn>({in[0], in[1]})[0];
  };
  auto split_mul = [](const std::vector<Tensor>& in) {  // two outputs, both used
    auto halves = Function::apply<test03::SplitFn>({in[0]});
    return Function::apply<test03::MulFn>(
        {halves[0], Function::apply<test03::ExpFn>({halves[1]})[0]})[0];
  };
  Tensor c = randn({6}, gen, {DType::kFloat64});
  c.set_requires_grad();
  for (const auto& [fn, inputs] : std::vector<std::pair<TensorFn, std::vector<Tensor>>>{
           {square, {a}}, {mul, {a, b}}, {split_mul, {c}}}) {
    const GradcheckResult r = gradcheck(fn, inputs);
    EXPECT_TRUE(r.ok) << r.message;
    EXPECT_LT(r.max_abs_err, 1e-6);
  }
  EXPECT_FALSE(a.grad().defined()) << "gradcheck must not touch the inputs' .grad";
}

TEST(Ch03_5_Gradcheck, RejectsAWrongBackward) {
  Tensor x = f64({1, 2, 3});
  x.set_requires_grad();
  const GradcheckResult r = gradcheck(
      [](const std::vector<Tensor>& in) {
        return Function::apply<test03::BadSquareFn>({in[0]})[0];
      },
      {x});
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.message.find("input 0"), std::string::npos) << r.message;
  EXPECT_GT(r.max_abs_err, 0.1);
}

TEST(Ch03_5_Gradcheck, OnlyInputsThatRequireGradAreChecked) {
  Tensor a = f64({1, 2}), b = f64({3, 4});
  b.set_requires_grad();
  const GradcheckResult r = gradcheck(
      [](const std::vector<Tensor>& in) {
        return Function::apply<test03::MulFn>({in[0], in[1]})[0];
      },
      {a, b});
  EXPECT_TRUE(r.ok) << r.message;
}

TEST(Ch03_Gradcheck, RejectsBadInputs) {
  auto id = [](const std::vector<Tensor>& in) { return in[0]; };
  Tensor f = from_vector<float>({1, 2});
  f.set_requires_grad();
  EXPECT_TT_ERROR(gradcheck(id, {f}), "gradcheck", "float32", "float64");
  EXPECT_TT_ERROR(gradcheck(id, {f64({1})}), "gradcheck", "no input requires grad");
}

}  // namespace
}  // namespace tt::autograd

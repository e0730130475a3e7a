// Tests of the differentiable views (given code): values share storage, gradients map back.
#include "ch04_test_util.h"
#include "tt/functional.h"

namespace tt {
namespace {

using test04::f64;
using test04::gradcheck_ok;
using test04::leaf64;

TEST(Ch04_Views, ForwardSharesStorage) {
  Tensor x = leaf64({2, 3}, 1);
  Tensor t = transpose(x, 0, 1);
  EXPECT_EQ(t.storage(), x.storage());
  EXPECT_EQ(t.shape(), (Shape{3, 2}));
  EXPECT_TRUE(t.requires_grad());
  EXPECT_FALSE(t.is_leaf());
  Tensor c = contiguous(t);
  EXPECT_TRUE(c.is_contiguous());
  EXPECT_FALSE(contiguous(x).is_same(x));
}

TEST(Ch04_Views, Gradcheck) {
  Tensor x = leaf64({2, 3, 4}, 2);
  EXPECT_TRUE(gradcheck_ok([](const auto& in) { return view(in[0], {6, 4}); }, {x}));
  EXPECT_TRUE(gradcheck_ok([](const auto& in) { return reshape(in[0], {4, -1}); }, {x}));
  EXPECT_TRUE(gradcheck_ok([](const auto& in) { return flatten(in[0], 1); }, {x}));
  EXPECT_TRUE(gradcheck_ok([](const auto& in) { return permute(in[0], {2, 0, 1}); }, {x}));
  EXPECT_TRUE(gradcheck_ok([](const auto& in) { return transpose(in[0], 0, 2); }, {x}));
  EXPECT_TRUE(gradcheck_ok([](const auto& in) { return slice(in[0], 2, 1, 4, 2); }, {x}));
  EXPECT_TRUE(gradcheck_ok([](const auto& in) { return select(in[0], 1, -1); }, {x}));
  EXPECT_TRUE(gradcheck_ok([](const auto& in) { return unsqueeze(in[0], 1); }, {x}));
  EXPECT_TRUE(gradcheck_ok([](const auto& in) { return squeeze(in[0], 0); }, {leaf64({1, 3}, 4)}));
  EXPECT_TRUE(gradcheck_ok(
      [](const auto& in) {
        return expand(in[0], {2, 3, 4});
      },
      {leaf64({3, 1}, 5)}));
  EXPECT_TRUE(gradcheck_ok([](const auto& in) { return contiguous(transpose(in[0], 0, 1)); }, {x}));
}

TEST(Ch04_Views, SliceGradientIsScatteredIntoZeros) {
  Tensor x = f64({1, 2, 3, 4, 5}, {5});
  x.set_requires_grad();
  autograd::backward(sum(slice(x, 0, 1, 5, 2)));
  EXPECT_TENSOR_NEAR(x.grad(), f64({0, 1, 0, 1, 0}, {5}), 0, 0);
}

}  // namespace
}  // namespace tt

// Exercise ch13.1: f (identity forward, all-reduce backward) and g (all-reduce forward,
// identity backward). Values are small integers, so every sum is exact and compared bitwise.
#include <gtest/gtest.h>

#include <string>

#include "ch13_test_util.h"

namespace {

using ch13_test::bitwise_equal;
using ch13_test::for_each_tp;
using tt::Tensor;
namespace dist = tt::dist;
using tt::tp::ProcessGrid;

TEST(Ch13_1_Conjugate, FIsIdentityForwardAllReduceBackwardMpi) {
  for_each_tp([&](int tp, dist::ProcessGroup& group) {
    const int r = group.rank();
    Tensor x = ch13_test::make_input(3, 4, 7);
    x.set_requires_grad();
    Tensor y = tt::tp::copy_to_tp(x, group);
    EXPECT_TRUE(bitwise_equal(y, x));
    // Rank r sends gradient (r + 1) * [1 2 3 ...]: x.grad = sum_r (r + 1) * [1 2 3 ...].
    Tensor base = tt::arange(1, 13).view({3, 4});
    tt::autograd::backward(y, tt::mul(base, double(r + 1)));
    ASSERT_TRUE(x.grad().defined());
    EXPECT_TRUE(bitwise_equal(x.grad(), tt::mul(base, tp * (tp + 1) / 2.0)))
        << "f's backward must sum the gradient over the " << tp << " ranks of the group";
  });
}

TEST(Ch13_1_Conjugate, GIsAllReduceForwardIdentityBackwardMpi) {
  for_each_tp([&](int tp, dist::ProcessGroup& group) {
    const int r = group.rank();
    Tensor base = tt::arange(1, 13).view({3, 4});
    Tensor x = tt::mul(base, double(r + 1));
    x.set_requires_grad();
    Tensor before = x.detach().clone();
    Tensor y = tt::tp::reduce_from_tp(x, group);
    EXPECT_TRUE(bitwise_equal(y, tt::mul(base, tp * (tp + 1) / 2.0)));
    EXPECT_TRUE(bitwise_equal(x, before)) << "g must not change its input";
    Tensor grad = ch13_test::make_input(3, 4, 100 + static_cast<uint64_t>(r));
    tt::autograd::backward(y, grad);
    ASSERT_TRUE(x.grad().defined());
    EXPECT_TRUE(bitwise_equal(x.grad(), grad)) << "g's backward is the identity";
  });
}

TEST(Ch13_1_Conjugate, FThenGSumsForwardAndBackwardOnceMpi) {
  // g(f(x)) = tp * x forward, and its gradient is tp * grad: each all-reduce runs once.
  dist::ProcessGroup& world = dist::world();
  const int tp = world.world_size();
  ProcessGrid grid = ProcessGrid::dp_tp(world, tp);
  Tensor x = ch13_test::make_input(2, 3, 9);
  x.set_requires_grad();
  Tensor y = tt::tp::reduce_from_tp(tt::tp::copy_to_tp(x, grid.group("tp")), grid.group("tp"));
  EXPECT_LE(ch13_test::max_abs_diff(y, tt::mul(x.detach(), double(tp))), 1e-6);
  tt::autograd::backward(tt::sum(y));
  EXPECT_TRUE(bitwise_equal(x.grad(), tt::full({2, 3}, double(tp))));
}

}  // namespace

// Tests of chapter 03's post-accumulate-grad hooks (register_post_accumulate_grad_hook): they
// need the whole backward pass (ch03.2 with ch03.3 and ch03.4), hence the ch03.2 label.
#include <string>
#include <vector>

#include "ch03_test_util.h"

namespace tt::autograd {
namespace {

using test03::f64;

Tensor mul(const Tensor& a, const Tensor& b) {
  return Function::apply<test03::MulFn>({a, b})[0];
}
Tensor add(const Tensor& a, const Tensor& b) {
  return Function::apply<test03::AddFn>({a, b})[0];
}
Tensor leaf(const std::vector<double>& values) {
  Tensor t = f64(values);
  t.set_requires_grad();
  return t;
}

TEST(Ch03_2_Hooks, FiresOncePerBackwardWhenEveryContributionHasArrived) {
  // z = x * w + x: x has two sinks, one right under the add (runs first) and one under the mul.
  // The hook must wait for both: it sees dz/dx = w + 1, never w or 1 alone.
  Tensor x = leaf({2, -1}), w = leaf({3, 5});
  std::vector<Tensor> seen;
  RemovableHandle h =
      register_post_accumulate_grad_hook(x, [&](const Tensor& g) { seen.push_back(g.clone()); });
  backward(add(mul(x, w), x), f64({1, 1}));
  ASSERT_EQ(seen.size(), 1u) << "one call per backward, however many sinks the leaf has";
  EXPECT_TENSOR_NEAR(seen[0], f64({4, 6}), 0, 0);
  // A second backward accumulates into .grad; the hook sees the accumulated value, once.
  backward(add(mul(x, w), x), f64({1, 1}));
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_TENSOR_NEAR(seen[1], f64({8, 12}), 0, 0);
}

TEST(Ch03_2_Hooks, TheHookReceivesTheLeafsGrad) {
  Tensor x = leaf({1, 2});
  const TensorImpl* grad_impl = nullptr;
  RemovableHandle h = register_post_accumulate_grad_hook(
      x, [&](const Tensor& g) { grad_impl = g.defined() ? g.impl().get() : nullptr; });
  backward(mul(x, x), f64({1, 1}));
  ASSERT_TRUE(x.grad().defined());
  EXPECT_EQ(grad_impl, x.grad().impl().get());
}

TEST(Ch03_2_Hooks, LeavesFinishInReverseOrderOfUse) {
  // A chain of layers h = ((x * a) * b) * c: backward reaches c first, then b, then a.
  Tensor x = f64({1, 2}), a = leaf({3, 4}), b = leaf({5, 6}), c = leaf({7, 8});
  std::string order;
  RemovableHandle ha = register_post_accumulate_grad_hook(a, [&](const Tensor&) { order += 'a'; });
  RemovableHandle hb = register_post_accumulate_grad_hook(b, [&](const Tensor&) { order += 'b'; });
  RemovableHandle hc = register_post_accumulate_grad_hook(c, [&](const Tensor&) { order += 'c'; });
  backward(mul(mul(mul(x, a), b), c), f64({1, 1}));
  EXPECT_EQ(order, "cba");
}

TEST(Ch03_2_Hooks, HooksOfOneLeafRunInRegistrationOrder) {
  Tensor x = leaf({1});
  std::string order;
  RemovableHandle h1 = register_post_accumulate_grad_hook(x, [&](const Tensor&) { order += '1'; });
  RemovableHandle h2 = register_post_accumulate_grad_hook(x, [&](const Tensor&) { order += '2'; });
  backward(mul(x, x));
  EXPECT_EQ(order, "12");
}

TEST(Ch03_2_Hooks, RemovedOrDestroyedHandlesStopTheHook) {
  Tensor x = leaf({1});
  int calls = 0;
  RemovableHandle h = register_post_accumulate_grad_hook(x, [&](const Tensor&) { ++calls; });
  backward(mul(x, x));
  EXPECT_EQ(calls, 1);
  h.remove();
  h.remove();  // a second remove is harmless
  backward(mul(x, x));
  EXPECT_EQ(calls, 1);
  {
    RemovableHandle scoped = register_post_accumulate_grad_hook(x, [&](const Tensor&) { ++calls; });
    RemovableHandle moved = std::move(scoped);  // the hook now belongs to `moved`
    backward(mul(x, x));
    EXPECT_EQ(calls, 2);
  }
  backward(mul(x, x));
  EXPECT_EQ(calls, 2) << "the handle's destructor must unregister the hook";
}

TEST(Ch03_2_Hooks, UnreachedLeavesAndOtherLeavesAreNotCalled) {
  Tensor x = leaf({1}), y = leaf({2});
  int calls = 0;
  RemovableHandle h = register_post_accumulate_grad_hook(x, [&](const Tensor&) { ++calls; });
  backward(mul(y, y));  // x is not in this graph
  EXPECT_EQ(calls, 0);
}

TEST(Ch03_2_Hooks, AHookMayRemoveItselfWhileRunning) {
  Tensor x = leaf({1});
  int calls = 0;
  RemovableHandle h;
  h = register_post_accumulate_grad_hook(x, [&](const Tensor&) {
    ++calls;
    h.remove();
  });
  backward(mul(x, x));
  backward(mul(x, x));
  EXPECT_EQ(calls, 1);
}

TEST(Ch03_Hooks, NeedALeafThatRequiresGradAndAFunction) {
  Tensor plain = f64({1});
  EXPECT_TT_ERROR((void)register_post_accumulate_grad_hook(plain, [](const Tensor&) {}),
                  "register_post_accumulate_grad_hook", "leaf");
  Tensor x = leaf({1});
  Tensor y = Function::apply<test03::IdentityFn>({x})[0];  // has a grad_fn: not a leaf
  EXPECT_TT_ERROR((void)register_post_accumulate_grad_hook(y, [](const Tensor&) {}),
                  "register_post_accumulate_grad_hook", "leaf");
  EXPECT_TT_ERROR((void)register_post_accumulate_grad_hook(x, PostAccumulateGradHook()),
                  "register_post_accumulate_grad_hook", "empty");
}

}  // namespace
}  // namespace tt::autograd

// Tests of gradient-accumulation fusion (Function::accumulation_target): an op's backward may
// add a leaf's gradient straight into its .grad; the engine then has nothing to add, and the
// leaf's hooks still see the final .grad. They need the whole backward pass (ch03.2 with ch03.3
// and ch03.4), hence the ch03.2 label.
#include <vector>

#include "ch03_test_util.h"

namespace tt::autograd {
namespace {

using test03::f64;

// y = a * w where w's gradient (g * a) is added into w's accumulation target when there is one
// (as chapter 10's weight-gradient GEMM does with beta = 1); counts the fused backwards.
struct FusingMulFn : test03::MulFn {
  static inline int fused = 0;
  std::string name() const override { return "FusingMulBackward"; }
  std::vector<Tensor> backward(const std::vector<Tensor>& g) override {
    std::vector<Tensor> grads = MulFn::backward(g);
    if (Tensor target = accumulation_target(1); target.defined()) {
      call_kernel<BinaryKernel>("add", target.device(), target, target, grads[1]);
      grads[1] = Tensor();  // accumulated: the engine gets nothing to add
      ++fused;
    }
    return grads;
  }
};

Tensor fmul(const Tensor& a, const Tensor& w) {
  return Function::apply<FusingMulFn>({a, w})[0];
}
Tensor leaf(const std::vector<double>& values) {
  Tensor t = f64(values);
  t.set_requires_grad();
  return t;
}

// Three backwards of sum(a_k * w) (one per "micro-batch"), values chosen so that the order of
// the additions would show in the last bits; returns w's .grad.
Tensor accumulate_three(bool fusion) {
  GradAccumulationFusionGuard guard(fusion);
  Tensor w = leaf({0.1, -2.5, 3.0});
  const std::vector<std::vector<double>> as = {
      {1e-3, 7.0, 0.3}, {1.0 / 3, -1e8, 0.7}, {2.2, 3.3, 1e-9}};
  for (const auto& a : as) backward(fmul(f64(a), w), f64({1.0, 0.5, -1.0}));
  return w.grad();
}

TEST(Ch03_2_AccumFusion, FusedGradientsEqualTheUnfusedOnesBitForBit) {
  FusingMulFn::fused = 0;
  const Tensor unfused = accumulate_three(false);
  EXPECT_EQ(FusingMulFn::fused, 0) << "fusion off: every gradient goes through AccumulateGrad";
  const Tensor fused = accumulate_three(true);
  // The first backward finds no .grad (AccumulateGrad stores a private copy), the next two fuse.
  EXPECT_EQ(FusingMulFn::fused, 2);
  EXPECT_TENSOR_NEAR(fused, unfused, 0, 0);
}

TEST(Ch03_2_AccumFusion, GradKeepsItsIdentityAndHooksSeeTheFinalValueOnce) {
  GradAccumulationFusionGuard guard(true);
  Tensor w = leaf({1, 2});
  std::vector<Tensor> seen;
  RemovableHandle h =
      register_post_accumulate_grad_hook(w, [&](const Tensor& g) { seen.push_back(g.clone()); });
  backward(fmul(f64({3, 4}), w), f64({1, 1}));
  const void* storage = w.grad().data_ptr();
  FusingMulFn::fused = 0;
  backward(fmul(f64({5, 6}), w), f64({1, 1}));
  EXPECT_EQ(FusingMulFn::fused, 1);
  EXPECT_EQ(w.grad().data_ptr(), storage) << "accumulated in place, like AccumulateGrad does";
  ASSERT_EQ(seen.size(), 2u) << "the hook runs once per backward, fused or not";
  EXPECT_TENSOR_NEAR(seen[0], f64({3, 4}), 0, 0);
  EXPECT_TENSOR_NEAR(seen[1], f64({8, 10}), 0, 0);
}

TEST(Ch03_2_AccumFusion, ALeafWithTwoSinksKeepsTheOldPath) {
  // w used twice in one graph: the two contributions must be added in the engine's order, so
  // neither op fuses (the gradient is still right).
  GradAccumulationFusionGuard guard(true);
  Tensor w = leaf({1, 2});
  backward(fmul(f64({1, 1}), w), f64({1, 1}));
  FusingMulFn::fused = 0;
  backward(fmul(fmul(f64({2, 3}), w), w), f64({1, 1}));  // d(a w^2)/dw = 2 a w
  EXPECT_EQ(FusingMulFn::fused, 0);
  EXPECT_TENSOR_NEAR(w.grad(), f64({1 + 4, 1 + 12}), 0, 0);
}

TEST(Ch03_2_AccumFusion, NoTargetWithoutAPlainGradOrOutsideBackward) {
  GradAccumulationFusionGuard guard(true);
  // A .grad of another layout (a transposed view): AccumulateGrad would not add in place either.
  Tensor w = f64({1, 2, 3, 4}, {2, 2});
  w.set_requires_grad();
  w.set_grad(f64({0, 0, 0, 0}, {2, 2}).transpose(0, 1));
  FusingMulFn::fused = 0;
  backward(fmul(f64({1, 2, 3, 4}, {2, 2}), w), f64({1, 1, 1, 1}, {2, 2}));
  EXPECT_EQ(FusingMulFn::fused, 0);
  EXPECT_TENSOR_NEAR(w.grad(), f64({1, 2, 3, 4}, {2, 2}), 0, 0);
  // Outside backward() (the engine's loop called directly, no scope): never a target.
  Tensor u = leaf({1, 2});
  backward(fmul(f64({1, 1}), u), f64({1, 1}));
  Tensor z = fmul(f64({1, 1}), u);
  FusingMulFn::fused = 0;
  run_backward(gradient_edge(z), f64({1, 1}), compute_dependencies(*z.grad_fn()));
  EXPECT_EQ(FusingMulFn::fused, 0);
  EXPECT_TENSOR_NEAR(u.grad(), f64({2, 2}), 0, 0);
}

TEST(Ch03_AccumFusion, TheSwitchTurnsItOff) {
  {
    GradAccumulationFusionGuard off(false);
    EXPECT_FALSE(grad_accumulation_fusion_enabled());
    {
      GradAccumulationFusionGuard on(true);
      EXPECT_TRUE(grad_accumulation_fusion_enabled());
    }
    EXPECT_FALSE(grad_accumulation_fusion_enabled());
  }
}

}  // namespace
}  // namespace tt::autograd

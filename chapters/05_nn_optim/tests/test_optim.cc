// Tests of the optimizers, gradient clipping and schedules (tt/optim.h) against hand-written
// float64 references of the update rules (the PyTorch comparison is in test_reference.cc).
#include <cmath>
#include <numbers>

#include "tt/dispatcher.h"
#include "tt/optim.h"
#include "tt/parallel.h"
#include "tt/testing.h"

namespace tt::optim {
namespace {

/// A float64 parameter with the given values and a gradient.
Tensor param_with_grad(std::vector<double> value, std::vector<double> grad) {
  Tensor p = from_vector<double>(value, {static_cast<int64_t>(value.size())});
  p.set_requires_grad(true);
  p.set_grad(from_vector<double>(grad, {static_cast<int64_t>(grad.size())}));
  return p;
}

/// torch.optim.SGD's rule for one element over several steps (double precision).
struct SgdRef {
  SgdOptions o;
  double p, buf = 0;
  int64_t t = 0;
  void step(double g) {
    double d = g + o.weight_decay * p;
    if (o.momentum != 0) {
      buf = t == 0 ? d : o.momentum * buf + (1 - o.dampening) * d;
      d = o.nesterov ? d + o.momentum * buf : buf;
    }
    p -= o.lr * d;
    ++t;
  }
};

/// torch.optim.AdamW's rule for one element (double precision).
struct AdamWRef {
  AdamWOptions o;
  double p, m = 0, v = 0;
  int64_t t = 0;
  void step(double g) {
    ++t;
    p *= 1 - o.lr * o.weight_decay;
    m = o.beta1 * m + (1 - o.beta1) * g;
    v = o.beta2 * v + (1 - o.beta2) * g * g;
    const double mhat = m / (1 - std::pow(o.beta1, t)), vhat = v / (1 - std::pow(o.beta2, t));
    p -= o.lr * mhat / (std::sqrt(vhat) + o.eps);
  }
};

const std::vector<double> kGrads = {0.5, -1.25, 3.0, 0.0, -0.75};

void check_sgd(const SgdOptions& o) {
  Tensor p = param_with_grad({1.0, -2.0}, {0, 0});
  SGD opt({p}, o);
  SgdRef r0{o, 1.0}, r1{o, -2.0};
  for (double g : kGrads) {
    p.set_grad(from_vector<double>({g, -2 * g}, {2}));
    opt.step();
    r0.step(g);
    r1.step(-2 * g);
  }
  EXPECT_NEAR(p.to_vector<double>()[0], r0.p, 1e-12);
  EXPECT_NEAR(p.to_vector<double>()[1], r1.p, 1e-12);
  EXPECT_EQ(opt.step_count(), static_cast<int64_t>(kGrads.size()));
}

TEST(Ch05_2_Sgd, PlainStepIsPMinusLrG) {
  Tensor p = param_with_grad({1.0, 2.0}, {0.5, -1.0});
  SGD opt({p}, {.lr = 0.1});
  opt.step();
  EXPECT_TENSOR_NEAR(p, from_vector<double>({0.95, 2.1}, {2}), 1e-15, 0);
}

TEST(Ch05_2_Sgd, MomentumNesterovWeightDecayDampening) {
  check_sgd({.lr = 0.1, .momentum = 0.9});
  check_sgd({.lr = 0.05, .momentum = 0.9, .weight_decay = 0.01, .nesterov = true});
  check_sgd({.lr = 0.1, .momentum = 0.5, .dampening = 0.3, .weight_decay = 0.1});
  check_sgd({.lr = 0.2, .weight_decay = 0.5});
}

TEST(Ch05_2_Sgd, Float32AndParametersWithoutGradient) {
  Tensor a = from_vector<float>({1.f, 1.f}, {2}), b = from_vector<float>({5.f}, {1});
  a.set_requires_grad(true);
  b.set_requires_grad(true);
  a.set_grad(from_vector<float>({1.f, -1.f}, {2}));
  SGD opt({a, b}, {.lr = 0.5, .momentum = 0.9});
  opt.step();  // b has no gradient: untouched
  EXPECT_EQ(a.to_vector<float>(), (std::vector<float>{0.5f, 1.5f}));
  EXPECT_EQ(b.to_vector<float>(), std::vector<float>{5.f});
  EXPECT_EQ(opt.state_dict()[2].first, "state.0.momentum_buffer");
  EXPECT_EQ(opt.state_dict()[2].second.to_vector<float>(), (std::vector<float>{1.f, -1.f}));
}

TEST(Ch05_3_AdamW, FirstStepByHand) {
  // t = 1: mhat = g, vhat = g^2, so the step is lr * g / (|g| + eps) ~ lr * sign(g).
  Tensor p = param_with_grad({1.0, -1.0}, {0.5, -2.0});
  AdamW opt({p}, {.lr = 0.1, .weight_decay = 0.1});
  opt.step();
  const double decayed = 1.0 * (1 - 0.1 * 0.1);
  EXPECT_NEAR(p.to_vector<double>()[0], decayed - 0.1 * 0.5 / (0.5 + 1e-8), 1e-15);
  EXPECT_NEAR(p.to_vector<double>()[1], -decayed + 0.1 * 2.0 / (2.0 + 1e-8), 1e-15);
}

TEST(Ch05_3_AdamW, ManyStepsMatchTheFormula) {
  for (const AdamWOptions& o :
       {AdamWOptions{},
        AdamWOptions{.lr = 0.05, .beta1 = 0.8, .beta2 = 0.95, .eps = 1e-3, .weight_decay = 0.5}}) {
    Tensor p = param_with_grad({0.3, -0.7}, {0, 0});
    AdamW opt({p}, o);
    AdamWRef r0{o, 0.3}, r1{o, -0.7};
    for (double g : kGrads) {
      p.set_grad(from_vector<double>({g, g * g}, {2}));
      opt.step();
      r0.step(g);
      r1.step(g * g);
    }
    EXPECT_NEAR(p.to_vector<double>()[0], r0.p, 1e-14);
    EXPECT_NEAR(p.to_vector<double>()[1], r1.p, 1e-14);
    // The state is torch's: m and v, not the bias-corrected versions.
    EXPECT_NEAR(opt.state_dict()[2].second.to_vector<double>()[0], r0.m, 1e-15);
    EXPECT_NEAR(opt.state_dict()[3].second.to_vector<double>()[0], r0.v, 1e-15);
  }
}

TEST(Ch05_3_AdamW, GroupsHaveTheirOwnWeightDecay) {
  Tensor w = param_with_grad({1.0}, {0.0}), b = param_with_grad({1.0}, {0.0});
  AdamW opt(std::vector<ParamGroup>{{{w}, 0.5}, {{b}, 0.0}}, {.lr = 0.1});
  opt.step();  // zero gradients: only the decay moves the parameters
  EXPECT_NEAR(w.to_vector<double>()[0], 1.0 - 0.1 * 0.5, 1e-15);
  EXPECT_EQ(b.to_vector<double>()[0], 1.0);
}

TEST(Ch05_Optimizer, ChecksAndZeroGrad) {
  Tensor p = param_with_grad({1.0, 2.0}, {1.0, 1.0});
  EXPECT_TT_ERROR(SGD({p, p}, {}), "SGD", "appears twice");
  EXPECT_TT_ERROR(AdamW({p}, {.beta1 = 1.0}), "AdamW", "betas");
  EXPECT_TT_ERROR(SGD({p}, {.nesterov = true}), "Nesterov");
  EXPECT_TT_ERROR(SGD({p}, {.lr = -1}), "learning rate");
  EXPECT_TT_ERROR(SGD({from_vector<double>({1, 2, 3, 4}, {2, 2}).transpose(0, 1)}, {}),
                  "contiguous");
  SGD opt({p}, {.lr = 1.0});
  p.set_grad(from_vector<float>({1, 2}, {2}));
  EXPECT_TT_ERROR(opt.step(), "SGD::step", "parameter 0", "float32", "float64");
  p.set_grad(from_vector<double>({1, 2}, {2}));
  opt.zero_grad(false);
  EXPECT_EQ(p.grad().to_vector<double>(), (std::vector<double>{0, 0}));
  opt.zero_grad();
  EXPECT_FALSE(p.grad().defined());
  opt.step();  // no gradient: nothing to do, but the step is counted
  EXPECT_EQ(opt.step_count(), 1);
  opt.set_lr(0.25);
  EXPECT_EQ(opt.lr(), 0.25);
}

TEST(Ch05_Optimizer, StateDictRoundTrip) {
  Tensor p = param_with_grad({1.0, 2.0}, {0.5, -0.5});
  AdamW a({p}, {.lr = 0.1});
  a.step();
  a.step();
  StateDict saved;
  for (const auto& [name, t] : a.state_dict()) saved.emplace_back(name, t.clone());
  EXPECT_EQ(saved[0].first, "step");
  EXPECT_EQ(saved[1].first, "lr");
  EXPECT_EQ(saved[2].first, "state.0.exp_avg");
  EXPECT_EQ(saved[3].first, "state.0.exp_avg_sq");
  Tensor q = param_with_grad({1.0, 2.0}, {0.5, -0.5});
  AdamW b({q}, {.lr = 0.7});
  b.load_state_dict(saved);
  EXPECT_EQ(b.step_count(), 2);
  EXPECT_EQ(b.lr(), 0.1);
  EXPECT_EQ(b.state_dict()[3].second.to_vector<double>(), saved[3].second.to_vector<double>());
}

TEST(Ch05_4_ClipGradNorm, ScalesOnlyAboveTheLimit) {
  // Global norm over both parameters: sqrt(3^2 + 4^2 + 12^2) = 13.
  Tensor a = param_with_grad({0, 0}, {3, 4}), b = param_with_grad({0}, {12});
  Tensor none = param_with_grad({0}, {0});
  none.set_grad(Tensor());
  EXPECT_DOUBLE_EQ(clip_grad_norm_({a, none, b}, 26.0), 13.0);
  EXPECT_EQ(a.grad().to_vector<double>(), (std::vector<double>{3, 4}));  // under the limit
  EXPECT_DOUBLE_EQ(clip_grad_norm_({a, b}, 1.3), 13.0);
  const double c = 1.3 / (13.0 + 1e-6);
  EXPECT_NEAR(a.grad().to_vector<double>()[0], 3 * c, 1e-15);
  EXPECT_NEAR(a.grad().to_vector<double>()[1], 4 * c, 1e-15);
  EXPECT_NEAR(b.grad().to_vector<double>()[0], 12 * c, 1e-15);
  EXPECT_NEAR(clip_grad_norm_({a, b}, 100.0), 1.3, 1e-6);
}

TEST(Ch05_4_ClipGradNorm, Float32AndEdgeCases) {
  Tensor a = from_vector<float>({0, 0, 0, 0}, {2, 2});
  a.set_requires_grad(true);
  a.set_grad(from_vector<float>({1, 1, 1, 1}, {2, 2}));
  EXPECT_DOUBLE_EQ(clip_grad_norm_({a}, 1.0), 2.0);
  EXPECT_NEAR(a.grad().to_vector<float>()[3], 0.5f, 1e-6f);
  EXPECT_EQ(clip_grad_norm_({from_vector<float>({1}, {1})}, 1.0), 0.0);  // no gradients
  EXPECT_TT_ERROR(clip_grad_norm_({a}, 0.0), "max_norm must be > 0");
}

TEST(Ch05_ClipGradNorm, SumOfSquaresIsTheSameForAnyThreadCount) {
  // The given kernel "sum_of_squares" sums fixed chunks in parallel, each in 8 partial sums:
  // the bits depend on no thread count, and the sum stays a float64 sum of the squares.
  std::vector<Tensor> ts;
  long double want = 0;
  for (int64_t n : {100003, 7, 32768, 65537}) {
    std::vector<float> v(static_cast<std::size_t>(n));
    for (int64_t i = 0; i < n; ++i) v[i] = static_cast<float>(std::sin(0.001 * i + n) * 3);
    for (const float x : v) want += static_cast<long double>(x) * x;
    ts.push_back(from_vector<float>(v, {n}));
  }
  double got[3];
  for (int threads : {1, 2, 3}) {
    ScopedNumThreads scoped(threads);
    got[threads - 1] = call_kernel<optim::SumOfSquaresKernel>("sum_of_squares", Device::cpu(), ts);
  }
  EXPECT_EQ(got[0], got[1]);
  EXPECT_EQ(got[0], got[2]);
  EXPECT_NEAR(got[0], static_cast<double>(want), 1e-12 * static_cast<double>(want));
}

TEST(Ch05_5_WarmupCosine, WarmupPeakDecayFloor) {
  const WarmupCosineLR s(/*max_lr=*/1.0, /*min_lr=*/0.1, /*warmup=*/4, /*total=*/14);
  EXPECT_DOUBLE_EQ(s.lr(0), 0.25);
  EXPECT_DOUBLE_EQ(s.lr(1), 0.5);
  EXPECT_DOUBLE_EQ(s.lr(3), 1.0);
  EXPECT_DOUBLE_EQ(s.lr(4), 1.0);                // r = 0: the peak
  EXPECT_NEAR(s.lr(9), 0.1 + 0.5 * 0.9, 1e-15);  // r = 1/2: halfway
  EXPECT_NEAR(s.lr(6), 0.1 + 0.5 * (1 + std::cos(std::numbers::pi * 0.2)) * 0.9, 1e-15);
  EXPECT_NEAR(s.lr(13), 0.1 + 0.5 * (1 + std::cos(std::numbers::pi * 0.9)) * 0.9, 1e-15);
  EXPECT_DOUBLE_EQ(s.lr(14), 0.1);
  EXPECT_DOUBLE_EQ(s.lr(1000), 0.1);
  // Monotone decay after the warmup.
  for (int64_t t = 4; t < 20; ++t) EXPECT_LE(s.lr(t + 1), s.lr(t)) << t;
}

TEST(Ch05_5_WarmupCosine, NoWarmupAndApply) {
  const WarmupCosineLR s(2.0, 0.0, 0, 10);
  EXPECT_DOUBLE_EQ(s.lr(0), 2.0);
  EXPECT_NEAR(s.lr(5), 1.0, 1e-15);
  Tensor p = param_with_grad({1.0}, {1.0});
  SGD opt({p}, {.lr = 5.0});
  s.apply(opt);
  EXPECT_DOUBLE_EQ(opt.lr(), 2.0);
  EXPECT_TT_ERROR(WarmupCosineLR(1.0, 0.0, 5, 5), "total_steps > warmup_steps");
  EXPECT_TT_ERROR(WarmupCosineLR(0.1, 1.0, 0, 5), "max_lr >= min_lr");
  EXPECT_EQ(ConstantLR(0.3).lr(123), 0.3);
}

}  // namespace
}  // namespace tt::optim

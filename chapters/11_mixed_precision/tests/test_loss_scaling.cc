// Dynamic loss scaling (tt/loss_scaling.h): the scaler's state machine (exercise ch11.4) and
// training with it. float16 is emulated: the tests round every gradient the backward produces
// to the nearest float16 value (kept in a float32 tensor), which is where a float16 backward
// loses small gradients (underflow) and large ones (overflow to Inf).
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <vector>

#include "../../09_gpt2/tests/ch09_test_util.h"
#include "tt/functional.h"
#include "tt/gpt2.h"
#include "tt/loss_scaling.h"
#include "tt/testing.h"
#include "tt/train.h"

namespace tt {
namespace {

// ----- float16 emulation -----------------------------------------------------------------------

constexpr double kFloat16Max = 65504.0;  // (2 - 2^-10) 2^15

/// The float16 nearest to x, ties to even, as a float: 11 significant bits, denormals below
/// 2^-14 spaced 2^-24 apart, +-Inf from the halfway point above 65504 on.
float round_to_float16(float x) {
  if (!std::isfinite(x) || x == 0.0f) return x;
  const double a = std::fabs(static_cast<double>(x));
  int e = 0;
  std::frexp(a, &e);  // a in [2^(e-1), 2^e)
  const double spacing = std::ldexp(1.0, std::max(e - 1, -14) - 10);
  const double r = std::nearbyint(a / spacing) * spacing;  // ties to even
  return std::copysign(r > kFloat16Max ? INFINITY : static_cast<float>(r), x);
}

/// One process whose backward leaves float16 gradients: every gradient of `params` is rounded to
/// float16 after each backward (the tests use it as the strategy a LossScalingStrategy wraps).
class Float16Gradients final : public gpt2::ParallelStrategy {
 public:
  explicit Float16Gradients(std::vector<Tensor> params) : params_(std::move(params)) {}
  void backward(const Tensor& loss, bool last) override {
    gpt2::ParallelStrategy::backward(loss, last);
    for (const Tensor& p : params_) {
      const Tensor g = p.grad();
      if (!g.defined()) continue;
      float* x = g.data<float>();
      for (int64_t i = 0; i < g.numel(); ++i) x[i] = round_to_float16(x[i]);
    }
  }

 private:
  std::vector<Tensor> params_;
};

TEST(Ch11_Float16Emulation, RoundsAsTheFormatDoes) {
  EXPECT_EQ(round_to_float16(65504.0f), 65504.0f);
  EXPECT_EQ(round_to_float16(65519.0f), 65504.0f);
  EXPECT_EQ(round_to_float16(65520.0f), INFINITY) << "the tie above the largest rounds to Inf";
  EXPECT_EQ(round_to_float16(-1e6f), -INFINITY);
  EXPECT_EQ(round_to_float16(1.0f + 0x1p-11f), 1.0f) << "a tie goes to the even neighbour";
  EXPECT_EQ(round_to_float16(1.0f + 3 * 0x1p-11f), 1.0f + 0x1p-9f);
  EXPECT_EQ(round_to_float16(0x1p-24f), 0x1p-24f) << "the smallest denormal";
  EXPECT_EQ(round_to_float16(0x1p-25f), 0.0f) << "half of it ties to 0";
  EXPECT_EQ(round_to_float16(0x1.8p-24f), 0x1p-23f);
  EXPECT_EQ(round_to_float16(0x1.0p-14f + 0x1p-25f), 0x1.0p-14f);
}

// ----- the state machine (exercise ch11.4) ---------------------------------------------------------

TEST(Ch11_4_LossScaler, OverflowHalvesTheScaleAndRestartsTheCount) {
  DynamicLossScaler s({.init_scale = 65536.0, .growth_interval = 10});
  EXPECT_EQ(s.scale(), 65536.0);
  s.update(true);
  s.update(true);
  EXPECT_EQ(s.good_steps(), 2);
  s.update(false);
  EXPECT_EQ(s.scale(), 32768.0) << "an overflow halves S";
  EXPECT_EQ(s.good_steps(), 0) << "an overflow restarts the count of clean steps";
  EXPECT_EQ(s.skipped_steps(), 1);
  s.update(false);
  EXPECT_EQ(s.scale(), 16384.0);
  EXPECT_EQ(s.skipped_steps(), 2);
}

TEST(Ch11_4_LossScaler, DoublesAfterGrowthIntervalCleanStepsInARow) {
  DynamicLossScaler s({.init_scale = 1024.0, .growth_interval = 3});
  s.update(true);
  s.update(true);
  EXPECT_EQ(s.scale(), 1024.0) << "2 clean steps of 3: not yet";
  s.update(true);
  EXPECT_EQ(s.scale(), 2048.0) << "the 3rd clean step in a row doubles S";
  EXPECT_EQ(s.good_steps(), 0);
  // An overflow in between: the clean steps before it do not count.
  s.update(true);
  s.update(true);
  s.update(false);
  EXPECT_EQ(s.scale(), 1024.0);
  s.update(true);
  s.update(true);
  EXPECT_EQ(s.scale(), 1024.0) << "only 2 clean steps since the overflow";
  s.update(true);
  EXPECT_EQ(s.scale(), 2048.0);
  EXPECT_EQ(s.skipped_steps(), 1);
}

TEST(Ch11_4_LossScaler, StaysWithinItsBounds) {
  DynamicLossScaler s(
      {.init_scale = 8.0, .growth_interval = 1, .min_scale = 4.0, .max_scale = 32.0});
  for (int i = 0; i < 5; ++i) s.update(false);
  EXPECT_EQ(s.scale(), 4.0) << "never halved below min_scale";
  EXPECT_EQ(s.skipped_steps(), 5) << "a step at min_scale that overflows is still skipped";
  for (int i = 0; i < 5; ++i) s.update(true);
  EXPECT_EQ(s.scale(), 32.0) << "never doubled above max_scale";
  EXPECT_EQ(s.good_steps(), 0) << "the count restarts when it reaches growth_interval";
  DynamicLossScaler fixed(
      {.init_scale = 1.0, .growth_interval = 1, .min_scale = 1.0, .max_scale = 1.0});  // no scaling
  fixed.update(true);
  fixed.update(false);
  EXPECT_EQ(fixed.scale(), 1.0);
}

TEST(Ch11_LossScaler, RejectsOptionsThatWouldMakeScalingInexact) {
  EXPECT_TT_ERROR(DynamicLossScaler({.init_scale = 3.0}), "DynamicLossScaler", "init_scale",
                  "power of two");
  EXPECT_TT_ERROR(DynamicLossScaler({.init_scale = 0.0}), "init_scale");
  EXPECT_TT_ERROR(DynamicLossScaler({.init_scale = -4.0}), "init_scale");
  EXPECT_TT_ERROR(DynamicLossScaler({.init_scale = NAN}), "init_scale");
  EXPECT_TT_ERROR(DynamicLossScaler({.max_scale = INFINITY}), "max_scale");
  EXPECT_TT_ERROR(DynamicLossScaler({.max_scale = 0x1p127}), "max_scale", "2^126");
  EXPECT_TT_ERROR(DynamicLossScaler({.min_scale = 0x1p-127}), "min_scale");
  EXPECT_TT_ERROR(DynamicLossScaler({.init_scale = 2.0, .min_scale = 4.0}), "min_scale <= ");
  EXPECT_TT_ERROR(DynamicLossScaler({.init_scale = 64.0, .max_scale = 32.0}), "init_scale <= ");
  EXPECT_TT_ERROR(DynamicLossScaler({.growth_interval = 0}), "growth_interval");
}

// ----- training a tiny GPT-2 with it ------------------------------------------------------------

const optim::AdamWOptions kAdamW{.lr = 3e-3, .beta1 = 0.9, .beta2 = 0.95, .weight_decay = 0.1};

/// A tiny GPT-2, its AdamW and the batches of its steps: four batches in turn (seeds 500..503),
/// so that a few steps already lower the loss on them.
struct TinyRun {
  gpt2::GPT2 model{test09::tiny_config(), 21};
  optim::AdamW opt{gpt2::param_groups(model, 0.1), kAdamW};
  int64_t step = 0;
  /// model.loss times `factor`, poisoned with NaN in the steps listed in `nan_steps`.
  std::function<Tensor(const Batch&)> loss_of(double factor = 1.0,
                                              std::vector<int64_t> nan_steps = {}) {
    return [this, factor, nan_steps](const Batch& b) {
      const bool poison = std::ranges::find(nan_steps, step) != nan_steps.end();
      return mul(model.loss(b.inputs, b.targets), poison ? NAN : factor);
    };
  }
  std::function<Batch()> next_batch() {
    return [this] { return test09::fixed_batch(2, 8, 50, 500 + static_cast<uint64_t>(step % 4)); };
  }
  std::vector<Tensor> params() const { return model.parameters(); }
};

std::vector<Tensor> snapshot(const std::vector<Tensor>& ts) {
  std::vector<Tensor> out;
  for (const Tensor& t : ts) out.push_back(t.detach().clone());
  return out;
}

bool bitwise_equal(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t j = 0; j < a.size(); ++j) {
    const std::vector<float> x = a[j].to(Device::cpu()).contiguous().to_vector<float>();
    const std::vector<float> y = b[j].to(Device::cpu()).contiguous().to_vector<float>();
    if (x.size() != y.size()) return false;
    for (std::size_t i = 0; i < x.size(); ++i) {
      if (std::bit_cast<uint32_t>(x[i]) != std::bit_cast<uint32_t>(y[i])) return false;
    }
  }
  return true;
}

TEST(Ch11_4_LossScaledTraining, WithoutOverflowTheRunIsBitForBitTheUnscaledOne) {
  // S is a power of two: scaling the loss and unscaling the gradients only move exponents. The
  // growth interval of 2 makes S change during the run (1024 -> 2048 -> 4096).
  TinyRun plain, scaled;
  DynamicLossScaler scaler({.init_scale = 1024.0, .growth_interval = 2});
  const gpt2::TrainStepOptions so{.grad_accum_steps = 2, .max_grad_norm = 1.0};
  for (; plain.step < 5; ++plain.step, ++scaled.step) {
    const auto a = gpt2::train_step(plain.opt, plain.loss_of(), plain.next_batch(), so);
    const auto b =
        train_step_loss_scaled(scaled.opt, scaled.loss_of(), scaled.next_batch(), so, scaler);
    ASSERT_TRUE(a.finite && b.finite) << "step " << plain.step;
    EXPECT_EQ(a.loss, b.loss) << "step " << plain.step << ": the result holds the unscaled loss";
    EXPECT_EQ(a.grad_norm, b.grad_norm)
        << "step " << plain.step << ": the norm of the unscaled gradients";
    ASSERT_TRUE(bitwise_equal(plain.params(), scaled.params()))
        << "step " << plain.step << ": the weights differ from the unscaled run's";
  }
  EXPECT_EQ(scaler.scale(), 4096.0) << "5 clean steps with growth_interval 2 double S twice";
  EXPECT_EQ(scaled.opt.step_count(), 5);
}

TEST(Ch11_4_LossScaledTraining, Float16GradientsUnderflowWithoutScaling) {
  // Gradients of the order of 1e-8 (the tiny model's loss times 2^-20, as a large model's
  // gradients are small): below float16's smallest denormal, 2^-24 = 6e-8. Unscaled, float16
  // keeps almost none of them; with S = 2^16 they are normal float16 numbers, and after the
  // unscaling the optimizer sees them within float16's rounding.
  const double kSmall = 0x1p-20;
  auto gradients = [&](double init_scale, bool emulate) {
    TinyRun run;
    Float16Gradients fp16(run.params());
    DynamicLossScaler scaler({.init_scale = init_scale, .min_scale = 1.0});
    const gpt2::TrainStepOptions so{.max_grad_norm = 0.0,  // the raw gradients, not clipped
                                    .parallel = emulate ? &fp16 : nullptr};
    const auto r =
        train_step_loss_scaled(run.opt, run.loss_of(kSmall), run.next_batch(), so, scaler);
    EXPECT_TRUE(r.finite);
    std::vector<float> g;
    for (const Tensor& p : run.params()) {
      for (float x : p.grad().contiguous().to_vector<float>()) g.push_back(x);
    }
    return g;
  };
  const std::vector<float> exact = gradients(1.0, false);  // float32 gradients
  const std::vector<float> unscaled = gradients(1.0, true);
  const std::vector<float> scaled = gradients(65536.0, true);
  ASSERT_EQ(exact.size(), scaled.size());
  int64_t nonzero = 0, lost_unscaled = 0, lost_scaled = 0;
  double err_unscaled = 0, err_scaled = 0, norm = 0;
  for (std::size_t i = 0; i < exact.size(); ++i) {
    if (exact[i] == 0.0f) continue;
    ++nonzero;
    lost_unscaled += unscaled[i] == 0.0f;
    lost_scaled += scaled[i] == 0.0f;
    norm += std::pow(double{exact[i]}, 2);
    err_unscaled += std::pow(double{unscaled[i]} - exact[i], 2);
    err_scaled += std::pow(double{scaled[i]} - exact[i], 2);
  }
  ASSERT_GT(nonzero, 1000);
  const double rel_unscaled = std::sqrt(err_unscaled / norm);
  const double rel_scaled = std::sqrt(err_scaled / norm);
  std::printf(
      "float16 gradients: unscaled %lld of %lld lost (rel. error %.3g), S = 2^16: %lld "
      "lost (rel. error %.3g)\n",
      static_cast<long long>(lost_unscaled), static_cast<long long>(nonzero), rel_unscaled,
      static_cast<long long>(lost_scaled), rel_scaled);
  EXPECT_GT(lost_unscaled, nonzero / 2) << "unscaled, most gradients should underflow to 0";
  EXPECT_GT(rel_unscaled, 100 * rel_scaled)
      << "the few that survive unscaled are denormals with a few bits left";
  EXPECT_LT(lost_scaled, nonzero / 20) << "with S = 2^16 almost every gradient survives";
  EXPECT_LT(rel_scaled, 0x1p-10) << "with S = 2^16 the error is float16's rounding (u = 2^-11)";
}

TEST(Ch11_4_LossScaledTraining, OverflowIsSkippedAndTheScaleSettles) {
  // Starting at S = 2^24, the float16 gradients overflow; each overflowing step is skipped (the
  // weights, moments and step count as before) and halves S, until S fits. Then the run trains,
  // and every growth_interval clean steps S probes one doubling higher.
  TinyRun run;
  Float16Gradients fp16(run.params());
  DynamicLossScaler scaler({.init_scale = 0x1p24, .growth_interval = 4, .max_scale = 0x1p24});
  const gpt2::TrainStepOptions so{.max_grad_norm = 1.0, .parallel = &fp16};
  const Batch probe = test09::fixed_batch(2, 8, 50, 500);
  const double loss0 = gpt2::evaluate(
      run.model, [&] { return probe; }, 1);
  int64_t skipped = 0, applied = 0, first_applied = -1, grown = 0;
  for (; run.step < 30; ++run.step) {
    const std::vector<Tensor> before = snapshot(run.params());
    const int64_t count = run.opt.step_count();
    const double s = scaler.scale();
    const auto r = train_step_loss_scaled(run.opt, run.loss_of(), run.next_batch(), so, scaler);
    if (!r.finite) {
      ++skipped;
      EXPECT_TRUE(bitwise_equal(before, run.params())) << "step " << run.step << " skipped";
      EXPECT_EQ(run.opt.step_count(), count) << "step " << run.step;
      EXPECT_EQ(scaler.scale(), s / 2) << "step " << run.step;
      EXPECT_TRUE(std::isfinite(r.loss)) << "the loss itself is finite: the gradients overflowed";
    } else {
      ++applied;
      if (first_applied < 0) first_applied = run.step;
      EXPECT_EQ(run.opt.step_count(), count + 1);
      grown += scaler.scale() > s;
    }
  }
  const double loss1 = gpt2::evaluate(
      run.model, [&] { return probe; }, 1);
  std::printf(
      "first applied step %lld, %lld skipped, %lld applied, %lld doublings, final S = "
      "%g, loss %.4f -> %.4f\n",
      static_cast<long long>(first_applied), static_cast<long long>(skipped),
      static_cast<long long>(applied), static_cast<long long>(grown), scaler.scale(), loss0, loss1);
  EXPECT_EQ(scaler.skipped_steps(), skipped);
  EXPECT_GT(first_applied, 0) << "at S = 2^24 the float16 gradients must overflow";
  // first_applied steps were skipped on the way down from 2^24; after that, an overflow comes
  // from a growth probe, at most one per growth_interval (4) clean steps.
  EXPECT_LE(skipped - first_applied, applied / 4 + 1)
      << "once S fits, only the growth probes may overflow";
  EXPECT_GT(grown, 0) << "S grows again after growth_interval clean steps";
  EXPECT_LT(loss1, loss0 - 0.1) << "the run trains after its skipped steps";
}

TEST(Ch11_4_LossScaledTraining, AnInjectedNanIsSkippedAndTheRunGoesOnAsWithoutIt) {
  // Step 2's loss is NaN. The scaled run skips it and halves S; from then on it is, bit for
  // bit, a run that never saw step 2 (S stays a power of two, so the halving changes nothing
  // but exponents).
  TinyRun with_nan, without;
  DynamicLossScaler scaler({.init_scale = 4096.0, .growth_interval = 1000});
  const gpt2::TrainStepOptions so{.max_grad_norm = 1.0};
  for (; with_nan.step < 6; ++with_nan.step) {
    const std::vector<Tensor> before = snapshot(with_nan.params());
    const auto r = train_step_loss_scaled(with_nan.opt, with_nan.loss_of(1.0, {2}),
                                          with_nan.next_batch(), so, scaler);
    if (with_nan.step == 2) {
      EXPECT_FALSE(r.finite);
      EXPECT_TRUE(bitwise_equal(before, with_nan.params())) << "the NaN step changed weights";
      EXPECT_EQ(scaler.scale(), 2048.0);
      EXPECT_EQ(with_nan.opt.step_count(), 2);
      continue;
    }
    EXPECT_TRUE(r.finite) << "step " << with_nan.step;
    without.step = with_nan.step;  // the same batch
    gpt2::train_step(without.opt, without.loss_of(), without.next_batch(), so);
    ASSERT_TRUE(bitwise_equal(without.params(), with_nan.params()))
        << "step " << with_nan.step << ": not the run without the bad step";
  }
  EXPECT_EQ(scaler.skipped_steps(), 1);
  EXPECT_EQ(with_nan.opt.step_count(), 5);
}

TEST(Ch11_4_LossScaledTrainingCuda, SkipsAndRecoversOnTheGpu) {
  TT_SKIP_IF_NO_CUDA();
  // The same strategy on the GPU ("scale_" is chapter 07's kernel there): a NaN step is
  // skipped, S halves, the weights stay, and the losses follow the unscaled run's.
  const Device gpu = Device::cuda(0);
  TinyRun with_nan, without;
  with_nan.model.to(gpu);
  without.model.to(gpu);
  DynamicLossScaler scaler({.init_scale = 4096.0, .growth_interval = 1000});
  const gpt2::TrainStepOptions so{.max_grad_norm = 1.0};
  auto on_gpu = [&](TinyRun& r) {
    return [&r, gpu] {
      Batch b = test09::fixed_batch(2, 8, 50, 500 + static_cast<uint64_t>(r.step % 4));
      return Batch{b.inputs.to(gpu), b.targets.to(gpu)};
    };
  };
  for (; with_nan.step < 5; ++with_nan.step) {
    const std::vector<Tensor> before = snapshot(with_nan.params());
    const auto r = train_step_loss_scaled(with_nan.opt, with_nan.loss_of(1.0, {1}),
                                          on_gpu(with_nan), so, scaler);
    if (with_nan.step == 1) {
      EXPECT_FALSE(r.finite);
      EXPECT_TRUE(bitwise_equal(before, with_nan.params())) << "the NaN step changed weights";
      EXPECT_EQ(scaler.scale(), 2048.0);
      continue;
    }
    without.step = with_nan.step;
    const auto ref = gpt2::train_step(without.opt, without.loss_of(), on_gpu(without), so);
    EXPECT_TRUE(r.finite);
    EXPECT_NEAR(r.loss, ref.loss, 1e-5 * std::fabs(ref.loss)) << "step " << with_nan.step;
  }
}

}  // namespace
}  // namespace tt

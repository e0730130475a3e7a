/// @file loss_scaling.h
/// @brief Dynamic loss scaling, what float16 training needs and bfloat16 training does not: the
/// loss is multiplied by a scale S before the backward, so that small gradients stay within
/// float16's range, the gradients are divided by S in float32 before the norm and the update,
/// and a step whose gradients overflowed (Inf/NaN) is skipped and S halved.
///
/// float16 has 5 exponent bits: nothing below \f$ 2^{-24} \approx 6 \cdot 10^{-8} \f$, nothing
/// above 65504. A gradient computed in float16 either underflows (too small: lost) or overflows
/// (too large: Inf). Multiplying the loss by S multiplies every gradient of the backward by S,
/// which moves them up, out of the underflow; too large an S makes some overflow. Dynamic
/// scaling keeps S as large as the gradients allow: halve it after an overflow (the step is
/// skipped), double it after growth_interval steps without one (PyTorch's GradScaler, apex).
///
/// The pieces, on top of chapter 09's training step and its non-finite policy (tt/train.h: a
/// step whose loss or gradient norm is NaN/Inf makes no update and returns finite = false):
///  - DynamicLossScaler holds S and decides its next value from each step's outcome
///    (DynamicLossScaler::update, exercise ch11.4);
///  - LossScalingStrategy is a gpt2::ParallelStrategy wrapped around the step's layout (one
///    process, DDP, ...): its backward multiplies the loss by S, its clip_grad_norm divides the
///    gradients by S before the inner strategy takes their norm. A gradient that overflowed is
///    still Inf after the division, so the norm is Inf and train_step skips the update;
///  - train_step_loss_scaled runs train_step through it and then updates the scaler.
///
/// S, min_scale and max_scale are powers of two, so scaling and unscaling are exact (they only
/// change exponents): without overflow or underflow, a loss-scaled step computes the same
/// gradients and the same update, bit for bit, as the unscaled one.
/// @code
///   tt::DynamicLossScaler scaler({.init_scale = 65536.0, .growth_interval = 2000});
///   for (int step = 0; step < steps; ++step) {
///     const auto r = tt::train_step_loss_scaled(opt, loss_of, next_batch, step_options, scaler);
///     if (!r.finite) std::printf("step %d skipped, scale now %g\n", step, scaler.scale());
///   }
/// @endcode
/// Tests: Ch11_4_LossScaler.* (the state machine), Ch11_4_LossScaledTraining.* (a tiny GPT-2
/// with float16 gradients emulated: underflow without scaling, overflow skipped and recovered,
/// bit-for-bit equality without overflow).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "tt/optim.h"
#include "tt/train.h"
#include "tt/train_parallel.h"

namespace tt {

/// Settings of a DynamicLossScaler (defaults: PyTorch's GradScaler, plus bounds).
struct LossScalerOptions {
  double init_scale = 65536.0;     ///< S at the start (2^16)
  int64_t growth_interval = 2000;  ///< consecutive finite steps after which S doubles
  double min_scale = 1.0;          ///< S is never halved below this
  double max_scale = 16777216.0;   ///< S is never doubled above this (2^24)
};

/// The loss scale S and the state machine that adapts it: after a step whose gradients were not
/// finite S halves, after growth_interval consecutive finite steps S doubles, always within
/// [min_scale, max_scale].
class DynamicLossScaler {
 public:
  /// Throws tt::Error naming the option unless init_scale, min_scale and max_scale are powers
  /// of two in [2^-126, 2^126] (so S and 1/S are normal float32 values and scaling is exact)
  /// with min_scale <= init_scale <= max_scale, and growth_interval >= 1.
  explicit DynamicLossScaler(LossScalerOptions options = {});

  /// The scale the next step multiplies its loss by.
  double scale() const { return scale_; }
  /// Finite steps counted towards the next growth: those since the last non-finite step or the
  /// last time the count reached growth_interval (0 after either).
  int64_t good_steps() const { return good_steps_; }
  /// Non-finite (skipped) steps so far.
  int64_t skipped_steps() const { return skipped_steps_; }
  /// The options given to the constructor.
  const LossScalerOptions& options() const { return options_; }

  /// Records the outcome of one step (exercise ch11.4). `finite` false (the step's gradients or
  /// loss were Inf/NaN, the update was skipped): S becomes max(S / 2, min_scale), good_steps()
  /// 0, skipped_steps() one more. `finite` true: good_steps() one more; when it reaches
  /// growth_interval, S becomes min(2 S, max_scale) and good_steps() 0.
  void update(bool finite);

 private:
  LossScalerOptions options_;
  double scale_;
  int64_t good_steps_ = 0;
  int64_t skipped_steps_ = 0;
};

/// A ParallelStrategy that adds loss scaling to another one (`inner`: single_process(), DDP,
/// ...). backward(loss, last) is inner.backward(loss * S, last); clip_grad_norm(opt, max_norm)
/// first multiplies every gradient of opt's parameters by 1/S (chapter 05's "scale_" kernel on
/// their device), then returns inner.clip_grad_norm(opt, max_norm), the norm of the unscaled
/// gradients. Everything else is the inner strategy's. S is read from the scaler at each call;
/// the strategy does not change it (train_step_loss_scaled does, after the step). Both
/// referenced objects must outlive the strategy.
class LossScalingStrategy final : public gpt2::ParallelStrategy {
 public:
  /// Loss scaling with `scaler`'s S around `inner`.
  LossScalingStrategy(const DynamicLossScaler& scaler, gpt2::ParallelStrategy& inner);

  /// The inner strategy's name.
  std::string name() const override { return inner_.name(); }
  /// The inner strategy's rank.
  int rank() const override { return inner_.rank(); }
  /// The inner strategy's world size.
  int world_size() const override { return inner_.world_size(); }
  /// The inner strategy's local rank.
  int local_rank() const override { return inner_.local_rank(); }
  /// The inner strategy's optimizer.
  std::unique_ptr<optim::Optimizer> make_optimizer(nn::Module& model,
                                                   std::vector<optim::ParamGroup> groups,
                                                   const optim::AdamWOptions& options,
                                                   const gpt2::AdamWFactory& adamw = {}) override;
  /// inner.backward(loss * S, last).
  void backward(const Tensor& loss, bool last) override;
  /// Divides the gradients by S, then inner.clip_grad_norm(optimizer, max_norm).
  double clip_grad_norm(optim::Optimizer& optimizer, double max_norm) override;
  /// inner.step(optimizer).
  void step(optim::Optimizer& optimizer) override { inner_.step(optimizer); }
  /// inner.average(value).
  double average(double value) override { return inner_.average(value); }
  /// inner.maximum(value).
  double maximum(double value) override { return inner_.maximum(value); }
  /// inner.save_checkpoint(...).
  void save_checkpoint(const std::string& path, const nn::Module& model,
                       optim::Optimizer& optimizer) override;
  /// inner.load_checkpoint(...).
  void load_checkpoint(const std::string& path, nn::Module& model,
                       optim::Optimizer& optimizer) override;
  /// inner.optimizer_state_bytes(optimizer).
  int64_t optimizer_state_bytes(const optim::Optimizer& optimizer) const override {
    return inner_.optimizer_state_bytes(optimizer);
  }
  /// inner.finish().
  void finish() override { inner_.finish(); }

 private:
  const DynamicLossScaler& scaler_;
  gpt2::ParallelStrategy& inner_;
};

/// gpt2::train_step with loss scaling: the step runs through a LossScalingStrategy around
/// options.parallel (or single_process()) with the scaler's current S, then
/// scaler.update(result.finite). The result is train_step's: the unscaled mean loss, the norm of
/// the unscaled gradients, finite = false for a skipped step (no update; the optimizer's step
/// count unchanged).
gpt2::TrainStepResult train_step_loss_scaled(optim::Optimizer& optimizer,
                                             const std::function<Tensor(const Batch&)>& loss_of,
                                             const std::function<Batch()>& next_batch,
                                             const gpt2::TrainStepOptions& options,
                                             DynamicLossScaler& scaler);

}  // namespace tt

/// @file optim.h
/// @brief Optimizers (SGD with momentum/Nesterov, AdamW), gradient-norm clipping and learning
/// rate schedules.
///
/// An optimizer holds handles to the parameters it updates and its own state tensors (one set
/// per parameter, allocated with the parameter's shape when the optimizer is built). step()
/// updates the parameters IN PLACE through a kernel found in the registry by name:
/// "sgd_step" and "adamw_step" take whole lists of tensors, so a device can implement them as
/// one fused multi-tensor launch (chapter 07 registers a CUDA "adamw_step" with the same
/// signature).
///
/// Hyper-parameters are validated when the optimizer is built (and by set_lr): a negative or
/// non-finite learning rate, weight decay, momentum, eps, or betas outside [0, 1) throw tt::Error
/// naming the optimizer and the value. Gradient *values* are not checked: step() applies a
/// NaN/Inf gradient, which makes those parameters NaN/Inf. Check before stepping (chapter 09's
/// train_step skips the update when the loss or the clip_grad_norm_ result is not finite).
///
/// Bias correction uses the optimizer's step counter. A parameter without a gradient is
/// skipped; PyTorch counts steps per parameter, which agrees whenever every parameter gets a
/// gradient at every step (the case in training).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tt/dispatcher.h"
#include "tt/module.h"

namespace tt::optim {

using nn::NamedTensor;
using nn::StateDict;

/// Parameters that share hyper-parameters (e.g. GPT-2 decays matrices but not biases/norms).
struct ParamGroup {
  std::vector<Tensor> params;  ///< updated tensors (float, contiguous, requires_grad)
  double weight_decay = 0.0;   ///< weight decay of this group
};

/// Base class: parameter groups, the step counter, the learning rate, per-parameter state,
/// zero_grad, state_dict. Subclasses implement update() with their kernel.
class Optimizer {
 public:
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  /// One update of every parameter that has a gradient; then step_count() grows by one.
  /// Throws tt::Error (naming the optimizer, parameter index and shapes) when a gradient does
  /// not match its parameter. State tensors follow their parameter to its device.
  void step();
  /// step() decided on the device: the same update, made by the kernels only where the 0-d
  /// float64 tensor `skip` (on the parameters' device) holds 0; where it is non-zero nothing
  /// changes (parameters, state). The host never reads `skip` (no synchronization), so the step
  /// counter advances either way: a caller that later reads a non-zero `skip` calls
  /// rewind_step_count(). Used by chapter 10's sync-free step; needs an optimizer whose kernel
  /// has a skipping variant (AdamW: "adamw_step_unless"), otherwise throws tt::Error.
  void step_unless(const Tensor& skip);
  /// Takes back one count of step_count() (after a step_unless whose `skip` was non-zero).
  /// Throws tt::Error when step_count() is 0.
  void rewind_step_count();
  /// Clears every parameter's gradient: undefined (`set_to_none`, the default) or zeros.
  void zero_grad(bool set_to_none = true);
  /// Learning rate of the next step.
  double lr() const;
  /// Sets the learning rate (a schedule calls this before every step).
  void set_lr(double lr);
  /// Number of completed steps.
  int64_t step_count() const;
  /// The parameter groups.
  const std::vector<ParamGroup>& param_groups() const { return groups_; }
  /// Moves every state tensor to `device` in place (see nn::move_to_device_).
  void to(Device device);
  /// "step" (int64 0-d), "lr" (float64 0-d) and per parameter i (flattened over the groups)
  /// "state.<i>.<name>" for each state tensor; handles to the live tensors.
  StateDict state_dict() const;
  /// Validates `state` completely, then copies it in (see nn::apply_state_dict): on any
  /// problem nothing changes. `source` names the origin in error messages.
  void load_state_dict(const StateDict& state, const std::string& source = "<state_dict>");
  /// "SGD" or "AdamW".
  const std::string& name() const { return name_; }

 protected:
  /// Checks the groups (float, contiguous, each tensor once) and allocates zeroed state
  /// tensors named `state_names` for every parameter.
  Optimizer(std::string name, std::vector<ParamGroup> groups, double lr,
            std::vector<std::string> state_names);
  /// Updates `params` (all on one device, all with a gradient `grads`) of one group, whose
  /// state tensors are `state[k][j]` = state number k of params[j]. `step` is 1 at the first
  /// step. Inside step_unless(), skip() is the device flag the kernel must honour.
  virtual void update(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                      const std::vector<std::vector<Tensor>>& state, double weight_decay,
                      int64_t step) = 0;
  /// The `skip` tensor of the step_unless() in progress; undefined inside step().
  const Tensor& skip() const { return skip_; }

 private:
  void step_impl();

  std::string name_;
  std::vector<ParamGroup> groups_;
  std::vector<std::string> state_names_;
  std::vector<std::vector<Tensor>> state_;  // state_[flat parameter index][k]
  Tensor step_;                             // int64 0-d, CPU
  Tensor lr_;                               // float64 0-d, CPU
  Tensor skip_;                             // set during step_unless()
};

// ----- SGD ---------------------------------------------------------------------------------

/// Hyper-parameters of SGD (PyTorch's names and defaults).
struct SgdOptions {
  double lr = 1e-2;           ///< learning rate
  double momentum = 0.0;      ///< \f$ \mu \f$; 0 turns momentum off
  double dampening = 0.0;     ///< \f$ \tau \f$
  double weight_decay = 0.0;  ///< L2 penalty added to the gradient
  bool nesterov = false;      ///< Nesterov momentum (needs momentum > 0 and dampening 0)
};

/// Arguments of one "sgd_step" call.
struct SgdStepArgs {
  double lr;            ///< learning rate
  double momentum;      ///< \f$ \mu \f$
  double dampening;     ///< \f$ \tau \f$
  double weight_decay;  ///< \f$ \lambda \f$
  bool nesterov;        ///< Nesterov variant
  bool first_step;      ///< the momentum buffer is initialised with d instead of updated
};

/// Signature of "sgd_step": updates every params[j] in place with grads[j] and (when
/// momentum != 0) momentum_buffers[j]; all contiguous, same shape/dtype/device per j;
/// momentum_buffers is empty when momentum == 0.
using SgdStepKernel = void(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                           const std::vector<Tensor>& momentum_buffers, const SgdStepArgs& args);

/// Stochastic gradient descent with momentum (PyTorch's torch.optim.SGD):
/// \f$ d = g + \lambda p;\ b = d \f$ (first step) or \f$ b = \mu b + (1-\tau) d;
/// d = d + \mu b \f$ (Nesterov) or \f$ d = b;\ p \leftarrow p - \eta d \f$.
class SGD : public Optimizer {
 public:
  /// One group with options.weight_decay.
  SGD(std::vector<Tensor> params, SgdOptions options);
  /// Several groups (each with its own weight decay; options.weight_decay is ignored).
  SGD(std::vector<ParamGroup> groups, SgdOptions options);
  /// The options given to the constructor (lr is the initial one).
  const SgdOptions& options() const { return options_; }

 protected:
  /// Calls the "sgd_step" kernel.
  void update(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
              const std::vector<std::vector<Tensor>>& state, double weight_decay,
              int64_t step) override;

 private:
  SgdOptions options_;
};

// ----- AdamW -------------------------------------------------------------------------------

/// Hyper-parameters of AdamW (PyTorch's names and defaults).
struct AdamWOptions {
  double lr = 1e-3;            ///< learning rate \f$ \eta \f$
  double beta1 = 0.9;          ///< decay of the first moment
  double beta2 = 0.999;        ///< decay of the second moment
  double eps = 1e-8;           ///< added to \f$ \sqrt{\hat v} \f$
  double weight_decay = 1e-2;  ///< decoupled decay \f$ \lambda \f$
};

/// Arguments of one "adamw_step" call.
struct AdamWStepArgs {
  double lr;            ///< learning rate
  double beta1;         ///< \f$ \beta_1 \f$
  double beta2;         ///< \f$ \beta_2 \f$
  double eps;           ///< \f$ \epsilon \f$
  double weight_decay;  ///< \f$ \lambda \f$
  int64_t step;         ///< t, 1 at the first step
};

/// Signature of "adamw_step": updates params[j], exp_avgs[j] (m) and exp_avg_sqs[j] (v) in
/// place from grads[j]; all contiguous, same shape/dtype/device per j.
using AdamWStepKernel = void(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                             const std::vector<Tensor>& exp_avgs,
                             const std::vector<Tensor>& exp_avg_sqs, const AdamWStepArgs& args);
/// Signature of "adamw_step_unless": "adamw_step", except that nothing changes when `skip` (a
/// 0-d float64 tensor on the parameters' device, read by the kernel) is non-zero.
using AdamWStepUnlessKernel = void(const std::vector<Tensor>& params,
                                   const std::vector<Tensor>& grads,
                                   const std::vector<Tensor>& exp_avgs,
                                   const std::vector<Tensor>& exp_avg_sqs,
                                   const AdamWStepArgs& args, const Tensor& skip);

/// Adam with decoupled weight decay (Loshchilov & Hutter), exactly as torch.optim.AdamW:
/// \f$ p \leftarrow p(1 - \eta\lambda);\ m \leftarrow \beta_1 m + (1-\beta_1) g;
/// v \leftarrow \beta_2 v + (1-\beta_2) g^2;
/// p \leftarrow p - \eta\, \frac{m/(1-\beta_1^t)}{\sqrt{v}/\sqrt{1-\beta_2^t} + \epsilon} \f$.
class AdamW : public Optimizer {
 public:
  /// One group with options.weight_decay.
  AdamW(std::vector<Tensor> params, AdamWOptions options);
  /// Several groups (each with its own weight decay; options.weight_decay is ignored).
  AdamW(std::vector<ParamGroup> groups, AdamWOptions options);
  /// The options given to the constructor (lr is the initial one).
  const AdamWOptions& options() const { return options_; }

 protected:
  /// Calls the "adamw_step" kernel.
  void update(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
              const std::vector<std::vector<Tensor>>& state, double weight_decay,
              int64_t step) override;

 private:
  AdamWOptions options_;
};

// ----- gradient clipping -------------------------------------------------------------------

/// Signature of "sum_of_squares": \f$ \sum_j \sum_i t_{j,i}^2 \f$ over a list of tensors on one
/// device, accumulated in double in a fixed order.
using SumOfSquaresKernel = double(const std::vector<Tensor>& tensors);
/// Signature of "scale_": multiplies every element of every tensor in place by `factor`.
using ScaleInplaceKernel = void(const std::vector<Tensor>& tensors, double factor);
/// Signature of "sum_of_squares_device": "sum_of_squares" left on the tensors' device, as a 0-d
/// float64 tensor (same value, bit for bit; no host synchronization). 0 for no elements.
using SumOfSquaresDeviceKernel = Tensor(const std::vector<Tensor>& tensors);
/// Signature of "clip_and_check_": clip_grad_norm_ and the finite check of a training step,
/// decided on the device. With \f$ n = \sqrt{\text{sumsq}} \f$ (sumsq: 0-d float64, e.g. from
/// "sum_of_squares_device") and \f$ c = \mathrm{max\_norm}/(n + 10^{-6}) \f$, every gradient is
/// multiplied by c (rounded to float once) when c < 1, bit for bit as clip_grad_norm_ does; then
/// `status` (float64 [3], contiguous, on the grads' device) receives {loss, n, skip}, where
/// `loss` is a 0-d float64 tensor and skip = 1 when the loss or n is NaN/Inf (else 0).
using ClipAndCheckKernel = void(const std::vector<Tensor>& grads, const Tensor& sumsq,
                                double max_norm, const Tensor& loss, const Tensor& status);

/// Scales all gradients together so that their global L2 norm is at most `max_norm`:
/// \f$ n = \sqrt{\sum_p \lVert g_p\rVert^2},\ c = \mathrm{max\_norm}/(n + 10^{-6}) \f$, and if
/// c < 1 every gradient is multiplied by c. Parameters without a gradient are ignored. Returns
/// n, the norm before clipping (0 when there is no gradient) (exercise ch05.4).
/// A NaN or Inf gradient makes n NaN or Inf, and is returned as such, as in PyTorch: with
/// n = Inf, c = 0 scales every gradient to 0 (Inf ones to NaN); with n = NaN nothing is scaled.
/// Either way the gradients are unusable: test std::isfinite(n) before optimizer.step().
double clip_grad_norm_(const std::vector<Tensor>& params, double max_norm);

// ----- learning-rate schedules -------------------------------------------------------------

/// A learning rate as a function of the step (0-based: the rate used by the step-th update).
class LRSchedule {
 public:
  virtual ~LRSchedule() = default;
  /// The learning rate of step `step`.
  virtual double lr(int64_t step) const = 0;
  /// Sets optimizer.lr() to lr(optimizer.step_count()): call it before every step().
  void apply(Optimizer& optimizer) const { optimizer.set_lr(lr(optimizer.step_count())); }
};

/// The same rate at every step.
class ConstantLR final : public LRSchedule {
 public:
  /// Always `lr`.
  explicit ConstantLR(double lr) : lr_(lr) {}
  /// lr.
  double lr(int64_t) const override { return lr_; }

 private:
  double lr_;
};

/// Linear warmup then cosine decay to a floor (GPT-2/llm.c):
/// \f$ \eta_s = \eta_{max} (s+1)/W \f$ for \f$ s < W \f$;
/// \f$ \eta_s = \eta_{min} + \tfrac12(1 + \cos \pi r)(\eta_{max} - \eta_{min}) \f$ with
/// \f$ r = (s - W)/(S - W) \f$ for \f$ W \le s \le S \f$; \f$ \eta_{min} \f$ after S.
class WarmupCosineLR final : public LRSchedule {
 public:
  /// max_lr after `warmup_steps` (W), decaying to min_lr at `total_steps` (S > W >= 0).
  WarmupCosineLR(double max_lr, double min_lr, int64_t warmup_steps, int64_t total_steps);
  /// The formula above (exercise ch05.5).
  double lr(int64_t step) const override;

 private:
  double max_lr_, min_lr_;
  int64_t warmup_steps_, total_steps_;
};

}  // namespace tt::optim

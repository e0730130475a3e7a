// Dynamic loss scaling (tt/loss_scaling.h): the scaler's options, the strategy that scales the
// loss and unscales the gradients, and the loss-scaled training step. The scaler's state
// machine, DynamicLossScaler::update, is exercise ch11.4 (loss_scaler_update.cc).
#include "tt/loss_scaling.h"

#include <cmath>
#include <utility>

#include "tt/dispatcher.h"
#include "tt/error.h"
#include "tt/functional.h"

namespace tt {

namespace {

// A power of two whose reciprocal is a normal float32 too: 2^-126 .. 2^126.
bool exact_scale(double x) {
  int e = 0;
  return std::isfinite(x) && x > 0 && std::frexp(x, &e) == 0.5 && e - 1 >= -126 && e - 1 <= 126;
}

}  // namespace

DynamicLossScaler::DynamicLossScaler(LossScalerOptions options)
    : options_(options), scale_(options.init_scale) {
  for (const auto& [name, value] :
       {std::pair{"init_scale", options.init_scale}, std::pair{"min_scale", options.min_scale},
        std::pair{"max_scale", options.max_scale}}) {
    TT_CHECK(exact_scale(value), "DynamicLossScaler: ", name,
             " must be a power of two in [2^-126, 2^126] (scaling by it is exact), got ", value);
  }
  TT_CHECK(options.min_scale <= options.init_scale && options.init_scale <= options.max_scale,
           "DynamicLossScaler: need min_scale <= init_scale <= max_scale, got ", options.min_scale,
           ", ", options.init_scale, ", ", options.max_scale);
  TT_CHECK(options.growth_interval >= 1, "DynamicLossScaler: growth_interval must be >= 1, got ",
           options.growth_interval);
}

LossScalingStrategy::LossScalingStrategy(const DynamicLossScaler& scaler,
                                         gpt2::ParallelStrategy& inner)
    : scaler_(scaler), inner_(inner) {}

std::unique_ptr<optim::Optimizer> LossScalingStrategy::make_optimizer(
    nn::Module& model, std::vector<optim::ParamGroup> groups, const optim::AdamWOptions& options,
    const gpt2::AdamWFactory& adamw) {
  return inner_.make_optimizer(model, std::move(groups), options, adamw);
}

void LossScalingStrategy::backward(const Tensor& loss, bool last) {
  inner_.backward(mul(loss, scaler_.scale()), last);
}

double LossScalingStrategy::clip_grad_norm(optim::Optimizer& optimizer, double max_norm) {
  // Unscaled in the gradients' own precision (float32): exact, since 1/S is a power of two. An
  // Inf stays Inf and makes the inner strategy's norm Inf: train_step then skips the update.
  std::vector<Tensor> grads;
  for (const auto& group : optimizer.param_groups()) {
    for (const Tensor& p : group.params) {
      const Tensor g = p.grad();
      if (!g.defined()) continue;
      TT_CHECK(grads.empty() || g.device() == grads[0].device(),
               "LossScalingStrategy::clip_grad_norm: gradients on different devices: ",
               grads[0].describe(), " and ", g.describe());
      grads.push_back(g);
    }
  }
  if (!grads.empty()) {
    call_kernel<optim::ScaleInplaceKernel>("scale_", grads[0].device(), grads,
                                           1.0 / scaler_.scale());
  }
  return inner_.clip_grad_norm(optimizer, max_norm);
}

void LossScalingStrategy::save_checkpoint(const std::string& path, const nn::Module& model,
                                          optim::Optimizer& optimizer) {
  inner_.save_checkpoint(path, model, optimizer);
}

void LossScalingStrategy::load_checkpoint(const std::string& path, nn::Module& model,
                                          optim::Optimizer& optimizer) {
  inner_.load_checkpoint(path, model, optimizer);
}

gpt2::TrainStepResult train_step_loss_scaled(optim::Optimizer& optimizer,
                                             const std::function<Tensor(const Batch&)>& loss_of,
                                             const std::function<Batch()>& next_batch,
                                             const gpt2::TrainStepOptions& options,
                                             DynamicLossScaler& scaler) {
  LossScalingStrategy scaled(
      scaler, options.parallel != nullptr ? *options.parallel : gpt2::single_process());
  gpt2::TrainStepOptions with_scaling = options;
  with_scaling.parallel = &scaled;
  const gpt2::TrainStepResult result =
      gpt2::train_step(optimizer, loss_of, next_batch, with_scaling);
  scaler.update(result.finite);
  return result;
}

}  // namespace tt

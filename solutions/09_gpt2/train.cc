// The training step (exercise ch09.4), evaluation, parameter groups and FLOPs (tt/train.h).
#include <cmath>
#include <vector>

#include "tt/autograd.h"
#include "tt/functional.h"
#include "tt/todo.h"
#include "tt/train.h"

namespace tt::gpt2 {

TrainStepResult train_step(optim::Optimizer& optimizer,
                           const std::function<Tensor(const Batch&)>& loss_of,
                           const std::function<Batch()>& next_batch,
                           const TrainStepOptions& options) {
  TT_CHECK(options.grad_accum_steps >= 1, "train_step: grad_accum_steps must be >= 1, got ",
           options.grad_accum_steps);
#if TT_SOLUTION
  ParallelStrategy& par = options.parallel != nullptr ? *options.parallel : single_process();
  TrainStepResult r;
  par.zero_grad(optimizer);
  const double scale = 1.0 / static_cast<double>(options.grad_accum_steps);
  for (int64_t micro = 0; micro < options.grad_accum_steps; ++micro) {
    const Batch batch = next_batch();
    const Tensor loss = loss_of(batch);
    TT_CHECK(loss.defined() && loss.numel() == 1,
             "train_step: loss_of must return a one-element tensor, got ", loss.describe());
    r.tokens += batch.inputs.numel();
    // d(mean over micro-batches)/dp = sum of d(loss_i / n)/dp: backward adds into .grad.
    par.backward(mul(loss, scale), micro + 1 == options.grad_accum_steps);
    // Read after backward is queued: on a GPU item() waits for the device, and waiting before
    // backward would leave the host no lead while it queues backward's kernels (and chapter 12's
    // gradient hooks), so every microsecond of host work there would become GPU idle time.
    r.loss += loss.item() * scale;
  }
  r.loss = par.average(r.loss);       // every rank agrees on the loss, and on `finite`
  r.tokens *= par.data_world_size();  // the replicas read different rows
  const double max_norm = options.max_grad_norm > 0 ? options.max_grad_norm : INFINITY;
  r.grad_norm = par.clip_grad_norm(optimizer, max_norm);
  r.finite = std::isfinite(r.loss) && std::isfinite(r.grad_norm);
  if (r.finite) par.step(optimizer);  // never let NaN/Inf reach the weights
  return r;
#else
  (void)optimizer, (void)loss_of, (void)next_batch;
  TT_TODO(
      "ch09.4",
      "train_step: gradients = those of the mean loss over grad_accum_steps micro-batches "
      "(from zero), clipped to max_grad_norm (<= 0: not clipped); result holds the mean "
      "loss, total tokens, pre-clip norm, finite; the update only when loss and norm are "
      "finite; zeroing, backward, clipping, the update, the loss mean and the token count go through "
      "the hooks of options.parallel (null: one process), as include/tt/train.h describes");
#endif
}

TrainStepResult train_step(GPT2& model, optim::Optimizer& optimizer,
                           const std::function<Batch()>& next_batch,
                           const TrainStepOptions& options) {
  const Device device = model.device();
  return train_step(
      optimizer,
      [&](const Batch& b) { return model.loss(b.inputs.to(device), b.targets.to(device)); },
      next_batch, options);
}

bool all_finite(const std::vector<Tensor>& tensors) {
  std::vector<Tensor> floats;
  for (const Tensor& t : tensors) {
    TT_CHECK(t.defined(), "all_finite: undefined tensor in the list");
    if (!is_floating(t.dtype()) || t.numel() == 0) continue;
    TT_CHECK(floats.empty() || t.device() == floats[0].device(),
             "all_finite: tensors on different devices: ", floats[0].describe(), " and ",
             t.describe());
    floats.push_back(t.is_contiguous() ? t : t.contiguous());
  }
  if (floats.empty()) return true;
  // One pass on the tensors' device: the sum of squares of finite float32 values is finite in
  // double, and a NaN or Inf anywhere makes it NaN or Inf.
  return std::isfinite(
      call_kernel<optim::SumOfSquaresKernel>("sum_of_squares", floats[0].device(), floats));
}

double evaluate(GPT2& model, const std::function<Batch()>& next_batch, int64_t num_batches) {
  TT_CHECK(num_batches >= 1, "evaluate: num_batches must be >= 1, got ", num_batches);
  autograd::NoGradGuard no_grad;
  double sum = 0;
  for (int64_t i = 0; i < num_batches; ++i) {
    const Batch batch = next_batch();
    sum += model.loss(batch.inputs.to(model.device()), batch.targets.to(model.device())).item();
  }
  return sum / static_cast<double>(num_batches);
}

std::vector<optim::ParamGroup> param_groups(const nn::Module& model, double weight_decay) {
  optim::ParamGroup decay{{}, weight_decay}, no_decay{{}, 0.0};
  for (const Tensor& p : model.parameters()) (p.dim() >= 2 ? decay : no_decay).params.push_back(p);
  return {decay, no_decay};
}

double flops_per_token(const GPT2Config& config, int64_t num_parameters, int64_t seq_len) {
  return 6.0 * static_cast<double>(num_parameters) +
         12.0 * static_cast<double>(config.n_layer * config.n_embd * seq_len);
}

}  // namespace tt::gpt2

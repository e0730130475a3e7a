/// @file train.h
/// @brief The GPT-2 training step (gradient accumulation, clipping, a finite check before the
/// update), evaluation, parameter groups for weight decay, and the FLOP count behind MFU.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "tt/dataloader.h"
#include "tt/gpt2.h"
#include "tt/optim.h"

namespace tt::gpt2 {

/// Settings of one optimizer step.
struct TrainStepOptions {
  int64_t grad_accum_steps = 1;  ///< micro-batches whose gradients are summed into one step
  double max_grad_norm = 1.0;    ///< global L2 norm clipping threshold (<= 0: no clipping)
};

/// What one step measured.
struct TrainStepResult {
  double loss = 0;       ///< mean loss over the micro-batches
  double grad_norm = 0;  ///< global gradient norm before clipping
  bool finite = true;    ///< false when the loss or the norm is NaN/Inf (no update was made)
  int64_t tokens = 0;    ///< tokens processed (B * T * grad_accum_steps)
};

/// One optimizer step for any model (exercise ch08.8): zero the gradients of the optimizer's
/// parameters; for each of grad_accum_steps micro-batches from `next_batch`, compute
/// `loss_of(batch)` (a 0-d tensor) and backpropagate loss / grad_accum_steps (so the summed
/// gradient is the gradient of the mean loss); clip the global gradient norm of the optimizer's
/// parameters; and only if the mean loss and the norm are finite, call optimizer.step().
/// `tokens` counts batch.inputs elements. The learning rate is whatever the optimizer holds
/// (apply a schedule before calling).
TrainStepResult train_step(optim::Optimizer& optimizer,
                           const std::function<Tensor(const Batch&)>& loss_of,
                           const std::function<Batch()>& next_batch,
                           const TrainStepOptions& options);

/// The training step of a GPT-2: train_step with loss_of(batch) = model.loss of the batch moved
/// to the model's device.
TrainStepResult train_step(GPT2& model, optim::Optimizer& optimizer,
                           const std::function<Batch()>& next_batch,
                           const TrainStepOptions& options);

/// Mean loss over `num_batches` batches from `next_batch`, under no_grad.
double evaluate(GPT2& model, const std::function<Batch()>& next_batch, int64_t num_batches);

/// GPT-2's two AdamW groups: matrices and embeddings (dim >= 2) with `weight_decay`, biases and
/// LayerNorm parameters (dim < 2) without.
std::vector<optim::ParamGroup> param_groups(const GPT2& model, double weight_decay);

/// Training FLOPs per token (forward + backward) of a model with N parameters at sequence
/// length T, as in llm.c/nanoGPT: \f$ 6N + 12\,L\,C\,T \f$ (the second term: attention
/// scores and weighted sums, 2 matmuls of \f$ 2 T C \f$ each per layer and token, times 3
/// for forward + backward).
double flops_per_token(const GPT2Config& config, int64_t num_parameters, int64_t seq_len);

}  // namespace tt::gpt2

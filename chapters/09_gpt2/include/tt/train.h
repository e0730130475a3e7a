/// @file train.h
/// @brief The GPT-2 training step (gradient accumulation, clipping, a finite check before the
/// update), evaluation, parameter groups for weight decay, and the FLOP count behind MFU.
///
/// Non-finite policy (what keeps a diverged run from destroying its last good state):
///  1. train_step never applies an update whose mean loss or gradient norm is NaN/Inf: it
///     returns finite = false with the weights and the optimizer (moments, step count)
///     unchanged. It does not decide whether to go on; its caller does.
///  2. The training loop (apps/train_gpt2.cc) stops at the first such step, printing the step,
///     the loss, the norm and the path of the last good checkpoint; it writes nothing more (no
///     checkpoint, no model.bin) and exits with status 3. It also checks the parameters after
///     every update (all_finite): an update that was finite in loss and norm but overflowed the
///     weights (an absurd learning rate) stops the run the same way, before anything (sample,
///     evaluation, checkpoint) uses them.
///  3. ckpt::save_checkpoint refuses to write model or optimizer state holding NaN/Inf (chapter
///     05): whatever slips through (e.g. an overflowed Adam moment), a diverged state never
///     overwrites the last good checkpoint (train_gpt2 then exits with status 1 and the error).
/// Tests: Ch09_4_TrainStep.NonFiniteLossSkipsTheUpdate (1), Ch09_TrainSafety.* (2, running the
/// real train_gpt2), Ch05_Checkpoint.SaveCheckpointRefusesNonFiniteValues (3).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tt/dataloader.h"
#include "tt/gpt2.h"
#include "tt/optim.h"
#include "tt/train_parallel.h"

namespace tt::gpt2 {

/// Settings of one optimizer step.
struct TrainStepOptions {
  int64_t grad_accum_steps = 1;  ///< micro-batches whose gradients are summed into one step
  double max_grad_norm = 1.0;    ///< global L2 norm clipping threshold (<= 0: no clipping)
  /// How the step is spread over processes (tt/train_parallel.h); null: one process
  /// (single_process()).
  ParallelStrategy* parallel = nullptr;
};

/// What one step measured.
struct TrainStepResult {
  double loss = 0;       ///< mean loss over the micro-batches (and over the ranks)
  double grad_norm = 0;  ///< global gradient norm before clipping
  bool finite = true;    ///< false when the loss or the norm is NaN/Inf (no update was made)
  int64_t tokens = 0;    ///< tokens processed by all ranks (B * T * grad_accum_steps * ranks)
};

/// One optimizer step for any model (exercise ch09.4): zero the gradients of the optimizer's
/// parameters; for each of grad_accum_steps micro-batches from `next_batch`, compute
/// `loss_of(batch)` (a 0-d tensor) and backpropagate loss / grad_accum_steps (so the summed
/// gradient is the gradient of the mean loss); clip the global gradient norm of the optimizer's
/// parameters; and only if the mean loss and the norm are finite, update.
/// `tokens` counts batch.inputs elements. The learning rate is whatever the optimizer holds
/// (apply a schedule before calling). Throws tt::Error when grad_accum_steps < 1 or loss_of
/// returns anything but a one-element tensor.
///
/// Zeroing, backward, clipping, the update and the mean loss go through the step's
/// ParallelStrategy P (options.parallel, or single_process()): P.zero_grad(optimizer),
/// P.backward(scaled loss, last micro-batch?), P.clip_grad_norm(optimizer, max_norm or +inf),
/// P.step(optimizer), loss = P.average(local mean loss), tokens = local tokens *
/// P.world_size(). With one process these are optimizer.zero_grad(), autograd::backward,
/// optim::clip_grad_norm_, optimizer.step() and the identity.
TrainStepResult train_step(optim::Optimizer& optimizer,
                           const std::function<Tensor(const Batch&)>& loss_of,
                           const std::function<Batch()>& next_batch,
                           const TrainStepOptions& options);

/// The training step of a GPT-2: train_step with loss_of(batch) = model.loss of the batch moved
/// to the model's device.
TrainStepResult train_step(GPT2& model, optim::Optimizer& optimizer,
                           const std::function<Batch()>& next_batch,
                           const TrainStepOptions& options);

/// Runs the optimizer steps of one training run in place of train_step (made once, for one
/// model, optimizer, micro-batch shape and TrainStepOptions); a later chapter provides it
/// (chapter 10: fast::GraphedTrainStep, the step replayed as a CUDA graph), train_gpt2
/// --cuda-graph uses it. The registry has one slot, like the step profiler of tt/gpt2_ops.h.
class StepRunner {
 public:
  virtual ~StepRunner() = default;
  /// One optimizer step on grad_accum_steps micro-batches from `next_batch` (each [B, T]): the
  /// result train_step(model, optimizer, next_batch, options) would return, with the same
  /// update. The learning rate is whatever the optimizer holds.
  virtual TrainStepResult step(const std::function<Batch()>& next_batch) = 0;
  /// The validation loss of `num_batches` batches from `next_batch` when the runner computes it
  /// itself (a pipeline, chapter 14: no rank holds the whole model, so the batches go through
  /// the stages); std::nullopt, the default: the caller runs gpt2::evaluate on the model.
  virtual std::optional<double> evaluate(const std::function<Batch()>& next_batch,
                                         int64_t num_batches) {
    (void)next_batch;
    (void)num_batches;
    return std::nullopt;
  }
  /// A short description for logs, e.g. "CUDA graph (captured after 2 eager steps)".
  virtual std::string description() const = 0;
};

/// What builds a StepRunner: (model, optimizer, B, T, options). It throws tt::Error for what it
/// cannot run (naming the model's device, the options, ...).
using StepRunnerFactory =
    std::function<std::unique_ptr<StepRunner>(GPT2& model, optim::Optimizer& optimizer, int64_t B,
                                              int64_t T, const TrainStepOptions& options)>;

/// Registers the factory of graphed step runners (at most one; a second throws tt::Error).
/// Returns true, for use in a static initializer.
bool register_graphed_step_runner(StepRunnerFactory factory);

/// True when a chapter linked in registers a graphed step runner.
bool has_graphed_step_runner();

/// A graphed step runner for `model` and `optimizer` with micro-batches of B x T tokens. Throws
/// tt::Error when none is registered (chapter 10 is not linked in), or what the factory throws.
std::unique_ptr<StepRunner> make_graphed_step_runner(GPT2& model, optim::Optimizer& optimizer,
                                                     int64_t B, int64_t T,
                                                     const TrainStepOptions& options);

/// True when every element of every float tensor in `tensors` (all on one device) is finite:
/// one pass on their device through the "sum_of_squares" kernel (its double sum of squares is
/// finite exactly when every value is, for float32; float64 values beyond ~1e154 count as
/// non-finite). The training loop calls it on the parameters after each update.
bool all_finite(const std::vector<Tensor>& tensors);

/// Mean loss over `num_batches` batches from `next_batch`, under no_grad.
double evaluate(GPT2& model, const std::function<Batch()>& next_batch, int64_t num_batches);

/// The two AdamW groups of GPT-2 (and of any module, e.g. chapter 15's LLaMA): matrices and
/// embeddings (dim >= 2) with `weight_decay`, biases and norm weights (dim < 2) without, in the
/// order of model.parameters().
std::vector<optim::ParamGroup> param_groups(const nn::Module& model, double weight_decay);

/// Training FLOPs per token (forward + backward) of a model with N parameters at sequence
/// length T, as in llm.c/nanoGPT: \f$ 6N + 12\,L\,C\,T \f$ (the second term: attention
/// scores and weighted sums, 2 matmuls of \f$ 2 T C \f$ each per layer and token, times 3
/// for forward + backward).
double flops_per_token(const GPT2Config& config, int64_t num_parameters, int64_t seq_len);

}  // namespace tt::gpt2

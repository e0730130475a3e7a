/// @file fast_step.h
/// @brief Chapter 09's training step without host synchronizations: the loss, the gradient
/// norm, the clipping and the non-finite check stay on the device, and the host reads them
/// once, at the end of the step.
///
/// What "inside the step" means (what the steady-state test counts, see the chapter README,
/// "A step without waste"): everything train_step_async() does, i.e. zero_grad, for each
/// micro-batch the upload of its tokens, the forward and the backward, then the gradient norm,
/// the clipping and the AdamW update. On CUDA, in a steady state (after two warm-up steps), that
/// makes no cudaMalloc and no host synchronization (tt::cuda::host_sync_count()): the host only
/// queues work. finish_step() then reads the result, which waits for the GPU once (and once
/// more for the index-error record on CUDA). llm.c reads its loss once per step the same way.
///
/// The non-finite policy of chapter 09 (tt/train.h) holds unchanged, decided on the device: the
/// "clip_and_check_" kernel writes a skip flag when the mean loss or the norm is NaN/Inf, the
/// AdamW kernel reads it ("adamw_step_unless") and changes nothing, and finish_step() takes the
/// optimizer's step count back (Optimizer::rewind_step_count) and reports finite = false.
///
/// Index checks: on CUDA the forward and backward run under IndexChecks::kDevice (tt/cuda_ops.h):
/// a token id outside the vocabulary is recorded on the device and finish_step() throws
/// tt::Error for it, instead of the embedding throwing at the call. By then the step has run: a
/// bad target made the loss NaN, so the update was skipped; a bad input id read a zero
/// embedding row, and the update was made. Either way the run should stop there.
/// @code
///   fast::PendingStep pending = fast::train_step_async(model, opt, next_batch, options);
///   // ... the host is free here: e.g. prepare the next batch ...
///   gpt2::TrainStepResult r = fast::finish_step(opt, pending);   // the one read
/// @endcode
#pragma once

#include <cstddef>
#include <functional>
#include <memory>

#include "tt/dataloader.h"
#include "tt/gpt2.h"
#include "tt/optim.h"
#include "tt/train.h"

namespace tt::fast {

/// A step whose results are still on the device.
struct PendingStep {
  /// float64 [3] on the parameters' device: {mean loss, gradient norm before clipping, skip}.
  Tensor status;
  /// Tokens processed (B * T * grad_accum_steps).
  int64_t tokens = 0;
};

/// The step without its update: zero_grad; for each micro-batch the forward and the backward of
/// loss / grad_accum_steps; then the gradient norm, the clipping and the finite check
/// ("sum_of_squares_device", "clip_and_check_"), all on the device. train_step_async is this
/// followed by Optimizer::step_unless; GraphedTrainStep captures exactly this part (exercise
/// ch10.9).
PendingStep forward_backward_async(optim::Optimizer& optimizer,
                                   const std::function<Tensor(const Batch&)>& loss_of,
                                   const std::function<Batch()>& next_batch,
                                   const gpt2::TrainStepOptions& options);

/// gpt2::train_step (the generic one: any model, any device) without reading anything on the
/// host: the same gradients, clipping and update, bit for bit, but the mean loss is accumulated
/// on the device (in float64, as chapter 09 does on the host) and the optimizer steps with
/// Optimizer::step_unless. Throws tt::Error when grad_accum_steps < 1, loss_of returns anything
/// but a one-element tensor, or the gradients are not all on one device.
PendingStep train_step_async(optim::Optimizer& optimizer,
                             const std::function<Tensor(const Batch&)>& loss_of,
                             const std::function<Batch()>& next_batch,
                             const gpt2::TrainStepOptions& options);

/// train_step_async for a GPT-2: loss_of(batch) = model.loss of the batch moved to the model's
/// device (an asynchronous staged copy on CUDA, see tt/cuda_device.h).
PendingStep train_step_async(gpt2::GPT2& model, optim::Optimizer& optimizer,
                             const std::function<Batch()>& next_batch,
                             const gpt2::TrainStepOptions& options);

/// Reads a pending step (the step's one host synchronization; on CUDA one more for
/// cuda::check_index_errors, which throws tt::Error for an out-of-range token id). When the
/// update was skipped (finite = false), takes the optimizer's step count back, so that
/// everything is as chapter 09's train_step leaves it.
gpt2::TrainStepResult finish_step(optim::Optimizer& optimizer, const PendingStep& pending);

/// train_step_async then finish_step: a drop-in for gpt2::train_step.
gpt2::TrainStepResult train_step(gpt2::GPT2& model, optim::Optimizer& optimizer,
                                 const std::function<Batch()>& next_batch,
                                 const gpt2::TrainStepOptions& options);

/// The step of a GPT-2 on a GPU as a CUDA graph (tt::cuda::CudaGraph): forward_backward_async
/// is captured once and then replayed with one launch per step; the optimizer's update runs
/// after the replay, outside the graph (one multi-tensor launch: its learning rate and bias
/// corrections change every step, and a graph would replay the captured ones).
///
/// The graph reads its tokens from fixed device buffers: step() copies each micro-batch into
/// them first (staged, no waiting). The first `warmup` steps run eagerly on the same buffers
/// (they warm the caching allocator and create the cuBLAS handle); the next one captures and
/// replays. Results are bit for bit those of train_step_async. Do not call zero_grad between
/// steps: the gradients are tensors of the graph. Each step's PendingStep is overwritten by the
/// next replay: finish_step it first.
class GraphedTrainStep {
 public:
  /// For `model` on a CUDA device, micro-batches of B x T tokens. Throws tt::Error for a model
  /// not on CUDA (or a build without CUDA).
  GraphedTrainStep(gpt2::GPT2& model, optim::Optimizer& optimizer, int64_t B, int64_t T,
                   const gpt2::TrainStepOptions& options, int warmup = 2);
  ~GraphedTrainStep();
  GraphedTrainStep(const GraphedTrainStep&) = delete;
  GraphedTrainStep& operator=(const GraphedTrainStep&) = delete;

  /// One step on grad_accum_steps batches from next_batch (each [B, T], any device); read the
  /// result with finish_step. Throws tt::Error for a batch of another shape (exercise ch10.10).
  PendingStep step(const std::function<Batch()>& next_batch);
  /// True once the graph is captured.
  bool captured() const;
  /// Nodes of the captured graph (0 before).
  std::size_t graph_nodes() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tt::fast

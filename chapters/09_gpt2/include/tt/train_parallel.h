/// @file train_parallel.h
/// @brief How a training step is spread over processes: the ParallelStrategy interface, its
/// one-process implementation, and a registry of named strategies.
///
/// Chapter 09 trains in one process; chapter 12 (data parallelism) registers "ddp"
/// (DistributedDataParallel: every rank holds the model and the optimizer, gradients are
/// averaged after the step's last micro-batch) and "zero1" (ZeRO-1: AdamW's state sharded over
/// the ranks). train_step() and apps/train_gpt2.cc call a strategy at every point where a
/// multi-process step differs from a one-process one, so the same loop runs both:
///  - make_optimizer(): the ranks start identical (parameters broadcast from rank 0) and the
///    strategy chooses how the optimizer state is held;
///  - zero_grad(): the gradients are cleared before the step (DDP: in its buckets);
///  - backward(loss, last): micro-batches before the last only accumulate gradients locally
///    (no_sync); after the last, gradients are synchronised;
///  - clip_grad_norm(): the norm of the AVERAGED gradient, the same on every rank;
///  - step(): the update (ZeRO-1: each rank updates its shard, then all-gathers);
///  - average(): the logged loss is the mean over the ranks, so every rank agrees on it (and on
///    whether it is finite);
///  - save_checkpoint()/load_checkpoint(): one file in the one-process format, written by rank
///    0 (ZeRO-1 first gathers the shards of the moments), read by every rank.
/// Every rank must make the same calls in the same order (they are collectives).
/// @code
///   auto strategy = tt::gpt2::make_parallel_strategy("ddp");   // chapter 12 linked in
///   auto opt = strategy->make_optimizer(model, param_groups(model, 0.1), adamw_options);
///   TrainStepOptions so;  so.parallel = strategy.get();
///   train_step(model, *opt, next_batch, so);
/// @endcode
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tt/dispatcher.h"  // TT_CONCAT
#include "tt/gpt2_ops.h"    // AdamWFactory
#include "tt/module.h"
#include "tt/optim.h"

namespace tt::gpt2 {

class GPT2;
class StepRunner;
struct TrainStepOptions;

/// The pipeline of a run (train_gpt2 --pp, --micro-batches, --schedule, --chunks; chapter 14):
/// the layer stack cut into `stages` stages, each batch of B rows cut into `micro_batches`
/// micro-batches of B / micro_batches rows that stream through them in `schedule`'s order.
struct PipelineSpec {
  int stages = 1;                 ///< p: ranks of one pipeline (--pp)
  int micro_batches = 1;          ///< micro-batches per batch of B rows (--micro-batches)
  std::string schedule = "1f1b";  ///< "afab", "1f1b" or "interleaved" (--schedule)
  int chunks = 1;                 ///< v: model chunks per rank, interleaved only (--chunks)
  /// How the blocks are weighed before the cut (--pp-partition): "flops" or "measured" (timed
  /// on micro-batches of micro_batch_rows x seq_len tokens).
  std::string partition = "flops";
  int64_t micro_batch_rows = 1;  ///< rows of one micro-batch (--B / --micro-batches)
  int64_t seq_len = 1;           ///< tokens per row (--T)
};

/// The parts of training that depend on how many processes share it. The base class is the
/// one-process behaviour ("single"); multi-process strategies override what they change.
class ParallelStrategy {
 public:
  ParallelStrategy() = default;
  virtual ~ParallelStrategy() = default;
  ParallelStrategy(const ParallelStrategy&) = delete;
  ParallelStrategy& operator=(const ParallelStrategy&) = delete;

  /// "single", "ddp", "zero1", ...
  virtual std::string name() const { return "single"; }
  /// This process's rank, 0..world_size()-1.
  virtual int rank() const { return 0; }
  /// Number of processes.
  virtual int world_size() const { return 1; }
  /// This process's rank among the processes of its machine: the GPU it uses is
  /// cuda:local_rank() (one GPU per rank).
  virtual int local_rank() const { return 0; }
  /// True on the one rank that prints, writes logs, samples and checkpoints (rank 0).
  bool is_logging_rank() const { return rank() == 0; }
  /// The data-parallel replica this rank belongs to, 0..data_world_size()-1: which rows of every
  /// global batch it reads. The ranks that split one model between them (chapter 13's tensor
  /// parallelism) read the same rows. Default: rank().
  virtual int data_rank() const { return rank(); }
  /// Number of data-parallel replicas: the global batch is data_world_size() times the rows of
  /// one rank. Default: world_size().
  virtual int data_world_size() const { return world_size(); }
  /// True when the ranks split each model between them (data_world_size() < world_size()):
  /// no rank holds the whole model, so nothing whole-model runs on one rank alone (sampling, the
  /// llm.c export).
  bool splits_model() const { return data_world_size() != world_size(); }

  /// Told first, before any other setting, the type of device every rank trains on
  /// (train_gpt2 --device). A strategy whose process groups carry CUDA tensors may connect the
  /// GPUs here (chapters 13, 14, 16: the world's NCCL communicator, so that the grid's groups
  /// are ncclCommSplit of it; a collective). Default: nothing.
  virtual void set_device_type(DeviceType type) { (void)type; }
  /// Asks the strategy to split every model over `tp` ranks (tensor parallelism), with
  /// sequence parallelism when `sequence_parallel` (train_gpt2 --tp, --sequence-parallel).
  /// Default: accepts tp = 1 without sequence parallelism only, else throws tt::Error naming
  /// the strategy (chapter 13 registers "tp", which splits).
  virtual void set_model_parallelism(int tp, bool sequence_parallel);
  /// Asks the strategy to split every sequence over `cp` ranks (context parallelism, train_gpt2
  /// --cp). Default: accepts cp = 1 only, else throws tt::Error naming the strategy (chapter 16
  /// registers "cp", which splits).
  virtual void set_context_parallelism(int cp);
  /// Asks the strategy to run every model as the pipeline `spec` (train_gpt2 --pp), after
  /// set_model_parallelism. Default: accepts one stage and one micro-batch only, else throws
  /// tt::Error naming the strategy (chapter 14 registers "pp", which pipelines).
  virtual void set_pipeline(const PipelineSpec& spec);
  /// Called once by the model family right after the model is built (on the CPU, before it
  /// moves to its device and gets its operations): a strategy that splits models replaces the
  /// parameters by this rank's parts here (a collective). Default: nothing.
  virtual void prepare_model(nn::Module& model) { (void)model; }
  /// The operations the model runs with, given those the run chose (`ops`): a strategy that
  /// splits models wraps them with its communication. Default: `ops`.
  virtual ModelOps model_ops(ModelOps ops) const { return ops; }

  /// The optimizer of `model` for `groups` (AdamW with `options`), built once before training.
  /// Multi-process strategies first make every rank's parameters and buffers equal to rank 0's.
  /// Default: adamw(groups, options), an optim::AdamW when `adamw` is empty (an operation set's
  /// own AdamW, gpt2::ModelOps::adamw, goes there).
  virtual std::unique_ptr<optim::Optimizer> make_optimizer(nn::Module& model,
                                                           std::vector<optim::ParamGroup> groups,
                                                           const optim::AdamWOptions& options,
                                                           const AdamWFactory& adamw = {});
  /// The step of the run when the strategy runs it itself (a pipeline: the micro-batches go
  /// through the stages of several ranks, so no rank can run gpt2::train_step alone), made once
  /// after make_optimizer for micro-batches of B x T tokens; null (the default): train_step.
  virtual std::unique_ptr<StepRunner> make_step_runner(GPT2& model, optim::Optimizer& optimizer,
                                                       int64_t B, int64_t T,
                                                       const TrainStepOptions& options);
  /// Clears the gradients before a step's first backward. Default: optimizer.zero_grad()
  /// (set to none). Chapter 12's DDP zeroes its gradient buckets in place instead, so that
  /// backward writes the gradients where the all-reduce reads them.
  virtual void zero_grad(optim::Optimizer& optimizer);
  /// Backpropagates one micro-batch's (already scaled) loss into the gradients. `last` is true
  /// for the last micro-batch of a step: only then are gradients synchronised over the ranks
  /// (the ones before accumulate locally). Default: autograd::backward(loss).
  virtual void backward(const Tensor& loss, bool last);
  /// After the last backward: the global L2 norm of the gradient the update will use (the
  /// average over the ranks), and that gradient scaled by max_norm / (norm + 1e-6) when this is
  /// below 1 (max_norm may be +inf: no clipping). Default: optim::clip_grad_norm_ over the
  /// optimizer's parameters.
  virtual double clip_grad_norm(optim::Optimizer& optimizer, double max_norm);
  /// The update. Default: optimizer.step().
  virtual void step(optim::Optimizer& optimizer);
  /// The mean of `value` over the ranks. Default: `value`.
  virtual double average(double value) { return value; }
  /// The maximum of `value` over the ranks. Default: `value`.
  virtual double maximum(double value) { return value; }
  /// Writes the model and the complete optimizer state to `path` in chapter 05's checkpoint
  /// format (ckpt::save_checkpoint), from rank 0 only; returns when the file is complete.
  virtual void save_checkpoint(const std::string& path, const nn::Module& model,
                               optim::Optimizer& optimizer);
  /// Entries every save_checkpoint writes with the state, under "meta." (ckpt::save_checkpoint):
  /// the training library (tt/trainer.h) puts the run's configuration there. Empty by default.
  void set_checkpoint_metadata(nn::StateDict metadata) { metadata_ = std::move(metadata); }
  /// The entries set with set_checkpoint_metadata.
  const nn::StateDict& checkpoint_metadata() const { return metadata_; }
  /// Reads a checkpoint written by save_checkpoint (by any strategy with the same parameters)
  /// into the model and this rank's optimizer state.
  virtual void load_checkpoint(const std::string& path, nn::Module& model,
                               optim::Optimizer& optimizer);
  /// Bytes of optimizer state (moments) this rank holds.
  virtual int64_t optimizer_state_bytes(const optim::Optimizer& optimizer) const;
  /// Ends the strategy's use of its processes (chapter 12: MPI_Finalize). Call it once on every
  /// rank at the normal end of a run, never on an error path (a rank that leaves with an error
  /// makes the launcher end the others).
  virtual void finish() {}

 private:
  nn::StateDict metadata_;
};

/// The one-process strategy (a shared instance of the base class).
ParallelStrategy& single_process();

/// Registers a strategy factory under `name`. Throws tt::Error when `name` is empty or taken.
/// Use TT_REGISTER_PARALLEL_STRATEGY at namespace scope.
bool register_parallel_strategy(const std::string& name,
                                std::function<std::unique_ptr<ParallelStrategy>()> factory);
/// A new strategy `name` ("single" is always registered). Throws tt::Error naming the
/// registered strategies when there is none called `name` (e.g. chapter 12 is not linked in).
std::unique_ptr<ParallelStrategy> make_parallel_strategy(const std::string& name);
/// Names of the registered strategies, sorted.
std::vector<std::string> parallel_strategy_names();

}  // namespace tt::gpt2

/// Registers a ParallelStrategy factory under `name` at static-initialization time (chapter
/// libraries are linked whole-archive, so the registration is kept).
#define TT_REGISTER_PARALLEL_STRATEGY(name, factory)                        \
  static const bool TT_CONCAT(tt_parallel_strategy_registered_, __LINE__) = \
      ::tt::gpt2::register_parallel_strategy(name, factory)

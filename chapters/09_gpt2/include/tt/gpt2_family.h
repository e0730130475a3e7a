/// @file gpt2_family.h
/// @brief GPT-2's part of a training run (the model family that train_gpt2 trains with the
/// training library of tt/trainer.h): the configuration -> the model, the choice of its
/// operation set, the optimizer and the step, its samples, and the train::TrainerParts that
/// hand them to the Trainer. A second model family supplies the same pieces in its own file.
/// @code
///   tt::train::TrainData data(config, *strategy);
///   tt::gpt2::Gpt2Family gpt2(config, device, *strategy, data);   // may set config.precision
///   tt::train::Trainer trainer(config, dir, gpt2.parts());
///   trainer.resume();
///   gpt2.print_plan();                                             // model, data, batch, ops
///   gpt2.prepare_step();                                           // --cuda-graph
///   trainer.run();
/// @endcode
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tt/gpt2.h"
#include "tt/gpt2_ops.h"
#include "tt/optim.h"
#include "tt/tokenizer.h"
#include "tt/train.h"
#include "tt/train_config.h"
#include "tt/train_parallel.h"
#include "tt/train_setup.h"
#include "tt/trainer.h"

namespace tt::gpt2 {

/// The operation set of a run and the log line that says which ("ops: ...").
struct OpsChoice {
  ModelOps ops;      ///< the model's operations (and its AdamW, for bf16)
  std::string line;  ///< "ops: attention flash, fused on (...)", with why when not the default
};

/// The operations of a run on `device`: chapter 11's "bf16" (or "bf16_recompute") set for
/// --precision bf16; otherwise (--attention, --fused) over chapter 09's "reference" set and
/// chapter 10's "fast" set. Without --precision (config.precision empty) it decides it first and
/// writes it into `config`: bf16 on a GPU where the set runs (a tiny probe step says so) unless
/// --attention or --fused choose among the float32 sets, else fp32 (the line says why). "auto"
/// picks chapter 10's operations on CUDA only. Throws tt::Error when an explicit choice cannot
/// run (not linked in, not implemented yet, or failing on `device`), saying why.
OpsChoice choose_ops(train::TrainConfig& config, Device device);

/// The text of `ids` from index `skip` on one line: newlines shown as " / ", tabs as spaces,
/// the end-of-text token (between documents) as " | ".
std::string sample_text(const Tokenizer& tokenizer, const std::vector<int64_t>& ids,
                        std::size_t skip);

/// Throws tt::Error unless --cuda-graph can run: a CUDA device, one process with the "single"
/// strategy and chapter 10's graphed step linked in. Does nothing without --cuda-graph.
void check_cuda_graph(const train::TrainConfig& config, Device device,
                      const ParallelStrategy& parallel);

/// GPT-2's pieces of one run on one rank: the model (new from the flags, or --init-llmc) on
/// `device` with its operation set, the optimizer (made by the strategy), the learning-rate
/// schedule, the step (train_step, or chapter 10's graphed step with --cuda-graph), the
/// evaluation on the validation loader, the samples and the MFU figures.
class Gpt2Family {
 public:
  /// Builds every piece for `config` (choose_ops may set config.precision) over `data`'s
  /// tokenizer and loaders, which it keeps by reference with `parallel`. Throws tt::Error
  /// (a model file of another vocabulary, T beyond the block size, a missing profiler, ...).
  Gpt2Family(train::TrainConfig& config, Device device, ParallelStrategy& parallel,
             train::TrainData& data);
  Gpt2Family(const Gpt2Family&) = delete;
  Gpt2Family& operator=(const Gpt2Family&) = delete;

  /// The parts of the Trainer (they refer to this object: keep it alive while training).
  train::TrainerParts parts();
  /// Prints the plan: "model: GPT-2 ...", train::print_plan's lines and the "ops:" line.
  void print_plan() const;
  /// With --cuda-graph, makes the graphed step (after a --resume load: it captures the state);
  /// prints "step: ..." when the steps are not gpt2::train_step's (the graphed step, or the
  /// strategy's own, e.g. chapter 14's pipeline).
  void prepare_step();
  /// The model.
  GPT2& model() { return *model_; }

 private:
  train::TrainConfig& config_;
  Device device_;
  ParallelStrategy& parallel_;
  train::TrainData& data_;
  std::unique_ptr<GPT2> model_;
  int64_t num_parameters_ = 0;  // of the whole model (a split one holds a part on each rank)
  std::string ops_line_;
  std::unique_ptr<StepProfiler> profiler_;
  std::unique_ptr<optim::Optimizer> optimizer_;
  std::unique_ptr<optim::WarmupCosineLR> schedule_;
  TrainStepOptions step_options_;
  std::unique_ptr<StepRunner> runner_;  // --cuda-graph, or the strategy's (--pp)
};

}  // namespace tt::gpt2

/// @file llama_family.h
/// @brief LLaMA's part of a training run with chapter 09's training library (tt/trainer.h):
/// the model from the flags, AdamW through the run's ParallelStrategy (one process, DDP or
/// ZeRO-1 under mpirun), the step (train::train_step on Llama::loss), the evaluation and the
/// samples (KV-cache generation). train_llama is its thin app, as train_gpt2 is
/// Gpt2Family's.
/// @code
///   tt::train::TrainData data(config, *strategy);
///   tt::llama::LlamaFamily family(config, device, *strategy, data);
///   tt::train::Trainer trainer(config, dir, family.parts());
///   trainer.resume();
///   family.print_plan();
///   trainer.run();
/// @endcode
/// Precision: float32 (tf32 GEMMs on CUDA with --precision tf32) unless --precision bf16 is
/// given (it is never the default here): then chapter 11's mixed precision
/// (Llama::set_mixed_precision, a MasterWeightAdamW), on the CPU (emulated) and on CUDA.
/// --recompute, --cuda-graph, --init-llmc, --attention and --fused (GPT-2's operation sets) are
/// refused with a message. Parallel strategies: those whose ranks each hold the whole model
/// (ParallelStrategy::splits_model() false: one process, DDP and ZeRO-1 of chapter 12), and
/// those registered with register_llama_strategy_loss (chapter 16's "cp", train_llama --cp N:
/// every sequence split over N ranks, ring attention); the others (--tp, --pp) are refused by
/// name.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "tt/gpt2_family.h"
#include "tt/llama.h"

namespace tt::llama {

/// A LLaMA's loss on one rank: (model, idx [B, T], targets [B, T]) -> the loss this rank
/// backpropagates (Llama::loss in one process and under DDP or ZeRO-1).
using LlamaLoss = std::function<Tensor(Llama& model, const Tensor& idx, const Tensor& targets)>;
/// How a parallel strategy that splits sequences computes that loss: given the strategy (set
/// up: its process groups exist), the loss function of this rank.
using StrategyLlamaLoss = std::function<LlamaLoss(gpt2::ParallelStrategy& strategy)>;

/// Registers `loss` as the LLaMA loss of the parallel strategy called `name` (chapter 16 registers
/// "cp" at static-initialization time; chapter 15 comes before it and cannot call it). Returns
/// true. Throws tt::Error when `loss` is empty or `name` has one already.
bool register_llama_strategy_loss(const std::string& name, StrategyLlamaLoss loss);

/// LLaMA's pieces of one run on one rank (see the file comment).
class LlamaFamily {
 public:
  /// A Llama of --layers, --heads, --channels (C), --n-kv-head (0: = --heads), F the multiple
  /// of 32 nearest 8C/3, V the tokenizer's, max_seq_len --block-size, on `device`, seeded with
  /// --seed; the optimizer from `parallel`; the schedule. Throws tt::Error for an option or a
  /// parallel strategy this family does not support yet (naming it) or an invalid shape.
  LlamaFamily(train::TrainConfig& config, Device device, gpt2::ParallelStrategy& parallel,
              train::TrainData& data);
  LlamaFamily(const LlamaFamily&) = delete;
  LlamaFamily& operator=(const LlamaFamily&) = delete;
  /// The parts of the Trainer (they refer to this object: keep it alive while training).
  train::TrainerParts parts();
  /// Prints "model: LLaMA ..." and train::print_plan's lines.
  void print_plan() const;
  /// The model.
  Llama& model() { return *model_; }

 private:
  train::TrainConfig& config_;
  Device device_;
  gpt2::ParallelStrategy& parallel_;
  train::TrainData& data_;
  std::unique_ptr<Llama> model_;
  std::unique_ptr<optim::Optimizer> optimizer_;
  std::unique_ptr<optim::WarmupCosineLR> schedule_;
  gpt2::TrainStepOptions step_options_;
  LlamaLoss
      loss_;  // this rank's loss: Llama::loss, or the strategy's (register_llama_strategy_loss)
};

}  // namespace tt::llama

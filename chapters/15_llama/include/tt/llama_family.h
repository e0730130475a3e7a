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
/// refused with a message.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "tt/gpt2_family.h"
#include "tt/llama.h"

namespace tt::llama {

/// LLaMA's pieces of one run on one rank (see the file comment).
class LlamaFamily {
 public:
  /// A Llama of --layers, --heads, --channels (C), --n-kv-head (0: = --heads), F the multiple
  /// of 32 nearest 8C/3, V the tokenizer's, max_seq_len --block-size, on `device`, seeded with
  /// --seed; the optimizer from `parallel`; the schedule. Throws tt::Error for an option this
  /// family does not support yet (naming it) or an invalid shape.
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
};

}  // namespace tt::llama

/// @file gpt2_ops.h
/// @brief The replaceable operations of a GPT-2 forward pass, and a registry of named sets of
/// them: chapter 09 registers "reference" (its own compositions of chapter 04/05 ops), chapter
/// 10 registers faster ones (FlashAttention, the fused classifier, cuBLASLt epilogues, fused
/// residual + LayerNorm) that the same model then uses unchanged.
///
/// Every operation is differentiable (autograd) and must equal the reference composition up to
/// floating-point rounding, in values and in gradients. An empty std::function means "use the
/// reference composition" for that operation, so a set may replace only some of them.
/// @code
///   auto model = tt::gpt2::GPT2(config);
///   model.set_ops(tt::gpt2::model_ops("fast"));   // chapter 10 linked in
/// @endcode
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tt/layers.h"
#include "tt/optim.h"
#include "tt/tensor.h"

namespace tt::gpt2 {

/// Makes the AdamW of a training run from its parameter groups and options: optim::AdamW, or an
/// operation set's own (chapter 11's MasterWeightAdamW, tt/master_weights.h).
using AdamWFactory = std::function<std::unique_ptr<optim::Optimizer>(
    std::vector<optim::ParamGroup> groups, const optim::AdamWOptions& options)>;

/// The operations a GPT-2 forward pass may delegate. Shapes: B batch, T time, C channels.
struct ModelOps {
  /// Causal self-attention before the output projection: qkv [B, T, 3C] (q | k | v) with
  /// n_head heads -> y [B, T, C]. Reference: causal_self_attention (exercise ch09.1).
  std::function<Tensor(const Tensor& qkv, int64_t n_head)> attention;

  /// y = x W^T + b of `layer` for x [..., in]. Reference: layer.forward(x).
  std::function<Tensor(const Tensor& x, nn::Linear& layer)> linear;

  /// y = gelu(x W^T + b) of `layer` (the MLP's first half). Reference: gelu(layer.forward(x)).
  std::function<Tensor(const Tensor& x, nn::Linear& layer)> linear_gelu;

  /// The residual update followed by the next LayerNorm: returns {r, ln(r)} with
  /// r = residual + delta (all [B, T, C]). Reference: add, then ln.forward.
  std::function<std::pair<Tensor, Tensor>(const Tensor& residual, const Tensor& delta,
                                          nn::LayerNorm& ln)>
      residual_layernorm;

  /// Mean cross-entropy of the tied language-model head: logits = x wte[0..V)^T for x [B, T, C]
  /// and wte [Vp, C] (Vp >= V rows, rows >= V never predicted), against int64 targets [B, T];
  /// returns a 0-d tensor. Reference: matmul then cross_entropy.
  std::function<Tensor(const Tensor& x, const Tensor& wte, int64_t vocab_size,
                       const Tensor& targets)>
      classifier_loss;

  /// The input of the blocks: token plus position embeddings of int64 idx [B, T] -> [B, T, C].
  /// Empty: add(wte.forward(idx), wpe.forward(arange(T))). A layout hook rather than a faster
  /// operation: chapter 13's tensor parallelism looks the tokens up in its part of the
  /// vocabulary and sums over the group (and, with sequence parallelism, returns only this
  /// rank's tokens [B, T/tp, C]). Not listed by reference_members().
  std::function<Tensor(const Tensor& idx, nn::Embedding& wte, nn::Embedding& wpe)> embed;

  /// Activation recomputation (chapter 11): runs `segment` (a part of the forward pass; the
  /// model passes each block's MLP, ln -> c_proj(gelu(c_fc(ln)))) on x, keeping for backward only
  /// x instead of the segment's intermediate tensors, and running the segment again in backward.
  /// Values and gradients equal segment(x)'s. Empty: segment(x), everything kept. Not an
  /// operation with a reference composition: reference_members() does not list it.
  std::function<Tensor(const std::function<Tensor(const Tensor&)>& segment, const Tensor& x)>
      recompute;

  /// The AdamW the set's operations are made for (chapter 11's "bf16": MasterWeightAdamW, whose
  /// step also writes the bfloat16 copies of the weights that its linear layers read). Empty:
  /// optim::AdamW. Not an operation: reference_members() does not list it.
  AdamWFactory adamw;

  /// A short description for logs, e.g. "flash attention, fused classifier".
  std::string description;
};

/// Registers the set `name`, built on demand by `factory`. Throws tt::Error when `name` is empty
/// or already registered. Use TT_REGISTER_MODEL_OPS at namespace scope.
bool register_model_ops(const std::string& name, std::function<ModelOps()> factory);

/// The registered set `name`, built by its factory. Throws tt::Error naming the registered sets
/// when there is none called `name`.
ModelOps model_ops(const std::string& name);

/// True when a set called `name` is registered.
bool has_model_ops(const std::string& name);

/// Names of the registered sets, sorted ("reference" always among them).
std::vector<std::string> model_ops_names();

/// Names of the members of `ops` left empty (those that use the reference composition), in
/// declaration order: "attention", "linear", "linear_gelu", "residual_layernorm",
/// "classifier_loss".
std::vector<std::string> reference_members(const ModelOps& ops);

/// Checks that every operation of `ops` runs on `device`: one forward and backward of a tiny
/// GPT-2 (L=1, NH=2, C=64, T=5) through them, then one step of the set's AdamW (ops.adamw). Returns "" when they do, or the message of the
/// tt::NotImplemented one of them threw (a TODO exercise of a later chapter, in a learner
/// build); other errors propagate. train_gpt2 uses it to fall back to the reference set.
std::string model_ops_not_implemented(const ModelOps& ops, Device device);

/// Watches one training step; a later chapter provides it (chapter 10: the per-op profiler),
/// train_gpt2 --profile-step N uses it.
class StepProfiler {
 public:
  virtual ~StepProfiler() = default;
  /// Called right before the step.
  virtual void begin() = 0;
  /// Called right after the step; returns the report to print.
  virtual std::string end() = 0;
};

/// Registers the factory of step profilers (at most one; a second throws tt::Error). Returns
/// true, for use in a static initializer. The factory's second argument says whether the step
/// runs in bf16 mixed precision (its report then reads compute-bound ops against the bf16 peak).
bool register_step_profiler(std::function<std::unique_ptr<StepProfiler>(Device, bool)> factory);

/// A step profiler for `device` (`bf16`: the step runs in bf16 mixed precision), or null when no
/// chapter linked in registers one.
std::unique_ptr<StepProfiler> make_step_profiler(Device device, bool bf16 = false);

/// Chapter 09's set, registered as "reference": every operation empty (the model's own
/// compositions), description "reference (chapter 09 compositions)". A model starts with it.
ModelOps reference_model_ops();

}  // namespace tt::gpt2

/// Pastes two tokens (helper of TT_MODEL_OPS_CONCAT).
#define TT_MODEL_OPS_CONCAT_INNER(a, b) a##b
/// Pastes two tokens after expanding them (e.g. __LINE__), for TT_REGISTER_MODEL_OPS.
#define TT_MODEL_OPS_CONCAT(a, b) TT_MODEL_OPS_CONCAT_INNER(a, b)
/// Registers a ModelOps factory under `name` at static-initialization time (the chapter
/// libraries are linked whole-archive, so the registration is never dropped by the linker).
#define TT_REGISTER_MODEL_OPS(name, factory)                                  \
  static const bool TT_MODEL_OPS_CONCAT(tt_model_ops_registered_, __LINE__) = \
      ::tt::gpt2::register_model_ops(name, factory)

/// @file master_weights.h
/// @brief Master weights: AdamW updates the float32 parameters (the masters) and, in the same
/// pass, writes the bfloat16 copies that the bf16 linear layers multiply with.
///
/// Why keep float32 masters: a bfloat16 has 8 significant bits, so near 1.0 its spacing is
/// \f$ 2^{-7} \f$ above and \f$ 2^{-8} \f$ below. An AdamW step moves a weight by about the
/// learning rate (3e-4 to 6e-4 for GPT-2): stored in bfloat16, such a weight would round back to
/// where it was, step after step, and stop learning. The update therefore runs on float32
/// masters (and float32 moments), and only its result is rounded, once, for the forward pass.
///
/// Why write copies in the update: the forward pass needs bfloat16 weights; casting every
/// master on use costs a read of 4 bytes and a write of 2 per weight, per forward, in one more
/// launch per layer. The update already reads and writes each master: writing the rounded value
/// too costs 2 bytes more and no launch (llm.c's AdamW kernel does the same).
///
/// | kernel name | signature | CPU | CUDA |
/// |---|---|---|---|
/// | "adamw_step_bf16" | AdamWStepBf16Kernel | cpu::adamw_step_bf16 (exercise ch11.5: cpu::adamw_master_update) | cuda::adamw_step_bf16 (chapter 07's AdamW kernel with a fifth list) |
///
/// The copies are kept by a MasterWeightAdamW and found by bf16_weight(), which chapter 11's
/// linear layers call instead of casting. A copy exists only for a parameter that bf16_weight()
/// was asked for (the first forward casts it and asks; the next step writes its copy; the
/// embeddings and LayerNorm parameters, read in float32, get none), and is used only while it is
/// *current*: written by the optimizer's last step (or a skipped step_unless) from the master as
/// it is now. Code that
/// writes a master itself after a step (loading weights into a model whose optimizer has
/// stepped) must call MasterWeightAdamW::invalidate_copies(); the layers then cast again until
/// the next step.
#pragma once

#include <memory>
#include <unordered_map>
#include <vector>

#include "tt/optim.h"
#include "tt/tensor.h"

namespace tt {

/// Signature of "adamw_step_bf16": chapter 05's "adamw_step" on params (the float32 masters),
/// grads, exp_avgs and exp_avg_sqs (float32, contiguous, one numel per j), then copies[j] (a
/// contiguous bfloat16 tensor of params[j]'s numel) = params[j] rounded to nearest even. With a
/// defined `skip` (a 0-d float64 tensor on the device, read by the kernel, as
/// "adamw_step_unless"): where it is non-zero the masters and moments do not change, and the
/// copies are still written from them.
using AdamWStepBf16Kernel = void(const std::vector<Tensor>& params,
                                 const std::vector<Tensor>& grads,
                                 const std::vector<Tensor>& exp_avgs,
                                 const std::vector<Tensor>& exp_avg_sqs,
                                 const std::vector<Tensor>& copies,
                                 const optim::AdamWStepArgs& args, const Tensor& skip);

/// torch.optim.AdamW on float32 master parameters that also keeps a bfloat16 copy of those the
/// layers read through bf16_weight(), written by every step through the kernel "adamw_step_bf16"
/// (the same pass as their update; the other parameters go through "adamw_step"). Same
/// state, state_dict and checkpoints as optim::AdamW (the copies are derived, never saved), and
/// the same masters bit for bit. While it lives, bf16_weight() returns its current copies.
class MasterWeightAdamW final : public optim::AdamW {
 public:
  /// AdamW over `groups` (float32 parameters) with `options`; registers every parameter for
  /// bf16_weight() (no copy is current before the first step). Throws tt::Error when a parameter
  /// is not float32, or already has copies kept by another live MasterWeightAdamW.
  MasterWeightAdamW(std::vector<optim::ParamGroup> groups, optim::AdamWOptions options);
  /// One group of `params` with options.weight_decay (as optim::AdamW's).
  MasterWeightAdamW(std::vector<Tensor> params, optim::AdamWOptions options);
  /// Unregisters the parameters: bf16_weight() casts them again.
  ~MasterWeightAdamW() override;

  /// The bfloat16 copy of `param` when it is current (see the file comment), else an undefined
  /// tensor. Throws tt::Error when `param` is not one of this optimizer's parameters.
  Tensor copy_of(const Tensor& param) const;
  /// Marks every copy stale: call after writing master weights outside step() (e.g. loading a
  /// checkpoint into the model after training began). The next step makes them current again.
  void invalidate_copies();

  /// The registry entry of one parameter (defined in master_weights.cc).
  struct Entry;

 protected:
  /// Calls "adamw_step_bf16" for the parameters with a copy (with skip() inside step_unless),
  /// then marks their copies current; optim::AdamW's update for the others.
  void update(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
              const std::vector<std::vector<Tensor>>& state, double weight_decay,
              int64_t step) override;

 private:
  /// The entry of `param`, or nullptr when it is not one of this optimizer's parameters.
  Entry* find(const Tensor& param) const;

  std::vector<std::shared_ptr<Entry>> entries_;          // one per parameter, in the groups' order
  std::unordered_map<const TensorImpl*, Entry*> index_;  // parameter -> its entry
};

/// The bfloat16 weight a GEMM multiplies with for the float32 master `w`: the current copy of a
/// live MasterWeightAdamW when `w` is one of its parameters (no work), otherwise w converted to
/// bfloat16 (a new tensor, the "cast" kernel); in that case a MasterWeightAdamW that has `w`
/// keeps a copy of it from its next step on.
Tensor bf16_weight(const Tensor& w);

/// A GPT-2 operation set's AdamW factory (gpt2::ModelOps::adamw) making a MasterWeightAdamW.
std::unique_ptr<optim::Optimizer> make_master_weight_adamw(std::vector<optim::ParamGroup> groups,
                                                           const optim::AdamWOptions& options);

namespace cpu {
/// Exercise ch11.5, the master-weight AdamW update on the CPU: the float32 masters `params` and
/// their moments updated exactly as chapter 05's CPU "adamw_step" does (its skipping variant
/// "adamw_step_unless" when `skip` is defined), then every copies[j] = params[j] rounded to the
/// nearest bfloat16, ties to even (float_to_bfloat16_rne), also after a skipped step. The lists
/// are checked by the caller (cpu::adamw_step_bf16).
void adamw_master_update(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                         const std::vector<Tensor>& exp_avgs,
                         const std::vector<Tensor>& exp_avg_sqs, const std::vector<Tensor>& copies,
                         const optim::AdamWStepArgs& args, const Tensor& skip);

/// CPU kernel "adamw_step_bf16": checks that there is one contiguous bfloat16 copy of each
/// parameter's numel on the CPU (tt::Error naming the copy otherwise), then adamw_master_update.
void adamw_step_bf16(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                     const std::vector<Tensor>& exp_avgs, const std::vector<Tensor>& exp_avg_sqs,
                     const std::vector<Tensor>& copies, const optim::AdamWStepArgs& args,
                     const Tensor& skip);
}  // namespace cpu

namespace cuda {
/// CUDA kernel "adamw_step_bf16" (CUDA builds only): the same checks of the copies, then chapter
/// 07's cuda::adamw_step_with_copies (tt/fused_optim.h): the multi-tensor AdamW launch with the
/// copies as a fifth, bfloat16 list, written in the same pass as the update (float4 loads and
/// 8-byte copy stores when aligned). It lives in chapter 07's source because its device code
/// calls adamw_update (exercise ch07.5), and device functions are not linked across files here.
void adamw_step_bf16(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                     const std::vector<Tensor>& exp_avgs, const std::vector<Tensor>& exp_avg_sqs,
                     const std::vector<Tensor>& copies, const optim::AdamWStepArgs& args,
                     const Tensor& skip);
}  // namespace cuda

}  // namespace tt

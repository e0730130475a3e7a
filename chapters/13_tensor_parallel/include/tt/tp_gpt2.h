/// @file tp_gpt2.h
/// @brief Chapter 09's GPT-2 split over a tensor-parallel group, in place: attention by heads,
/// the MLP, the vocabulary (embedding and head) and optionally the sequence (chapter 13).
///
/// TensorParallelGPT2 takes a whole gpt2::GPT2 (every rank builds the same one from the same
/// seed), replaces each split parameter by this rank's part of it, and gives the model an
/// operation set (gpt2::ModelOps) that puts the communication around chapter 09's own
/// computation. The model's forward code is unchanged: its blocks run GPT2's own loop, the
/// attention is causal_self_attention on the rank's heads, the LayerNorms are the model's.
///
/// | parameter | split | this rank holds |
/// |---|---|---|
/// | wte.weight [Vp, C] | rows (vocabulary) | [Vp/tp, C] |
/// | h.l.attn.c_attn [3C, C], bias [3C] | rows, q, k and v each (heads) | [3C/tp, C]: q_r, k_r, v_r |
/// | h.l.attn.c_proj [C, C] | columns | [C, C/tp]; the bias whole |
/// | h.l.mlp.c_fc [4C, C], bias [4C] | rows | [4C/tp, C] |
/// | h.l.mlp.c_proj [C, 4C] | columns | [C, 4C/tp]; the bias whole |
/// | wpe, ln_1, ln_2, ln_f | replicated | the whole tensor |
///
/// Communication per block: two all-reduces forward (after attention and after the MLP, g) and
/// two backward (before them, f); with sequence parallelism each becomes a reduce-scatter and an
/// all-gather. The embedding ends with one more reduction, the loss reduces three numbers per
/// row (tt/vocab_parallel.h).
/// @code
///   auto model = std::make_shared<tt::gpt2::GPT2>(config, seed);  // the same on every rank
///   tt::tp::ProcessGrid grid = tt::tp::ProcessGrid::dp_tp(tt::dist::world(), 2);
///   tt::tp::TensorParallelGPT2 tp(*model, grid.group("tp"), {.sequence_parallel = true});
///   tt::Tensor loss = model->loss(idx, targets);   // the same loss on every rank
///   tt::autograd::backward(loss);
///   tp.finish_backward();                          // sequence parallel: replicated grads
/// @endcode
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "tt/ddp.h"
#include "tt/dist.h"
#include "tt/gpt2.h"
#include "tt/gpt2_ops.h"
#include "tt/module.h"
#include "tt/optim.h"
#include "tt/tensor.h"
#include "tt/vocab_parallel.h"

namespace tt::tp {

/// How a model is split.
struct TpOptions {
  bool sequence_parallel = false;  ///< shard LayerNorm and residual regions along the sequence
  /// With sequence_parallel: give each rank B/tp whole sequences when tp divides the batch
  /// (the token dim 0 of tt/sequence_parallel.h: no permute around the collectives), else T/tp
  /// tokens of every sequence. False: always T/tp tokens of every sequence.
  bool shard_whole_sequences = true;
  /// With sequence_parallel, under chapter 11's bf16 linear layers: each column-parallel layer
  /// keeps only this rank's tokens of its gathered input for backward and all-gathers them again
  /// for its weight gradient (Megatron-LM's choice: one more all-gather per layer in backward,
  /// 1/tp of the activation memory that input held). Other operation sets keep the input.
  /// train_gpt2: on (TT_TP_SP_REGATHER=0: off).
  bool regather_in_backward = true;
  /// Start f's backward all-reduce inside each column-parallel layer's backward, right after its
  /// dx GEMM, so that it overlaps the layer's weight-gradient GEMM (chapter 11's bf16 layers
  /// call the hook; others keep f's plain all-reduce). Not with sequence_parallel (ignored).
  /// train_gpt2 turns it on (TT_TP_EARLY_GRAD_REDUCE=0: off).
  bool early_grad_reduce = false;
};

/// How one parameter of a GPT-2 is split over the tensor-parallel group.
enum class Split {
  kReplicated,  ///< every rank holds the whole tensor
  kRows,        ///< dim 0 split in tp equal parts (column-parallel weight and bias, wte)
  kColumns,     ///< dim 1 split (row-parallel weight)
  kQkvRows,     ///< dim 0 = q | k | v, each split in tp parts (c_attn by heads)
};

/// The split of GPT-2 parameter `name` ("h.3.attn.c_attn.weight", "wte.weight", ...).
Split split_of(const std::string& name);

/// Makes every handle of `param` (its module's registration and member, a tied use, an
/// optimizer's list) refer to `part`'s memory and shape, in place: how a split replaces a
/// parameter by this rank's part (and chapter 14's pipeline an unowned one by an empty tensor).
void replace_(const Tensor& param, const Tensor& part);

/// Rank `rank`'s part of the whole tensor `full` split `split` over `tp` ranks (a new tensor).
/// Throws tt::Error naming `name` when tp does not divide the split dim.
Tensor shard_tensor(const Tensor& full, Split split, int tp, int rank, const std::string& name);

/// The whole tensor from every rank's part `part` (a collective of `group`; the inverse of
/// shard_tensor).
Tensor gather_tensor(const Tensor& part, Split split, dist::ProcessGroup& group);

/// Throws tt::Error, naming every problem, when GPT-2 `config` cannot be split over `tp` ranks:
/// tp must divide n_head (attention by heads), the padded vocabulary (wte by rows) and, with
/// sequence parallelism, nothing else here (the sequence length is checked per batch). Uses
/// only values every rank has, so every rank throws alike before any collective.
void check_splittable(const gpt2::GPT2Config& config, int tp);

/// A GPT-2 split over a tensor-parallel group (see the file comment). Keep it alive while the
/// model is used: the model's operations refer to it.
class TensorParallelGPT2 {
 public:
  /// Splits `model` in place over `group`: each split parameter keeps its name and its handle
  /// (the tensor object, so tied uses and later optimizers see the part), the layers' sizes and
  /// the attention's head count become this rank's, and the model's operations become
  /// wrap(model.ops()). A collective of `group`: the ranks first check that they agree on the
  /// configuration, the group size and the options, and every rank throws tt::Error naming the
  /// differences when they do not (no rank hangs). Throws tt::Error (check_splittable) when tp
  /// does not divide what it must, and when the model already has gradients.
  TensorParallelGPT2(gpt2::GPT2& model, dist::ProcessGroup& group, TpOptions options = {});
  TensorParallelGPT2(const TensorParallelGPT2&) = delete;
  TensorParallelGPT2& operator=(const TensorParallelGPT2&) = delete;

  /// The operation set that runs `base` (reference, fast, bf16: chapters 09-11) split over the
  /// group: every linear layer through f / g (or the sequence all-gather / reduce-scatter)
  /// around base.linear, base.linear_gelu; the embedding and the loss vocab-parallel: when base
  /// has a classifier_loss (fast, bf16) the fused vocab_parallel_classifier_loss, else
  /// vocab_parallel_cross_entropy on float logits; description "<base>; tensor parallel tp=2[, sequence
  /// parallel]".
  gpt2::ModelOps wrap(gpt2::ModelOps base) const;
  /// model().set_ops(wrap(base)).
  void set_ops(gpt2::ModelOps base);

  /// The whole logits [B, T, V] of int64 idx [B, T] on every rank (no gradient): each rank's
  /// columns gathered. For tests and sampling; training uses model().loss().
  Tensor logits(const Tensor& idx);
  /// After backward, before the update: with sequence parallelism each rank's gradient of a
  /// replicated parameter (LayerNorms, wpe, row-parallel biases) covers only its tokens, so they
  /// are summed over the group: packed into one flat buffer and summed by one all-reduce
  /// (chapter 12's Reducer with ReduceOp::kSum; the gradients become views of the buffer).
  /// Without it, nothing to do. Every rank must call it.
  void finish_backward();
  /// The global L2 norm of the gradients: split parameters' squares summed over the group,
  /// replicated ones counted once (a collective of the group). Chapter 09's clipping of the
  /// parameters of one rank would see only its parts.
  double grad_norm() const;

  /// The whole tensor of parameter `name` from every rank's part `part` (a collective): also
  /// for state shaped like the parameter (AdamW's moments).
  Tensor gather(const std::string& name, const Tensor& part) const;
  /// This rank's part of the whole tensor `full` of parameter `name`.
  Tensor shard(const std::string& name, const Tensor& full) const;
  /// Every parameter as a whole tensor, under its usual name (a collective): what a
  /// one-process model's state_dict() holds, so a checkpoint is independent of the layout.
  nn::StateDict full_state_dict() const;
  /// Copies this rank's parts of the whole tensors in `full` (e.g. full_state_dict() of a model
  /// with another tp, or a one-process model's state_dict()) into the model. Throws tt::Error
  /// (apply_state_dict: names, shapes) naming `source`.
  void load_full_state_dict(const nn::StateDict& full, const std::string& source = "<state>");

  /// `optimizer`'s state_dict() (over this model's parameters) with every per-parameter state
  /// tensor ("state.<i>.<name>", e.g. AdamW's moments) whole, gathered like its parameter (a
  /// collective); with full_state_dict() the state of a checkpoint any layout can resume.
  nn::StateDict full_optimizer_state(const optim::Optimizer& optimizer) const;
  /// Loads whole optimizer state (full_optimizer_state() of any layout, or a one-process
  /// optimizer's state_dict()) into `optimizer`: this rank's part of every per-parameter tensor.
  /// Throws tt::Error (Optimizer::load_state_dict: names, shapes) naming `source`, or when
  /// `optimizer` updates a tensor that is not a parameter of the model.
  void load_full_optimizer_state(optim::Optimizer& optimizer, const nn::StateDict& full,
                                 const std::string& source = "<state>") const;

  /// The model.
  gpt2::GPT2& model() const { return *model_; }
  /// The tensor-parallel group.
  dist::ProcessGroup& group() const { return *group_; }
  /// The options.
  const TpOptions& options() const { return options_; }
  /// This rank's part of the vocabulary.
  const VocabShard& vocab() const { return vocab_; }
  /// "tp=2 (rank 1), sequence parallel, 6 heads of 12 and vocabulary rows 32..63 here".
  std::string describe() const;

  /// The shared state of the operations (layers and their kinds; internal).
  struct Plan;

 private:
  gpt2::GPT2* model_;
  dist::ProcessGroup* group_;
  TpOptions options_;
  VocabShard vocab_;
  std::shared_ptr<Plan> plan_;
  std::unique_ptr<dist::Reducer> replicated_;  // SP: sums the replicated gradients (lazily made)
};

}  // namespace tt::tp

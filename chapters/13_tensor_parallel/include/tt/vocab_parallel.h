/// @file vocab_parallel.h
/// @brief The vocabulary split over a tensor-parallel group: the vocab-parallel embedding and
/// the vocab-parallel cross-entropy, which never gathers the logits (chapter 13).
///
/// GPT-2's token table wte [Vp, C] (Vp >= V rows, the rows >= V padding that no token uses and
/// the head never predicts) is split by rows: rank r holds rows [r*Vp/tp, (r+1)*Vp/tp). The
/// table serves twice (tied):
/// - as the embedding: each rank looks up the tokens whose row it holds and writes zeros for the
///   others; the sum over the group (g, or a reduce-scatter with sequence parallelism) is the
///   whole lookup;
/// - as the head: each rank computes its logits [N, Vp/tp] = x wte_r^T and the loss comes from
///   three per-row numbers reduced over the group (the max, the sum of exponentials, the target
///   logit), so the [N, V] logits never exist on one rank.
///
/// Padding: when tp does not divide the vocabulary the table is padded to Vp (a multiple of tp),
/// and the columns of the padded rows must be left out of the softmax. A rank may hold only
/// padding (V = 9, Vp = 16, tp = 4: rank 3's rows 12..15). VocabShard::valid says how many of
/// the rank's rows are real tokens.
#pragma once

#include <cstdint>
#include <string>

#include "tt/dist.h"
#include "tt/layers.h"
#include "tt/module.h"
#include "tt/tensor.h"

namespace tt::tp {

/// One rank's part of a padded vocabulary.
struct VocabShard {
  int64_t start = 0;  ///< first row (token id) of this rank's part
  int64_t size = 0;   ///< rows per rank: padded_vocab / tp
  int64_t valid = 0;  ///< rows of this part that are real tokens (ids < vocab_size), 0..size
};

/// Rank `rank`'s part of a table of `padded_vocab` rows of which the first `vocab_size` are
/// tokens, split over `tp` ranks. Throws tt::Error when tp does not divide padded_vocab (the
/// message names the smallest padding that works) or when padded_vocab < vocab_size.
VocabShard vocab_shard(int64_t padded_vocab, int64_t vocab_size, int tp, int rank);

/// The smallest multiple of `multiple` that is >= vocab_size (GPT-2's 50257 padded to 64: 50304).
int64_t padded_vocab_size(int64_t vocab_size, int64_t multiple);

/// This rank's partial lookup of int64 `idx` (any shape, ids in [0, Vp)) in its rows `weight`
/// [Vp/tp, C] starting at token `start`: the row of each token this rank holds, zeros for the
/// others (shape idx.shape + [C]); differentiable with respect to `weight`. Summed over the
/// group it is the whole lookup.
Tensor vocab_parallel_lookup(const Tensor& weight, const Tensor& idx, int64_t start);

/// Mean cross-entropy of this rank's `logits` [N, Vp/tp] (the columns of its VocabShard)
/// against int64 `targets` [N] (ids in [0, vocab_size), the same on every rank), over the
/// vocabulary split across `group` (exercise ch13.4): the row max, the sum of exp(logit - max)
/// over the valid columns and the target logit are reduced over the group; padded columns take
/// no part. Returns the same 0-d loss on every rank; backward gives this rank's columns
/// (softmax - one_hot(target)) / N, zeros for padded columns. Throws tt::Error for a target
/// outside [0, vocab_size) or logits that are not [N, shard.size].
Tensor vocab_parallel_cross_entropy(const Tensor& logits, const Tensor& targets,
                                    const VocabShard& shard, int64_t vocab_size,
                                    dist::ProcessGroup& group);

/// The fused vocab-parallel head and loss: chapter 10's fused classifier (tt/fused_classifier.h)
/// on this rank's rows of the tied table, x [..., C] against wte [shard.size, C] (float32 or
/// float64 x with wte of its dtype, or bfloat16 x with float32 wte: chapter 11's bfloat16 GEMMs),
/// with the rows' softmax statistics made whole over `group` (ClassifierVocabPart). Per chunk of
/// rows one all_gather of [2, rows] numbers (this rank's log-sum-exp and target logit) crosses
/// the group; the logits exist one chunk at a time, of this rank's columns only. Returns the
/// mean cross-entropy over the whole vocabulary of vocab_size tokens, the same 0-d loss on every
/// rank; gradients: this rank's term of dx (x must enter through f, copy_to_tp, which sums them)
/// and wte's rows (zero for the padded ones). The same loss as
/// vocab_parallel_cross_entropy(matmul(x, wte^T), ...) in float32, computed as ModelOps' fast
/// and bf16 classifiers compute it on one rank. Throws tt::Error naming the op for bad shapes,
/// dtypes or a target outside [0, vocab_size).
Tensor vocab_parallel_classifier_loss(const Tensor& x, const Tensor& wte, const Tensor& targets,
                                      const VocabShard& shard, int64_t vocab_size,
                                      dist::ProcessGroup& group);

/// An embedding whose table is split by rows over a tensor-parallel group: forward(idx) is
/// g(vocab_parallel_lookup(weight, idx, start)), the whole lookup on every rank.
class VocabParallelEmbedding : public nn::Module {
 public:
  /// This rank's rows of `full` (copied), the first `vocab_size` of them tokens (all when
  /// vocab_size is 0). Throws tt::Error when the group's size does not divide full's rows.
  VocabParallelEmbedding(const nn::Embedding& full, dist::ProcessGroup& group,
                         int64_t vocab_size = 0);
  /// The rows of the int64 ids `idx` ([..., C] appended), summed over the group.
  Tensor forward(const Tensor& idx) override;
  /// "num=16 (rows 8..15 on this rank, 5 valid), dim=4, tp=2".
  std::string extra_repr() const override;

  VocabShard shard;           ///< this rank's rows
  int64_t num_embeddings;     ///< rows of the whole (padded) table
  int64_t dim;                ///< size of a row
  Tensor weight;              ///< [shard.size, dim]
  dist::ProcessGroup* group;  ///< the tensor-parallel group
};

}  // namespace tt::tp

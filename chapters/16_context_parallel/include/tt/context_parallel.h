/// @file context_parallel.h
/// @brief GPT-2 trained with context parallelism (chapter 16): every rank of a cp group holds
/// the whole model and 1/cp of each sequence; attention is ring attention over the group.
///
/// The model is unchanged: context parallelism wraps three of its operations (gpt2::ModelOps):
///  - embed: this rank's shard of the tokens (shard(), zigzag or contiguous) plus the position
///    embeddings of their GLOBAL positions (shard_positions()): wte(idx[pos]) + wpe(pos);
///  - attention: the packed qkv [B, Tl, 3C] of the shard split into heads and passed to
///    ring_attention() (causal over the whole sequence);
///  - classifier_loss: the mean cross-entropy of the shard's tokens against their targets.
/// Everything else (LayerNorm, the MLP, the residuals) is per position and runs on the shard
/// as it is. The loss of a step is the mean of the ranks' losses (every shard has Tl tokens),
/// and the gradient of that mean is the average over the ranks of their gradients, because
/// ring attention's backward already delivers to each rank the gradient of ALL ranks' losses
/// with respect to its activations: the cp group averages gradients exactly as data
/// parallelism does (DDP over the dp x cp ranks).
///
/// train_gpt2 --cp N (strategy "cp"): the world is a grid dp x cp (cp innermost); each dp
/// replica reads its rows of the batch, its cp ranks read the same rows and keep their shard.
/// train_gpt2 --pp P --cp N: chapter 14's strategy "pp" wraps each pipeline stage's operations
/// with these (registered by src/cp_strategy.cc, pp::register_context_parallel_wrap) over the
/// cp group of the grid dp x pp x cp x tp; the stages exchange [B/M, T/N, C] activations.
#pragma once

#include <memory>

#include "tt/dist.h"
#include "tt/gpt2_ops.h"
#include "tt/llama.h"
#include "tt/ring_attention.h"

namespace tt::cp {

/// `inner` (the operation set the run chose, e.g. "fast") with embed, attention and
/// classifier_loss replaced by their context-parallel versions over `group` with `layout`
/// (see the file comment); the other operations are kept. The description says
/// "context parallel (cp=N, zigzag) + ...". An embed hook of `inner` (chapter 13's tensor
/// parallelism: CP x TP) gets the shard's tokens and, as its position table, the rows of wpe at
/// the shard's global positions (it must add rows 0..Tl-1 of the table it is given); its loss
/// hook gets the shard's targets. Throws tt::Error when `inner` is sequence parallel (its
/// position rows would be offset by the tp rank). The group must outlive the model's use of
/// the returned operations.
gpt2::ModelOps context_parallel_ops(gpt2::ModelOps inner, dist::ProcessGroup& group,
                                    Layout layout = Layout::kZigzag);

/// Chapter 15's LLaMA under context parallelism: the mean cross-entropy of this rank's shard
/// of every row of idx, targets [B, T] (int64; every rank of `group` passes the same whole
/// rows; T a multiple of num_chunks(layout, N)). The shard's tokens are embedded at their
/// GLOBAL positions, which RoPE rotates by (Llama::loss_at with shard_positions()), and every
/// layer's attention is ring_attention over `group` (causal over the whole sequence) with each
/// key/value head repeated for its NH / NKV query heads (GQA: repeat_kv, whose backward sums
/// the copies' gradients). As for GPT-2 (context_parallel_ops), the mean of the ranks' losses
/// is the loss of the whole rows, and averaging the ranks' gradients (DDP over the group) gives
/// its gradient. The model's own attention is restored on return (also after an error).
/// Throws tt::Error when the shapes do not shard.
Tensor llama_context_parallel_loss(llama::Llama& model, const Tensor& idx, const Tensor& targets,
                                   dist::ProcessGroup& group, Layout layout = Layout::kZigzag);

}  // namespace tt::cp

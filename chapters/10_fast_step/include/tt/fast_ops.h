/// @file fast_ops.h
/// @brief Chapter 10 inside GPT-2: the operation set "fast" (tt/gpt2_ops.h) made of this
/// chapter's pieces, and the step profiler that train_gpt2 --profile-step uses.
///
/// Each piece is installed by one function `install_<piece>(ModelOps&)` that sets its member of
/// the set and names itself in the description; fast_model_ops() calls them in turn. Members no
/// piece sets stay empty, i.e. the reference compositions of chapter 09.
/// @code
///   model.set_ops(tt::gpt2::model_ops("fast"));  // registered by fast_ops.cc
///   std::cout << model.ops().description;        // "fast: FlashAttention (packed qkv); ..."
/// @endcode
#pragma once

#include <string>

#include "tt/gpt2_ops.h"

namespace tt::fast {

/// Appends `piece` (e.g. "FlashAttention (packed qkv)") to the list of pieces in
/// ops.description ("fast: a, b").
void describe_piece(gpt2::ModelOps& ops, const std::string& piece);

/// The attention piece: ops.attention = flash_attention_qkv (tt/flash_attention.h), which reads
/// q, k, v from the packed qkv [B, T, 3C] and writes y [B, T, C] and dqkv without copies.
void install_attention(gpt2::ModelOps& ops);

/// The classifier piece: ops.classifier_loss = fused_classifier_loss (tt/fused_classifier.h,
/// default options), the loss of the tied head computed in chunks of rows with the gradient
/// written in place: no [B*T, V] logits or gradient in memory.
void install_classifier(gpt2::ModelOps& ops);

/// The set registered as "fast": every install_<piece>, then the members left to the reference
/// named at the end of the description ("...; reference: linear, ...").
gpt2::ModelOps fast_model_ops();

}  // namespace tt::fast

/// @file mixed_precision.h
/// @brief The bf16 mixed-precision policy as GPT-2's operation set "bf16" (tt/gpt2_ops.h), and
/// the differentiable dtype conversion it is built with.
///
/// The policy (PyTorch autocast's, llm.c's): parameters and AdamW state stay float32 (the master
/// weights; checkpoints hold them, so a bf16 run resumes exactly); the residual stream is
/// float32; GEMM inputs and outputs (linear layers, attention) are bfloat16 with float32
/// accumulation; LayerNorm statistics, softmax, the loss and the gradient norm are float32;
/// weight gradients are float32, activation gradients bfloat16.
/// @code
///   model.set_ops(tt::gpt2::model_ops("bf16"));   // chapter 11 linked in
/// @endcode
#pragma once

#include <cstdint>

#include "tt/gpt2_ops.h"
#include "tt/tensor.h"

namespace tt {

/// x converted to `dtype` (float32 <-> bfloat16 through chapter 11's "cast" kernel, round to
/// nearest even; x itself when it has that dtype already), differentiable: the gradient is
/// converted back to x's dtype. Throws tt::Error naming both dtypes for other conversions.
Tensor to_dtype(const Tensor& x, DType dtype);

/// Causal self-attention of a bfloat16 packed qkv [B, T, 3C] (float32 is converted first) with
/// n_head heads -> bfloat16 y [B, T, C]: chapter 10's flash_attention_qkv, which sends bfloat16
/// to chapter 11's tensor-core kernels (tt/flash_attention_bf16.h). Head sizes those kernels do
/// not take run chapter 10's float32 attention between two conversions.
Tensor bf16_attention(const Tensor& qkv, int64_t n_head);

namespace gpt2 {
/// Chapter 11's operation set, registered as "bf16": bf16_attention, residual_layernorm_bf16
/// (tt/layernorm_bf16.h), and bfloat16 linear layers and classifier (see bf16_ops.cc); its AdamW
/// (ModelOps::adamw) is MasterWeightAdamW (tt/master_weights.h), whose bfloat16 copies of the
/// weights the linear layers read.
ModelOps bf16_model_ops();
/// bf16_model_ops() with ModelOps::recompute = tt::recompute (tt/recompute.h): each block's MLP
/// runs again in backward instead of keeping GELU's input and output. Registered as
/// "bf16_recompute".
ModelOps bf16_recompute_model_ops();
}  // namespace gpt2

}  // namespace tt

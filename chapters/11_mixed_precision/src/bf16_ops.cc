// Chapter 11's GPT-2 operation set "bf16" (tt/mixed_precision.h).
#include "tt/classifier_bf16.h"
#include "tt/layernorm_bf16.h"
#include "tt/linear_bf16.h"
#include "tt/master_weights.h"
#include "tt/mixed_precision.h"
#include "tt/recompute.h"

namespace tt::gpt2 {

ModelOps bf16_model_ops() {
  ModelOps ops;
  ops.attention = bf16_attention;
  ops.residual_layernorm = residual_layernorm_bf16;
  ops.linear = linear_bf16;
  ops.linear_gelu = linear_gelu_bf16;
  ops.classifier_loss = classifier_loss_bf16;
  ops.adamw = make_master_weight_adamw;
  ops.description =
      "bf16 mixed precision: FlashAttention bf16, residual + LayerNorm (float32 stream, bf16 "
      "output), cuBLASLt bf16 linear layers (weights: the bf16 copies AdamW writes), fused "
      "classifier on bf16 (float32 loss)";
  return ops;
}

TT_REGISTER_MODEL_OPS("bf16", bf16_model_ops);

// "bf16" with each block's MLP recomputed in backward (tt/recompute.h): GELU's input and output
// are not kept between forward and backward.
ModelOps bf16_recompute_model_ops() {
  ModelOps ops = bf16_model_ops();
  ops.recompute = recompute;
  ops.description += "; MLP recomputed in backward";
  return ops;
}

TT_REGISTER_MODEL_OPS("bf16_recompute", bf16_recompute_model_ops);

}  // namespace tt::gpt2

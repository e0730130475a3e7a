// Chapter 11's GPT-2 operation set "bf16" (tt/mixed_precision.h).
#include "tt/fused_classifier.h"
#include "tt/fused_ops.h"
#include "tt/layernorm_bf16.h"
#include "tt/mixed_precision.h"
#include "tt/recompute.h"

namespace tt::gpt2 {

namespace {

// ===== TEMPORARY STAND-INS ====================================================================
// Correct but slow: bf16 -> float32, chapter 10's float32 op, -> bf16. Replace the three lines
// marked STAND-IN in bf16_model_ops() by the bf16 cuBLASLt ops (linear_bf16, linear_gelu_bf16,
// classifier_loss_bf16) and delete this block.
Tensor linear_standin(const Tensor& x, nn::Linear& layer) {
  return to_dtype(linear_lt(to_dtype(x, DType::kFloat32), layer), DType::kBFloat16);
}
Tensor linear_gelu_standin(const Tensor& x, nn::Linear& layer) {
  return to_dtype(linear_gelu_lt(to_dtype(x, DType::kFloat32), layer), DType::kBFloat16);
}
Tensor classifier_loss_standin(const Tensor& x, const Tensor& wte, int64_t vocab_size,
                               const Tensor& targets) {
  return fused_classifier_loss(to_dtype(x, DType::kFloat32), wte, vocab_size, targets);
}
// ===== END OF TEMPORARY STAND-INS =============================================================

}  // namespace

ModelOps bf16_model_ops() {
  ModelOps ops;
  ops.attention = bf16_attention;
  ops.residual_layernorm = residual_layernorm_bf16;
  ops.linear = linear_standin;                    // STAND-IN
  ops.linear_gelu = linear_gelu_standin;          // STAND-IN
  ops.classifier_loss = classifier_loss_standin;  // STAND-IN
  ops.description =
      "bf16 mixed precision: FlashAttention bf16, residual + LayerNorm (float32 stream, bf16 "
      "output), linear layers and classifier (stand-ins: float32 between conversions)";
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

/// @file classifier_bf16.h
/// @brief GPT-2's tied language-model head and loss under the mixed-precision policy: chapter
/// 10's fused classifier (tt/fused_classifier.h) with bfloat16 logits.
///
/// For x [B, T, C] bfloat16 and the float32 token embedding wte [Vp, C] (the master weight):
/// wte is cast to bfloat16 once per call; each chunk of logits is a bfloat16 GEMM with float32
/// accumulation ("matmul_lt_gemm": cuBLASLt on CUDA, chapter 11's emulation on the CPU) into a
/// bfloat16 buffer; the row kernel reads it in float32 (max, log-sum-exp, float32 loss) and
/// writes the gradient (softmax - onehot) / N back in bfloat16, in place; dx and dW are GEMMs of
/// those bfloat16 operands into float32 (dW accumulated over the chunks in float32). Backward
/// returns dx in bfloat16 and dwte in float32.
#pragma once

#include <cstdint>

#include "tt/tensor.h"

namespace tt {

/// The mean cross-entropy of logits = x wte[0..V)^T (the signature of
/// gpt2::ModelOps::classifier_loss): x [..., C] bfloat16, wte [Vp, C] float32 (Vp >= V), int64
/// targets of x's leading shape in [0, V), all on one device. Returns a float32 0-d tensor;
/// gradients: dx bfloat16, dwte float32. Throws tt::Error naming "classifier_loss_bf16" (or the
/// fused classifier), the shapes, dtypes and devices otherwise.
Tensor classifier_loss_bf16(const Tensor& x, const Tensor& wte, int64_t vocab_size,
                            const Tensor& targets);

namespace cpu {

/// CPU kernel "matmul_lt_gemm" (GemmKernel, alpha must be 1): out = a b + beta out through
/// cpu::run_lt(lt_rowmajor_gemm(out, a, b, beta)) (tt/lt_gemm.h, tt/linear_bf16.h).
void matmul_lt_gemm(const Tensor& out, const Tensor& a, const Tensor& b, double alpha, double beta);

}  // namespace cpu

}  // namespace tt

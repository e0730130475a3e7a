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

/// y + bias for a bfloat16 y [..., N] and a float32 bias [N], in one pass: each element is
/// computed in float32 and rounded to bfloat16 once, bit for bit what
/// to_dtype(add(to_dtype(y, float32), bias), bfloat16) gives in three. Differentiable: dy reaches
/// y unchanged, and \f$ d\,bias_n = \sum_r dy_{r,n} \f$ in float32 over the rows r of dy in a
/// fixed order (deterministic). For a bias that must follow a reduction, such as chapter 13's
/// row-parallel layers (the GEMM epilogue cannot add it before the all-reduce). Throws
/// tt::Error naming the op, shapes, dtypes and devices for anything else.
Tensor add_bias_bf16(const Tensor& y, const Tensor& bias);

/// Signature of the kernel "add_bias_bf16": out [R, N] = y [R, N] + bias [N] (contiguous; out and
/// y bfloat16, bias float32), each sum in float32, rounded to nearest even once.
using AddBiasBf16Kernel = void(const Tensor& out, const Tensor& y, const Tensor& bias);
/// Signature of the kernel "bias_grad_bf16": dbias [N] (float32) = the sum over the rows of dy
/// [R, N] (bfloat16, contiguous), accumulated in float32 in a fixed order.
using BiasGradBf16Kernel = void(const Tensor& dbias, const Tensor& dy);
/// The checks every "add_bias_bf16" kernel makes (CPU and CUDA): y and out bfloat16 of one
/// shape [..., N], bias float32 [N], all contiguous on `device_type`'s devices, one device.
/// Throws tt::Error naming `op` and the three tensors.
void check_add_bias_bf16_kernel(const char* op, DeviceType device_type, const Tensor& out,
                                const Tensor& y, const Tensor& bias);
/// The checks every "bias_grad_bf16" kernel makes: dbias float32 [N], dy bfloat16 [..., N],
/// both contiguous on one device of `device_type`. Throws tt::Error naming `op` and both.
void check_bias_grad_bf16_kernel(const char* op, DeviceType device_type, const Tensor& dbias,
                                 const Tensor& dy);

namespace cpu {
/// The CPU kernel "add_bias_bf16" (see AddBiasBf16Kernel).
void add_bias_bf16(const Tensor& out, const Tensor& y, const Tensor& bias);
/// The CPU kernel "bias_grad_bf16": rows summed in order 0, 1, ..., R-1.
void bias_grad_bf16(const Tensor& dbias, const Tensor& dy);
}  // namespace cpu

namespace cuda {
/// The CUDA kernel "add_bias_bf16" (CUDA builds only): one element per thread.
void add_bias_bf16(const Tensor& out, const Tensor& y, const Tensor& bias);
/// The CUDA kernel "bias_grad_bf16" (CUDA builds only): chapter 06's column_sum
/// (tt/cuda_column_sum.h) reading bfloat16 and summing in float32, in its fixed order
/// (deterministic, not the CPU's order).
void bias_grad_bf16(const Tensor& dbias, const Tensor& dy);
}  // namespace cuda

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

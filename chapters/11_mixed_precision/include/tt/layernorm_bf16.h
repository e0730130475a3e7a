/// @file layernorm_bf16.h
/// @brief The fused residual add + LayerNorm of chapter 10 under the mixed-precision policy:
/// float32 residual stream, bfloat16 LayerNorm output (the next GEMM's input), float32
/// statistics.
///
/// | tensor | dtype | why |
/// |---|---|---|
/// | residual, r = residual + delta | float32 | the residual stream accumulates L updates: bf16's 8 bits would lose the small ones |
/// | delta (a GEMM's output) | bfloat16 (or float32) | what the bf16 GEMMs produce |
/// | mean, rstd | float32 | sums over C elements |
/// | y = ln(r) | bfloat16 | the next GEMM's operand |
/// | d residual, d gamma, d beta | float32 | parameters' and the stream's gradients |
/// | d delta | bfloat16 | an activation gradient, the bf16 GEMM's input |
///
/// It is chapter 10's residual_layernorm with its kernels made generic over the delta and output
/// types (tt::residual_layernorm_to, tt/fused_ops.h): on CUDA one kernel reads residual and
/// delta once, widening delta as it reads and rounding y to bf16 (round to nearest even) as it
/// writes; on the CPU the same arithmetic runs on float32 copies (an emulation, tested in CI).
#pragma once

#include <utility>

#include "tt/layers.h"
#include "tt/tensor.h"

namespace tt {

/// {r, y}: r = residual + delta (float32) and y = ln(r) rounded to bfloat16, for residual
/// float32 [..., C], delta bfloat16 or float32 of the same shape and device, C = ln.dim, ln's
/// parameters float32. Differentiable: backward gives residual a float32 gradient, delta one of
/// its own dtype (the float32 gradient rounded to bf16), ln.weight and ln.bias float32 ones.
/// Throws tt::Error naming the op, shapes, dtypes and devices on other inputs (and when chapter
/// 11's bfloat16 cast is missing).
std::pair<Tensor, Tensor> residual_layernorm_bf16(const Tensor& residual, const Tensor& delta,
                                                  nn::LayerNorm& ln);

}  // namespace tt

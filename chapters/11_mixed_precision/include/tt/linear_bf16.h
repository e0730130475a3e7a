/// @file linear_bf16.h
/// @brief GPT-2's linear layers in bfloat16 under the mixed-precision policy: float32 master
/// weights read as their bfloat16 copies (tt/master_weights.h), bfloat16 GEMM inputs and
/// outputs, float32 accumulation (cuBLASLt, CUBLAS_COMPUTE_32F), float32 weight and bias
/// gradients.
///
/// | tensor | dtype | note |
/// |---|---|---|
/// | x (input) | float32 or bfloat16 | float32 is cast to bfloat16 first (its gradient comes back as float32) |
/// | layer.weight, layer.bias (parameters) | float32 | the master weights; their bfloat16 copies (bf16_weight(), tt/master_weights.h: written by a MasterWeightAdamW's step, else cast on use) are kept for backward |
/// | y (output), the GELU pre-activation | bfloat16 | |
/// | dx | bfloat16 (x's dtype) | dx = dy W: one bfloat16 GEMM ("matmul_lt_dgrad", exercise ch11.2) |
/// | dW, db | float32 | one GEMM with bfloat16 A and B and a float32 D, db in its epilogue (BGRADB) |
///
/// The three GEMMs of a layer are described by tt::LtGemm (chapter 10's tt/lt_gemm.h) and run
/// through the kernels "matmul_lt_forward", "matmul_lt_dgrad" and "matmul_lt_wgrad": cuBLASLt on
/// CUDA (chapter 10's cuda::run_lt), and on the CPU an emulation of cuBLASLt (cpu::run_lt: the
/// bfloat16 operands widened exactly to float, float32 accumulation, the result rounded to
/// bfloat16 to nearest even) so that the logic runs and is tested without a GPU.
///
/// | kernel | signature | CPU | CUDA |
/// |---|---|---|---|
/// | "matmul_lt_forward" | MatmulLtForwardKernel (tt/fused_ops.h) | cpu::matmul_lt_forward | chapter 10's |
/// | "matmul_lt_wgrad" | MatmulLtWgradKernel (tt/fused_ops.h) | cpu::matmul_lt_wgrad | chapter 10's |
/// | "matmul_lt_dgrad" | MatmulLtDgradKernel | cpu::matmul_lt_dgrad | cuda::matmul_lt_dgrad |
#pragma once

#include <functional>

#include "tt/layers.h"
#include "tt/lt_gemm.h"
#include "tt/tensor.h"

namespace tt {

/// What a bf16 linear layer (linear_bf16, linear_gelu_bf16) takes from the scope its forward
/// runs in and keeps for its backward. Empty members do nothing.
struct LinearHooks {
  /// Work on the input gradient that may overlap the layer's weight-gradient GEMM (chapter 13
  /// starts its tensor-parallel all-reduce of dx there): called by backward with dx (x's dtype and
  /// shape [M, K]) right after the dx GEMM is queued and before the dW GEMM; must not modify dx.
  std::function<void(const Tensor& dx)> dgrad{};
  /// What the layer keeps of its bfloat16 input x [M, K] for the weight gradient: pack(x) in
  /// forward, after the forward GEMM (PyTorch's saved-tensor hooks). Chapter 13's sequence
  /// parallelism keeps only this rank's tokens. Needs unpack.
  std::function<Tensor(const Tensor& x)> pack{};
  /// x back from what pack returned, bfloat16 [M, K], in backward before the dW GEMM (after the
  /// dx GEMM and the dgrad hook). Chapter 13 all-gathers the tokens again.
  std::function<Tensor(const Tensor& packed)> unpack{};
};

/// Installs `hooks` for the bf16 linear layers whose forward runs in this scope, on this thread:
/// each such layer keeps them and uses them in its backward. The previous hooks are restored at
/// the end of the scope. Throws tt::Error when exactly one of pack and unpack is set.
class ScopedLinearHooks {
 public:
  /// Installs `hooks` (empty members: none).
  explicit ScopedLinearHooks(LinearHooks hooks);
  /// Restores the previous hooks.
  ~ScopedLinearHooks();
  ScopedLinearHooks(const ScopedLinearHooks&) = delete;
  ScopedLinearHooks& operator=(const ScopedLinearHooks&) = delete;
  /// The hooks installed on this thread (all empty when none).
  static const LinearHooks& current();

 private:
  LinearHooks previous_;
};

/// y = x W^T + b in bfloat16 for `layer` (bias optional; the signature of
/// gpt2::ModelOps::linear): x [..., in] float32 or bfloat16 on the layer's device, the layer's
/// parameters float32; returns y [..., out] bfloat16, the bias added in the GEMM's epilogue.
/// Backward: dx (x's dtype) = dy W in one bfloat16 GEMM; dW = dy^T x and db = the column sums of
/// dy in one GEMM, both float32. Throws tt::Error naming the shapes, dtypes and devices when x is
/// not [..., in] of a floating dtype on the weight's device, or the parameters are not float32,
/// and when no GEMM algorithm exists for the shapes (cuBLASLt).
Tensor linear_bf16(const Tensor& x, nn::Linear& layer);

/// y = gelu(x W^T + b) in bfloat16 (GPT-2's tanh approximation; the signature of
/// gpt2::ModelOps::linear_gelu): as linear_bf16, and the GEMM's epilogue adds the bias, applies
/// GELU and stores the bfloat16 pre-activation h for backward (CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
/// when out is not a multiple of 8, cuBLASLt's requirement for it, GELU runs as a separate
/// float32 kernel on the bfloat16 h). Backward: dh = dy gelu'(h) (in float32, rounded to
/// bfloat16), then as linear_bf16 with dh. Throws as linear_bf16, and when the layer has no bias.
Tensor linear_gelu_bf16(const Tensor& x, nn::Linear& layer);

/// Exercise ch11.2: the LtGemm of a linear layer's input gradient dx [M, K] = dy [M, N] W [N, K]
/// (no epilogue), in cuBLASLt's column-major conventions (tt/lt_gemm.h): A and B of dy's dtype,
/// D of dx's dtype. dx, dy and w are contiguous and their shapes are checked by the caller
/// (cpu::matmul_lt_dgrad, cuda::matmul_lt_dgrad).
LtGemm lt_linear_dgrad_gemm(const Tensor& dx, const Tensor& dy, const Tensor& w);

/// Checks the operands of "matmul_lt_dgrad" (as below) and returns lt_linear_dgrad_gemm of
/// them; throws tt::Error naming `op`, the shapes, dtypes and devices otherwise.
LtGemm checked_lt_linear_dgrad_gemm(const char* op, const Tensor& dx, const Tensor& dy,
                                    const Tensor& w);

/// Kernel "gelu_backward_bf16": dx = dy gelu'(pre) (GPT-2's tanh approximation) for bfloat16
/// dx, dy and pre, contiguous, of one shape, on one device; computed in float32 per element and
/// rounded once to nearest even. The backward of linear_gelu_bf16 calls it: on CUDA one kernel
/// reads 4 bytes and writes 2 per element, where converting to float32 around chapter 06's
/// "gelu_backward" moved 30.
using GeluBackwardBf16Kernel = void(const Tensor& dx, const Tensor& dy, const Tensor& pre);

/// Checks the operands of "gelu_backward_bf16" (see above); throws tt::Error naming `op`, the
/// shapes, dtypes and devices otherwise.
void check_gelu_backward_bf16(const char* op, const Tensor& dx, const Tensor& dy,
                              const Tensor& pre);

/// Kernel "matmul_lt_dgrad": dx [M, K] = dy [M, N] W [N, K], dy and W of one dtype (float32 or
/// bfloat16), dx float32 or bfloat16, contiguous on one device. Returns false, writing nothing,
/// when no algorithm exists for the problem (cuBLASLt) or it is empty.
using MatmulLtDgradKernel = bool(const Tensor& dx, const Tensor& dy, const Tensor& w);

namespace cpu {

/// Runs `g` on host pointers as cuBLASLt would (tt/lt_gemm.h): bfloat16 A and B widened
/// exactly to float, products summed in float32, D (and aux, and the bias gradient) rounded to
/// bfloat16 to nearest even when D is bfloat16; GELU through chapter 04's CPU "gelu_forward".
/// Returns false, writing nothing, where cuBLASLt would have no algorithm: an empty problem, or
/// an aux whose leading dimension is not a multiple of 8.
bool run_lt(const LtGemm& g);

/// CPU kernel "matmul_lt_forward": run_lt(lt_linear_forward_gemm(y, x, w, b, pre)).
bool matmul_lt_forward(const Tensor& y, const Tensor& x, const Tensor& w, const Tensor& b,
                       const Tensor& pre);
/// CPU kernel "matmul_lt_wgrad": run_lt(lt_linear_wgrad_gemm(dw, dy, x, db, beta)).
bool matmul_lt_wgrad(const Tensor& dw, const Tensor& dy, const Tensor& x, const Tensor& db,
                     double beta);
/// CPU kernel "matmul_lt_dgrad": run_lt(checked_lt_linear_dgrad_gemm(...)).
bool matmul_lt_dgrad(const Tensor& dx, const Tensor& dy, const Tensor& w);
/// CPU kernel "gelu_backward_bf16": dy and pre widened to float32, chapter 04's CPU
/// "gelu_backward", the result rounded into dx.
void gelu_backward_bf16(const Tensor& dx, const Tensor& dy, const Tensor& pre);

}  // namespace cpu

namespace cuda {

/// CUDA kernel "matmul_lt_dgrad" (CUDA builds only): cuda::run_lt(checked_lt_linear_dgrad_gemm(
/// ...)) on dx's device.
bool matmul_lt_dgrad(const Tensor& dx, const Tensor& dy, const Tensor& w);
/// CUDA kernel "gelu_backward_bf16" (CUDA builds only): one elementwise launch, 8 values per
/// 16-byte access when aligned, chapter 06's GeluBackwardFn in float (tt/cuda_gelu.h).
void gelu_backward_bf16(const Tensor& dx, const Tensor& dy, const Tensor& pre);

}  // namespace cuda

}  // namespace tt

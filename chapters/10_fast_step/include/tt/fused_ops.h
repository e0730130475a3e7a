/// @file fused_ops.h
/// @brief Fused operations of GPT-2's blocks: linear layers whose bias (and GELU) run in the
/// GEMM's epilogue (cuBLASLt), and the residual add fused with the LayerNorm that follows it.
///
/// Each one equals its unfused composition up to floating-point rounding, in values and in
/// gradients, on the CPU and on CUDA; each is an autograd Function with a fused backward.
///
/// | op | unfused composition | what the fusion saves per call (float32, x [M, K], y [M, N]) |
/// |---|---|---|
/// | linear_lt | matmul, then add(bias) | forward: the bias add's read and write of y (8MN bytes); backward: the bias-gradient `sum`, a re-read of dy (4MN) |
/// | linear_gelu_lt | matmul, add(bias), gelu | forward: the bias add and the gelu kernel (16MN); the pre-activation the GEMM stores in its epilogue is what gelu would have saved anyway |
/// | residual_layernorm | add, then layernorm | forward: a re-read of r (4MC); backward: writing the LayerNorm gradient and re-reading it for the add of r's two gradients (8MC) |
///
/// On CUDA, linear_lt and linear_gelu_lt run float32 GEMMs through cuBLASLt (TF32 when
/// cuda::allow_tf32(), like chapter 07's matmul). Other dtypes, CPUs, and shapes cuBLASLt has no
/// algorithm for fall back to the composition, so the ops work everywhere.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "tt/autograd.h"
#include "tt/layers.h"
#include "tt/ops_view.h"
#include "tt/tensor.h"

namespace tt {

/// y = x W^T + b for `layer` (bias optional), x [..., in] -> y [..., out]: the bias added in the
/// GEMM's epilogue (CUBLASLT_EPILOGUE_BIAS). Backward: dx = dy W (one GEMM), and dW = dy^T x
/// together with db = the column sums of dy in one GEMM (CUBLASLT_EPILOGUE_BGRADB). Throws
/// tt::Error naming the shapes when x is not [..., in] and the dtypes and devices when x's differ
/// from the weight's.
Tensor linear_lt(const Tensor& x, nn::Linear& layer);

/// y = gelu(x W^T + b) (GPT-2's tanh approximation) for `layer` (which must have a bias): on
/// CUDA one GEMM whose epilogue adds the bias, applies GELU and also stores the pre-activation
/// h = x W^T + b (CUBLASLT_EPILOGUE_GELU_AUX_BIAS) for backward. Backward: dh = dy gelu'(h), then
/// as linear_lt with dh. Throws as linear_lt, and when the layer has no bias.
Tensor linear_gelu_lt(const Tensor& x, nn::Linear& layer);

/// Runs a linear layer's autograd Function `Fn` on x [..., in]: x flattened (contiguous) to
/// [M, in], inputs {x2, weight, bias if the layer has one} and the argument `gelu`, the output
/// [M, out] reshaped to [..., out]. Shared by linear_lt / linear_gelu_lt and chapter 11's bf16
/// linear layers, which differ only in `Fn`.
template <typename Fn>
Tensor apply_linear_function(const Tensor& x, nn::Linear& layer, bool gelu) {
  Shape out_shape = x.shape();
  out_shape.back() = layer.out_features;
  // The free (differentiable) view functions: Tensor's own methods carry no gradient.
  const Tensor x2 = reshape(contiguous(x), {x.numel() / layer.in_features, layer.in_features});
  std::vector<Tensor> in{x2, layer.weight};
  if (layer.bias.defined()) in.push_back(layer.bias);
  return reshape(autograd::Function::apply<Fn>(in, gelu)[0], out_shape);
}

/// The residual update followed by the next LayerNorm: returns {r, ln(r)} with
/// r = residual + delta, residual and delta of one shape [..., C] with C = ln.dim. Forward reads
/// residual and delta once and writes r, y = ln(r) and the per-row mean and rstd; backward
/// computes dr = (the LayerNorm gradient) + (the gradient of r) in one kernel, and hands dr to
/// both inputs. Throws tt::Error naming shapes, dtypes and devices when they differ.
std::pair<Tensor, Tensor> residual_layernorm(const Tensor& residual, const Tensor& delta,
                                             nn::LayerNorm& ln);

/// residual_layernorm for mixed precision (chapter 11): the same {r, ln(r)}, with r of the
/// residual's dtype, `delta` of that dtype or bfloat16 (when the residual is float32) and y made
/// in `y_dtype` (the residual's dtype or bfloat16). The statistics are computed in the residual's
/// dtype; backward gives the residual a gradient of its dtype and delta one of delta's (the
/// float32 gradient rounded to bfloat16). Throws tt::Error as residual_layernorm, and naming the
/// dtypes for any other combination.
std::pair<Tensor, Tensor> residual_layernorm_to(const Tensor& residual, const Tensor& delta,
                                                nn::LayerNorm& ln, DType y_dtype);

/// Checks the tensors of the kernel "residual_layernorm_forward" for the op `op`: contiguous, on
/// one device; r, a [..., C], mean, rstd [...], w, b [C] of one floating dtype; d and y [..., C]
/// of that dtype or bfloat16 when it is float32. Returns C; throws tt::Error naming the op and
/// the offending tensor otherwise.
int64_t check_residual_layernorm_forward(const std::string& op, const Tensor& r, const Tensor& y,
                                         const Tensor& mean, const Tensor& rstd, const Tensor& a,
                                         const Tensor& d, const Tensor& w, const Tensor& b);

/// Kernel "residual_layernorm_forward": r = a + d, then per row of C: mean, rstd =
/// 1/sqrt(var + eps) (biased variance), y = (r - mean) rstd w + b. All contiguous; r, y, a, d of
/// shape [..., C]; mean and rstd [...]; w and b [C]. d and y may be bfloat16 while the rest is
/// float32 (check_residual_layernorm_forward): d is widened exactly, y rounded to nearest even;
/// the sums and statistics stay float32 (on the CPU through float32 copies, an emulation).
using ResidualLayerNormForwardKernel = void(const Tensor& r, const Tensor& y, const Tensor& mean,
                                            const Tensor& rstd, const Tensor& a, const Tensor& d,
                                            const Tensor& w, const Tensor& b, double eps);

/// Kernel "residual_layernorm_backward": dr = dr_in + the LayerNorm input gradient of dy (from r,
/// w, mean, rstd), dw = sum over rows of dy xhat, db = sum over rows of dy. All contiguous, as in
/// the forward. Mixed precision (chapter 11): dy may be bfloat16 while the rest is float32 (it is
/// widened exactly as it is read), and `dd`, when defined, is a bfloat16 tensor of r's shape that
/// receives dr rounded to nearest even (the gradient of a bfloat16 delta); undefined, nothing
/// else is written. The CUDA kernel for rows of C = 128 k (k <= 8) writes dd in the same pass as
/// dr; other rows, and the CPU, convert dy and copy dr into dd around the float32 kernel.
using ResidualLayerNormBackwardKernel = void(const Tensor& dr, const Tensor& dd, const Tensor& dw,
                                             const Tensor& db, const Tensor& dr_in,
                                             const Tensor& dy, const Tensor& r, const Tensor& w,
                                             const Tensor& mean, const Tensor& rstd);

/// Checks the tensors of "residual_layernorm_backward" (contiguous rows of C = w's numel, the
/// dtypes allowed above, one device) and returns C; errors name `op` and the offending tensor.
int64_t check_residual_layernorm_backward(const std::string& op, const Tensor& dr, const Tensor& dd,
                                          const Tensor& dw, const Tensor& db, const Tensor& dr_in,
                                          const Tensor& dy, const Tensor& r, const Tensor& w,
                                          const Tensor& mean, const Tensor& rstd);

/// CUDA kernel "matmul_lt_forward": y [M, N] = x [M, K] W^T + b (W [N, K], b [N]), and with
/// `pre` defined ([M, N]) y = gelu(x W^T + b) with pre = x W^T + b (lt_linear_forward_gemm,
/// tt/lt_gemm.h). float32 here; x and W may also be bfloat16 with y, b and pre bfloat16 or
/// float32 (chapter 11, which also registers a CPU emulation). Returns false, without writing
/// anything, when cuBLASLt offers no algorithm for the problem. Named "matmul_*" so that the
/// profiler counts its 2MNK FLOPs.
using MatmulLtForwardKernel = bool(const Tensor& y, const Tensor& x, const Tensor& w,
                                   const Tensor& b, const Tensor& pre);

/// CUDA kernel "matmul_lt_wgrad": dw [N, K] = dy^T x + beta dw for dy [M, N], x [M, K], and with
/// `db` defined ([N]) db = the column sums of dy in the same GEMM (lt_linear_wgrad_gemm). beta =
/// 1 accumulates into dw (the parameter's .grad under gradient-accumulation fusion), 0 ignores
/// dw's contents. float32 here; dy and x may also be bfloat16 with dw and db float32 (chapter
/// 11). Returns false, without writing anything, when cuBLASLt offers no algorithm (with beta !=
/// 0: no algorithm that forms each element in one pass, LtGemm::one_pass_only).
using MatmulLtWgradKernel = bool(const Tensor& dw, const Tensor& dy, const Tensor& x,
                                 const Tensor& db, double beta);

namespace cpu {

/// Exercise ch10.8, the forward row core of residual_layernorm on the CPU: for one row of C
/// elements, r = a + d, then y = (r - mean) rstd w + b with the row mean, the biased variance
/// and rstd = 1 / sqrt(var + eps); writes r[0..C), y[0..C), *mean and *rstd. T = float or double.
template <typename T>
void residual_layernorm_forward_row(const T* a, const T* d, const T* w, const T* b, T* r, T* y,
                                    T* mean, T* rstd, int64_t C, T eps);

/// Exercise ch10.8, the backward row core: with xhat = (r - mean) rstd and g = dy w, writes
/// dr = dr_in + rstd (g - mean(g) - xhat mean(g xhat)) and adds dy xhat to dw_acc[0..C) and dy
/// to db_acc[0..C) (the caller sums those over rows).
template <typename T>
void residual_layernorm_backward_row(const T* dr_in, const T* dy, const T* r, const T* w, T mean,
                                     T rstd, T* dr, T* dw_acc, T* db_acc, int64_t C);

}  // namespace cpu

}  // namespace tt

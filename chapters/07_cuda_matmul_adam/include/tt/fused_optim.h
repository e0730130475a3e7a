/// @file fused_optim.h
/// @brief Fused optimizer kernels: AdamW over all parameters in a few launches (multi-tensor
/// apply), and a deterministic global gradient norm with clipping.
///
/// Registry names and signatures (a CPU implementation registers the same names):
///
/// | kernel name | signature | CUDA function |
/// |---|---|---|
/// | "adamw_step" | AdamWKernel | cuda::adamw_step |
/// | "grad_norm" | GradNormKernel | cuda::grad_norm |
/// | "clip_grads" | ClipGradsKernel | cuda::clip_grads |
///
/// The AdamW step follows PyTorch's torch.optim.AdamW (decoupled weight decay):
/// \f[ p \leftarrow p\,(1 - \eta\lambda), \quad m \leftarrow \beta_1 m + (1-\beta_1) g, \quad
///     v \leftarrow \beta_2 v + (1-\beta_2) g^2, \f]
/// \f[ p \leftarrow p - \frac{\eta}{1-\beta_1^t} \cdot
///     \frac{m}{\sqrt{v}/\sqrt{1-\beta_2^t} + \epsilon}. \f]
#pragma once

#include <cstdint>
#include <vector>

#include "tt/strided_indexer.h"  // TT_HOST_DEVICE
#include "tt/tensor.h"

namespace tt {

/// Hyper-parameters of AdamW (PyTorch's names and defaults).
struct AdamWConfig {
  double lr = 1e-3;            ///< learning rate \f$ \eta \f$
  double beta1 = 0.9;          ///< decay of the first moment \f$ \beta_1 \f$
  double beta2 = 0.999;        ///< decay of the second moment \f$ \beta_2 \f$
  double eps = 1e-8;           ///< \f$ \epsilon \f$, added to the denominator
  double weight_decay = 0.01;  ///< decoupled weight decay \f$ \lambda \f$
};

/// Kernel "adamw_step": one AdamW step number `step` (1 for the first) on every parameter:
/// params[i], grads[i], exp_avg[i] (m) and exp_avg_sq[i] (v) have one shape, are contiguous
/// float32 on one device; params, exp_avg and exp_avg_sq are updated in place.
using AdamWKernel = void(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                         const std::vector<Tensor>& exp_avg, const std::vector<Tensor>& exp_avg_sq,
                         const AdamWConfig& config, int64_t step);

/// Kernel "grad_norm": writes \f$ \sqrt{\sum_i \sum_j g_{ij}^2} \f$ over all `grads`
/// (contiguous float32, one device) into `out`, a 0-d float32 tensor on that device.
using GradNormKernel = void(const Tensor& out, const std::vector<Tensor>& grads);

/// Kernel "clip_grads": multiplies every grad by \f$ \min(1, c / (n + 10^{-6})) \f$, where n is
/// the 0-d float32 `total_norm` (on the grads' device, e.g. from "grad_norm") and c = max_norm.
/// The factor is computed on the device: no host synchronization.
using ClipGradsKernel = void(const std::vector<Tensor>& grads, const Tensor& total_norm,
                             double max_norm);

/// The per-step constants of the AdamW update, in float, computed once per step on the host
/// in double and rounded once.
struct AdamWCoefficients {
  float lr = 0;     ///< \f$ \eta \f$
  float beta1 = 0;  ///< \f$ \beta_1 \f$
  float beta2 = 0;  ///< \f$ \beta_2 \f$
  float one_minus_beta1 =
      0;  ///< \f$ 1 - \beta_1 \f$ (rounded once from double: 1 - 0.999f is off by 1e-5)
  float one_minus_beta2 = 0;        ///< \f$ 1 - \beta_2 \f$
  float eps = 0;                    ///< \f$ \epsilon \f$
  float weight_decay = 0;           ///< \f$ \lambda \f$
  float bias_correction1 = 0;       ///< \f$ 1 - \beta_1^t \f$
  float bias_correction2_sqrt = 0;  ///< \f$ \sqrt{1 - \beta_2^t} \f$
};

/// The coefficients of step `step` >= 1 (powers computed in double); throws tt::Error naming
/// the bad value for step < 1 or hyper-parameters outside lr >= 0, 0 <= beta < 1, eps > 0.
AdamWCoefficients adamw_coefficients(const AdamWConfig& config, int64_t step);

/// The AdamW update of one element (exercise ch07.5), on the host or inside a CUDA kernel: with
/// gradient g, updates parameter p, first moment m and second moment v in place by the formula
/// of this file, in float32, in PyTorch's order (decay p, update m and v, then step p).
/// Defined in a CUDA source: available in CUDA builds (TT_WITH_CUDA) only.
TT_HOST_DEVICE void adamw_update(float& p, float g, float& m, float& v, const AdamWCoefficients& c);

namespace cuda {

/// Elements of one tensor handled by one block at a time in the multi-tensor kernels. Fixed
/// (not derived from the GPU) so that the grad-norm summation order, and hence its bits, are
/// the same on every GPU.
inline constexpr int64_t kMultiTensorChunk = 65536;

/// CUDA kernel "adamw_step" (AdamWKernel): one launch for all tensors. A table of
/// (p, g, m, v, numel) pointers and of (tensor, start) chunks of kMultiTensorChunk elements is
/// copied to the device; each block walks chunks c = blockIdx.x, +gridDim.x, ... and applies
/// adamw_update to each element, with float4 accesses when the four tensors are 16-byte aligned.
void adamw_step(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                const std::vector<Tensor>& exp_avg, const std::vector<Tensor>& exp_avg_sq,
                const AdamWConfig& config, int64_t step);

/// CUDA kernel "grad_norm" (GradNormKernel), exercise ch07.6: two launches and no atomics.
/// Pass 1 writes the sum of squares of every chunk (one block per chunk at a time) into a
/// buffer of partial sums; pass 2, one block, adds the partials in a fixed order (in double)
/// and writes the square root. The result depends only on the tensor sizes: bitwise
/// reproducible from run to run and GPU to GPU.
void grad_norm(const Tensor& out, const std::vector<Tensor>& grads);

/// CUDA kernel "clip_grads" (ClipGradsKernel): one multi-tensor launch scaling every grad.
void clip_grads(const std::vector<Tensor>& grads, const Tensor& total_norm, double max_norm);

}  // namespace cuda
}  // namespace tt

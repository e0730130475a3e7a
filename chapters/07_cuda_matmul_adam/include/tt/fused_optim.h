/// @file fused_optim.h
/// @brief Fused optimizer kernels for CUDA: chapter 05's "adamw_step", "sgd_step",
/// "sum_of_squares" and "scale_" as multi-tensor launches, so that tt::optim::AdamW, tt::optim::SGD
/// and tt::optim::clip_grad_norm_ run on GPU parameters unchanged.
///
/// Registry names and signatures (chapter 05's, from tt/optim.h):
///
/// | kernel name | signature | CUDA function |
/// |---|---|---|
/// | "adamw_step" | optim::AdamWStepKernel | cuda::adamw_step |
/// | "sgd_step" | optim::SgdStepKernel | cuda::sgd_step |
/// | "sum_of_squares" | optim::SumOfSquaresKernel | cuda::sum_of_squares |
/// | "scale_" | optim::ScaleInplaceKernel | cuda::scale_ |
/// | "adamw_step_unless" | optim::AdamWStepUnlessKernel | cuda::adamw_step_unless |
/// | "sum_of_squares_device" | optim::SumOfSquaresDeviceKernel | cuda::sum_of_squares_device |
/// | "clip_and_check_" | optim::ClipAndCheckKernel | cuda::clip_and_check_ |
///
/// The CUDA kernels take contiguous float32 tensors (the dtype of training); other dtypes throw
/// tt::Error naming the op and the tensor. The AdamW step follows PyTorch's torch.optim.AdamW
/// (decoupled weight decay), in the operation order of chapter 05's CPU kernel:
/// \f[ p \leftarrow p\,(1 - \eta\lambda), \quad m \leftarrow \beta_1 m + (1-\beta_1) g, \quad
///     v \leftarrow \beta_2 v + (1-\beta_2) g^2, \f]
/// \f[ p \leftarrow p - \frac{\eta}{1-\beta_1^t} \cdot
///     \frac{m}{\sqrt{v}/\sqrt{1-\beta_2^t} + \epsilon}. \f]
#pragma once

#include <cstdint>
#include <vector>

#include "tt/optim.h"
#include "tt/strided_indexer.h"  // TT_HOST_DEVICE
#include "tt/tensor.h"

namespace tt {

/// The per-step constants of the AdamW update, in float, computed once per step on the host
/// in double and rounded once (as chapter 05's CPU kernel does).
struct AdamWCoefficients {
  float decay = 0;  ///< \f$ 1 - \eta\lambda \f$
  float beta1 = 0;  ///< \f$ \beta_1 \f$
  float beta2 = 0;  ///< \f$ \beta_2 \f$
  float one_minus_beta1 =
      0;  ///< \f$ 1 - \beta_1 \f$ (rounded once from double: 1 - 0.999f is off by 1e-5)
  float one_minus_beta2 = 0;        ///< \f$ 1 - \beta_2 \f$
  float neg_step_size = 0;          ///< \f$ -\eta / (1 - \beta_1^t) \f$
  float bias_correction2_sqrt = 0;  ///< \f$ \sqrt{1 - \beta_2^t} \f$
  float eps = 0;                    ///< \f$ \epsilon \f$
};

/// The coefficients of the step args.step >= 1 (powers computed in double); throws tt::Error
/// naming the bad value for step < 1 or hyper-parameters outside lr >= 0, 0 <= beta < 1, eps > 0,
/// weight_decay >= 0.
AdamWCoefficients adamw_coefficients(const optim::AdamWStepArgs& args);

/// The AdamW update of one element (exercise ch07.5), on the host or inside a CUDA kernel: with
/// gradient g, updates parameter p, first moment m and second moment v in place by the formula
/// of this file, in float32, in chapter 05's order (decay p, update m and v, then step p).
/// Defined in a CUDA source: available in CUDA builds (TT_WITH_CUDA) only.
TT_HOST_DEVICE void adamw_update(float& p, float g, float& m, float& v, const AdamWCoefficients& c);

namespace cuda {

/// Elements of one tensor handled by one block at a time in the multi-tensor kernels. Fixed
/// (not derived from the GPU) so that the sum-of-squares order, and hence its bits, are the
/// same on every GPU.
inline constexpr int64_t kMultiTensorChunk = 65536;

/// CUDA kernel "adamw_step" (optim::AdamWStepKernel): one launch for all tensors. A table of
/// (p, g, m, v, numel) pointers and of (tensor, start) chunks of kMultiTensorChunk elements is
/// copied to the device (tt/multi_tensor.h); each block walks chunks c = blockIdx.x, +gridDim.x,
/// ... and applies adamw_update to each element, with float4 accesses when the four tensors are
/// 16-byte aligned.
void adamw_step(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                const std::vector<Tensor>& exp_avgs, const std::vector<Tensor>& exp_avg_sqs,
                const optim::AdamWStepArgs& args);

/// CUDA kernel "sgd_step" (optim::SgdStepKernel): one multi-tensor launch applying chapter 05's
/// SGD update (weight decay, momentum with dampening, Nesterov) to every element.
void sgd_step(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
              const std::vector<Tensor>& momentum_buffers, const optim::SgdStepArgs& args);

/// CUDA kernel "adamw_step_unless" (optim::AdamWStepUnlessKernel): adamw_step whose kernel
/// first reads the device flag `skip` (0-d float64) and returns when it is non-zero.
void adamw_step_unless(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                       const std::vector<Tensor>& exp_avgs, const std::vector<Tensor>& exp_avg_sqs,
                       const optim::AdamWStepArgs& args, const Tensor& skip);

/// adamw_step(_unless) that can also write bfloat16 copies of the parameters (chapter 11's master
/// weights, tt/master_weights.h): with `copies` non-empty (one contiguous bfloat16 tensor per
/// parameter, of its numel), the same launch writes copies[j] = params[j] after the update,
/// rounded to nearest even, also where `skip` (optional, as in adamw_step_unless) is non-zero
/// and the parameters do not change. Empty `copies`: adamw_step, or adamw_step_unless with a
/// defined `skip`. Chapter 11 registers it as its "adamw_step_bf16".
void adamw_step_with_copies(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                            const std::vector<Tensor>& exp_avgs,
                            const std::vector<Tensor>& exp_avg_sqs,
                            const std::vector<Tensor>& copies, const optim::AdamWStepArgs& args,
                            const Tensor& skip);

/// CUDA kernel "sum_of_squares_device" (optim::SumOfSquaresDeviceKernel), exercise ch07.6: two
/// launches and no atomics. Pass 1 writes the sum of squares of every chunk (one block per chunk
/// at a time, accumulated in double) into a buffer of partial sums; pass 2, one block, adds the
/// partials in a fixed order into a 0-d float64 tensor on the device (a 0 on the device when
/// there is no element; on the CPU for an empty list). The result depends only on the tensor
/// sizes: bitwise reproducible from run to run and GPU to GPU.
Tensor sum_of_squares_device(const std::vector<Tensor>& tensors);

/// CUDA kernel "sum_of_squares" (optim::SumOfSquaresKernel): sum_of_squares_device copied to the
/// host (one synchronization).
double sum_of_squares(const std::vector<Tensor>& tensors);

/// CUDA kernel "clip_and_check_" (optim::ClipAndCheckKernel): one thread computes the clipping
/// coefficient and `status` on the device, then one multi-tensor launch scales the gradients by
/// the coefficient (it returns at once when the coefficient is >= 1). Nothing waits.
void clip_and_check_(const std::vector<Tensor>& grads, const Tensor& sumsq, double max_norm,
                     const Tensor& loss, const Tensor& status);

/// CUDA kernel "scale_" (optim::ScaleInplaceKernel): one multi-tensor launch multiplying every
/// element by `factor` (rounded to float once).
void scale_(const std::vector<Tensor>& tensors, double factor);

}  // namespace cuda
}  // namespace tt

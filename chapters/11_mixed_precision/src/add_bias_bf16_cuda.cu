// The CUDA kernels "add_bias_bf16" and "bias_grad_bf16" (tt/mixed_precision.h): a float32 bias
// added to a bfloat16 tensor in one pass, and its gradient, the column sums of dy in float32
// (chapter 06's deterministic column_sum, bfloat16 in, float sums).
#include <cuda_bf16.h>

#include <cstdint>

#include "tt/cuda_column_sum.h"
#include "tt/cuda_device.h"
#include "tt/dispatcher.h"
#include "tt/mixed_precision.h"

namespace tt::cuda {

namespace {

/// out[i] = bf16(float(y[i]) + bias[i % n]), grid-stride.
__global__ void add_bias_bf16_kernel(__nv_bfloat16* __restrict__ out,
                                     const __nv_bfloat16* __restrict__ y,
                                     const float* __restrict__ bias, int64_t total, int64_t n) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += stride) {
    out[i] = __float2bfloat16_rn(__bfloat162float(y[i]) + bias[i % n]);
  }
}

}  // namespace

void add_bias_bf16(const Tensor& out, const Tensor& y, const Tensor& bias) {
  constexpr const char* kOp = "cuda::add_bias_bf16";
  TT_CHECK(out.defined() && y.defined() && bias.defined() && out.device().is_cuda() &&
               y.device() == out.device() && bias.device() == out.device() &&
               out.dtype() == DType::kBFloat16 && y.dtype() == DType::kBFloat16 &&
               bias.dtype() == DType::kFloat32 && out.shape() == y.shape() && bias.dim() == 1 &&
               y.dim() >= 1 && y.size(-1) == bias.size(0) && out.is_contiguous() &&
               y.is_contiguous() && bias.is_contiguous(),
           kOp,
           ": expected contiguous bfloat16 out and y [..., N] and a float32 bias [N] on one CUDA "
           "device, got out ",
           out.describe(), ", y ", y.describe(), ", bias ", bias.describe());
  const int64_t total = y.numel(), n = bias.numel();
  if (total == 0) return;
  const int index = out.device().index;
  DeviceGuard guard(index);
  add_bias_bf16_kernel<<<grid_size(total, kBlockThreads, index), kBlockThreads, 0, stream(index)>>>(
      static_cast<__nv_bfloat16*>(out.data_ptr()), static_cast<const __nv_bfloat16*>(y.data_ptr()),
      bias.data<float>(), total, n);
  TT_CUDA_CHECK_LAUNCH("add_bias_bf16_kernel");
}

void bias_grad_bf16(const Tensor& dbias, const Tensor& dy) {
  constexpr const char* kOp = "cuda::bias_grad_bf16";
  TT_CHECK(dbias.defined() && dy.defined() && dbias.device().is_cuda() &&
               dy.device() == dbias.device() && dbias.dtype() == DType::kFloat32 &&
               dy.dtype() == DType::kBFloat16 && dbias.dim() == 1 && dy.dim() >= 1 &&
               dy.size(-1) == dbias.size(0) && dbias.is_contiguous() && dy.is_contiguous(),
           kOp,
           ": expected a contiguous float32 dbias [N] and bfloat16 dy [..., N] on one CUDA "
           "device, got dbias ",
           dbias.describe(), " and dy ", dy.describe());
  const int64_t n = dbias.numel();
  if (n == 0) return;
  DeviceGuard guard(dbias.device().index);
  if (dy.numel() == 0) {
    TT_CUDA_CHECK(cudaMemsetAsync(dbias.data_ptr(), 0, static_cast<std::size_t>(n) * sizeof(float),
                                  stream(dbias.device().index)));
    return;
  }
  column_sum(dbias.data<float>(), static_cast<const __nv_bfloat16*>(dy.data_ptr()), dy.numel() / n,
             n, n, dbias.device());
}

TT_REGISTER_KERNEL("add_bias_bf16", DeviceType::kCUDA, add_bias_bf16);
TT_REGISTER_KERNEL("bias_grad_bf16", DeviceType::kCUDA, bias_grad_bf16);

}  // namespace tt::cuda

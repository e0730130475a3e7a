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
  check_add_bias_bf16_kernel("cuda::add_bias_bf16", DeviceType::kCUDA, out, y, bias);
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
  check_bias_grad_bf16_kernel("cuda::bias_grad_bf16", DeviceType::kCUDA, dbias, dy);
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

// The CUDA kernel "gelu_backward_bf16" (tt/linear_bf16.h): dx = dy gelu'(pre) on bfloat16
// tensors in one pass, the arithmetic in float (chapter 06's GeluBackwardFn, tt/cuda_gelu.h).
#include <cuda_bf16.h>

#include <cstdint>

#include "tt/cuda_block_reduce.h"  // aligned16
#include "tt/cuda_device.h"
#include "tt/cuda_gelu.h"
#include "tt/dispatcher.h"
#include "tt/linear_bf16.h"

namespace tt::cuda {

namespace {

/// One element: dy gelu'(x) in float, rounded to nearest even.
__device__ __nv_bfloat16 gelu_grad(__nv_bfloat16 dy, __nv_bfloat16 x) {
  return __float2bfloat16_rn(GeluBackwardFn{}(__bfloat162float(dy), __bfloat162float(x)));
}

/// Grid-stride loop; `vec`: every pointer 16-byte aligned, so 8 values move per uint4 access
/// (the n % 8 last ones one by one).
__global__ void gelu_backward_bf16_kernel(__nv_bfloat16* __restrict__ dx,
                                          const __nv_bfloat16* __restrict__ dy,
                                          const __nv_bfloat16* __restrict__ x, int64_t n,
                                          bool vec) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t first = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t n8 = vec ? n / 8 : 0;
  for (int64_t i = first; i < n8; i += stride) {
    const uint4 d4 = reinterpret_cast<const uint4*>(dy)[i];
    const uint4 x4 = reinterpret_cast<const uint4*>(x)[i];
    const auto* d = reinterpret_cast<const __nv_bfloat16*>(&d4);
    const auto* v = reinterpret_cast<const __nv_bfloat16*>(&x4);
    uint4 o4;
    auto* o = reinterpret_cast<__nv_bfloat16*>(&o4);
#pragma unroll
    for (int k = 0; k < 8; ++k) o[k] = gelu_grad(d[k], v[k]);
    reinterpret_cast<uint4*>(dx)[i] = o4;
  }
  for (int64_t i = 8 * n8 + first; i < n; i += stride) dx[i] = gelu_grad(dy[i], x[i]);
}

}  // namespace

void gelu_backward_bf16(const Tensor& dx, const Tensor& dy, const Tensor& pre) {
  check_gelu_backward_bf16("cuda::gelu_backward_bf16", dx, dy, pre);
  TT_CHECK(dx.device().is_cuda(), "cuda::gelu_backward_bf16: expected CUDA tensors, got dx ",
           dx.describe());
  const int64_t n = dx.numel();
  if (n == 0) return;
  auto* out = static_cast<__nv_bfloat16*>(dx.data_ptr());
  const auto* d = static_cast<const __nv_bfloat16*>(dy.data_ptr());
  const auto* x = static_cast<const __nv_bfloat16*>(pre.data_ptr());
  const bool vec = aligned16(out) && aligned16(d) && aligned16(x);
  const int index = dx.device().index;
  DeviceGuard guard(index);
  const int64_t items = vec ? (n + 7) / 8 : n;
  gelu_backward_bf16_kernel<<<grid_size(items, kBlockThreads, index), kBlockThreads, 0,
                              stream(index)>>>(out, d, x, n, vec);
  TT_CUDA_CHECK_LAUNCH("gelu_backward_bf16_kernel");
}

TT_REGISTER_KERNEL("gelu_backward_bf16", DeviceType::kCUDA, gelu_backward_bf16);

}  // namespace tt::cuda
